import CMicroHTTPD
import Foundation
import IsletCore
import Synchronization

/// The memory request bodies may hold while they arrive. A body is read whole before its request runs, so a client
/// that declares a large body and sends it slowly (or never finishes) holds its memory for as long as its connection
/// lives: a thousand such clients held 1.4 GB. Bodies up to `small` bytes take nothing from it (libmicrohttpd bounds a
/// connection's own buffers); a larger one reserves its declared length when its headers are in, from the server's
/// budget and from its client address's share, and gives it back when its request ends. A body that finds no room is
/// answered 503 with `Retry-After` before it is read. When the bodies held return to none, after large ones were held,
/// the free memory they leave is given back to the system (at once, at most once a second, and again 0.2 and 1.5 s
/// later while no large body came, for buffers freed after that moment): glibc keeps freed heap memory for
/// reuse, and a burst of large bodies otherwise stayed in the process's memory for good. (Fixing glibc's mmap
/// threshold at 64 KiB instead gave such bodies pages of their own, but made every allocation of that size a system
/// call: 0.6 of the update rate.)
public final class BodyBudget: Sendable {
    public let total: Int
    public let perAddress: Int
    public let small: Int
    private let held = Mutex<(total: Int, byAddress: CountsByKey, givenBack: ContinuousClock.Instant?, owed: Bool, quiet: Int)>((0, CountsByKey(), nil, false, 0))

    public init(total: Int = 64 << 20, perAddress: Int = 16 << 20, small: Int = 64 << 10) {
        self.total = total
        self.perAddress = perAddress
        self.small = small
    }

    /// Reserves `bytes` for a body from `address`; false when the budget or the address's share has no room. A small
    /// body always gets in, and reserves nothing (returns true).
    public func reserve(_ bytes: Int, for address: String) -> Bool {
        guard bytes > small else { return true }
        return held.withLock { held in
            guard held.total + bytes <= total, held.byAddress[address] + bytes <= perAddress else { return false }
            held.total += bytes
            held.byAddress.add(bytes, to: address)
            held.owed = true
            held.quiet += 1   // the later trims of a quiet moment that ended are skipped
            return true
        }
    }

    /// Gives back what `reserve` took.
    public func release(_ bytes: Int, for address: String) {
        guard bytes > small else { return }
        let quietMoment = held.withLock { held -> (trimNow: Bool, quiet: Int)? in
            held.total -= bytes
            held.byAddress.remove(bytes, from: address)
            guard held.total == 0, held.owed else { return nil }
            held.owed = false
            held.quiet += 1
            let trimNow = held.givenBack.map({ ContinuousClock.now - $0 >= .seconds(1) }) ?? true
            if trimNow { held.givenBack = .now }
            return (trimNow, held.quiet)
        }
        guard let quietMoment else { return }
        if quietMoment.trimNow { islet_release_free_memory() }
        // Again shortly after, if no large body came meanwhile: what a closing connection frees after this moment, and
        // what the once-a-second rate held back now, is given back too.
        for delay in [0.2, 1.5] {
            DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + delay) { [self] in
                if held.withLock({ $0.total == 0 && $0.quiet == quietMoment.quiet }) { islet_release_free_memory() }
            }
        }
    }

    /// Bytes reserved now.
    public var reserved: Int { held.withLock { $0.total } }

    /// Seconds a refused client is told to wait.
    public static let retryAfter = 1

    public static func busyMessage(retryAfter: Int) -> String {
        "request body: the bodies being received at once fill the memory this server holds for them; nothing was read or done, retry after \(retryAfter) s"
    }
}
