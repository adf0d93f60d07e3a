/// What the store knows, inside the transaction, about a device reporting an update token for an activity.
public struct ActivityJoinFacts: Sendable, Equatable {
    /// The application has an activity with this id.
    public var known = false
    /// It was started by startLiveActivity (not only by the app on a phone).
    public var startedByIslet = false
    /// The device already takes part in it.
    public var isMember = false
    /// A start of it was addressed to this device.
    public var targeted = false
    /// Another device with this device's User ID was addressed by its start or takes part in it.
    public var sharesUserWithParticipant = false

    public init(known: Bool = false, startedByIslet: Bool = false, isMember: Bool = false, targeted: Bool = false,
                sharesUserWithParticipant: Bool = false) {
        self.known = known
        self.startedByIslet = startedByIslet
        self.isMember = isMember
        self.targeted = targeted
        self.sharesUserWithParticipant = sharesUserWithParticipant
    }
}

/// D5: who may attach an update token to an activity. The device API token ships in every copy of the
/// app, so without this anyone could join another customer's activity and receive its updates.
public enum ActivityJoin {
    /// Nil when the report is accepted; otherwise the 403 that names the rule.
    ///
    /// - A server API token (the backend) is trusted.
    /// - An activity Islet has never seen is defined by the first device that reports it.
    /// - A device already taking part may renew its token.
    /// - An activity started by startLiveActivity admits the devices its start addressed, and devices of
    ///   the same User ID as one of those (the customer's other phone).
    /// - An activity started on a phone admits devices of the same User ID as one taking part.
    public static func refusal(activityID: String, facts: ActivityJoinFacts, trusted: Bool) -> APIError? {
        if trusted || !facts.known || facts.isMember || facts.sharesUserWithParticipant { return nil }
        if facts.startedByIslet && facts.targeted { return nil }
        let why = facts.startedByIslet
            ? "its start did not address this device, nor a device of the same User ID"
            : "it runs on other devices, none with this device's User ID"
        return APIError(.forbidden, "activity_id: this device may not join activity '\(activityID.prefix(256))': \(why) (D5)")
    }
}
