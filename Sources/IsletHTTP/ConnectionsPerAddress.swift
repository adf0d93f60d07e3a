import Foundation
import CMicroHTTPD
import Synchronization

/// How many connections one client address may hold open at once (IPv6 by its /64): without it, one client holding
/// the server's 1,024 connections (idle, or trickling a request) shut everyone else out. Connections from a proxy on
/// this machine (the loopback addresses) are not counted: the proxy holds connections for all its clients, and
/// limits them itself (nginx's `limit_conn`). A connection over the limit is closed as soon as it is accepted.
public final class ConnectionsPerAddress: Sendable {
    /// Nil: no limit.
    public let limit: Int?
    private let open = Mutex<[String: Int]>([:])

    public init(limit: Int?) { self.limit = limit }

    /// Whether a new connection from `key` may be accepted now (a few accepted at the same moment may pass it).
    func admits(_ key: String) -> Bool {
        guard let limit, !Self.isLoopback(key) else { return true }
        return open.withLock { $0[key, default: 0] } < limit
    }

    func opened(_ key: String) {
        guard limit != nil, !Self.isLoopback(key) else { return }
        open.withLock { $0[key, default: 0] += 1 }
    }

    func closed(_ key: String) {
        guard limit != nil, !Self.isLoopback(key) else { return }
        open.withLock { open in
            let left = open[key, default: 1] - 1
            open[key] = left > 0 ? left : nil
        }
    }

    /// Connections counted now for `key`.
    public func count(_ key: String) -> Int { open.withLock { $0[key, default: 0] } }

    static func isLoopback(_ key: String) -> Bool { key == "127.0.0.1" || key == "::1" }

    /// The counting key of an address written as text (`key(_:)`'s, from the connection's address).
    static func key(text: String) -> String {
        guard text.contains(":") else { return text }
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        guard inet_pton(AF_INET6, text, &v6.sin6_addr) == 1 else { return text }
        return withUnsafePointer(to: &v6) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { key($0) } }
    }

    /// The counting key of a socket address: an IPv4 address, an IPv4-mapped IPv6 address as IPv4, else the /64 of an
    /// IPv6 address (`2001:db8:1:2::/64`); "" when unknown.
    static func key(_ address: UnsafePointer<sockaddr>?) -> String {
        guard let address else { return "" }
        var text = [CChar](repeating: 0, count: 64)
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                var ip = v4.pointee.sin_addr
                _ = inet_ntop(AF_INET, &ip, &text, socklen_t(text.count))
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 -> String in
                var bytes = v6.pointee.sin6_addr
                let raw = withUnsafeBytes(of: &bytes) { Array($0) }
                if raw[0..<10].allSatisfy({ $0 == 0 }) && raw[10] == 0xFF && raw[11] == 0xFF {
                    return raw[12...].map(String.init).joined(separator: ".")
                }
                if raw[0..<15].allSatisfy({ $0 == 0 }) && raw[15] == 1 { return "::1" }
                var prefix = in6_addr()
                withUnsafeMutableBytes(of: &prefix) { out in for i in 0..<8 { out[i] = raw[i] } }
                _ = inet_ntop(AF_INET6, &prefix, &text, socklen_t(text.count))
                return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/64"
            }
        default:
            return ""
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
