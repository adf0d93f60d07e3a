import Foundation
import IsletCore
import IsletStore
import Synchronization

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
    /// How long a claim stays this node's without a renewal (issue 14): a node that stops renewing (paused,
    /// cut off from the database) loses its work to another node after this, and a node that sees it has
    /// lost a lease sends no further batch of it. Renewed four times per lease (at least every second).
    public var lease: Duration
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

/// Sends accepted messages: claims due jobs and streams their devices in batches, and claims due
/// deliveries (retries, second copies of unconfirmed starts, catch-ups); sends through the transport
/// and records each outcome durably with what comes next (durable pipeline, issues 4 and 10).
///
/// A push waiting for its retry is a row with a due time, not a sleeping worker: workers only send.
public final class DeliveryService: Sendable {
    let messages: any MessageStore
    let devices: any DeviceStore
    let applications: any ApplicationStore
    let transport: any PushTransport
    /// Broadcasts to channels (X5), when the server keeps them.
    let broadcasts: (any BroadcastStore)?
    let configuration: DeliveryConfiguration
    let decisions: DeliveryDecisions
    /// A12: push-to-start slots per device, for starts to named devices.
    let pacer: PushToStartPacer
    let logger: Logger
    let now: @Sendable () -> Date
    /// Recorded outcomes, for `/metrics`.
    public let metrics: DeliveryMetrics
    /// This process among the nodes sharing the database: its leases, liveness and wake-ups.
    let membership: NodeMembership
    var leases: LeaseKeeper { membership.leases }

    private let wakeUp = NSCondition()
    private let pauses = NSCondition()
    private let state = Mutex(State())
    private let claiming = Mutex(())

    private struct State {
        var stopping = false
        /// A kick came that no look has started after yet. Owed to one worker, not to each: the worker whose look
        /// starts next takes it, so a stream of accepted updates keeps one worker looking, not all of them.
        var lookOwed = false
        /// Workers waiting in `sleepUntilWork`.
        var asleep = 0
        var running = 0
        /// Workers busy per application, for `workersPerApplication`.
        var busy: [ApplicationCode: Int] = [:]
        /// When a busy worker last looked for held updates that fell due (A11).
        var releaseLooked = ContinuousClock.now
    }

    /// `cluster` and `node` make this process a node among those sharing the database; `session` opens its
    /// liveness session (PostgreSQL), given its node number.
    public init(messages: any MessageStore, devices: any DeviceStore, applications: any ApplicationStore, transport: any PushTransport,
                cluster: any ClusterStore, node: NodeInfo, session: (@Sendable (Int) throws -> any NodeSession)? = nil,
                configuration: DeliveryConfiguration = DeliveryConfiguration(), logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
                jitter: @escaping @Sendable () -> Double = { Double.random(in: 0.5...1.0) }, broadcasts: (any BroadcastStore)? = nil) {
        self.broadcasts = broadcasts
        let metrics = DeliveryMetrics()
        self.metrics = metrics
        self.membership = NodeMembership(cluster: cluster, node: node, leaseDuration: configuration.lease, session: session, metrics: metrics,
                                         logger: logger, now: now)
        self.messages = messages
        self.devices = devices
        self.applications = applications
        self.transport = transport
        self.configuration = configuration
        self.decisions = DeliveryDecisions(policy: configuration.retry, jitter: jitter)
        self.pacer = PushToStartPacer(pacing: configuration.pushToStartPacing)
        self.logger = logger
        self.now = now
    }

    /// This node's id and whether its liveness session holds its lock (`/healthz`).
    public var node: NodeID { membership.node.id }
    public var nodeIsAlive: Bool { membership.isAlive }

    /// Joins the cluster (resuming what a previous run left unfinished), then starts the workers.
    public func start() throws {
        try membership.join()
        membership.start(wake: { [weak self] in self?.kick() })
        state.withLock { $0.running = configuration.workers }
        for index in 0..<configuration.workers {
            let thread = Thread { [self] in
                nameCurrentThread("islet-deliv-\(index)")
                work()
            }
            thread.start()
        }
    }

    /// New work was accepted: wake a sleeping worker now rather than at its next poll. One, not all: a worker
    /// that finds work wakes the next (`workOnce`), so workers join while there is work and an accepted
    /// update does not send every worker to claim (each claim is a write transaction).
    public func kick() {
        wakeUp.lock()
        state.withLock { $0.lookOwed = true }
        wakeUp.signal()
        wakeUp.unlock()
    }

    /// A look is owed, by the worker that owes it: no sleeper is woken for it.
    private func oweLook() {
        state.withLock { $0.lookOwed = true }
    }

    /// Stops claiming work; workers finish the batch in hand (`unblock` should make the transport
    /// answer at once) and record it, and are waited for until `deadline`. Unfinished jobs and
    /// retries resume at the next start. Returns false if a worker was still busy at the deadline.
    @discardableResult
    public func shutdown(deadline: ContinuousClock.Instant = .now + .seconds(10), unblock: () -> Void = {}) -> Bool {
        wakeUp.lock()
        state.withLock { $0.stopping = true }
        wakeUp.broadcast()
        wakeUp.unlock()
        pauses.lock()
        pauses.broadcast()
        pauses.unlock()
        unblock()
        while state.withLock({ $0.running }) > 0 && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.005) }
        let stopped = state.withLock { $0.running } == 0
        membership.stop(deadline: max(deadline, .now + .milliseconds(300)))
        return stopped
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    /// Workers sleeping until work is owed or due (for tests: with a long idle poll, all asleep means quiet).
    var workersAsleep: Int { state.withLock { $0.asleep } }

    private func work() {
        defer { state.withLock { $0.running -= 1 } }
        var smallFirst = true
        // The first look, and one at a due time or the idle poll, is made whatever is owed.
        var look = Look.always
        // Whether this worker looked at the queue since it last slept: then it reads when the next work falls due.
        var readDue = true
        while !stopping {
            do {
                // Small messages and large jobs take turns at being looked for first: neither waits behind the other.
                smallFirst.toggle()
                let outcome = try workOnce(smallFirst: smallFirst, look: look)
                look = .ifOwed
                if outcome == .worked || outcome == .foundNone { readDue = true }
                if outcome == .worked {
                    // While there is always work, held updates that fell due are still let in, and due broadcasts sent,
                    // at most every quarter second.
                    let releaseDue = state.withLock { s in
                        guard ContinuousClock.now - s.releaseLooked >= .milliseconds(250) else { return false }
                        s.releaseLooked = .now
                        return true
                    }
                    if releaseDue {
                        _ = try releaseScheduled()
                        _ = try sendDueBroadcasts()   // a broadcast does not wait behind a large fan-out
                    }
                    continue
                }
                if outcome == .foundNone {
                    // There may be more of either: this worker looks again.
                    if try releaseScheduled() || sendDueBroadcasts() {
                        look = .always
                        continue
                    }
                }
                look = sleepUntilWork(readingDue: readDue) ? .ifOwed : .always
                readDue = false
            } catch let error as StoreError where error.code == .busy {
                // A write held a row the claim needed: it goes on, and this worker looks again in a moment, owed or
                // not (the look that failed may have taken what a kick owed).
                logger.debug("claim gave way to a write", ["error": .string("\(error)")])
                pause(seconds: 0.05)
                (look, readDue) = (.always, true)
            } catch {
                logger.error("delivery store failure", ["error": .string("\(error)")])
                pause(seconds: 1)
                (look, readDue) = (.always, true)
            }
        }
    }

    /// A11: held updates and ends that fell due join the queue; true when some did.
    private func releaseScheduled() throws -> Bool {
        // A few at a time: each holds the writers' turn while it joins the queue.
        let released = try messages.releaseScheduledUpdates(at: now(), limit: 50, pacing: configuration.updatePacing)
        if released > 0 { kick() }
        return released > 0
    }

    /// X5: broadcasts that are due, one request each, recorded with Apple's answer: retried like pushes
    /// (backoff, `retry-after`) until they expire. True when some were due.
    private func sendDueBroadcasts() throws -> Bool {
        guard let broadcasts else { return false }
        let sendTimeout = configuration.sendTimeout
        let due = try broadcasts.claimDueBroadcasts(at: now(), limit: 20, claimFor: sendTimeout.timeInterval + 30)
        guard !due.isEmpty else { return false }
        var bundles: [ApplicationCode: String] = [:]
        for application in Set(due.map(\.application)) { bundles[application] = try applications.application(application)?.bundleID }
        let pushes = due.map { item in
            Push.broadcast(application: item.application, gateway: item.gateway, bundleID: bundles[item.application] ?? "", channelID: item.channelID,
                           priority: item.priority, expiration: item.expiration, payload: item.payload)
        }
        let outcomes = transport.send(pushes, deadline: .now + sendTimeout)
        let at = now()
        try broadcasts.recordBroadcasts(zip(due, outcomes).map { item, outcome in
            let (state, next) = decisions.broadcastVerdict(outcome, attempts: item.attempts + 1, expiresAt: item.expiresAt, now: at)
            if state != .sent {
                logger.warning("broadcast not delivered", ["message": .string(item.code), "environment": .string(item.gateway.rawValue),
                                                           "status": .int(Int64(outcome.status)), "reason": .string(outcome.recordedReason ?? "")])
            }
            return BroadcastResult(id: item.id, state: state, status: outcome.status, reason: outcome.recordedReason, uniqueID: outcome.management?.uniqueID,
                                   nextAt: next)
        }, at: at)
        return true
    }

    /// Whether a worker looks for work only when a look is owed (after a kick), or in any case.
    private enum Look { case ifOwed, always }

    private enum LookOutcome { case worked, foundNone, nothingOwed, withheld }

    private enum Claim {
        case claimed((Unit, Set<ApplicationCode>))
        case foundNone, nothingOwed, withheld
    }

    private enum Unit {
        case job(MessageJob)
        case small([MessageJob])
        case due([DueDelivery])
    }

    /// Claims and sends one unit of work: a job's batches, or a group of due deliveries.
    private func workOnce(smallFirst: Bool, look: Look) throws -> LookOutcome {
        // Claiming and counting the claim against its application happen together, so two workers
        // cannot both take a slow application's work past its share.
        let claim: Claim = try claiming.withLock { _ in
            // Looks are made one at a time, and a look owed after a kick is owed to one of them: a worker that waited
            // here while another looked after the last kick has nothing to look for. The owed look is taken just before
            // the claims, so a kick that lands during them (work committed after they read) is owed another.
            let owed = state.withLock { s in
                defer { s.lookOwed = false }
                return s.lookOwed
            }
            guard owed || look == .always else { return .nothingOwed }
            // Without its liveness session the other nodes count this node gone and take over its leases: a claim
            // now could be sent twice. The session, once back, wakes the workers; till then they poll.
            guard membership.isAlive else { return .withheld }
            let (saturated, shardsFull) = busyApplications()
            let lease = membership.claimLease
            // Read before the claim: the lease's local deadline never runs past the one the database sets.
            let claimedAt = ContinuousClock.now
            func claimSmall() throws(StoreError) -> (Unit, Set<ApplicationCode>)? {
                let jobs = try messages.claimSmallJobs(at: now(), limit: configuration.smallJobsPerClaim,
                                                       devicesAtMost: configuration.smallJobDevices, excluding: saturated, lease: lease)
                guard let first = jobs.first else { return nil }
                leases.add(first.lease, claimedAt: claimedAt)
                return reserve((.small(jobs), Set(jobs.map(\.application))))
            }
            if smallFirst, let small = try claimSmall() { return .claimed(small) }
            // Small updates are left to claimSmall: one at a time here they would each cost a whole job cycle.
            let leavingSmall = configuration.smallJobsPerClaim > 0 ? configuration.smallJobDevices : nil
            if let job = try messages.claimNextJob(at: now(), excluding: saturated, shardsExcluding: shardsFull,
                                                   sharding: configuration.sharding, leavingSmall: leavingSmall, lease: lease) {
                leases.add(job.lease, claimedAt: claimedAt)
                return .claimed(reserve((.job(job), [job.application])))
            }
            if !smallFirst, let small = try claimSmall() { return .claimed(small) }
            // Pushes settled at the claim (expired, superseded, confirmed, failed after two copies) count in
            // /metrics once the claim has committed.
            var settled: [DeliveryMetrics.Key] = []
            let due = try messages.claimDueDeliveries(at: now(), limit: configuration.retryBatchSize, excluding: saturated, lease: lease) { item, at in
                let verdict = decisions.verdict(item, now: at)
                if case .settle(let state, let reason) = verdict { settled.append(DeliveryMetrics.settledKey(state, reason: reason)) }
                return verdict
            }
            metrics.count(keys: settled)
            guard let first = due.first else { return .foundNone }
            leases.add(first.lease, claimedAt: claimedAt)
            return .claimed(reserve((.due(due), Set(due.map(\.application)))))
        }
        let (work, applications): (Unit, Set<ApplicationCode>)
        switch claim {
        case .nothingOwed: return .nothingOwed
        case .withheld:
            metrics.count { $0.withheldLooks += 1 }
            return .withheld
        case .foundNone:
            metrics.count { $0.emptyLooks += 1 }
            return .foundNone
        case .claimed(let unit): (work, applications) = unit
        }
        metrics.count { $0.claims += 1 }
        kick()   // there may be more: the next sleeping worker looks while this one sends
        defer {
            let freed = state.withLock { s in
                applications.contains { application in
                    defer {
                        s.busy[application, default: 1] -= 1
                        if s.busy[application] == 0 { s.busy[application] = nil }
                    }
                    return s.busy[application, default: 0] >= configuration.shardShare
                }
            }
            // A share came free: looks made meanwhile skipped that application's due work, so a sleeper looks again now.
            if freed { kick() }
            // Its messages done, the next of their activities may be due: a look is owed (once the share is given
            // back, so the look counts it), made by this worker unless another looks first.
            oweLook()
        }
        switch work {
        case .job(let job):
            defer { leases.remove(job.lease) }
            process(job)
        case .small(let jobs):
            defer { leases.remove(jobs[0].lease) }
            processSmall(jobs)
        case .due(let due):
            defer { leases.remove(due[0].lease) }
            try sendDue(due)
        }
        return .worked
    }

    /// Applications at their share of workers, and those whose shards must wait: shards leave one of
    /// the application's workers free for its small messages (an update while its large starts go out).
    private func busyApplications() -> (saturated: Set<ApplicationCode>, shardsFull: Set<ApplicationCode>) {
        state.withLock { s in
            (Set(s.busy.filter { $0.value >= configuration.workersPerApplication }.keys),
             Set(s.busy.filter { $0.value >= configuration.shardShare }.keys))
        }
    }

    private func reserve(_ unit: (Unit, Set<ApplicationCode>)) -> (Unit, Set<ApplicationCode>) {
        state.withLock { s in for application in unit.1 { s.busy[application, default: 0] += 1 } }
        return unit
    }

    /// Waits after a failure, cut short only by shutdown, so a store or APNs that keeps failing is not
    /// hammered. Its own condition: a kick meant for a sleeping worker is never absorbed here.
    private func pause(seconds: Double) {
        pauses.lock()
        let deadline = Date().addingTimeInterval(seconds)
        while !stopping && Date() < deadline { _ = pauses.wait(until: deadline) }
        pauses.unlock()
    }

    /// Sleeps until a look is owed, the next due job or delivery, or the idle poll; true when a look is owed.
    /// When the next is due is read only by a worker that looked at the queue since it last read it: the others
    /// were woken for a look another worker made, which reads it in turn. Durations are measured on `now`, the
    /// service's clock, but waited on the wall clock, so a test clock that stands still never spins.
    private func sleepUntilWork(readingDue readDue: Bool) -> Bool {
        // Work came while this worker looked and no other has looked since: it looks again at once.
        if state.withLock({ $0.lookOwed }) { return true }
        var wait = configuration.idlePoll.timeInterval
        // At least 5 ms: a job that is due but not claimable (another worker, a busy application) must not make this spin.
        if readDue {
            let (saturated, shardsFull) = busyApplications()
            if let due = try? messages.nextDueDate(excluding: saturated, shardsExcluding: shardsFull) { wait = min(wait, max(0.005, due.timeIntervalSince(now()))) }
            if let due = try? broadcasts?.nextBroadcastDue() { wait = min(wait, max(0.005, due.timeIntervalSince(now()))) }
        }
        wakeUp.lock()
        state.withLock { $0.asleep += 1 }
        defer {
            state.withLock { $0.asleep -= 1 }
            wakeUp.unlock()
        }
        let deadline = Date().addingTimeInterval(wait)
        while !stopping && Date() < deadline {
            if state.withLock({ $0.lookOwed }) { return true }
            _ = wakeUp.wait(until: deadline)
        }
        return state.withLock { $0.lookOwed }
    }

    private func process(_ job: MessageJob) {
        var window: [Flight] = []
        do {
            guard let application = try applications.application(job.application) else {
                try messages.finish(job, at: now())
                return
            }
            let planner = Self.planner(for: job, bundleID: application.bundleID, now: now())
            var readUpTo = job.cursor
            var exhausted = false
            var totals: [DeliveryState: Int] = [:]
            // Whatever happens, batches already on the wire are answered and recorded before the job
            // is given back: their outcomes (and retries) are not lost.
            func land() throws {
                let result = collect(window[0], job: job)
                try record(result, of: job)
                window.removeFirst()
                for record in result.records { totals[record.state, default: 0] += 1 }
            }
            while true {
                // Checked before each new page is read: a newer update stops this one within a page.
                let reading = !exhausted && window.count < configuration.pipelineDepth
                // A lease past its local deadline may be another node's already: no further batch goes out, and
                // what is on the wire is recorded only if the lease still holds (else that node sends it again).
                if reading && !leases.isValid(job.lease) {
                    while !window.isEmpty { try land() }
                    throw StoreError(.leaseLost, "the lease of message \(job.code) ran past its deadline without a renewal")
                }
                let superseded = !stopping && reading && job.event == .update ? try messages.supersededBy(job) != nil : false
                if stopping || superseded {
                    while !window.isEmpty { try land() }
                    if stopping {
                        try messages.release(job)
                    } else {
                        // Latest state wins: the newer message goes to every device, this one stops here.
                        try messages.finish(job, at: now())
                        logger.info("message superseded while sending", ["message": .string(job.code)])
                    }
                    return
                }
                if reading {
                    let batch = try nextBatch(job, planner: planner, after: readUpTo)
                    if let last = batch.last {
                        window.append(dispatch(batch, cursor: last.device, dueAt: job.dueAt, lease: job.lease))
                        readUpTo = last.device
                        continue
                    }
                    exhausted = true
                }
                guard !window.isEmpty else { break }
                try land()
            }
            // Off the renewal list first: a renewal racing the end of the lease would take it for rescued.
            leases.remove(job.lease)
            try messages.finish(job, at: now())
            logger.info(job.shard == nil ? "message delivered" : "message shard delivered", [
                "message": .string(job.code), "shard": job.shard.map { .int(Int64($0.number)) } ?? .null, "event": .string(job.event.rawValue), "activity": .string(job.activityID),
                "sent": .int(Int64(totals[.sent] ?? 0)), "failed": .int(Int64(totals[.failed] ?? 0)),
                "skipped": .int(Int64(totals[.skipped] ?? 0)), "retrying": .int(Int64((totals[.retrying] ?? 0) + (totals[.unconfirmed] ?? 0))),
            ])
        } catch {
            // Batches already on the wire are answered and recorded in order while the store lets us, so
            // a resumed job does not send them again (a start sent twice is a second card).
            for flight in window {
                guard (try? record(collect(flight, job: job), of: job)) != nil else { break }
            }
            if lostLease(error, messages: [job.code]) { return }
            logger.error("delivery failed; the job will resume", ["message": .string(job.code), "error": .string("\(error)")])
            try? messages.release(job)
            pause(seconds: 1)
        }
    }

    /// True for a lease lost to a rescue: counted and logged; the work is another node's, nothing to give back.
    private func lostLease(_ error: any Error, messages codes: [String]) -> Bool {
        guard (error as? StoreError)?.code == .leaseLost else { return false }
        metrics.count { $0.leaseLosses += 1 }
        logger.warning("lease lost: another node resumes this work from its last recorded batch", [
            "messages": .int(Int64(codes.count)), "message": codes.first.map { .string($0) } ?? .null, "error": .string("\(error)"),
        ])
        return true
    }

    /// Sends small jobs claimed together (updates and ends of small activities, starts to a few named
    /// devices): every device page read, all pushes on the wire at once, every outcome and every job's end
    /// recorded in one transaction. A job with more devices than one page is given back after its first
    /// page, to resume from its cursor.
    private func processSmall(_ jobs: [MessageJob]) {
        do {
            if stopping {
                try persistently { try messages.recordJobs(jobs.map(JobOutcome.givenBack), at: now()) }
                return
            }
            var bundles: [ApplicationCode: String?] = [:]
            var planned: [(job: MessageJob, batch: [(device: Int64, plan: PlannedDelivery)], complete: Bool)] = []
            var gone: [JobOutcome] = []
            for job in jobs {
                if bundles[job.application] == nil { bundles[job.application] = .some(try applications.application(job.application)?.bundleID) }
                guard let bundle = bundles[job.application] ?? nil else {
                    gone.append(JobOutcome(job: job, result: BatchResult(cursor: job.cursor), finished: true))   // its application was deleted
                    continue
                }
                // One page of at most `smallJobDevices`: a job with more goes on after it, on its own.
                let page = configuration.smallJobDevices
                let batch = try nextBatch(job, planner: Self.planner(for: job, bundleID: bundle, now: now()), after: job.cursor, limit: page)
                planned.append((job, batch, batch.count < page))
            }
            guard leases.isValid(jobs[0].lease) else {
                throw StoreError(.leaseLost, "the lease of \(jobs.count) small messages ran past its deadline before they were sent")
            }
            // One submit for all: the APNs client spreads them over its connections and streams.
            let parts = planned.map { Self.split($0.batch) }
            let pushes = parts.flatMap { $0.pushes.map(\.push) }
            let deadline = ContinuousClock.now + configuration.sendTimeout
            let outcomes = transport.submit(pushes, deadline: deadline, writeBy: leases.deadline(jobs[0].lease))
            let sentAt = now()
            let answers = outcomes.wait(deadline: deadline + .seconds(2))
            let at = now()
            var offset = 0
            var results = gone
            for ((job, batch, complete), (skips, mine)) in zip(planned, parts) {
                metrics.recordLag(sentAt.timeIntervalSince(job.dueAt), pushes: mine.count)
                let result = settle(cursor: batch.last?.device ?? job.cursor, skips: skips, pushes: mine,
                                    outcomes: answers[offset..<(offset + mine.count)], job: job, at: at)
                offset += mine.count
                results.append(JobOutcome(job: job, result: result, finished: complete))
            }
            leases.remove(jobs[0].lease)
            metrics.count(try recordSmall(results).flatMap(\.result.records))
            logger.info("small messages delivered", ["messages": .int(Int64(results.count)), "pushes": .int(Int64(pushes.count))])
        } catch {
            if lostLease(error, messages: jobs.map(\.code)) { return }
            logger.error("delivery failed; the jobs will resume", ["messages": .int(Int64(jobs.count)), "error": .string("\(error)")])
            try? messages.recordJobs(jobs.map(JobOutcome.givenBack), at: now())
            pause(seconds: 1)
        }
    }

    /// Records the small jobs' outcomes together; if that keeps failing, one job at a time, so a job whose
    /// record cannot be written (and whose pushes go again when it resumes) does not take the others with it.
    /// Returns the outcomes recorded.
    private func recordSmall(_ results: [JobOutcome]) throws -> [JobOutcome] {
        do {
            try persistently { try messages.recordJobs(results, at: now()) }
            return results
        } catch where results.count > 1 && (error as? StoreError)?.code != .leaseLost {
            var failed = 0
            var recorded: [JobOutcome] = []
            for result in results {
                do {
                    try messages.recordJobs([result], at: now())
                    recorded.append(result)
                } catch {
                    failed += 1
                    logger.error("could not record a message's pushes; it will be sent again", ["message": .string(result.job.code), "error": .string("\(error)")])
                    try? messages.recordJobs([.givenBack(result.job)], at: now())
                }
            }
            if failed > 0 { pause(seconds: 1) }
            return recorded
        }
    }

    /// Records a batch, trying again a few times over a second: its outcomes are what keeps a resumed
    /// job from sending the batch again.
    private func record(_ result: BatchResult, of job: MessageJob) throws {
        try persistently { try messages.recordBatch(result, of: job, at: now()) }
        metrics.count(result.records)
    }

    /// Runs a store write up to five times over a second: what it records is what keeps the pushes it
    /// describes from being sent again.
    private func persistently(_ write: () throws -> Void) throws {
        var attempt = 0
        while true {
            do {
                return try write()
            } catch {
                attempt += 1
                if attempt >= 5 || (error as? StoreError)?.code == .leaseLost { throw error }
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    /// One planned delivery per device of the next page.
    /// `limit` devices at most (a fan-out's `batchSize` by default).
    private func nextBatch(_ job: MessageJob, planner: PushPlanner, after cursor: Int64, limit: Int? = nil) throws -> [(device: Int64, plan: PlannedDelivery)] {
        let limit = limit ?? configuration.batchSize
        if job.event == .start, let target = job.target {
            // A shard stops at its last id: the rest of the page belongs to the next shard.
            let upTo = job.shard?.upTo ?? .max
            let page = try devices.targets(target, in: job.application, attributesType: job.attributesType, afterID: cursor,
                                           limit: limit).prefix { $0.id <= upTo }.map { ($0.id, planner.start($0)) }
            if case .filter = target { return page }
            // A12: starts to named devices keep each device under its push-to-start pace.
            let at = now()
            return page.map { device, plan in
                guard case .push(let push) = plan, push.pushType == .liveActivity, let until = pacer.admit(device, now: at) else { return (device, plan) }
                return (device, .held(push, until: until, reason: pacer.pacing.reason(until: until)))
            }
        }
        return try messages.updateTargets(activity: job.activity, afterID: cursor, limit: limit)
            .map { ($0.device.id, planner.update($0)) }
    }

    /// What decides each device's push for a job: its payloads, priority and expiry, under its app's topic.
    private static func planner(for job: MessageJob, bundleID: String, now: Date) -> PushPlanner {
        var planner = PushPlanner(application: job.application, bundleID: bundleID, messageCode: job.code, payload: job.payload,
                                  fallbackPayload: job.fallbackPayload, priority: job.priority, expiration: Int64(job.expiresAt.timeIntervalSince1970))
        planner.lifetimeOver = job.event != .start && ActivityLifetime.isOver(startedAt: job.activityStartedAt, now: now)
        if job.event == .start { planner.startOnChannel(job.channelIDs) } else { planner.sessionChannelIDs = job.channelIDs }
        return planner
    }

    /// A page's plans parted into the records of its skips and the pushes to send.
    private static func split(_ batch: [(device: Int64, plan: PlannedDelivery)]) -> (skips: [DeliveryRecord], pushes: [(device: Int64, push: Push)]) {
        var skips: [DeliveryRecord] = []
        var pushes: [(device: Int64, push: Push)] = []
        for (device, plan) in batch {
            switch plan {
            case .skip(let reason):
                skips.append(DeliveryRecord(device: device, pushType: nil, status: 0, reason: reason, apnsID: nil, attempts: 0))
            case .held(let push, let until, let reason):
                // A12: recorded as due at its slot; the due path sends it then, as the same request.
                skips.append(DeliveryRecord(device: device, pushType: push.pushType, status: 0, reason: reason, apnsID: push.apnsID, attempts: 0,
                                            state: .retrying, nextAttemptAt: until, token: push.deviceToken, priority: push.priority))
            case .push(let push):
                pushes.append((device, push))
            }
        }
        return (skips, pushes)
    }

    /// A batch on the wire: its skips, its pushes and their outcomes to come.
    struct Flight {
        let cursor: Int64
        let skips: [DeliveryRecord]
        let pushes: [(device: Int64, push: Push)]
        let outcomes: PendingOutcomes
        let deadline: ContinuousClock.Instant
    }

    /// Puts a batch's pushes on the wire and returns at once.
    func dispatch(_ batch: [(device: Int64, plan: PlannedDelivery)], cursor: Int64, dueAt: Date, lease: Int64) -> Flight {
        let (skips, pushes) = Self.split(batch)
        let deadline = ContinuousClock.now + configuration.sendTimeout
        let outcomes = transport.submit(pushes.map(\.push), deadline: deadline, writeBy: leases.deadline(lease), bulk: true)
        metrics.recordLag(now().timeIntervalSince(dueAt), pushes: pushes.count)
        return Flight(cursor: cursor, skips: skips, pushes: pushes, outcomes: outcomes, deadline: deadline)
    }

    /// Waits for a batch's answers and turns each into a record with what comes next: sent, failed, a
    /// retry at a due time, a start awaiting confirmation, or expired (A5, issue 10).
    func collect(_ flight: Flight, job: MessageJob) -> BatchResult {
        let outcomes = flight.outcomes.wait(deadline: flight.deadline + .seconds(2))
        return settle(cursor: flight.cursor, skips: flight.skips, pushes: flight.pushes, outcomes: outcomes, job: job, at: now())
    }

    /// A batch's records from its skips and its pushes' outcomes.
    func settle(cursor: Int64, skips: [DeliveryRecord], pushes: [(device: Int64, push: Push)], outcomes: some Collection<PushOutcome>,
                job: MessageJob, at: Date) -> BatchResult {
        var result = BatchResult(cursor: cursor)
        result.records = skips
        let isStart = job.event == .start
        for ((device, push), outcome) in zip(pushes, outcomes) {
            let record = decisions.record(device: device, push: push, outcome: outcome, isStart: isStart, attempts: 1, uncertainCopies: 0,
                                          expiresAt: job.expiresAt, now: at)
            result.records.append(record)
            result.effects.add(outcome, of: push, isStart: isStart, activity: job.activity, device: device)
        }
        return result
    }

    /// Sends claimed due deliveries and records what each came to.
    func sendDue(_ due: [DueDelivery]) throws {
        var bundles: [ApplicationCode: String] = [:]
        for application in Set(due.map(\.application)) {
            do {
                bundles[application] = try applications.application(application)?.bundleID ?? ""
            } catch {
                try messages.requeue(due, at: now().addingTimeInterval(5))
                throw error
            }
        }
        let pushes = due.map { PushPlanner.push($0, bundleID: bundles[$0.application] ?? "") }
        guard leases.isValid(due[0].lease) else {
            _ = lostLease(StoreError(.leaseLost, "the lease of \(due.count) due retries ran past its deadline before they were sent"), messages: due.map(\.code))
            return
        }
        do {
            try send(due, pushes)
        } catch where lostLease(error, messages: due.map(\.code)) {
            return
        } catch {
            // Not recorded: give them back, due again in a few seconds, their start copies still counted.
            logger.error("could not record retries; they are due again shortly", ["error": .string("\(error)")])
            try messages.requeue(due, at: now().addingTimeInterval(5))
        }
    }

    private func send(_ due: [DueDelivery], _ pushes: [Push]) throws {
        let deadline = ContinuousClock.now + configuration.sendTimeout
        let outcomes = transport.submit(pushes, deadline: deadline, writeBy: leases.deadline(due[0].lease)).wait(deadline: deadline + .seconds(2))
        let at = now()
        var result = RetryResult()
        for ((item, push), outcome) in zip(zip(due, pushes), outcomes) {
            let isStart = item.event == .start
            let record = decisions.record(device: item.device, push: push, outcome: outcome, isStart: isStart, attempts: item.attempts + 1,
                                          uncertainCopies: item.uncertainCopies, expiresAt: item.expiresAt, now: at)
            result.records.append((item.message, record))
            result.effects.add(outcome, of: push, isStart: isStart, activity: item.activity, device: item.device)
        }
        leases.remove(due[0].lease)
        try persistently { try messages.recordRetries(result, lease: due[0].lease, at: at) }
        metrics.count(result.records.map(\.record))
    }
}
