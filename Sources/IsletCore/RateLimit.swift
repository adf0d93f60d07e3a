/// A rate: `perSecond` requests a second on average, bursts of up to `burst` (E6).
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
    public let perSecond: Double
    public let burst: Double

    /// `perSecond` > 0; the burst defaults to two seconds' worth (at least 10).
    public init(perSecond: Double, burst: Double? = nil) {
        self.perSecond = perSecond
        self.burst = burst ?? max(10, perSecond * 2)
    }

    /// `N` or `N/BURST` requests a second; "0" or "off" is no limit (nil inside `.some`). Nil for bad text.
    public static func parse(_ text: String) -> RateLimit?? {
        if text == "0" || text == "off" { return .some(nil) }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let rate = Double(parts[0]), rate > 0, rate.isFinite else { return nil }
        guard parts.count == 2 else { return .some(RateLimit(perSecond: rate)) }
        guard let burst = Double(parts[1]), burst >= 1, burst.isFinite else { return nil }
        return .some(RateLimit(perSecond: rate, burst: burst))
    }

    public var description: String { "\(Self.number(perSecond))/\(Self.number(burst))" }

    public static func number(_ value: Double) -> String { value == value.rounded() ? String(Int(value)) : String(value) }
}

/// A token bucket: full at first, refilled continuously; each request takes one token.
public struct TokenBucket: Sendable, Equatable {
    public private(set) var tokens: Double
    public private(set) var updatedAt: Double

    public init(limit: RateLimit, now: Double) {
        tokens = limit.burst
        updatedAt = now
    }

    /// Takes a token at `now` (seconds on any monotonic clock). Nil when allowed; otherwise how many whole
    /// seconds until one is there (the `Retry-After` value, at least 1).
    public mutating func take(_ limit: RateLimit, now: Double) -> Int? {
        tokens = min(limit.burst, tokens + max(0, now - updatedAt) * limit.perSecond)
        updatedAt = max(updatedAt, now)
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return max(1, Int(((1 - tokens) / limit.perSecond).rounded(.up)))
    }

    /// True when the bucket would be full again at `now`: forgetting it changes nothing.
    public func isFull(_ limit: RateLimit, now: Double) -> Bool {
        tokens + max(0, now - updatedAt) * limit.perSecond >= limit.burst
    }
}
