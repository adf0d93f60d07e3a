import Foundation
import IsletCore

/// Where a message is: waiting for its time, being sent, sent, or cancelled before it fired.
public struct MessageState: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let pending = Self(uncheckedRawValue: "pending")
    public static let sending = Self(uncheckedRawValue: "sending")
    public static let done = Self(uncheckedRawValue: "done")
    public static let cancelled = Self(uncheckedRawValue: "cancelled")
    public static let all = [pending, sending, done, cancelled]
}

/// Where one device's push of one message is (A5, issue 10).
public struct DeliveryState: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    /// APNs accepted it (or, for a start, the device confirmed it by reporting its update token).
    public static let sent = Self(uncheckedRawValue: "sent")
    /// APNs refused it for good (bad token, bad request), or a start stayed unconfirmed after two copies.
    public static let failed = Self(uncheckedRawValue: "failed")
    /// Not sent, with the reason (S7, U2).
    public static let skipped = Self(uncheckedRawValue: "skipped")
    /// Waiting for its next attempt (`next_attempt_at`) after a retryable answer or no answer.
    public static let retrying = Self(uncheckedRawValue: "retrying")
    /// A retry being sent now.
    public static let sending = Self(uncheckedRawValue: "sending")
    /// A start whose answer was lost: waiting for the device to report an update token before a second copy.
    public static let unconfirmed = Self(uncheckedRawValue: "unconfirmed")
    /// A newer update or end of the activity went instead (latest state wins).
    public static let superseded = Self(uncheckedRawValue: "superseded")
    /// Still undelivered when the push expired (`apns-expiration`).
    public static let expired = Self(uncheckedRawValue: "expired")
    /// A broadcast waiting for its first send (X5). A device's push has no record before it is sent or skipped.
    public static let pending = Self(uncheckedRawValue: "pending")
    public static let all = [sent, failed, skipped, retrying, sending, unconfirmed, superseded, expired, pending]

    /// Still owed to the device: the message is not settled while any push is in one of these.
    public var isOpen: Bool { self == .retrying || self == .sending || self == .unconfirmed }
}

/// Whether a device takes part in an activity's session (`activity_devices`, S8, U2).
public struct ActivityDeviceState: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    /// The activity runs there: its start reached the phone, or the app reported an update token.
    public static let active = Self(uncheckedRawValue: "active")
    /// APNs declared the device's update token for it dead: updates skip it.
    public static let tokenDead = Self(uncheckedRawValue: "token-dead")
    public static let all = [active, tokenDead]
}

/// A Live Activity of an application, keyed by its `live_activity_id` (S8).
public struct ActivityRecord: Sendable, Equatable {
    public let id: Int64
    public let activityID: String
    public let state: ActivityState
    public let attributesType: String?
    public let name: String?
    /// The last content-state sent (or to be sent, while scheduled).
    public let contentState: JSONObject?
    public let updatedAt: Date
    /// When its current session's start went out (A8); nil while scheduled.
    public let startedAt: Date?
    /// After an end: when it leaves the lock screen (A8).
    public let dismissAt: Date?
    /// The schema its current session started with (X2), when it did; read with the activity locked for an update.
    public var schema: ActivitySchema?

    public init(id: Int64, activityID: String, state: ActivityState, attributesType: String?, name: String?,
                contentState: JSONObject?, updatedAt: Date, startedAt: Date? = nil, dismissAt: Date? = nil) {
        self.startedAt = startedAt
        self.dismissAt = dismissAt
        self.id = id
        self.activityID = activityID
        self.state = state
        self.attributesType = attributesType
        self.name = name
        self.contentState = contentState
        self.updatedAt = updatedAt
    }
}

/// One accepted notification, ready to store with its delivery job: payloads are final bytes, so a
/// resend after a crash repeats them exactly (A4).
public struct NewMessage: Sendable {
    public let code: String
    public let event: LiveActivityEvent
    public let activityID: String
    /// Starts only: who to start on, and the type whose push-to-start tokens to use.
    public let target: TargetSelection?
    public let attributesType: String?
    public let name: String?
    public let contentState: JSONObject
    public let payload: [UInt8]
    /// Starts only: the alert for devices below iOS 16.1 (S7).
    public let fallbackPayload: [UInt8]?
    /// The FCM `data` of the Android Live Update it sends (issue 46); nil: it reaches no Android phone (its application
    /// has no FCM service account, or it is a renewal's end or start, which Android has no need of).
    public var androidPayload: [UInt8]?
    public let priority: Int
    public let dueAt: Date
    /// Starts only: the schema version the activity's content-state was checked against (X2).
    public let schemaVersion: Int?
    /// After this the pushes are not worth delivering: sent as `apns-expiration`, and retries stop.
    public let expiresAt: Date
    /// An end's `dismissal-date` (seconds since 1970), kept with the activity (A8).
    public let dismissalDate: Int64?
    /// A start's `end_date`: the code of the end Islet sends itself then, and that end's expiry (A11).
    public var scheduledEnd: (code: String, at: Date, expiresAt: Date)?
    /// A start's `renew`: Islet starts the activity again shortly before its 8 hours, each time (A8).
    public var renew = false
    /// An update's: what its content-state was checked against (X2); the store refuses it when that no longer holds.
    public var checkedSchema = CheckedSchema.unchecked
    /// A start on a broadcast channel (X5): Apple's channel id per environment, and Islet's name for the channel.
    public var channelIDs: [Gateway: String]?
    /// A start to `devices` or `users`: how many of the entries named no device of the application (issue 45).
    public var unknownTargets = 0
    public var channel: String?

    public init(code: String, event: LiveActivityEvent, activityID: String, target: TargetSelection?, attributesType: String?,
                name: String?, contentState: JSONObject, payload: [UInt8], fallbackPayload: [UInt8]?, priority: Int, dueAt: Date,
                schemaVersion: Int? = nil, expiresAt: Date? = nil, dismissalDate: Int64? = nil) {
        self.dismissalDate = dismissalDate
        self.schemaVersion = schemaVersion
        self.expiresAt = expiresAt ?? dueAt.addingTimeInterval(3600)
        self.code = code
        self.event = event
        self.activityID = activityID
        self.target = target
        self.attributesType = attributesType
        self.name = name
        self.contentState = contentState
        self.payload = payload
        self.fallbackPayload = fallbackPayload
        self.priority = priority
        self.dueAt = dueAt
    }
}

/// What accepting one update decided (A7, A8).
public struct AcceptedUpdate: Sendable, Equatable {
    public let priority: BudgetedPriority
    /// When the activity's current session started; nil when unknown.
    public let activityStartedAt: Date?
    /// When it goes out: at once, or its turn when paced (A9).
    public let dueAt: Date
    /// X5: the channel the activity's session was started on, which the update is broadcast to as well.
    public var channel: SessionChannel?
    /// An end of an activity that had already ended (`ActivityRules.isRepeatedEnd`): the code of the message that ended
    /// it; nothing was stored or sent.
    public var endedBy: String?

    public init(priority: BudgetedPriority, activityStartedAt: Date?, dueAt: Date, channel: SessionChannel? = nil) {
        self.priority = priority
        self.activityStartedAt = activityStartedAt
        self.dueAt = dueAt
        self.channel = channel
    }
}

/// X5: the broadcast channel an activity's session was started on: Islet's name (nil for a start stored
/// before names were kept) and Apple's id per environment.
public struct SessionChannel: Sendable, Equatable {
    public let name: String?
    public let ids: [Gateway: String]

    public init(name: String?, ids: [Gateway: String]) {
        self.name = name
        self.ids = ids
    }
}

/// Why a notification of an accepted request was refused by what is stored (S3, U1).
public struct AcceptRefusal: Error, Sendable, Equatable {
    /// The notification's index in the request.
    public let index: Int
    public let field: String
    public let message: String

    public init(index: Int, field: String, message: String) {
        self.index = index
        self.field = field
        self.message = message
    }
}

/// What deleteMessage did.
public enum CancelResult: Sendable, Equatable {
    case cancelled
    case notFound
    /// Not a start waiting to fire: already sending or sent, cancelled, or an update or end.
    case notCancellable(state: MessageState, event: LiveActivityEvent)
}

/// Delivery statistics of a message (X4).
public struct MessageDetails: Sendable, Equatable {
    public let code: String
    public let event: LiveActivityEvent
    public let activityID: String
    public let state: MessageState
    public let createdAt: Date
    public let dueAt: Date
    public let finishedAt: Date?
    public let targeted: Int
    public let sent: Int
    public let failed: Int
    public let skipped: [String: Int]
    /// APNs reasons of the failed pushes, with counts.
    public let reasons: [String: Int]
    /// Pushes by delivery state, for the states beyond sent/failed/skipped (retrying, unconfirmed, superseded, expired…).
    public let pending: [DeliveryState: Int]
    /// The earliest next attempt of a retrying or unconfirmed push.
    public let nextAttemptAt: Date?
    /// Pushes sent to catch a late device up with the latest state.
    public let caughtUp: Int
    /// The newer message that made this one unnecessary before it went out.
    public let supersededBy: String?
    public let expiresAt: Date?
    /// Pushes of a priority-10 update sent at priority 5 because the activity's budget was used (A7).
    public let overBudget: Int
    /// Devices whose app reported the push received, and opened (issue 45: the SDK's own receipts).
    public var received = 0, opened = 0
    /// A start's pushes sent as its fallback alert, to phones that cannot be started remotely (S7).
    public var fallbackAlerts = 0
    /// A start's `devices` or `users` entries that named no device of the application when it was accepted.
    public var unknownTargets = 0

    public init(code: String, event: LiveActivityEvent, activityID: String, state: MessageState, createdAt: Date, dueAt: Date, finishedAt: Date?, targeted: Int, sent: Int, failed: Int, skipped: [String: Int], reasons: [String: Int],
                pending: [DeliveryState: Int] = [:], nextAttemptAt: Date? = nil, caughtUp: Int = 0, supersededBy: String? = nil, expiresAt: Date? = nil,
                overBudget: Int = 0) {
        self.overBudget = overBudget
        self.pending = pending
        self.nextAttemptAt = nextAttemptAt
        self.caughtUp = caughtUp
        self.supersededBy = supersededBy
        self.expiresAt = expiresAt
        self.code = code
        self.event = event
        self.activityID = activityID
        self.state = state
        self.createdAt = createdAt
        self.dueAt = dueAt
        self.finishedAt = finishedAt
        self.targeted = targeted
        self.sent = sent
        self.failed = failed
        self.skipped = skipped
        self.reasons = reasons
    }
}

/// One device's part in an activity, for getLiveActivity (X4).
public struct ActivityDevice: Sendable, Equatable {
    /// The device's row id: the paging cursor of getLiveActivity.
    public var id: Int64 = 0
    public let hwid: String
    public let state: String
    public let lastStatus: Int?
    public let lastReason: String?
    public let lastMessage: String?
    /// The delivery state of the last message's push to this device.
    public let lastState: DeliveryState?
    /// That push caught the device up after a late token.
    public let caughtUp: Bool
    /// What the device's health flags for this activity are decided from (A10): its start, if APNs accepted
    /// one, and the last push's `BadDeviceToken`.
    public var health = DeviceHealth.Facts(gateway: .production)
    /// Attempts of the last message's push to this device (retries included).
    public var attempts: Int?
    /// When that push is tried next: a retry's next attempt, or an unconfirmed start's second copy (nil otherwise).
    public var nextAttemptAt: Date?
    /// When the app last reported this activity's update token (nil: never, or it was dropped).
    public var tokenUpdatedAt: Date?

    public init(hwid: String, state: String, lastStatus: Int?, lastReason: String?, lastMessage: String?, lastState: DeliveryState? = nil,
                caughtUp: Bool = false) {
        self.lastState = lastState
        self.caughtUp = caughtUp
        self.hwid = hwid
        self.state = state
        self.lastStatus = lastStatus
        self.lastReason = lastReason
        self.lastMessage = lastMessage
    }
}
