import Foundation
import IsletStore

/// Group commit: the write transactions that arrive while one is committing are run together, each in a
/// savepoint of one shared transaction, and committed with one sync to disk. A commit is durable
/// (SQLite FULL, PostgreSQL's defaults), so a sync per request would cap writes at the disk's sync rate;
/// shared, the cost is paid once per group. Each request still sees its own outcome: an error rolls back
/// its savepoint only, and the others commit. No thread of its own: the first writer to find no group
/// committing leads the next one, running the others' bodies on its connection while they wait.
public final class GroupCommit: @unchecked Sendable {
    /// One waiting write: its body (run by whichever thread leads its group) and what came of it.
    final class Job {
        let body: (any SQLConnection) throws -> Void
        var error: (any Error)?
        var done = false
        init(_ body: @escaping (any SQLConnection) throws -> Void) { self.body = body }
    }

    private let condition = NSCondition()
    private var pending: [Job] = []
    private var leading = false
    /// The thread running the current group: a write it started would wait for itself.
    private var leader: pthread_t?

    public init() {}

    /// Runs `body` in a write transaction shared with the writes waiting now; returns once it is committed
    /// (or rethrows what `body` threw, having rolled back only its own changes). `transaction` opens one
    /// transaction on a connection of the leader's and commits it.
    public func write<T>(_ body: (any SQLConnection) throws -> T,
                         transaction: (_ group: (any SQLConnection) throws -> Void) throws -> Void) throws -> T {
        var result: T?
        // `body` is only run before this call returns: the waiting below guarantees it.
        try withoutActuallyEscaping(body) { body in
            let job = Job { connection in result = try body(connection) }
            condition.lock()
            precondition(!(leading && leader.map { pthread_equal($0, pthread_self()) != 0 } == true),
                         "a write inside a write would wait for itself")
            pending.append(job)
            while !job.done {
                if leading {
                    condition.wait()
                    continue
                }
                leading = true
                leader = pthread_self()
                let group = pending
                pending = []
                condition.unlock()
                Self.run(group, transaction)
                condition.lock()
                for member in group { member.done = true }
                leading = false
                leader = nil
                condition.broadcast()
            }
            condition.unlock()
            if let error = job.error { throw error }
        }
        guard let result else { throw StoreError(.io, "a grouped write finished without a result") }
        return result
    }

    /// One transaction for the group, a savepoint per member; a failed commit fails every member. A group
    /// of one needs no savepoint (two round trips less on PostgreSQL): its error rolls back the transaction.
    private static func run(_ group: [Job], _ transaction: ((any SQLConnection) throws -> Void) throws -> Void) {
        if group.count == 1, let only = group.first {
            do { try transaction { connection in try only.body(connection) } } catch { only.error = error }
            return
        }
        do {
            try transaction { connection in
                for job in group {
                    try connection.execute("SAVEPOINT islet_write")
                    do {
                        try job.body(connection)
                        try connection.execute("RELEASE islet_write")
                    } catch {
                        job.error = error
                        try connection.execute("ROLLBACK TO islet_write; RELEASE islet_write")
                    }
                }
            }
        } catch {
            for job in group where job.error == nil { job.error = error }
        }
    }
}
