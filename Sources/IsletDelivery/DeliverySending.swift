import Foundation
import IsletCore
import IsletStore
import Synchronization

/// Sending: a job's fan-out in batches kept in flight, small messages claimed together, due deliveries; each
/// outcome recorded durably under the claim's lease.
extension DeliveryService {
    func process(_ job: MessageJob) {
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
            // Given back when the database lets us; else its lease, no longer renewed, runs out and a rescue frees it.
            try? persistently { try messages.release(job) }
            pause(seconds: 1)
        }
    }

    /// True for a lease lost to a rescue: counted and logged; the work is another node's, nothing to give back.
    func lostLease(_ error: any Error, messages codes: [String]) -> Bool {
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
    func processSmall(_ jobs: [MessageJob]) {
        do {
            if stopping {
                try persistently { try messages.recordJobs(jobs.map(JobOutcome.givenBack), at: now()) }
                return
            }
            var bundles: [ApplicationCode: String?] = [:]
            var planned: [(job: MessageJob, batch: [(device: Int64, plan: PlannedDelivery)], complete: Bool)] = []
            var gone: [JobOutcome] = []
            // One page of at most `smallJobDevices`: a job with more goes on after it, on its own.
            let page = configuration.smallJobDevices
            // The first pages of the updates and ends in one read, not one a message.
            let firstPages = try messages.updateTargets(
                activities: jobs.filter { !Self.goesToTargets($0) && $0.cursor == 0 }.map(\.activity), limit: page)
            for job in jobs {
                if bundles[job.application] == nil { bundles[job.application] = .some(try applications.application(job.application)?.bundleID) }
                guard let bundle = bundles[job.application] ?? nil else {
                    gone.append(JobOutcome(job: job, result: BatchResult(cursor: job.cursor), finished: true))   // its application was deleted
                    continue
                }
                let batch = try nextBatch(job, planner: Self.planner(for: job, bundleID: bundle, now: now()), after: job.cursor, limit: page,
                                          targets: job.cursor == 0 && !Self.goesToTargets(job) ? firstPages[job.activity] : nil)
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
    func recordSmall(_ results: [JobOutcome]) throws -> [JobOutcome] {
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
    func record(_ result: BatchResult, of job: MessageJob) throws {
        try persistently { try messages.recordBatch(result, of: job, at: now()) }
        metrics.count(result.records)
    }

    /// Runs a store write until it is done: what it records is what keeps the pushes it describes from being sent
    /// again (issue 47). While the database cannot be reached (`.io`: a failover, a restart, a cut network) or a row is
    /// held (`.busy`), it is tried again, 0.2 s after the first failure and then at most every second, for
    /// `recordPatience`: the answers in hand are recorded once the database is back, under the claim's lease if it
    /// still stands (renewed, even past its expiry, while no node rescued it), and no other node sends those pushes
    /// again. It gives up at once when the lease was rescued (`.leaseLost`: the work is another node's), when the
    /// service stops, or after five tries for any other error.
    func persistently(_ write: () throws -> Void) throws {
        let giveUp = ContinuousClock.now + configuration.recordPatience
        var attempt = 0
        var wait = 0.2
        while true {
            do {
                return try write()
            } catch {
                attempt += 1
                let code = (error as? StoreError)?.code
                let transient = code == .io || code == .busy
                if code == .leaseLost || stopping || (!transient && attempt >= 5) || ContinuousClock.now + .seconds(wait) > giveUp { throw error }
                if attempt == 1 || attempt % 10 == 0 {
                    logger.warning("could not record what pushes came to; trying again", ["attempt": .int(Int64(attempt)), "error": .string("\(error)")])
                }
                pause(seconds: wait)
                wait = min(1, wait * 2)
            }
        }
    }

    /// One planned delivery per device of the next page.
    /// `limit` devices at most (a fan-out's `batchSize` by default).
    /// `targets`: an update's or end's page, when the caller read it (`updateTargets(activities:)`).
    func nextBatch(_ job: MessageJob, planner: PushPlanner, after cursor: Int64, limit: Int? = nil,
                   targets: [UpdateTarget]? = nil) throws -> [(device: Int64, plan: PlannedDelivery)] {
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
        return try (targets ?? messages.updateTargets(activity: job.activity, afterID: cursor, limit: limit))
            .map { ($0.device.id, planner.update($0)) }
    }

    /// A start to a target goes to the devices it selects (`nextBatch`); anything else to the activity's devices (U2).
    static func goesToTargets(_ job: MessageJob) -> Bool { job.event == .start && job.target != nil }

    /// What decides each device's push for a job: its payloads, priority and expiry, under its app's topic.
    static func planner(for job: MessageJob, bundleID: String, now: Date) -> PushPlanner {
        var planner = PushPlanner(application: job.application, bundleID: bundleID, messageCode: job.code, payload: job.payload,
                                  fallbackPayload: job.fallbackPayload, priority: job.priority, expiration: Int64(job.expiresAt.timeIntervalSince1970))
        planner.lifetimeOver = job.event != .start && ActivityLifetime.isOver(startedAt: job.activityStartedAt, now: now)
        planner.androidPayload = job.androidPayload
        if job.event == .start { planner.startOnChannel(job.channelIDs) } else { planner.sessionChannelIDs = job.channelIDs }
        return planner
    }

    /// A page's plans parted into the records of its skips and the pushes to send.
    static func split(_ batch: [(device: Int64, plan: PlannedDelivery)]) -> (skips: [DeliveryRecord], pushes: [(device: Int64, push: Push)]) {
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

    func send(_ due: [DueDelivery], _ pushes: [Push]) throws {
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
