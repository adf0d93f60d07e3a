import Foundation
import IsletCore

/// A device an update goes to, with its update token for the activity (U2).
public struct UpdateTarget: Sendable, Equatable {
    public let device: Device
    /// nil: the app has not reported one yet, or the activity ended on the device.
    public let updateToken: String?
    /// The token was reported and later cleared (`activity_token: ""`).
    public let endedOnDevice: Bool
    /// APNs answered 410 for this device's update token.
    public let tokenDead: Bool

    public init(device: Device, updateToken: String?, endedOnDevice: Bool, tokenDead: Bool) {
        self.device = device
        self.updateToken = updateToken
        self.endedOnDevice = endedOnDevice
        self.tokenDead = tokenDead
    }
}

/// What happened to one device of a message (A5).
public struct DeliveryRecord: Sendable, Equatable {
    public let device: Int64
    /// `.liveActivity` or `.alert`; nil when skipped.
    public let pushType: PushType?
    /// The HTTP status from APNs; 0 when skipped or never answered.
    public let status: Int
    /// Apple's reason, or the skip reason.
    public let reason: String?
    public let apnsID: String?
    /// Sends of this push in this record (added to the stored count).
    public let attempts: Int
    public let state: DeliveryState
    /// With `.retrying` and `.unconfirmed`: when to look at it again.
    public let nextAttemptAt: Date?
    /// The device token it went (or goes) to.
    public let token: String?
    /// Sends of a start that may have reached the phone without an answer (at most two ever go out).
    public let uncertainCopies: Int
    /// The `apns-priority` it went at; nil when skipped.
    public let priority: Int?

    public init(device: Int64, pushType: PushType?, status: Int, reason: String?, apnsID: String?, attempts: Int,
                state: DeliveryState? = nil, nextAttemptAt: Date? = nil, token: String? = nil, uncertainCopies: Int = 0, priority: Int? = nil) {
        self.priority = priority
        self.device = device
        self.pushType = pushType
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.attempts = attempts
        self.state = state ?? (pushType == nil ? .skipped : status == 200 ? .sent : .failed)
        self.nextAttemptAt = nextAttemptAt
        self.token = token
        self.uncertainCopies = uncertainCopies
    }
}

/// A push owed to a device that is due again: a retry, a start awaiting confirmation, or a catch-up.
public struct DueDelivery: Sendable, Equatable {
    public let message: Int64
    public let code: String
    public let application: ApplicationCode
    public let event: LiveActivityEvent
    public let activity: Int64
    public let device: Int64
    public let gateway: Gateway
    public let state: DeliveryState
    /// `.liveActivity` or `.alert`.
    public let pushType: PushType
    public let token: String
    public let payload: [UInt8]
    public let priority: Int
    public let expiresAt: Date
    public let attempts: Int
    public let uncertainCopies: Int
    /// Sent to catch a device up with the latest state: without the alert (issue 10).
    public let catchUp: Bool
    /// The facts the claim decides on.
    public let activityEnded: Bool
    /// A newer update or end of the same activity exists.
    public let newerMessage: Bool
    /// The activity runs on the device (its start was answered 200, or the device reported an update token).
    public let tokenReportedSince: Bool
    /// A start on a broadcast channel (X5): Apple's channel id per environment, and the device's iOS.
    public var channelIDs: [Gateway: String]?
    public var osVersion: String?
    /// When the activity's current session started (A8).
    public var activityStartedAt: Date?
    /// The lease of the claim that took it (issue 14).
    public var lease: Int64 = 0

    public init(message: Int64, code: String, application: ApplicationCode, event: LiveActivityEvent, activity: Int64, device: Int64,
                gateway: Gateway, state: DeliveryState, pushType: PushType, token: String, payload: [UInt8], priority: Int, expiresAt: Date,
                attempts: Int, uncertainCopies: Int, catchUp: Bool, activityEnded: Bool, newerMessage: Bool, tokenReportedSince: Bool) {
        self.message = message
        self.code = code
        self.application = application
        self.event = event
        self.activity = activity
        self.device = device
        self.gateway = gateway
        self.state = state
        self.pushType = pushType
        self.token = token
        self.payload = payload
        self.priority = priority
        self.expiresAt = expiresAt
        self.attempts = attempts
        self.uncertainCopies = uncertainCopies
        self.catchUp = catchUp
        self.activityEnded = activityEnded
        self.newerMessage = newerMessage
        self.tokenReportedSince = tokenReportedSince
    }
}

/// What becomes of a due delivery when it is claimed.
public enum DueVerdict: Sendable, Equatable {
    /// Send it now (a start awaiting confirmation counts one more possible copy).
    case send
    /// Settle it without sending.
    case settle(DeliveryState, reason: String)
}

/// The outcome of sending due deliveries, written in one transaction.
public struct RetryResult: Sendable {
    public var records: [(message: Int64, record: DeliveryRecord)] = []
    public var effects = DeliveryEffects()
    public init() {}
}

/// A token APNs answered 410 or BadDeviceToken for; cleared only while the device still holds it, and
/// (with a 410's timestamp) only if it was not registered again after APNs found it invalid (issue 5).
public struct DeadToken: Sendable, Equatable {
    public let device: Int64
    public let token: String
    /// From a 410: when APNs last knew the token invalid, milliseconds since 1970.
    public let invalidSince: Int64?

    public init(device: Int64, token: String, invalidSince: Int64? = nil) {
        self.device = device
        self.token = token
        self.invalidSince = invalidSince
    }
}

/// What sent pushes change besides their records: where an activity now runs, and tokens APNs
/// declared dead (cleared only while the device still holds them, see `DeadToken`).
public struct DeliveryEffects: Sendable {
    /// Devices where an activity now runs: its start reached APNs (S8).
    public var startedOn: [(activity: Int64, device: Int64)] = []
    public var deadPushToStartTokens: [DeadToken] = []
    /// Update tokens of an activity (U2).
    public var deadUpdateTokens: [(activity: Int64, token: DeadToken)] = []
    /// Regular push tokens (fallback alerts).
    public var deadPushTokens: [DeadToken] = []

    public init() {}

    /// Adds what one answered push means for its activity and device.
    /// An Android push goes to the device's FCM registration token, its push token, whatever the event (issue 46).
    public mutating func add(_ verdict: PushVerdict, pushType: PushType, token: String, isStart: Bool, activity: Int64, device: Int64) {
        if verdict == .delivered && isStart && pushType.startsActivity { startedOn.append((activity, device)) }
        guard case .deadToken(let invalidSince) = verdict else { return }
        let dead = DeadToken(device: device, token: token, invalidSince: invalidSince)
        if pushType.isFCM {
            deadPushTokens.append(dead)
        } else if !isStart {
            deadUpdateTokens.append((activity, dead))
        } else if pushType == .liveActivity {
            deadPushToStartTokens.append(dead)
        } else {
            deadPushTokens.append(dead)
        }
    }
}

/// One batch of a job's fan-out, written in one transaction with the job's new cursor.
public struct BatchResult: Sendable {
    public var records: [DeliveryRecord] = []
    public var effects = DeliveryEffects()
    public var cursor: Int64

    public init(cursor: Int64) { self.cursor = cursor }
}

/// What sending a claimed job came to, recorded with others in one transaction.
public struct JobOutcome: Sendable {
    public let job: MessageJob
    public let result: BatchResult
    /// Every device was done: the job is finished; otherwise it is given back to resume at the cursor.
    public let finished: Bool

    public init(job: MessageJob, result: BatchResult, finished: Bool) {
        self.job = job
        self.result = result
        self.finished = finished
    }

    /// The job given back untouched (not sent, or its sending could not be recorded): it resumes where it was.
    public static func givenBack(_ job: MessageJob) -> JobOutcome {
        JobOutcome(job: job, result: BatchResult(cursor: job.cursor), finished: false)
    }
}

/// What waits to be sent, as operators watch it.
public struct DeliveryQueueStatistics: Sendable, Equatable {
    /// Messages (or shards of one) due now and not finished: waiting for a worker or being sent (an activity's waiting
    /// update counts, queued or not).
    public var jobsDue = 0
    /// Scheduled starts not due yet.
    public var jobsScheduled = 0
    /// When the oldest unfinished due job fell due.
    public var oldestDueAt: Date?
    /// Pushes owed a retry (`retrying`) and starts awaiting their device's token (`unconfirmed`).
    public var retrying = 0
    public var unconfirmed = 0
    /// When the most overdue retry fell due (only retries already due count).
    public var oldestRetryDueAt: Date?

    public init() {}
}

/// Starts of an activity whose answer was lost (issue 10): how many, and the earliest second copy's time.
public struct UnconfirmedStarts: Sendable, Equatable {
    public let count: Int
    public let nextAttemptAt: Date?

    public init(count: Int, nextAttemptAt: Date?) {
        self.count = count
        self.nextAttemptAt = nextAttemptAt
    }
}

/// When a device reports an update token for an activity, whether it must be sent the activity's
/// latest update or end again (issue 10): it missed it (no token yet, skipped, failed, expired), or it
/// went to a token the device no longer uses (rotation). Pure: every storage engine asks this.
public enum CatchUpRule {
    /// - latest: the state of the activity's newest update or end since the device's start; nil when there is none.
    /// - delivery: that message's push to this device, if one is recorded.
    public static func needed(latest: MessageState?, delivery: (state: DeliveryState, token: String?)?, token: String) -> Bool {
        guard latest == .done || latest == .sending else { return false }
        // No record: the device was not among the targets when the fan-out read its page (or the fan-out
        // is still to read it; a second copy of the same update is harmless, a missed one is not).
        guard let delivery else { return true }
        switch delivery.state {
        case .sent, .retrying, .unconfirmed: return delivery.token != token
        case .skipped, .failed, .expired: return true
        default: return false   // in flight now, or superseded by a newer message that will reach the device itself
        }
    }

    /// How long a catch-up push is worth delivering.
    public static let lifetime: TimeInterval = 3600
}
