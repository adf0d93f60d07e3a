/// What the store knows, inside the transaction, about a device reporting an update token for an activity.
public struct ActivityJoinFacts: Sendable, Equatable {
    /// The application has an activity with this id.
    public var known = false
    /// It was started by startLiveActivity (not only by the app on a phone).
    public var startedByIslet = false
    /// The device already takes part in it.
    public var isMember = false
    /// The start of its current session was addressed to this device.
    public var targeted = false

    public init(known: Bool = false, startedByIslet: Bool = false, isMember: Bool = false, targeted: Bool = false) {
        self.known = known
        self.startedByIslet = startedByIslet
        self.isMember = isMember
        self.targeted = targeted
    }
}

/// Whether an activity Islet never started (begun by the app on the phone) may be defined by the first
/// device that reports it. Refusing closes the one gap of D5, a report that races the real phone for a
/// guessable id, at the cost of phone-started activities (the backend can still add devices).
public enum PhoneStartedActivities: String, Sendable, CaseIterable {
    case allow
    case refuse
}

/// D5: who may attach an update token to an activity. The device API token ships in every copy of the
/// app, so without this anyone could join another customer's activity and receive its updates.
public enum ActivityJoin {
    /// Nil when the report is accepted; otherwise the 403 that names the rule.
    ///
    /// - A server API token (the backend) is trusted.
    /// - An activity Islet has never seen is defined by the first device that reports it.
    /// - A device already taking part may renew its token.
    /// - An activity started by startLiveActivity admits the devices the start of its current session
    ///   addressed (a start by `users` addresses every device of those users).
    /// A User ID is not proof: the device API lets any caller claim one, so it admits nobody by itself.
    public static func refusal(activityID: String, facts: ActivityJoinFacts, trusted: Bool,
                               phoneStarted: PhoneStartedActivities = .allow) -> APIError? {
        if trusted || facts.isMember { return nil }
        if !facts.known {
            guard phoneStarted == .refuse else { return nil }
            return APIError(.forbidden, "activity_id: this device may not join activity '\(activityID.prefix(256))': "
                                + "it was not started by startLiveActivity, and this server takes no phone-started activities (D5)")
        }
        if facts.startedByIslet && facts.targeted { return nil }
        let why = facts.startedByIslet
            ? "its start did not address this device (start it with devices or users that include it)"
            : "it runs on other devices"
        return APIError(.forbidden, "activity_id: this device may not join activity '\(activityID.prefix(256))': \(why) (D5)")
    }
}
