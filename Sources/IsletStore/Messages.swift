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
    public static let all = [sent, failed, skipped, retrying, sending, unconfirmed, superseded, expired]

    /// Still owed to the device: the message is not settled while any push is in one of these.
    public var isOpen: Bool { self == .retrying || self == .sending || self == .unconfirmed }
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
    /// A start on a broadcast channel (X5): Apple's channel id per environment, and Islet's name for the channel.
    public var channelIDs: [Gateway: String]?
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

/// How a large fan-out is split into shards that workers send at once (issue 10): contiguous ranges
/// of device ids, each with its own progress.
public struct ShardPolicy: Sendable, Equatable {
    /// Device ids per shard; an application whose ids span less than two of these is not split.
    public var span: Int64
    /// Shards of one message at most.
    public var maximum: Int

    /// The default splits only audiences spanning 500,000 device ids or more: on a 2-core machine one
    /// worker's pipeline already keeps the wire busy, and more shards mostly compete for the CPU and
    /// SQLite's writer with the small messages that must get through at once (BENCHMARKS.md).
    public init(span: Int64 = 250_000, maximum: Int = 4) {
        self.span = max(1, span)
        self.maximum = max(1, maximum)
    }

    /// The shards of ids in `lowest...highest`: (after, upTo] ranges covering them, none for a small range.
    public func shards(lowest: Int64, highest: Int64) -> [(after: Int64, upTo: Int64)] {
        let width = highest - lowest + 1
        guard width >= 2 * span else { return [] }
        let count = Int(min(Int64(maximum), (width + span - 1) / span))
        let size = (width + Int64(count) - 1) / Int64(count)
        return (0..<count).map { index in
            let after = lowest - 1 + Int64(index) * size
            return (after, index == count - 1 ? Int64.max : min(after + size, highest))
        }
    }
}

/// A claimed delivery job: one message and how far its fan-out got.
public struct MessageJob: Sendable, Equatable {
    public let id: Int64
    public let code: String
    public let application: ApplicationCode
    public let event: LiveActivityEvent
    public let activity: Int64
    public let activityID: String
    public let target: TargetSelection?
    public let attributesType: String?
    public let payload: [UInt8]
    /// A start on a broadcast channel (X5): Apple's channel id per environment. An update or end of an
    /// activity started on one: the channel, which it is broadcast to as well.
    public var channelIDs: [Gateway: String]?
    public var channel: String?
    public let fallbackPayload: [UInt8]?
    /// The priority its pushes go at, by kind of device (A7).
    public let priority: BudgetedPriority
    /// Devices up to this id are done; a resumed job starts after it.
    public let cursor: Int64
    public let expiresAt: Date
    /// When it fell due: accepted (or its scheduled time); the delivery lag is measured from here.
    public let dueAt: Date
    /// When its activity's current session started (A8): an update past 8 hours reaches no device.
    public var activityStartedAt: Date?
    /// A shard of a large fan-out: its number, and the last device id it covers.
    public var shard: (number: Int, upTo: Int64)?
    /// The lease of the claim that took it: its fencing token (issue 14).
    public var lease: Int64 = 0

    public static func == (a: MessageJob, b: MessageJob) -> Bool {
        a.id == b.id && a.cursor == b.cursor && a.shard?.number == b.shard?.number && a.shard?.upTo == b.shard?.upTo
    }

    public init(id: Int64, code: String, application: ApplicationCode, event: LiveActivityEvent, activity: Int64, activityID: String, target: TargetSelection?, attributesType: String?, payload: [UInt8], fallbackPayload: [UInt8]?, priority: BudgetedPriority, cursor: Int64, expiresAt: Date, dueAt: Date) {
        self.expiresAt = expiresAt
        self.dueAt = dueAt
        self.id = id
        self.code = code
        self.application = application
        self.event = event
        self.activity = activity
        self.activityID = activityID
        self.target = target
        self.attributesType = attributesType
        self.payload = payload
        self.fallbackPayload = fallbackPayload
        self.priority = priority
        self.cursor = cursor
    }

    /// The same job resumed from another cursor.
    public init(copying job: MessageJob, cursor: Int64) {
        self.init(id: job.id, code: job.code, application: job.application, event: job.event, activity: job.activity,
                  activityID: job.activityID, target: job.target, attributesType: job.attributesType, payload: job.payload,
                  fallbackPayload: job.fallbackPayload, priority: job.priority, cursor: cursor, expiresAt: job.expiresAt, dueAt: job.dueAt)
        activityStartedAt = job.activityStartedAt
        channelIDs = job.channelIDs
        channel = job.channel
        shard = job.shard
        lease = job.lease
    }
}

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
    public mutating func add(_ verdict: APNsVerdict, pushType: PushType, token: String, isStart: Bool, activity: Int64, device: Int64) {
        if verdict == .delivered && isStart && pushType == .liveActivity { startedOn.append((activity, device)) }
        guard case .deadToken(let invalidSince) = verdict else { return }
        let dead = DeadToken(device: device, token: token, invalidSince: invalidSince)
        if !isStart {
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
    /// Messages (or shards of one) due now and not finished: waiting for a worker or being sent.
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

/// Messages, their jobs and the activities they start, update and end.
public protocol MessageStore: Sendable {
    /// Stores start messages with their jobs, all or none; refuses an id that is still scheduled or active (S3).
    /// With `validateOnly` (a dry run) it checks exactly the same and stores nothing.
    func acceptStarts(_ messages: [NewMessage], in application: ApplicationCode, at date: Date, validateOnly: Bool) throws
    /// Stores update/end messages, all or none; refuses unknown and ended activities (U1).
    /// What was decided of each update: its priority by kind of device, the one asked or 5 past the activity's
    /// `budget` (A7), and when its activity started (A8). An update accepted within `pacing`'s interval of the
    /// activity's last one waits for its turn (A9). One due later (`dueAt` after `date`) is held until then (A11).
    @discardableResult
    func acceptUpdates(_ messages: [NewMessage], in application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing,
                       at date: Date, validateOnly: Bool) throws -> [AcceptedUpdate]

    /// Takes the next due job, if any, under a new lease of `lease.owner`; none of the `excluding` applications.
    /// A start to a large audience is split into shards (`sharding`) on its first claim, and each
    /// shard is a job of its own, so several workers (of any node) send it at once.
    /// Shards are not taken for the `shardsExcluding` applications, so their small messages always find a worker.
    /// With `leavingSmall`, the messages `claimSmallJobs(devicesAtMost: leavingSmall)` takes are left to it.
    /// Jobs another node is claiming at this moment are skipped, not waited for.
    func claimNextJob(at date: Date, excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>,
                      sharding: ShardPolicy, leavingSmall: Int?, lease: ClaimLease) throws(StoreError) -> MessageJob?
    /// Takes up to `limit` due small messages (at most one per activity: the oldest, so order holds), none of
    /// the `excluding` applications, in one transaction and under one lease: updates and ends of activities with
    /// at most `devicesAtMost` devices, and starts to a short list of named devices (their scheduled activity
    /// becomes active). Small messages are sent and recorded together (issue 18) instead of a job cycle each.
    func claimSmallJobs(at date: Date, limit: Int, devicesAtMost: Int, excluding: Set<ApplicationCode>,
                        lease: ClaimLease) throws(StoreError) -> [MessageJob]
    /// Records the batches of several jobs in one transaction: each job's results, then the job finished
    /// (`finished`) or given back with its cursor (more devices than one page, or not sent). Throws
    /// `.leaseLost`, writing nothing, when a job's lease was rescued.
    func recordJobs(_ outcomes: [JobOutcome], at date: Date) throws(StoreError)
    /// When the next pending job or due delivery of an application not `excluding` falls due; nil when none waits.
    func nextDueDate(excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>) throws(StoreError) -> Date?
    /// Deletes, in one short transaction, up to `limit` delivery records of the oldest message finished before
    /// `cutoff`, and the message once none is left: any such message of an activity that ended or has not
    /// changed since `cutoff`; of a live one, all but its current start and its latest update or end.
    /// Returns what it deleted; (0, 0) when nothing is that old.
    func pruneFinished(before cutoff: Date, limit: Int) throws(StoreError) -> (deliveries: Int, messages: Int)
    /// The delivery backlog for operators (`/metrics`): jobs due and scheduled, retries owed.
    func queueStatistics(at date: Date) throws(StoreError) -> DeliveryQueueStatistics
    /// Gives claimed due deliveries back unsent (their outcomes could not be recorded), due at `date`.
    func requeue(_ due: [DueDelivery], at date: Date) throws(StoreError)
    /// Claims up to `limit` deliveries due at `date` (not of `excluding` applications) under a new lease,
    /// settling in the same transaction those `verdict` says need no send; returns the ones to send, now `.sending`.
    func claimDueDeliveries(at date: Date, limit: Int, excluding: Set<ApplicationCode>, lease: ClaimLease,
                            verdict: (DueDelivery, Date) -> DueVerdict) throws(StoreError) -> [DueDelivery]
    /// Writes what sending due deliveries of one claim (`lease`) came to, in one transaction; `.leaseLost`
    /// when the lease was rescued.
    func recordRetries(_ result: RetryResult, lease: Int64, at date: Date) throws(StoreError)
    /// The newer message that superseded this job while it was being sent, if any.
    func supersededBy(_ job: MessageJob) throws(StoreError) -> Int64?
    /// A page of the devices an update goes to, in id order after `afterID` (U2).
    func updateTargets(activity: Int64, afterID: Int64, limit: Int) throws(StoreError) -> [UpdateTarget]
    /// Writes one batch's results and advances the job, in one transaction; `.leaseLost` when its lease was rescued.
    func recordBatch(_ result: BatchResult, of job: MessageJob, at date: Date) throws(StoreError)
    func finish(_ job: MessageJob, at date: Date) throws(StoreError)
    /// Gives a claimed job back unfinished (its cursor kept), for any worker to resume.
    func release(_ job: MessageJob) throws(StoreError)

    /// Cancels a start that has not fired; its scheduled activity goes with it.
    func cancelMessage(code: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> CancelResult
    /// A11: the held updates and ends that fell due join the queue, as if accepted now (up to `limit`); one
    /// whose activity ended, or began a new session, since is recorded cancelled. A8: renewals that fell due
    /// take their next step (the old card's end, then the new start). How many were released or taken.
    func releaseScheduledUpdates(at date: Date, limit: Int, pacing: UpdatePacing) throws(StoreError) -> Int
    /// A8: when an activity started with `renew` is next renewed; nil when it is not.
    func renewal(ofActivity activity: Int64) throws(StoreError) -> Date?
    func messageDetails(code: String, in application: ApplicationCode) throws(StoreError) -> MessageDetails?
    func activity(_ activityID: String, in application: ApplicationCode) throws(StoreError) -> ActivityRecord?
    /// Up to `limit` devices of the activity after device id `after`, in id order, with their last delivery.
    func activityDevices(activity: Int64, after: Int64, limit: Int) throws(StoreError) -> [ActivityDevice]
    /// How many devices take part in the activity.
    func activityDeviceCount(activity: Int64) throws(StoreError) -> Int
    /// The devices whose start of the activity's current session has an unknown fate (its answer was lost): not
    /// taking part until the app reports its update token (S8), and when the first of them gets its second copy.
    func unconfirmedStarts(activity: Int64) throws(StoreError) -> UnconfirmedStarts
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
