import Foundation
import IsletCore

/// Messages, their jobs and the activities they start, update and end.
/// Accepting messages (S3, U1, A7, A9, A11): each call all or none, durable when it returns.
public protocol MessageIntake: Sendable {
    /// Stores start messages with their jobs, all or none; refuses an id that is still scheduled or active (S3).
    /// With `validateOnly` (a dry run) it checks exactly the same and stores nothing.
    func acceptStarts(_ messages: [NewMessage], in application: ApplicationCode, at date: Date, validateOnly: Bool) throws
    /// `acceptStarts` that does not wait for the durable commit: `then` gets nil once it is committed, or its error, on
    /// the thread that committed it. `then` must not wait, nor write.
    func acceptStarts(_ messages: [NewMessage], in application: ApplicationCode, at date: Date, validateOnly: Bool,
                      then: @escaping @Sendable ((any Error)?) -> Void)
    /// Stores update/end messages, all or none; refuses unknown and ended activities (U1).
    /// What was decided of each update: its priority by kind of device, the one asked or 5 past the activity's
    /// `budget` (A7), and when its activity started (A8). An update accepted within `pacing`'s interval of the
    /// activity's last one waits for its turn (A9). One due later (`dueAt` after `date`) is held until then (A11).
    @discardableResult
    func acceptUpdates(_ messages: [NewMessage], in application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing,
                       at date: Date, validateOnly: Bool) throws -> [AcceptedUpdate]
    /// `acceptUpdates` that does not wait for the durable commit (an API call whose connection waits suspended):
    /// `then` gets what it decided, or its error, once the write is committed or failed, on the thread that
    /// committed it. `then` must not wait, nor write.
    func acceptUpdates(_ messages: [NewMessage], in application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing,
                       at date: Date, validateOnly: Bool, then: @escaping @Sendable (Result<[AcceptedUpdate], any Error>) -> Void)
    /// Cancels a start that has not fired; its scheduled activity goes with it.
    func cancelMessage(code: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> CancelResult
}

/// What waits for its time: held updates and ends (A11) and renewals (A8).
public protocol ActivitySchedule: Sendable {
    /// A11: the held updates and ends that fell due join the queue, as if accepted now (up to `limit`); one
    /// whose activity ended, or began a new session, since is recorded cancelled. A8: renewals that fell due
    /// take their next step (the old card's end, then the new start). How many were released or taken.
    func releaseScheduledUpdates(at date: Date, limit: Int, pacing: UpdatePacing) throws(StoreError) -> Int
    /// A8: when an activity started with `renew` is next renewed; nil when it is not.
    func renewal(ofActivity activity: Int64) throws(StoreError) -> Date?
}

/// Delivery jobs: claims under a lease (issue 14), shards of large fan-outs, a job's end, the backlog, retention.
public protocol JobQueue: Sendable {
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
    /// When the next pending job or due delivery of an application not `excluding` falls due; nil when none waits.
    func nextDueDate(excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>) throws(StoreError) -> Date?
    /// The newer message that superseded this job while it was being sent, if any.
    func supersededBy(_ job: MessageJob) throws(StoreError) -> Int64?
    /// A page of the devices an update goes to, in id order after `afterID` (U2).
    func updateTargets(activity: Int64, afterID: Int64, limit: Int) throws(StoreError) -> [UpdateTarget]
    /// The first page of each activity's devices (`updateTargets` after 0) in one read: for the messages of a claim.
    func updateTargets(activities: [Int64], limit: Int) throws(StoreError) -> [Int64: [UpdateTarget]]
    func finish(_ job: MessageJob, at date: Date) throws(StoreError)
    /// Gives a claimed job back unfinished (its cursor kept), for any worker to resume.
    func release(_ job: MessageJob) throws(StoreError)
    /// Deletes, in one short transaction, up to `limit` delivery records of the oldest message finished before
    /// `cutoff`, and the message once none is left: any such message of an activity that ended or has not
    /// changed since `cutoff`; of a live one, all but its current start and its latest update or end.
    /// Returns what it deleted; (0, 0) when nothing is that old.
    func pruneFinished(before cutoff: Date, limit: Int) throws(StoreError) -> (deliveries: Int, messages: Int)
    /// The delivery backlog for operators (`/metrics`): jobs due and scheduled, retries owed.
    func queueStatistics(at date: Date) throws(StoreError) -> DeliveryQueueStatistics
}

/// What delivery came to: per-device records and their effects, and owed pushes (retries, unconfirmed starts, catch-ups) claimed again. Every record of a claim's work is fenced by its lease.
public protocol DeliveryLedger: Sendable {
    /// Records the batches of several jobs in one transaction: each job's results, then the job finished
    /// (`finished`) or given back with its cursor (more devices than one page, or not sent). Throws
    /// `.leaseLost`, writing nothing, when a job's lease was rescued.
    func recordJobs(_ outcomes: [JobOutcome], at date: Date) throws(StoreError)
    /// Writes one batch's results and advances the job, in one transaction; `.leaseLost` when its lease was rescued.
    func recordBatch(_ result: BatchResult, of job: MessageJob, at date: Date) throws(StoreError)
    /// Claims up to `limit` deliveries due at `date` (not of `excluding` applications) under a new lease,
    /// settling in the same transaction those `verdict` says need no send; returns the ones to send, now `.sending`.
    func claimDueDeliveries(at date: Date, limit: Int, excluding: Set<ApplicationCode>, lease: ClaimLease,
                            verdict: (DueDelivery, Date) -> DueVerdict) throws(StoreError) -> [DueDelivery]
    /// Writes what sending due deliveries of one claim (`lease`) came to, in one transaction; `.leaseLost`
    /// when the lease was rescued.
    func recordRetries(_ result: RetryResult, lease: Int64, at date: Date) throws(StoreError)
    /// Gives claimed due deliveries back unsent (their outcomes could not be recorded), due at `date`.
    func requeue(_ due: [DueDelivery], at date: Date) throws(StoreError)
}

/// A device's own receipts of its pushes (issue 45): the SDK reports a push that reached the phone
/// (`messageDeliveryEvent`) and one the user opened (`pushStat`), by the hash the push carried (its message's code).
public protocol DeviceReceipts: Sendable {
    /// Marks the delivery of message `code` to device `hwid` as received or opened, the first report kept; false when
    /// the application has no such message or device, or the message never went to that device.
    func recordReceipt(_ receipt: SDKCalls.Receipt, messageCode code: String, hwid: String, in application: ApplicationCode,
                       at date: Date) throws(StoreError) -> Bool
}

/// What the API and the console read of messages and activities.
public protocol MessageReads: Sendable {
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

/// Every job of the message store, as one conformer (`SQLMessageStore`) provides them; a part of Islet that
/// needs one job takes that protocol.
public typealias MessageStore = MessageIntake & ActivitySchedule & JobQueue & DeliveryLedger & MessageReads
