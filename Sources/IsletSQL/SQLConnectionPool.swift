import IsletStore
import Synchronization

/// The connections of one database, for either engine: each used by one thread at a time and reused
/// (up to `maximumIdle` kept), and write transactions grouped (`GroupCommit`).
public final class SQLConnectionPool<Connection: SQLConnection & Sendable>: Sendable {
    private let idle = Mutex<[Connection]>([])
    private let maximumIdle: Int
    private let connect: @Sendable () throws(StoreError) -> Connection
    private let reusable: @Sendable (Connection) -> Bool
    private let writers = GroupCommit()

    /// `connect` opens a new connection when none is idle; `reusable` says whether a used one may go back.
    public init(maximumIdle: Int, connect: @escaping @Sendable () throws(StoreError) -> Connection,
                reusable: @escaping @Sendable (Connection) -> Bool = { _ in true }) {
        self.maximumIdle = maximumIdle
        self.connect = connect
        self.reusable = reusable
    }

    /// A connection for one thread's use; give it back with `checkIn`.
    public func checkOut() throws(StoreError) -> Connection {
        if let reused = idle.withLock({ $0.popLast() }) { return reused }
        return try connect()
    }

    public func checkIn(_ connection: Connection) {
        guard reusable(connection) else { return }
        idle.withLock { pool in
            if pool.count < maximumIdle { pool.append(connection) }
        }
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
    public func inWriteTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try writers.write(body) { group in
            var retried = false
            while true {
                let connection = retried ? try connect() : try checkOut()
                var began = false
                do {
                    try connection.transaction(rethrowing: { began = true; try group(connection) })
                    checkIn(connection)
                    return
                } catch {
                    checkIn(connection)   // dropped when it lost its server
                    guard !began, !retried, !reusable(connection) else { throw error }
                    retried = true
                }
            }
        }
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
