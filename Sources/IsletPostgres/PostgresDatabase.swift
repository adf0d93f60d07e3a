import Foundation
import IsletSQL
import IsletStore
import Synchronization

/// A pool of connections to one PostgreSQL database, migrated to the current schema on open.
public final class PostgresDatabase: SQLDatabase {
    public let dialect = SQLDialect(.postgresql)
    /// How long a claim waits for a row lock, in milliseconds (`inClaimTransaction`).
    static let claimLockWait = 100
    /// How old a `.fresh` query's plan may be: a second's stale plan is harmless, and planning at every run cost
    /// PostgreSQL more than running the queries.
    public static let replanInterval: Duration = .seconds(1)
    /// At most this many `.fresh` statements are prepared on a connection at once; more are planned by their run.
    public static let freshStatements = 32
    /// The server and database, without the password: safe in logs and messages.
    public let origin: String
    /// Writers of this process join one group at a time (one transaction, one commit for the group) rather
    /// than queueing on the server's advisory lock a connection each. A connection that lost its server (or
    /// was left inside a transaction) is dropped, not reused.
    private let pool: SQLConnectionPool<PostgresConnection>

    /// True for the URLs that select PostgreSQL: `postgresql://…` and `postgres://…`.
    public static func isURL(_ location: String) -> Bool {
        location.hasPrefix("postgresql://") || location.hasPrefix("postgres://")
    }

    /// Opens the database at `url` and applies pending migrations (none with `migrate: false`, for
    /// commands that only inspect it). `migrateUpTo` stops at an older version; only migration tests use it.
    /// At most `maximumConnections` are open at once (each is a server process): more concurrent callers wait
    /// for one, instead of opening and closing connections under load. `.fresh` queries are planned again once
    /// their plan is `replanInterval` old. `name` is each session's `application_name` (a node's says which node it
    /// is, in `pg_stat_activity`), unless the URL sets one.
    public init(url: String, maximumIdleConnections: Int = 16, maximumConnections: Int = 16, migrate: Bool = true,
                migrateUpTo: Int? = nil, replanInterval: Duration = PostgresDatabase.replanInterval, name: String = "islet") throws(StoreError) {
        let origin = Self.redacted(url)
        self.origin = origin
        let reconnect = Reconnect()
        pool = SQLConnectionPool(maximumIdle: maximumIdleConnections, maximumOpen: maximumConnections,
                                 connect: { () throws(StoreError) in try reconnect.attempt { () throws(StoreError) in try PostgresConnection(url: url, origin: origin, name: name, replanInterval: replanInterval) } },
                                 reusable: { $0.isUsable })
        let connection = try pool.checkOut()
        if migrate {
            try SQLMigrations.migrate(connection, dialect: dialect, upTo: migrateUpTo)
        } else {
            _ = try SQLMigrations.currentVersion(connection)
        }
        pool.checkIn(connection)
    }

    /// `url` with its password (`user:password@` or `?password=`) replaced by `***`.
    public static func redacted(_ url: String) -> String {
        var url = url
        if let query = url.firstIndex(of: "?") {
            let parameters = url[url.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
                .map { $0.lowercased().hasPrefix("password=") ? "password=***" : String($0) }
            url = String(url[...query]) + parameters.joined(separator: "&")
        }
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@") else { return url }
        let credentials = url[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
    }

    public func withConnection<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try pool.withConnection { (connection) throws(StoreError) in try body(connection) }
    }

    public func inWriteTransaction<T>(bulk: Bool, _ body: (any SQLConnection) throws -> T) throws -> T {
        try pool.inWriteTransaction(bulk: bulk, body)
    }

    public func inWriteTransaction<T>(reading reads: GroupReads, _ body: (any SQLConnection, [[SQLRow]]) throws -> T) throws -> T {
        try pool.inWriteTransaction(reading: reads, body)
    }

    /// A plain READ COMMITTED transaction: claims lock their rows with SKIP LOCKED. A row they must wait for (a
    /// scheduled start's activity, which a write may hold while it waits for a message this claim has locked) is
    /// waited for `claimLockWait` at most: then the claim gives up with `.busy` and the write goes on, where waiting
    /// would deadlock for a second (PostgreSQL's `deadlock_timeout`) and then fail one side, maybe an API call.
    public func inClaimTransaction<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try pool.withConnection { (connection) throws(StoreError) -> T in
            do {
                return try connection.transaction(opening: "BEGIN; SET LOCAL lock_timeout = '\(Self.claimLockWait)ms'",
                                                  { () throws -> T in try body(connection) })
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(.io, "\(error)")
            }
        }
    }
}

/// After a failed connect, new connects wait (50 ms doubling up to 5 s) so an outage is not hammered; calls
/// meanwhile fail at once with the last error.
final class Reconnect: Sendable {
    private let state = Mutex<(failures: Int, notBefore: ContinuousClock.Instant?, lastError: String)>((0, nil, ""))

    func attempt(_ connect: () throws(StoreError) -> PostgresConnection) throws(StoreError) -> PostgresConnection {
        let waiting = state.withLock { state -> String? in
            guard let notBefore = state.notBefore, ContinuousClock.now < notBefore else { return nil }
            return state.lastError
        }
        if let waiting { throw StoreError(.io, "\(waiting); reconnecting") }
        do {
            let connection = try connect()
            state.withLock { $0 = (0, nil, "") }
            return connection
        } catch {
            state.withLock { state in
                state.failures += 1
                let delay = min(5.0, 0.05 * pow(2, Double(min(state.failures, 10))))
                state.notBefore = ContinuousClock.now + .milliseconds(Int(delay * 1000))
                state.lastError = error.message
            }
            throw error
        }
    }
}
