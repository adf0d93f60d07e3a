import Foundation
import IsletStore

/// Group commit: the write transactions that arrive while one is committing are run together, each in a
/// savepoint of one shared transaction, and committed with one sync to disk. A commit is durable
/// (SQLite FULL, PostgreSQL's defaults), so a sync per request would cap writes at the disk's sync rate;
/// shared, the cost is paid once per group. Each request still sees its own outcome: an error rolls back
/// its savepoint only, and the others commit. No thread of its own: the first writer to find no group
/// committing leads the next one, running the others' bodies on its connection while they wait, and hands the
/// lead to the oldest writer waiting when its group is done. A write that does not wait (`writeLater`: an API call
/// whose connection is suspended meanwhile) has no thread to lead: a thread of the group commit's own leads for it.
///
/// Bulk writes (a fan-out page's thousand records) run after the others of their group, and a group stops
/// taking members once its bodies have run for `budget`: the rest lead the next group. So a small write (an
/// API update, a claim) waits for at most the group committing and the small writes ahead of it, not for every
/// page of every fan-out that happened to be waiting.
public final class GroupCommit: @unchecked Sendable {
    /// One waiting write: its body (run by whichever thread leads its group) and what came of it.
    final class Job {
        let body: (any SQLConnection, [[SQLRow]]) throws -> Void
        let bulk: Bool
        /// What its body reads first; in a group, read together with the next members' reads (`GroupReads`).
        let reads: GroupReads?
        /// Its reads' rows, when read with other members' before its body began.
        var readAhead: [[SQLRow]]?
        /// Its reads failed together with others' (a row not granted in time): they are made again in its savepoint.
        var readsAlone = false
        /// Offered to a write together (`GroupReads.together`) in this group, and whether that write made it.
        var triedTogether = false
        var madeTogether = false
        var error: (any Error)?
        var done = false
        /// Its thread leads the next group (set by the leader that hands over, or by the first writer).
        var leads = false
        /// Times it gave way to another transaction's lock (`StoreError.busy`) and was put back for the next group.
        var retries = 0
        /// Signalled once: when the job is done, or when its thread is to lead.
        let wake = DispatchSemaphore(value: 0)
        /// A write that does not wait (`writeLater`): no thread sleeps on `wake`.
        let later: Later?
        init(bulk: Bool = false, reads: GroupReads? = nil, later: Later? = nil, _ body: @escaping (any SQLConnection, [[SQLRow]]) throws -> Void) {
            self.bulk = bulk
            self.reads = reads
            self.later = later
            self.body = body
        }
    }

    /// What a write that does not wait brings: the transaction its group runs in (when it leads one), and what to
    /// call with the job once it is done.
    struct Later {
        let transaction: Transaction
        let finished: (Job) -> Void
    }

    /// Opens one transaction on a connection of the leader's, runs the group in it and commits it.
    public typealias Transaction = (_ group: (any SQLConnection) throws -> Void) throws -> Void

    /// Guards `pending`, `leading` and `leader`. Each waiting writer sleeps on its own job's semaphore, so a finished
    /// group wakes its members and the next leader only, and the next leader first: with a broadcast, every waiting
    /// writer woke at each commit to find it was not done, and the next group began once the scheduler got round to
    /// the thread that would lead it.
    private let lock = NSLock()
    private var pending: [Job] = []
    private var leading = false
    /// The thread running the current group: a write it started would wait for itself.
    private var leader: pthread_t?
    /// Bodies run in one group for at most about this long (the one running when it passes finishes).
    let budget: Duration
    /// Where groups are led when the oldest waiting write does not wait (`writeLater`): one at a time, on a thread
    /// of Dispatch's that sleeps when there is none.
    private let leaders = DispatchQueue(label: "islet.group-commit")

    public init(budget: Duration = .milliseconds(10)) {
        self.budget = budget
    }

    /// Writes waiting for a group (for tests).
    public var waiting: Int {
        lock.withLock { pending.count }
    }

    /// Runs `body` in a write transaction shared with the writes waiting now; returns once it is committed
    /// (or rethrows what `body` threw, having rolled back only its own changes). `transaction` opens one
    /// transaction on a connection of the leader's and commits it.
    public func write<T>(bulk: Bool = false, _ body: (any SQLConnection) throws -> T,
                         transaction: Transaction) throws -> T {
        try write(bulk: bulk, reading: nil, { connection, _ in try body(connection) }, transaction: transaction)
    }

    /// `write` for a body that begins with `reads`, and is given their rows: in a group they are read in one round trip
    /// with the reads of the members after it (see `GroupReads`).
    public func write<T>(bulk: Bool = false, reading reads: GroupReads?, _ body: (any SQLConnection, [[SQLRow]]) throws -> T,
                         transaction: (_ group: (any SQLConnection) throws -> Void) throws -> Void) throws -> T {
        var result: T?
        // `body` is only run before this call returns: the waiting below guarantees it.
        try withoutActuallyEscaping(body) { body in
            let job = Job(bulk: bulk, reads: reads) { connection, rows in result = try body(connection, rows) }
            lock.lock()
            precondition(!(leading && leader.map { pthread_equal($0, pthread_self()) != 0 } == true),
                         "a write inside a write would wait for itself")
            pending.append(job)
            if leading {
                lock.unlock()
                job.wake.wait()
                lock.lock()
            } else {
                leading = true
                job.leads = true
            }
            while !job.done {
                precondition(job.leads, "a writer woke neither done nor leading")
                // Members that ran: woken once the group's jobs are let go (a job must not outlive its write).
                var wakes = leadOneGroup(for: job, transaction)
                if job.done, let next = handOver() {
                    wakes.sync.insert(next, at: 0)   // the next leader first
                }
                // Otherwise the budget left this writer's own job out: it leads the next group too.
                lock.unlock()
                wakes.announce()
                lock.lock()
            }
            lock.unlock()
            if let error = job.error { throw error }
            // Made together with others: its results are in its `WriteTogether`, and its body returns nothing.
            if job.madeTogether, let none = () as? T { result = none }
        }
        guard let result else { throw StoreError(.io, "a grouped write finished without a result") }
        return result
    }

    /// `write` that does not wait: `body` runs in the next group, and `then` is called with what it returned (or
    /// threw) once the group is committed (or failed), on the thread that led the group. `then` must not wait, and
    /// must not write (the group's leader runs it: a write would wait for itself).
    public func writeLater<T>(reading reads: GroupReads?, _ body: @escaping (any SQLConnection, [[SQLRow]]) throws -> T,
                              transaction: @escaping Transaction, then: @escaping (Result<T, any Error>) -> Void) {
        let result = Outcome<T>()
        let later = Later(transaction: transaction) { job in
            if let error = job.error {
                then(.failure(error))
            } else if let value = result.value {
                then(.success(value))
            } else if job.madeTogether, let none = () as? T {
                then(.success(none))   // made together with others: its results are in its `WriteTogether`
            } else {
                then(.failure(StoreError(.io, "a grouped write finished without a result")))
            }
        }
        let job = Job(reads: reads, later: later) { connection, rows in result.value = try body(connection, rows) }
        lock.withLock {
            pending.append(job)
            guard !leading else { return }
            leading = true
            leaders.async { self.leadLater() }
        }
    }

    /// What a write that does not wait returned, set by its group's leader before `finished` reads it.
    private final class Outcome<T> {
        var value: T?
    }

    /// Gives the lead to the oldest waiting write (`lock` held): the semaphore of its thread to signal, or nil when a
    /// thread of the group commit's leads for it (a write that does not wait) or when none waits.
    private func handOver() -> DispatchSemaphore? {
        guard let next = pending.first else {
            leading = false
            return nil
        }
        next.leads = true
        guard next.later == nil else {
            leaders.async { self.leadLater() }
            return nil
        }
        return next.wake
    }

    /// Leads groups on a thread of the group commit's own while the oldest waiting write is one that does not wait,
    /// then hands the lead on as a writer does.
    private func leadLater() {
        lock.lock()
        while let first = pending.first, let later = first.later {
            precondition(leading, "a group led for writes that do not wait without the lead")
            var finished = leadOneGroup(for: nil, later.transaction)
            // The oldest waiting write leads next: on this thread when it does not wait either.
            let again = pending.first.map { $0.later != nil } ?? false
            if !again, let wake = handOver() { finished.sync.insert(wake, at: 0) }
            lock.unlock()
            finished.announce()
            lock.lock()
            guard again else { break }
        }
        lock.unlock()
    }

    /// The members of a group that ran: the semaphores of the writers that wait, and the writes that do not.
    struct Finished {
        var sync: [DispatchSemaphore] = []
        var later: [Job] = []

        /// Wakes the writers (the next leader first, when it is one of them), then answers the writes that do not wait;
        /// called without `lock`.
        func announce() {
            for wake in sync { wake.signal() }
            for member in later { member.later?.finished(member) }
        }
    }

    /// Runs the writes pending now as one group, from the calling thread (the leader; `lock` held on entry and on
    /// return, not while the group runs). Marks the members that ran done, puts the ones the budget left out back
    /// first in line, and returns those that ran, but for the leader's `own`.
    private func leadOneGroup(for own: Job?, _ transaction: Transaction) -> Finished {
        leader = pthread_self()
        defer { leader = nil }
        // Small writes first, each kind in arrival order.
        let group = pending.filter { !$0.bulk } + pending.filter(\.bulk)
        pending = []
        lock.unlock()
        let ran = Self.run(group, budget: budget, transaction)
        lock.lock()
        // A member that gave way to another transaction's row lock (PostgreSQL: its wait ran out, or it was chosen
        // to break a deadlock) runs again in the next group, after this one's commit let go of its own locks.
        let again = group[..<ran].filter { member in
            guard member.retries < Self.retriesOfABusyWrite, (member.error as? StoreError)?.code == .busy else { return false }
            member.retries += 1
            member.error = nil
            member.readAhead = nil
            member.readsAlone = false
            member.triedTogether = false
            return true
        }
        for member in group[..<ran] where !again.contains(where: { $0 === member }) { member.done = true }
        // Members the budget left out, and those to run again, lead the next group, ahead of writes that came since.
        pending = again + Array(group[ran...]) + pending
        let finished = group[..<ran].filter { $0 !== own && $0.done }
        return Finished(sync: finished.filter { $0.later == nil }.map(\.wake), later: finished.filter { $0.later != nil })
    }

    /// How many times a write that gave way to another's lock is run again before its caller gets the `.busy`:
    /// with PostgreSQL's 200 ms wait for a lock, a write waits less than a second in all.
    static let retriesOfABusyWrite = 3

    /// One transaction for the first members of the group, a savepoint each, until their bodies have run for
    /// `budget`; returns how many ran (at least one). A failed commit fails every member that ran. A group of one
    /// needs no savepoint (two round trips less on PostgreSQL): its error rolls back the transaction.
    ///
    /// A member's writes and its RELEASE go out with the next member's SAVEPOINT and first query (PostgreSQL's
    /// pipeline: one round trip a member, not two), so an error of one member's writes may surface in the next
    /// member's body. The first statement that failed (`SQLConnection.firstFailure`) names whose it is: that
    /// member is rolled back to its savepoint and fails, and the members after it, whose statements the server
    /// skipped, run again.
    private static func run(_ group: [Job], budget: Duration, _ transaction: Transaction) -> Int {
        if group.count == 1, let only = group.first {
            do {
                try transaction { connection in try only.body(connection, try only.reads.map { try connection.queries($0.statements) } ?? []) }
            } catch {
                only.error = error
            }
            return 1
        }
        // Members whose bodies began (all fail if the transaction does), and members done when it commits.
        var begun = 0, ran = 0
        do {
            try transaction { connection in
                begun = 0
                ran = 0
                let started = ContinuousClock.now
                var statements = Statements()
                var index = 0
                while true {
                    while index < group.count {
                        if index > 0 && ContinuousClock.now - started >= budget { break }
                        let job = group[index]
                        if job.reads?.together != nil, !job.bulk, !job.triedTogether {
                            if let failed = try writeTogether(group, from: index, &statements, connection) {
                                index = failed + 1
                                continue
                            }
                        }
                        if job.reads != nil, !job.madeTogether, job.readAhead == nil, !job.readsAlone {
                            if let failed = try readAhead(group, from: index, &statements, connection) {
                                index = failed + 1
                                continue
                            }
                        }
                        statements.marks.removeSubrange(index...)
                        statements.marks.append(connection.statementsIssued)
                        begun = max(begun, index + 1)
                        if job.madeTogether {
                            index += 1
                            continue
                        }
                        do {
                            try connection.send("SAVEPOINT islet_write")
                            // Read ahead, or alone in its savepoint (a row it waits for in vain fails it only).
                            let rows = try job.readAhead ?? job.reads.map { try connection.queries($0.statements) } ?? []
                            try job.body(connection, rows)
                            try connection.send("RELEASE islet_write")
                            index += 1
                        } catch {
                            index = try rollBack(group, &statements, running: index, error, connection) + 1
                        }
                    }
                    // The last members' writes are answered here, before the commit.
                    do {
                        try connection.flush()
                        break
                    } catch {
                        index = try rollBack(group, &statements, running: index - 1, error, connection) + 1
                    }
                }
                ran = index
            }
        } catch {
            // The transaction failed: every member that ran fails with it; if none ran (it could not begin), the
            // whole group fails at once, as before budgets, rather than each waiting writer trying in turn.
            ran = begun == 0 ? group.count : begun
            for job in group[..<ran] where job.error == nil { job.error = error }
        }
        return ran
    }

    /// Reads ahead for the members from `index` on whose reads do not touch what another's does (`GroupReads.keys`),
    /// in one round trip (it also answers the writes sent ahead of it), their statements in order of their keys so two
    /// nodes' groups lock rows in one order. Reads that fail (a row lock not granted in time, a deadlock) are rolled
    /// back and made again by each member in its own savepoint; a failure of an earlier member's writes is rolled back
    /// as in `run`, and the index of the member that failed returned.
    private static func readAhead(_ group: [Job], from index: Int, _ statements: inout Statements, _ connection: any SQLConnection) throws -> Int? {
        var wave: [Job] = []
        var keys = Set<String>()
        for job in group[index...] {
            guard let reads = job.reads, !job.bulk, reads.together == nil || (job.triedTogether && !job.madeTogether), job.readAhead == nil,
                  !job.readsAlone, keys.isDisjoint(with: reads.keys),
                  wave.count < maximumReadAhead else { break }
            keys.formUnion(reads.keys)
            wave.append(job)
        }
        let ordered = wave.sorted { ($0.reads?.keys.min() ?? "") < ($1.reads?.keys.min() ?? "") }
        let readsBegin = connection.statementsIssued
        do {
            try connection.send("SAVEPOINT islet_reads")
            let rows = try readOnce(ordered.flatMap { $0.reads?.statements ?? [] }, connection)
            try connection.send("RELEASE islet_reads")
            var next = 0
            for job in ordered {
                let count = job.reads?.statements.count ?? 0
                job.readAhead = Array(rows[next..<next + count])
                next += count
            }
            return nil
        } catch {
            if index > 0, let first = connection.firstFailure(), first.statement < readsBegin {
                return try rollBack(group, &statements, running: index - 1, error, connection)
            }
            try connection.execute("ROLLBACK TO islet_reads; RELEASE islet_reads")
            for job in wave { job.readsAlone = true }
            return nil
        }
    }

    /// Where a group's statements stand: each member's first statement number (the member a failed statement belongs
    /// to), and the last write together, while its writes may be unanswered (`writeTogether`).
    struct Statements {
        var marks: [Int] = []
        var together: (begins: Int, ends: Int, first: Int, members: [Job])?
    }

    /// Offers the members from `index` on that can be written together (`GroupReads.together` of one type, keys apart,
    /// as `readAhead` takes them) to the first one's `WriteTogether`, in a savepoint of their own. If it fails, it is
    /// rolled back and every one of them runs its own body; a failure of an earlier member's writes is rolled back as
    /// in `run`, and the index of the member that failed returned. Its writes and RELEASE go with the next round trip,
    /// as a member's do: if they fail there, `rollBack` rolls the savepoint back, and its members run alone.
    private static func writeTogether(_ group: [Job], from index: Int, _ statements: inout Statements,
                                      _ connection: any SQLConnection) throws -> Int? {
        guard let first = group[index].reads?.together else { return nil }
        let kind = ObjectIdentifier(type(of: first))
        var wave: [Job] = []
        var keys = Set<String>()
        for job in group[index...] {
            guard let reads = job.reads, let together = reads.together, ObjectIdentifier(type(of: together)) == kind, !job.bulk,
                  !job.triedTogether, keys.isDisjoint(with: reads.keys), wave.count < maximumReadAhead else { break }
            keys.formUnion(reads.keys)
            wave.append(job)
        }
        for job in wave { job.triedTogether = true }
        let begins = connection.statementsIssued
        do {
            try connection.send("SAVEPOINT islet_together")
            let made = try first.write(together: wave.compactMap { $0.reads?.together }, connection)
            try connection.send("RELEASE islet_together")
            for (job, made) in zip(wave, made) { job.madeTogether = made }
            statements.together = (begins, connection.statementsIssued, index, wave)
            return nil
        } catch {
            if index > 0, let failure = connection.firstFailure(), failure.statement < begins {
                for job in wave { job.triedTogether = false }
                return try rollBack(group, &statements, running: index - 1, error, connection)
            }
            try connection.execute("ROLLBACK TO islet_together; RELEASE islet_together")
            return nil
        }
    }

    /// Runs `statements` in one round trip, one without parameters once however many members read it (every update
    /// probes whether any push is owed anywhere): the rows of each statement, in order.
    static func readOnce(_ statements: [SQLStatement], _ connection: any SQLConnection) throws -> [[SQLRow]] {
        var unique: [SQLStatement] = []
        var first: [String: Int] = [:]
        let slots = statements.map { statement in
            guard statement.parameters.isEmpty else {
                unique.append(statement)
                return unique.count - 1
            }
            if let slot = first[statement.sql] { return slot }
            unique.append(statement)
            first[statement.sql] = unique.count - 1
            return unique.count - 1
        }
        let rows = try connection.queries(unique)
        return slots.map { rows[$0] }
    }

    /// Members whose reads go in one round trip at most.
    static let maximumReadAhead = 64

    /// After `error` while member `running` ran (or while the writes up to it were answered): fails the member
    /// whose statement failed first, rolled back to its savepoint (the one open: the statements after the
    /// failed one were skipped), and clears what the members after it were told. Returns that member's index.
    /// A write together's statement that failed fails none: it is rolled back to its savepoint, and its members and
    /// those after them run again, its members alone; the index before its first member is returned.
    private static func rollBack(_ group: [Job], _ statements: inout Statements, running: Int, _ error: any Error,
                                 _ connection: any SQLConnection) throws -> Int {
        if let first = connection.firstFailure(), let together = statements.together, (together.begins..<together.ends).contains(first.statement) {
            statements.together = nil
            try connection.execute("ROLLBACK TO islet_together; RELEASE islet_together")
            for job in group[together.first...] { job.error = nil }
            for job in together.members { job.madeTogether = false }
            return together.first - 1
        }
        var failed = running, cause = error
        if let first = connection.firstFailure(), let owner = statements.marks.lastIndex(where: { $0 <= first.statement }) {
            failed = owner
            // The running member keeps the error its body threw (it may have said what the failure means to it).
            if owner < running { cause = first.error }
        }
        for job in group[failed...] { job.error = nil }
        group[failed].error = cause
        try connection.execute("ROLLBACK TO islet_write; RELEASE islet_write")
        return failed
    }
}
