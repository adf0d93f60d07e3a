import CMicroHTTPD
import Foundation
import IsletCore
import Synchronization

/// How long a client may take to send a request (issue 44): its headers, from its first line, and its body, from its
/// headers. libmicrohttpd's own timeout is for idleness, which a client sending a byte every few seconds never
/// reaches; these deadlines hold whatever the client sends meanwhile.
public struct ReceiveDeadline: Sendable, Equatable {
    /// From a request's first line to the end of its headers; and the least time for any body.
    public var headers: Duration
    /// The slowest a body may come: a body of `n` bytes may take `headers` plus `n / bytesPerSecond` seconds.
    public var bytesPerSecond: Int

    public init(headers: Duration = .seconds(10), bytesPerSecond: Int = 16 << 10) {
        self.headers = headers
        self.bytesPerSecond = bytesPerSecond
    }

    /// The time a body of `length` bytes (nil: not declared, so the largest allowed, `maximum`) may take.
    public func body(length: Int?, maximum: Int) -> Duration {
        headers + .milliseconds(Int64(max(0, length ?? maximum)) * 1000 / Int64(max(1, bytesPerSecond)))
    }
}

/// The requests being received and when each must be in; a watchdog thread ends the connection of one that is late by
/// shutting its socket down, which libmicrohttpd then sees as the client gone. A connection leaves the list when its
/// request is in and when libmicrohttpd says it closed; libmicrohttpd closes the socket only after saying so, and the
/// shutdown is made under the same lock, so a socket is never shut down after it was closed (and its number reused).
final class ReceiveDeadlines: Sendable {
    let deadline: ReceiveDeadline
    private struct Entry { let socket: Int32; let until: ContinuousClock.Instant }
    private let pending = Mutex<[UInt: Entry]>([:])
    private let state = Mutex<(stopping: Bool, ended: Int)>((false, 0))
    private let condition = NSCondition()
    private let threads = ServiceThreads()

    init(_ deadline: ReceiveDeadline) { self.deadline = deadline }

    /// Connections ended for being late, since the start.
    var ended: Int { state.withLock { $0.ended } }

    /// The connection must have sent what it is sending within `time` from now.
    func arm(_ connection: OpaquePointer, within time: Duration) {
        let socket = islet_mhd_connection_socket(connection)
        guard socket >= 0 else { return }
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
        pending.withLock { $0[key] = Entry(socket: socket, until: .now + time) }
    }

    /// The connection's request is in, or it closed: no deadline.
    func clear(_ connection: OpaquePointer) {
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
        _ = pending.withLock { $0.removeValue(forKey: key) }
    }

    func start() {
        threads.start("islet-http-deadlines") { [self] in
            while !state.withLock({ $0.stopping }) {
                endLate(at: .now)
                condition.lock()
                if !state.withLock({ $0.stopping }) { _ = condition.wait(until: Date().addingTimeInterval(0.25)) }
                condition.unlock()
            }
        }
    }

    /// Ends the connections past their deadline at `now`.
    func endLate(at now: ContinuousClock.Instant) {
        let late = pending.withLock { entries -> Int in
            let expired = entries.filter { $0.value.until <= now }
            for (key, entry) in expired {
                Glibc.shutdown(entry.socket, Int32(SHUT_RDWR))
                entries.removeValue(forKey: key)
            }
            return expired.count
        }
        if late > 0 { state.withLock { $0.ended += late } }
    }

    /// Stops the watchdog; true when its thread ended by `deadline`.
    @discardableResult
    func shutdown(deadline: ContinuousClock.Instant) -> Bool {
        condition.lock()
        state.withLock { $0.stopping = true }
        condition.broadcast()
        condition.unlock()
        return threads.waitForExit(by: deadline)
    }
}
