import Foundation

/// A12: a phone drops push-to-start pushes beyond a small burst (about 10 in a minute) although APNs
/// accepts them. Islet sends a device at most `perMinute` of them in any minute and holds the rest for
/// the next free slot, instead of letting them be dropped.
public struct PushToStartPacing: Sendable, Equatable {
    public var perMinute: Int

    public init(perMinute: Int) { self.perMinute = perMinute }

    public static let standard = PushToStartPacing(perMinute: 10)
    public static let window: TimeInterval = 60
    /// What `--push-to-start-per-minute` may be; 0 turns pacing off.
    public static let allowed = 0...1000

    /// When the next push-to-start may go to a device that was sent (or promised) one at each of `slots`:
    /// `now` while fewer than `perMinute` of them fall in the minute before, else a minute after the slot
    /// `perMinute` back. Always `now` when pacing is off.
    public func nextSlot(after slots: [Date], now: Date) -> Date {
        guard perMinute > 0 else { return now }
        let recent = slots.filter { $0 > now.addingTimeInterval(-Self.window) }.sorted(by: >)
        guard recent.count >= perMinute else { return now }
        return max(now, recent[perMinute - 1].addingTimeInterval(Self.window))
    }

    /// The reason a held push-to-start is recorded with until it goes.
    public func reason(until: Date) -> String {
        "paced: this device had \(perMinute) push-to-start pushes within a minute, and phones drop more; sent at \(until.formatted(.iso8601)) (A12)"
    }

    /// Whether a recorded reason is this rule's.
    public static func isPaced(_ reason: String?) -> Bool { reason?.hasPrefix("paced: ") == true }
}
