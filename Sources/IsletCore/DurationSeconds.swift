import Foundation

extension Duration {
    /// In seconds, as a `TimeInterval`, for `Date` arithmetic and metrics.
    public var timeInterval: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension NSCondition {
    /// With the lock held: waits while `pending()` holds, woken by a signal or broadcast, until `deadline`. True when
    /// `pending()` no longer holds; false at the deadline.
    public func wait(while pending: () -> Bool, until deadline: ContinuousClock.Instant) -> Bool {
        while pending() {
            let left = deadline - .now
            guard left > .zero else { return false }
            _ = wait(until: Date(timeIntervalSinceNow: left.timeInterval))
        }
        return true
    }
}
