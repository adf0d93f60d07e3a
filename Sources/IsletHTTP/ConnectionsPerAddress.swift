import IsletCore
import Synchronization

/// How many connections one client address may hold open at once (IPv6 by its /64, `ClientAddress.key`): without it,
/// one client holding the server's 1,024 connections (idle, or trickling a request) shut everyone else out.
/// Connections from a proxy on this machine (the loopback addresses) are not counted: the proxy holds connections for
/// all its clients, and limits them itself (nginx's `limit_conn`). A connection over the limit is closed as soon as it
/// is accepted.
public final class ConnectionsPerAddress: Sendable {
    /// Nil: no limit.
    public let limit: Int?
    private let open = Mutex(CountsByKey())

    public init(limit: Int?) { self.limit = limit }

    /// Whether a new connection from `address` may be accepted now (a few accepted at the same moment may pass it).
    func admits(_ address: String) -> Bool {
        guard let limit, let key = Self.counted(address) else { return true }
        return open.withLock { $0[key] } < limit
    }

    func opened(_ address: String) {
        guard let key = Self.counted(address) else { return }
        open.withLock { $0.add(1, to: key) }
    }

    func closed(_ address: String) {
        guard let key = Self.counted(address) else { return }
        open.withLock { $0.remove(1, from: key) }
    }

    /// The key `address` counts under; nil for loopback, which is not counted.
    static func counted(_ address: String) -> String? {
        ["127.0.0.1", "::1", "::ffff:127.0.0.1"].contains(address) ? nil : ClientAddress.key(address)
    }
}
