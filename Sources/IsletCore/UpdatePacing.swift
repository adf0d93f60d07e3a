import Foundation

/// A9: updates of one activity go out at most once per `interval`. One accepted sooner after the last one
/// that went out waits for its turn, and a newer update accepted meanwhile takes its place (latest state
/// wins), so a burst reaches each phone as its latest state, never as a string of stale ones.
public struct UpdatePacing: Sendable, Equatable {
    public var interval: TimeInterval

    public init(interval: TimeInterval) { self.interval = interval }

    public static let standard = UpdatePacing(interval: 1)
    /// Every update at once: pacing off.
    public static let off = UpdatePacing(interval: 0)
    /// What `--update-interval` may be, in seconds.
    public static let allowed: ClosedRange<TimeInterval> = 0...60

    /// The activity's latest update before this one.
    public struct Previous: Sendable, Equatable {
        public var dueAt: Date
        /// Not claimed yet: the new update supersedes it and takes its turn.
        public var waiting: Bool

        public init(dueAt: Date, waiting: Bool) {
            self.dueAt = dueAt
            self.waiting = waiting
        }
    }

    /// When an update accepted at `now` is due.
    public func dueAt(now: Date, previous: Previous?) -> Date {
        guard let previous, interval > 0 else { return now }
        return max(now, previous.waiting ? previous.dueAt : previous.dueAt.addingTimeInterval(interval))
    }
}
