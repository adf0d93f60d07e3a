import Foundation

extension Duration {
    /// In seconds, as a `TimeInterval`, for `Date` arithmetic and metrics.
    public var timeInterval: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
