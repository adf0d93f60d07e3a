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

    /// The per-application device limit is off by default: one bucket shared by every real phone is one an
    /// attacker with many addresses could keep empty for everyone.
    public init(devicePerAddress: RateLimit? = RateLimit(perSecond: 50, burst: 200),
                devicePerToken: RateLimit? = nil, serverPerToken: RateLimit? = nil) {
        self.devicePerAddress = devicePerAddress
        self.devicePerToken = devicePerToken
        self.serverPerToken = serverPerToken
    }
}

/// Token buckets for one limit, by key, shared by the HTTP worker threads. When the table grows past
/// `pruneAbove`, buckets that have filled up again are forgotten (at most every 10 seconds), so memory
/// stays bounded by the number of recent clients and no request pays for a sweep more than rarely.
public final class RateLimiter: Sendable {
    public let limit: RateLimit
    private struct State {
        var buckets: [String: TokenBucket] = [:]
        var prunedAt = -Double.infinity
    }
    private let state = Mutex(State())
    private let now: @Sendable () -> Double
    let pruneAbove: Int

    public init(limit: RateLimit, pruneAbove: Int = 50_000,
                now: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }) {
        self.limit = limit
        self.pruneAbove = pruneAbove
        self.now = now
    }

    /// Nil when the request may go; otherwise the seconds to wait.
    public func take(_ key: String) -> Int? {
        let at = now()
        return state.withLock { state in
            if state.buckets.count > pruneAbove && at - state.prunedAt >= 10 {
                state.buckets = state.buckets.filter { !$0.value.isFull(limit, now: at) }
                state.prunedAt = at
            }
            var bucket = state.buckets[key] ?? TokenBucket(limit: limit, now: at)
            let wait = bucket.take(limit, now: at)
            state.buckets[key] = bucket
            return wait
        }
    }

    public var trackedKeys: Int { state.withLock { $0.buckets.count } }
}

/// A call refused for its rate (E6): 429 with `Retry-After`.
public struct RateLimited: Error, Sendable, Equatable {
    public let message: String
    public let retryAfter: Int

    /// Refused with `message` (naming what is limited and when to retry).
    public init(message: String, retryAfter: Int) {
        self.message = message
        self.retryAfter = retryAfter
    }

    public static func message(_ what: String, limit: RateLimit, retryAfter: Int) -> RateLimited {
        RateLimited(message: "rate limit: \(what) may make \(RateLimit.number(limit.perSecond)) calls a second "
                        + "(bursts of \(RateLimit.number(limit.burst))); retry after \(retryAfter) s (E6)", retryAfter: retryAfter)
    }
}

extension RateLimiter {
    /// The client a request comes from: the peer, or behind a proxy on this machine (the peer is loopback)
    /// the address that proxy appended last to `X-Forwarded-For` (all the header's lines, in order), as nginx's
    /// `$proxy_add_x_forwarded_for` does. Entries a client wrote itself come earlier and are never believed.
    public static func clientAddress(peer: String, forwardedFor: [String]) -> String {
        let loopback = peer.hasPrefix("127.") || peer == "::1" || peer.hasPrefix("::ffff:127.")
        guard loopback, let last = forwardedFor.joined(separator: ",").split(separator: ",").last else { return peer }
        let address = last.trimmingCharacters(in: .whitespaces)
        return address.isEmpty ? peer : address
    }
}
