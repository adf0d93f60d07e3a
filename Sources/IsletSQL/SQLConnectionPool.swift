import Foundation
import IsletStore

/// The connections of one database, for either engine: each used by one thread at a time and reused
/// (up to `maximumIdle` kept), at most `maximumOpen` at once (a caller waits for one to come back, up to
/// `waitLimit`), and write transactions grouped (`GroupCommit`).
public final class SQLConnectionPool<Connection: SQLConnection & Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var idle: [Connection] = []
    /// The group commit's connection between groups, kept apart from the readers' when `keepsWriterApart`.
    private var writer: Connection?
    private var open = 0
    private var waiting = 0

    private let maximumIdle: Int
    private let maximumOpen: Int
    private let waitLimit: Duration
    private let connect: @Sendable () throws(StoreError) -> Connection
    private let reusable: @Sendable (Connection) -> Bool
    private let lostServer: @Sendable (Connection) -> Bool
    private let writers = GroupCommit()
    /// SQLite drops a connection's page cache whenever another connection changed the file: the one
    /// connection that writes keeps its cache warm only if readers never write on it in between.
    private let keepsWriterApart: Bool

    /// `connect` opens a new connection when none is idle; `reusable` says whether a used one may go back.
    /// `keepsWriterApart`: the writes' connection goes back to them, not to the readers (unless every other
    /// connection is in use). `lostServer` says a used one lost its server: the idle ones are dropped with it, as
    /// they most likely lost it too (a failover, a restart, a cut network), rather than each cost a caller its
    /// own failure.
    public init(maximumIdle: Int, maximumOpen: Int = .max, waitLimit: Duration = .seconds(10), keepsWriterApart: Bool = false,
                connect: @escaping @Sendable () throws(StoreError) -> Connection,
                reusable: @escaping @Sendable (Connection) -> Bool = { _ in true },
                lostServer: @escaping @Sendable (Connection) -> Bool = { _ in false }) {
        precondition(maximumOpen > 0, "a pool needs room for one connection")
        self.maximumIdle = maximumIdle
        self.maximumOpen = maximumOpen
        self.waitLimit = waitLimit
        self.connect = connect
        self.reusable = reusable
        self.lostServer = lostServer
        self.keepsWriterApart = keepsWriterApart
    }

    /// A connection for one thread's use; give it back with `checkIn`.
    public func checkOut() throws(StoreError) -> Connection {
        try checkOut(fresh: false)
    }

    /// `fresh`: a newly opened connection, not an idle one (after an idle one turned out dead).
    private func checkOut(fresh: Bool) throws(StoreError) -> Connection {
        let deadline = ContinuousClock.now + waitLimit
        condition.lock()
        while true {
            if !fresh, let reused = idle.popLast() {
                condition.unlock()
                return reused
            }
            if !fresh, open >= maximumOpen, let reused = writer {
                writer = nil   // every connection is in use: the writer's serves a reader rather than keep it waiting
                condition.unlock()
                return reused
            }
            if fresh, open >= maximumOpen, !idle.isEmpty || writer != nil {
                if writer != nil { writer = nil } else { idle.removeFirst() }   // make room: the idle ones may have lost their server too
                open -= 1
            }
            if open < maximumOpen {
                open += 1
                break
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                condition.unlock()
                throw StoreError(.io, "no database connection came free within \(waitLimit) (all \(maximumOpen) in use)")
            }
            waiting += 1
            _ = condition.wait(until: Date(timeIntervalSinceNow: left.timeInterval))
            waiting -= 1
        }
        condition.unlock()
        do {
            return try connect()
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    /// Callers waiting for a connection to come back (all `maximumOpen` are in use).
    public var waitingCallers: Int {
        condition.lock()
        defer { condition.unlock() }
        return waiting
    }

    public func checkIn(_ connection: Connection) {
        let keep = reusable(connection)
        let lost = !keep && lostServer(connection)
        condition.lock()
        defer { condition.unlock() }
        if lost {
            // Closed when their last reference goes, outside the lock.
            open -= idle.count + (writer == nil ? 0 : 1)
            idle = []
            writer = nil
        }
        if keep && idle.count < maximumIdle {
            idle.append(connection)
        } else {
            open -= 1   // dropped: closed when its last reference goes
        }
        condition.signal()
    }

    /// Runs `body` with a connection of its own, outside a transaction.
    public func withConnection<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try body(connection)
    }

    /// Runs `body` in a write transaction shared with the writes waiting at that moment. An idle connection
    /// whose server went away fails only when used: if it fails before the group's code ran, the group
    /// runs once more, on a new connection (the other idle ones may have lost their server too).
    public func inWriteTransaction<T>(bulk: Bool = false, _ body: (any SQLConnection) throws -> T) throws -> T {
        try inWriteTransaction(bulk: bulk, reading: nil) { connection, _ in try body(connection) }
    }

    /// `inWriteTransaction` for a body that begins with `reads` (`GroupReads`).
    public func inWriteTransaction<T>(bulk: Bool = false, reading reads: GroupReads?,
                                      _ body: (any SQLConnection, [[SQLRow]]) throws -> T) throws -> T {
        try writers.write(bulk: bulk, reading: reads, body) { group in try groupTransaction(group) }
    }

    /// `inWriteTransaction` that does not wait: `then` gets what `body` returned, or the error, once its group is
    /// committed or failed, on the thread that led the group (see `GroupCommit.writeLater`).
    public func inWriteTransaction<T>(reading reads: GroupReads?, _ body: @escaping (any SQLConnection, [[SQLRow]]) throws -> T,
                                      then: @escaping (Result<T, any Error>) -> Void) {
        writers.writeLater(reading: reads, body, transaction: { group in try self.groupTransaction(group) }, then: then)
    }

    /// One group's transaction, on the writers' connection.
    private func groupTransaction(_ group: (any SQLConnection) throws -> Void) throws {
        var retried = false
        while true {
            let connection = try retried ? checkOut(fresh: true) : takeWriter() ?? checkOut()
            var began = false
            do {
                try connection.transaction(rethrowing: { began = true; try group(connection) })
                keepWriter(connection)
                return
            } catch {
                keepWriter(connection)   // dropped when it lost its server
                guard !began, !retried, !reusable(connection) else { throw error }
                retried = true
            }
        }
    }
}

extension SQLConnectionPool {
    /// The writers' connection left by the last group, if any (one group runs at a time).
    private func takeWriter() -> Connection? {
        condition.lock()
        defer { condition.unlock() }
        defer { writer = nil }
        return writer
    }

    /// Keeps a group's connection for the next group; a dead one is dropped, and one more than the writer's
    /// (after a retry on a fresh connection) goes back to the readers.
    private func keepWriter(_ connection: Connection) {
        guard keepsWriterApart, reusable(connection) else { return checkIn(connection) }
        condition.lock()
        if writer == nil {
            writer = connection
            condition.signal()
            condition.unlock()
            return
        }
        condition.unlock()
        checkIn(connection)
    }
}

extension SQLConnection {
    /// Runs `body` in a transaction opened with `begin` (the engine's statement): committed, or rolled back
    /// on any error `body` throws, which is rethrown as it is.
    public func transaction<T>(opening begin: String, _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}
