import Foundation

/// A8: iOS ends a Live Activity 8 hours after it started (it leaves the Dynamic Island, and takes no more
/// updates) and keeps it on the lock screen at most 4 hours longer. An activity ended by the app stays
/// until its `dismissal-date`, or 4 hours after the end, whichever comes first.
public enum ActivityLifetime {
    public static let running: TimeInterval = 8 * 3600
    public static let onLockScreenAfterEnd: TimeInterval = 4 * 3600
    /// Why an update or end of an activity past its 8 hours reaches no device.
    public static let skipReason = "activity past its 8-hour lifetime"

    /// When iOS ends the activity on its own.
    public static func endsBy(startedAt: Date) -> Date { startedAt.addingTimeInterval(running) }

    /// Whether iOS has ended it by `now`; unknown start: no.
    public static func isOver(startedAt: Date?, now: Date) -> Bool {
        guard let startedAt else { return false }
        return now >= endsBy(startedAt: startedAt)
    }

    /// When an activity ended at `endedAt` leaves the lock screen: its `dismissal-date` (seconds since
    /// 1970; a past one at once), never later than 4 hours after the end.
    public static func dismissAt(endedAt: Date, dismissalDate: Int64?) -> Date {
        let latest = endedAt.addingTimeInterval(onLockScreenAfterEnd)
        guard let dismissalDate else { return latest }
        return min(max(Date(timeIntervalSince1970: Double(dismissalDate)), endedAt), latest)
    }

    /// When the card leaves the lock screen: an ended activity's stored time; one iOS ended after its 8 hours,
    /// 4 hours after that; nil while it runs.
    public static func leavesLockScreen(startedAt: Date?, dismissAt: Date?, ended: Bool, now: Date) -> Date? {
        let latest = startedAt.map { endsBy(startedAt: $0).addingTimeInterval(onLockScreenAfterEnd) }
        if ended { return [dismissAt, latest].compactMap { $0 }.min() }
        guard let startedAt, isOver(startedAt: startedAt, now: now) else { return nil }
        return latest
    }

    /// The answer's warning for an update or end of an activity iOS has already ended.
    public static func warning(path: String, activityID: String, startedAt: Date, now: Date) -> String {
        let minutes = Int(now.timeIntervalSince(startedAt) / 60)
        return "\(path).live_activity_id: activity '\(activityID.prefix(256))' started \(minutes / 60) h \(minutes % 60) min ago, and iOS ends "
            + "a Live Activity after 8 hours, so this reaches no device (A8); start a new activity to go on showing it"
    }
}
