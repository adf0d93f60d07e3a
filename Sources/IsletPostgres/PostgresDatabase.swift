import Foundation
import IsletSQL
import IsletStore
import Synchronization

/// A pool of connections to one PostgreSQL database, migrated to the current schema on open.
public final class PostgresDatabase: SQLDatabase {
    public let dialect = SQLDialect(.postgresql)
    /// The server and database, without the password: safe in logs and messages.
    public let origin: String
    private let url: String
    private let idle = Mutex<[PostgresConnection]>([])
    private let maximumIdle: Int
    /// Writers of this process join one group at a time (one transaction, one commit for the group) rather
    /// than queueing on the server's advisory lock a connection each.
    private let writers = GroupCommit()
    /// After a failed connect, new connects wait (50 ms doubling up to 5 s) so an outage is not hammered.
    private let reconnect = Mutex<(failures: Int, notBefore: ContinuousClock.Instant?, lastError: String)>((0, nil, ""))

    /// True for the URLs that select PostgreSQL: `postgresql://…` and `postgres://…`.
    public static func isURL(_ location: String) -> Bool {
        location.hasPrefix("postgresql://") || location.hasPrefix("postgres://")
    }

    /// Opens the database at `url` and applies pending migrations (none with `migrate: false`, for
    /// commands that only inspect it). `migrateUpTo` stops at an older version; only migration tests use it.
    public init(url: String, maximumIdleConnections: Int = 8, migrate: Bool = true, migrateUpTo: Int? = nil) throws(StoreError) {
        self.url = url
        self.origin = Self.redacted(url)
        self.maximumIdle = maximumIdleConnections
        let connection = try PostgresConnection(url: url, origin: origin)
        if migrate {
            try SQLMigrations.migrate(connection, dialect: dialect, upTo: migrateUpTo)
        } else {
            _ = try SQLMigrations.currentVersion(connection)
        }
        idle.withLock { $0.append(connection) }
    }

    /// `url` with its password replaced by `***`.
    public static func redacted(_ url: String) -> String {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@") else { return url }
        let credentials = url[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
    }

    private func checkOut() throws(StoreError) -> PostgresConnection {
        if let reused = idle.withLock({ $0.popLast() }) { return reused }
        let waiting = reconnect.withLock { state -> String? in
            guard let notBefore = state.notBefore, ContinuousClock.now < notBefore else { return nil }
            return state.lastError
        }
        if let waiting { throw StoreError(.io, "\(waiting); reconnecting") }
        do {
            let connection = try PostgresConnection(url: url, origin: origin)
            reconnect.withLock { $0 = (0, nil, "") }
            return connection
        } catch {
            reconnect.withLock { state in
                state.failures += 1
                let delay = min(5.0, 0.05 * pow(2, Double(min(state.failures, 10))))
                state.notBefore = ContinuousClock.now + .milliseconds(Int(delay * 1000))
                state.lastError = error.message
            }
            throw error
        }
    }

    /// A connection that lost its server (or was left inside a transaction) is dropped, not reused.
    private func checkIn(_ connection: PostgresConnection) {
        guard connection.isUsable else { return }
        idle.withLock { pool in
            if pool.count < maximumIdle { pool.append(connection) }
        }
    }

    public func withConnection<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try body(connection)
    }

    public func inWriteTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try writers.write(body) { group in
            let connection = try checkOut()
            defer { checkIn(connection) }
            try connection.transaction(rethrowing: { try group(connection) })
        }
    }

    /// The schema version the database is at.
    public func schemaVersion() throws(StoreError) -> Int {
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try SQLMigrations.currentVersion(connection)
    }
}
