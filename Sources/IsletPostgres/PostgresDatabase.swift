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
        let reconnect = Reconnect { () throws(StoreError) in try PostgresConnection(url: url, origin: origin, name: name, replanInterval: replanInterval) }
        pool = SQLConnectionPool(maximumIdle: maximumIdleConnections, maximumOpen: maximumConnections,
                                 connect: { () throws(StoreError) in try reconnect.attempt() },
                                 reusable: { $0.isUsable },
                                 lostServer: { connection in
                                     guard connection.lostServer else { return false }
                                     reconnect.lost(outOfReach: connection.lostToSilence)
                                     return true
                                 })
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

    public func inWriteTransaction<T>(reading reads: GroupReads?, _ body: @escaping (any SQLConnection, [[SQLRow]]) throws -> T,
                                      then: @escaping (Result<T, any Error>) -> Void) {
        pool.inWriteTransaction(reading: reads, body, then: then)
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

/// Connecting while the database cannot be reached (issue 47). After a failed connect, callers that need a new
/// connection fail at once with the last error (a 503 at the API) rather than each wait out a connect to a server
/// that does not answer (`connect_timeout`: two seconds at least, when a network drops every packet), and one probe
/// at a time connects in the background: at once, then after 50 ms, doubling up to a second, until a connect
/// succeeds; from then on callers connect again. A connection that lost its server (`lost`: a restart, a failover, a
/// cut network, or only that session ended) starts a probe too, and callers wait for its outcome, at most
/// `suspicion`: a server that ended one session answers the probe in milliseconds and they go on. A connection that
/// was lost because the server stopped answering fails them at once, as a failed connect does. So a node answers within about a second while its database is away, and is
/// back within about a second of it (a failover's new primary, a restart, a healed network).
final class Reconnect: @unchecked Sendable {
    /// Guards the state below; signalled when a probe ends.
    private let condition = NSCondition()
    /// Connects that failed in a row since the last that succeeded.
    private var failures = 0
    private var lastError = ""
    private var probing = false
    private let connect: @Sendable () throws(StoreError) -> PostgresConnection
    static let longestWait = 1.0
    /// How long a caller waits for the probe a lost connection started: a server that is there answers it in
    /// milliseconds.
    static let suspicion: Duration = .milliseconds(100)

    init(_ connect: @escaping @Sendable () throws(StoreError) -> PostgresConnection) {
        self.connect = connect
    }

    /// A new connection, or the last error at once while the database is known to be away.
    func attempt() throws(StoreError) -> PostgresConnection {
        condition.lock()
        let deadline = Date().addingTimeInterval(Self.suspicion.timeInterval)
        while failures == 0 && probing && Date() < deadline {
            _ = condition.wait(until: deadline)
        }
        let away = failures > 0 ? lastError : probing ? "the connection to PostgreSQL was lost and the server has not answered again yet" : nil
        condition.unlock()
        if let away {
            startProbe()
            throw StoreError(.io, "\(away); reconnecting")
        }
        do {
            return try connect()
        } catch {
            failed(error.message)
            startProbe()
            throw error
        }
    }

    /// A connection lost its server: a probe finds out whether the server is there. `outOfReach`: it stopped
    /// answering (a cut network, a machine gone), so callers fail at once until the probe connects.
    func lost(outOfReach: Bool) {
        if outOfReach {
            failed("the connection to PostgreSQL was lost: the server stopped answering")
        }
        startProbe()
    }

    /// Starts the probe unless one runs. It holds the reconnect weakly: a database closed meanwhile ends it.
    private func startProbe() {
        condition.lock()
        let start = !probing
        probing = true
        condition.unlock()
        guard start else { return }
        Thread.detachNewThread { [weak self] in
            var wait = 0.0
            while let reconnect = self {
                do {
                    _ = try reconnect.connect()   // closed at once: callers open their own
                    reconnect.condition.lock()
                    reconnect.failures = 0
                    reconnect.probing = false
                    reconnect.condition.broadcast()
                    reconnect.condition.unlock()
                    return
                } catch {
                    reconnect.failed("\(error)")
                }
                wait = min(Self.longestWait, max(0.05, wait * 2))
                Thread.sleep(forTimeInterval: wait)
            }
        }
    }

    private func failed(_ message: String) {
        condition.lock()
        failures += 1
        lastError = message
        condition.broadcast()
        condition.unlock()
    }
}
