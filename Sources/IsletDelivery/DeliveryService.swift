import Foundation
import IsletCore
import IsletStore
import Synchronization

/// Sends accepted messages: claims due jobs and streams their devices in batches, and claims due
/// deliveries (retries, second copies of unconfirmed starts, catch-ups); sends through the transport
/// and records each outcome durably with what comes next (durable pipeline, issues 4 and 10).
///
/// A push waiting for its retry is a row with a due time, not a sleeping worker: workers only send.
public final class DeliveryService: Service {
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
    /// Held while a worker looks for work; holds when the last look after a kick was made (`lookSpacing`).
    private let claiming = Mutex<ContinuousClock.Instant?>(nil)
    private let threads = ServiceThreads()

    private struct State {
        var stopping = false
        /// A kick came that no look has started after yet. Owed to one worker, not to each: the worker whose look
        /// starts next takes it, so a stream of accepted updates keeps one worker looking, not all of them.
        var lookOwed = false
        /// Workers waiting in `sleepUntilWork`.
        var asleep = 0
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
    /// Nodes running on the database, this one included (`NodeMembership.runningNodes`).
    public var runningNodes: Int { membership.runningNodes }

    /// Joins the cluster (resuming what a previous run left unfinished), then starts the workers.
    public func start() throws {
        try membership.join()
        membership.start(wake: { [weak self] in self?.kick() })
        for index in 0..<configuration.workers {
            threads.start("islet-deliv-\(index)") { [self] in work() }
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
    func oweLook() {
        state.withLock { $0.lookOwed = true }
    }

    /// Stops claiming work; workers finish the batch in hand (`unblock` should make the transport
    /// answer at once) and record it, and are waited for until `deadline`. Unfinished jobs and
    /// retries resume at the next start. Returns false if a worker was still busy at the deadline.
    @discardableResult
    public func shutdown(deadline: ContinuousClock.Instant, unblock: () -> Void) -> Bool {
        wakeUp.lock()
        state.withLock { $0.stopping = true }
        wakeUp.broadcast()
        wakeUp.unlock()
        pauses.lock()
        pauses.broadcast()
        pauses.unlock()
        unblock()
        let stopped = threads.waitForExit(by: deadline)
        membership.stop(deadline: max(deadline, .now + .milliseconds(300)))
        return stopped
    }

    /// `shutdown(deadline:unblock:)` with nothing to unblock: a transport that answers by its own deadlines.
    @discardableResult
    public func shutdown(deadline: ContinuousClock.Instant) -> Bool { shutdown(deadline: deadline, unblock: {}) }

    var stopping: Bool { state.withLock { $0.stopping } }

    /// Workers sleeping until work is owed or due (for tests: with a long idle poll, all asleep means quiet).
    var workersAsleep: Int { state.withLock { $0.asleep } }

    private func work() {
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
        let claim: Claim = try claiming.withLock { lastLook in
            // A look owed to a kick waits for its turn: the updates accepted meanwhile are claimed with it.
            if look == .ifOwed, let last = lastLook {
                // Every node is kicked by every accepted message (NOTIFY): spaced by the nodes running, the cluster as a
                // whole looks about as often as one node does, and each look claims as much.
                let wait = last + configuration.lookSpacing * membership.runningNodes - .now
                if wait > .zero && !stopping { Thread.sleep(forTimeInterval: wait.timeInterval) }
            }
            // Looks are made one at a time, and a look owed after a kick is owed to one of them: a worker that waited
            // here while another looked after the last kick has nothing to look for. The owed look is taken just before
            // the claims, so a kick that lands during them (work committed after they read) is owed another.
            let owed = state.withLock { s in
                defer { s.lookOwed = false }
                return s.lookOwed
            }
            guard owed || look == .always else { return .nothingOwed }
            lastLook = .now
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
    func pause(seconds: Double) {
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
}
