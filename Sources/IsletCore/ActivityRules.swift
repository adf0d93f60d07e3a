/// Where a Live Activity is (S3, U1): scheduled to start, active, or ended.
public struct ActivityState: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let scheduled = Self(uncheckedRawValue: "scheduled")
    public static let active = Self(uncheckedRawValue: "active")
    public static let ended = Self(uncheckedRawValue: "ended")
    public static let all = [scheduled, active, ended]
}

/// S3 and U1 as pure decisions: the storage engine reads the facts inside its transaction and asks; the
/// rule and the words the user reads live here, so every engine refuses alike.
public enum ActivityRules {
    /// What the store knows of an activity id when a start for it arrives.
    public struct StartFacts: Sendable, Equatable {
        /// The activity's state; nil when the application has no activity with this id.
        public var state: ActivityState?
        /// Messages were ever accepted for it (an activity only devices reported has none).
        public var hasMessages: Bool
        /// A message of it is still waiting or being sent.
        public var unfinished: Bool

        public init(state: ActivityState?, hasMessages: Bool, unfinished: Bool) {
            self.state = state
            self.hasMessages = hasMessages
            self.unfinished = unfinished
        }
    }

    /// S3: nil when a start of `activityID` is accepted, else the message for `live_activity_id`. An id that is
    /// scheduled or still active is refused; after its end it may start a new session once the end has gone
    /// out. An activity only devices reported (never started here) is taken over by the start.
    public static func startRefusal(_ activityID: String, facts: StartFacts) -> String? {
        guard let state = facts.state else { return nil }
        if state != .ended && facts.hasMessages {
            let why = state == .scheduled ? "is already scheduled to start" : "is still active"
            return "'\(activityID)' \(why) in this application; end it before starting it again (S3)"
        }
        if facts.unfinished {
            return "'\(activityID)' has ended but its end is still being sent; start it again once it has gone out (S3)"
        }
        return nil
    }

    /// U1 (issue 45): an end of an activity that has ended is a retry of the end that ended it (a backend that timed out
    /// and sent it again): answered 200, changing and sending nothing, rather than an error for something that worked.
    /// An update after an end is still refused.
    public static func isRepeatedEnd(_ event: LiveActivityEvent, state: ActivityState?) -> Bool {
        event == .end && state == .ended
    }

    /// The warning of a repeated end; `endedBy` is the message that ended the activity, which the answer gives as this
    /// notification's code.
    public static func repeatedEndWarning(path: String, activityID: String, endedBy: String) -> String {
        "\(path): '\(activityID)' had already ended (message \(endedBy)); nothing was sent again (U1)"
    }

    /// X2: the answer when an update's activity was started again with another schema each time the update was
    /// checked against the one before (a 503: nothing was changed, and the call can be made again).
    public static func startedAgainWhileChecked(path: String) -> String {
        "\(path).live_activity_id: the activity was started again with another schema while this update was checked against it; nothing was changed, retry"
    }

    /// U1: nil when an update or end of `activityID` is accepted (the activity is active), else the message.
    public static func updateRefusal(_ activityID: String, state: ActivityState?) -> String? {
        switch state {
        case nil: "no activity '\(activityID)' in this application; start it with startLiveActivity first (U1)"
        case .ended?: "'\(activityID)' has ended; it takes no more updates (U1)"
        case .scheduled?: "'\(activityID)' is scheduled and has not started yet; update it once it has (U1)"
        default: nil
        }
    }
}
