import Foundation
import IsletCore
import IsletStore
import Synchronization

/// How the delivery service works through its jobs.
public struct DeliveryConfiguration: Sendable {
    /// Jobs sent at once; messages of one activity still go out in order.
    public var workers: Int
    /// Devices read, sent and recorded together: the most pushes held in memory per worker.
    public var batchSize: Int
    /// Sends of one push before a retryable answer (429, 5xx, no answer) becomes its final one (A5).
    public var maximumAttempts: Int
    /// Wait before the first retry; doubled each time after.
    public var retryDelay: Duration
    /// Longest sleep with nothing due, so a job written by another process is seen soon.
    public var idlePoll: Duration

    public init(workers: Int = 2, batchSize: Int = 1000, maximumAttempts: Int = 4, retryDelay: Duration = .milliseconds(250),
                idlePoll: Duration = .milliseconds(500)) {
        self.workers = workers
        self.batchSize = batchSize
        self.maximumAttempts = maximumAttempts
        self.retryDelay = retryDelay
        self.idlePoll = idlePoll
    }
}

/// Sends accepted messages: claims due jobs, streams their devices in batches, sends each batch through
/// the transport and records the results with the job's progress (durable pipeline, issue 4).
public final class DeliveryService: Sendable {
    let messages: any MessageStore
    let devices: any DeviceStore
    let applications: any ApplicationStore
    let transport: any PushTransport
    let configuration: DeliveryConfiguration
    let logger: Logger
    let now: @Sendable () -> Date

    private let wakeUp = NSCondition()
    private let state = Mutex(State())

    private struct State {
        var stopping = false
        var kicks = 0
        var running = 0
    }

    public init(messages: any MessageStore, devices: any DeviceStore, applications: any ApplicationStore, transport: any PushTransport,
                configuration: DeliveryConfiguration = DeliveryConfiguration(), logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        self.messages = messages
        self.devices = devices
        self.applications = applications
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
        self.now = now
    }

    /// Resumes what a previous run left unfinished, then starts the workers.
    public func start() throws {
        try messages.releaseClaims()
        state.withLock { $0.running = configuration.workers }
        for index in 0..<configuration.workers {
            let thread = Thread { [self] in work() }
            thread.name = "islet-delivery-\(index)"
            thread.start()
        }
    }

    /// New work was accepted: wake a sleeping worker now rather than at its next poll.
    public func kick() {
        wakeUp.lock()
        state.withLock { $0.kicks += 1 }
        wakeUp.broadcast()
        wakeUp.unlock()
    }

    /// Stops after each worker's current batch; an unfinished job resumes at the next start.
    public func shutdown(timeout: Duration = .seconds(10)) {
        wakeUp.lock()
        state.withLock { $0.stopping = true }
        wakeUp.broadcast()
        wakeUp.unlock()
        let deadline = ContinuousClock.now + timeout
        while state.withLock({ $0.running }) > 0 && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func work() {
        defer { state.withLock { $0.running -= 1 } }
        while !stopping {
            do {
                // Read before claiming, so a kick that lands while the claim finds nothing is not missed.
                let kicks = state.withLock { $0.kicks }
                if let job = try messages.claimNextJob(at: now()) {
                    process(job)
                    continue
                }
                sleepUntilWork(kicksSeen: kicks)
            } catch {
                logger.error("delivery store failure", ["error": .string("\(error)")])
                Thread.sleep(forTimeInterval: 1)
            }
        }
    }

    /// Sleeps until a kick, the next due job, or the idle poll. Durations are measured on `now`, the
    /// service's clock, but waited on the wall clock, so a test clock that stands still never spins.
    private func sleepUntilWork(kicksSeen kicks: Int) {
        let poll = Double(configuration.idlePoll.components.seconds) + Double(configuration.idlePoll.components.attoseconds) / 1e18
        var wait = poll
        // At least 5 ms: a job that is due but not claimable (a race with another worker) must not make this spin.
        if let due = try? messages.nextDueDate() { wait = min(wait, max(0.005, due.timeIntervalSince(now()))) }
        wakeUp.lock()
        let deadline = Date().addingTimeInterval(wait)
        while !stopping && state.withLock({ $0.kicks }) == kicks && Date() < deadline {
            _ = wakeUp.wait(until: deadline)
        }
        wakeUp.unlock()
    }

    private func process(_ job: MessageJob) {
        do {
            guard let application = try applications.application(job.application) else {
                try messages.finish(job, at: now())
                return
            }
            let planner = PushPlanner(application: job.application, bundleID: application.bundleID, messageCode: job.code,
                                      payload: job.payload, fallbackPayload: job.fallbackPayload, priority: job.priority)
            var cursor = job.cursor
            var totals = (sent: 0, failed: 0, skipped: 0)
            while true {
                if stopping {
                    try messages.release(job)
                    return
                }
                let batch = try nextBatch(job, planner: planner, after: cursor)
                guard let last = batch.last else { break }
                guard let result = send(batch, cursor: last.device, isStart: job.event == .start) else {
                    // Stopping with retries still due: record nothing, so the batch is sent again on resume (A5).
                    try messages.release(job)
                    return
                }
                try messages.recordBatch(result, of: job, at: now())
                cursor = last.device
                for record in result.records {
                    if record.pushType == nil { totals.skipped += 1 } else if record.status == 200 { totals.sent += 1 } else { totals.failed += 1 }
                }
            }
            try messages.finish(job, at: now())
            logger.info("message delivered", [
                "message": .string(job.code), "event": .string(job.event.rawValue), "activity": .string(job.activityID),
                "sent": .int(Int64(totals.sent)), "failed": .int(Int64(totals.failed)), "skipped": .int(Int64(totals.skipped)),
            ])
        } catch {
            logger.error("delivery failed; the job will resume", ["message": .string(job.code), "error": .string("\(error)")])
            try? messages.release(job)
            Thread.sleep(forTimeInterval: 1)
        }
    }

    /// One planned delivery per device of the next page.
    private func nextBatch(_ job: MessageJob, planner: PushPlanner, after cursor: Int64) throws -> [(device: Int64, plan: PlannedDelivery)] {
        if job.event == .start, let target = job.target {
            return try devices.targets(target, in: job.application, attributesType: job.attributesType, afterID: cursor,
                                       limit: configuration.batchSize).map { ($0.id, planner.start($0)) }
        }
        return try messages.updateTargets(activity: job.activity, afterID: cursor, limit: configuration.batchSize)
            .map { ($0.device.id, planner.update($0)) }
    }

    /// Sends a batch, retrying what APNs asks to retry, and turns the answers into records (A5);
    /// nil when the service stops while retries are still due.
    func send(_ batch: [(device: Int64, plan: PlannedDelivery)], cursor: Int64, isStart: Bool) -> BatchResult? {
        var result = BatchResult(cursor: cursor)
        var pushes: [(device: Int64, push: Push)] = []
        for (device, plan) in batch {
            switch plan {
            case .skip(let reason):
                result.records.append(DeliveryRecord(device: device, pushType: nil, status: 0, reason: reason, apnsID: nil, attempts: 0))
            case .push(let push):
                pushes.append((device, push))
            }
        }
        var outcomes = [PushOutcome?](repeating: nil, count: pushes.count)
        var attempts = [Int](repeating: 0, count: pushes.count)
        var pending = Array(pushes.indices)
        var delay = configuration.retryDelay
        while !pending.isEmpty {
            let answers = transport.send(pending.map { pushes[$0].push }, deadline: .now + .seconds(60))
            var retry: [Int] = []
            for (index, answer) in zip(pending, answers) {
                attempts[index] += 1
                outcomes[index] = answer
                let retryable = answer.action == .retry || answer.action == .refreshProviderToken
                if retryable && attempts[index] < configuration.maximumAttempts { retry.append(index) }
            }
            if !retry.isEmpty && stopping { return nil }
            pending = retry
            if !pending.isEmpty {
                Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
                delay = delay * 2
            }
        }
        for (index, (device, push)) in pushes.enumerated() {
            let outcome = outcomes[index] ?? PushOutcome(status: 0)
            result.records.append(DeliveryRecord(
                device: device, pushType: push.pushType, status: outcome.status,
                reason: outcome.status == 0 ? "no answer from APNs" : outcome.reason, apnsID: push.apnsID, attempts: attempts[index]))
            switch outcome.action {
            case .delivered where isStart && push.pushType == "liveactivity":
                result.startedOn.append(device)
            case .dropToken:
                let dead = DeadToken(device: device, token: push.deviceToken, invalidSince: outcome.timestamp)
                if !isStart {
                    result.deadUpdateTokens.append(dead)
                } else if push.pushType == "liveactivity" {
                    result.deadPushToStartTokens.append(dead)
                } else {
                    result.deadPushTokens.append(dead)
                }
            default:
                break
            }
        }
        return result
    }
}
