import Foundation
import IsletCore
import IsletStore

/// How the delivery service works through its jobs.
public struct DeliveryConfiguration: Sendable {
    /// Units of work (a fan-out batch, a group of due retries) sent at once; one activity's messages
    /// still go out in order.
    public var workers: Int
    /// Workers one application may hold at once: a slow, failing or throttled APNs of one application
    /// never takes every worker from the others.
    public var workersPerApplication: Int
    /// Devices read, sent and recorded together: the most pushes held in memory per worker.
    public var batchSize: Int
    /// Due retries, second copies and catch-ups claimed together.
    public var retryBatchSize: Int
    /// Retry pacing, expiry and the wait for a start's confirmation (issue 10).
    public var retry: RetryPolicy
    /// The longest one batch waits for APNs' answers.
    public var sendTimeout: Duration
    /// Batches of one fan-out on the wire at once: the next pages are read and sent while the first is
    /// answered and recorded. A crash repeats at most these batches, with the same bytes and apns-ids.
    public var pipelineDepth: Int
    /// How a large start is split into shards that several workers send at once.
    public var sharding: ShardPolicy
    /// Workers an application's shards may hold: one less than its share, so its small messages
    /// (an update while its large starts go out) always find a worker.
    var shardShare: Int { max(1, workersPerApplication - 1) }
    /// Longest sleep with nothing due, so a job written by another process is seen soon.
    public var idlePoll: Duration
    /// Updates and ends of activities with at most `smallJobDevices` devices, and starts to a short list of
    /// named devices, are claimed up to `smallJobsPerClaim` at a time, sent together and recorded in one
    /// transaction (issue 18).
    public var smallJobsPerClaim: Int
    public var smallJobDevices: Int
    /// Looks for work made after a kick (work was accepted) come at most this often on a node, times the nodes
    /// running on the database (each node is kicked by the work every node accepts): the updates accepted
    /// meanwhile are claimed together, one claim (a transaction, and its record another) for many, where a look at
    /// each kick claimed a few at a time and most looks of a busy cluster found none. A push waits about this long
    /// at most before some node's claim; a look at a due time or at the idle poll is never held back.
    public var lookSpacing: Duration = .milliseconds(10)
    /// How long a claim stays this node's without a renewal (issue 14): a node that stops renewing (paused,
    /// cut off from the database) loses its work to another node after this, and a node that sees it has
    /// lost a lease sends no further batch of it. Renewed four times per lease (at least every second).
    public var lease: Duration
    /// How long a worker keeps trying to record what a batch's pushes came to while the database cannot be reached
    /// (issue 47): a failover, a restart or a cut network within this loses no answer, and sends nothing twice.
    public var recordPatience: Duration = .seconds(60)
    /// The least time between two updates of one activity (A9), for the held updates released when due (A11).
    public var updatePacing = UpdatePacing.standard
    /// Push-to-start pushes a device gets in a minute (A12).
    public var pushToStartPacing = PushToStartPacing.standard

    public init(workers: Int = 8, workersPerApplication: Int? = nil, batchSize: Int = 1000, retryBatchSize: Int = 500,
                retry: RetryPolicy = RetryPolicy(), sendTimeout: Duration = .seconds(30), pipelineDepth: Int = 3,
                sharding: ShardPolicy = ShardPolicy(), idlePoll: Duration = .milliseconds(500),
                smallJobsPerClaim: Int = 256, smallJobDevices: Int = 64, lease: Duration = .seconds(10)) {
        self.lease = max(.milliseconds(400), lease)
        self.sharding = sharding
        self.pipelineDepth = max(1, pipelineDepth)
        self.workers = max(1, workers)
        self.workersPerApplication = max(1, workersPerApplication ?? (workers + 1) / 2)
        self.batchSize = batchSize
        self.retryBatchSize = retryBatchSize
        self.retry = retry
        self.sendTimeout = sendTimeout
        self.idlePoll = idlePoll
        self.smallJobsPerClaim = max(0, smallJobsPerClaim)
        self.smallJobDevices = max(1, min(smallJobDevices, batchSize))
    }
}
