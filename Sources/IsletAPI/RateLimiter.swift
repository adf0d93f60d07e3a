import Foundation
import IsletCore
import Synchronization

/// The limits the API applies (E6). The device API is limited by default: its token ships in every copy
/// of the app, so anyone can call it. The server API is not, unless configured.
public struct RateLimits: Sendable, Equatable {
    /// Device API calls from one client address.
    public var devicePerAddress: RateLimit?
    /// Device API calls with one device API token: the whole app's traffic.
    public var devicePerToken: RateLimit?
    /// Server API calls with one server API token.
    public var serverPerToken: RateLimit?

    public init(devicePerAddress: RateLimit? = RateLimit(perSecond: 50, burst: 200),
                devicePerToken: RateLimit? = RateLimit(perSecond: 2000, burst: 10_000), serverPerToken: RateLimit? = nil) {
        self.devicePerAddress = devicePerAddress
        self.devicePerToken = devicePerToken
        self.serverPerToken = serverPerToken
    }

    public static let none = RateLimits(devicePerAddress: nil, devicePerToken: nil, serverPerToken: nil)
}

/// Token buckets by key, shared by the HTTP worker threads. Buckets that have filled up again are
/// forgotten when the table grows, so memory stays bounded by the number of recent clients.
public final class RateLimiter: Sendable {
    private let buckets = Mutex<[String: TokenBucket]>([:])
    private let now: @Sendable () -> Double
    static let pruneAbove = 50_000

    public init(now: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }) {
        self.now = now
    }

    /// Nil when the request may go; otherwise the seconds to wait.
    public func take(_ key: String, _ limit: RateLimit) -> Int? {
        let at = now()
        return buckets.withLock { buckets in
            if buckets.count > Self.pruneAbove {
                buckets = buckets.filter { !$0.value.isFull(limit, now: at) }
            }
            var bucket = buckets[key] ?? TokenBucket(limit: limit, now: at)
            let wait = bucket.take(limit, now: at)
            buckets[key] = bucket
            return wait
        }
    }

    public var trackedKeys: Int { buckets.withLock { $0.count } }
}

/// A call refused for its rate (E6): 429 with `Retry-After`.
public struct RateLimited: Error, Sendable, Equatable {
    public let message: String
    public let retryAfter: Int

    public static func message(_ what: String, limit: RateLimit, retryAfter: Int) -> RateLimited {
        RateLimited(message: "rate limit: \(what) may make \(RateLimit.number(limit.perSecond)) calls a second "
                        + "(bursts of \(RateLimit.number(limit.burst))); retry after \(retryAfter) s (E6)", retryAfter: retryAfter)
    }
}

extension RateLimiter {
    /// The client a request comes from: the peer, or behind a proxy on this machine (the peer is loopback)
    /// the address that proxy appended last to `X-Forwarded-For`, as nginx's `$proxy_add_x_forwarded_for` does.
    /// Entries a client wrote itself come earlier in the list and are never believed.
    public static func clientAddress(peer: String, forwardedFor: String?) -> String {
        let loopback = peer.hasPrefix("127.") || peer == "::1" || peer.hasPrefix("::ffff:127.")
        guard loopback, let forwardedFor, let last = forwardedFor.split(separator: ",").last else { return peer }
        let address = last.trimmingCharacters(in: .whitespaces)
        return address.isEmpty ? peer : address
    }
}
