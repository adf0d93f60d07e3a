import Foundation
import IsletSQL
import IsletStore
import Synchronization

/// A pool of connections to one SQLite file, migrated to the current schema on open.
public final class SQLiteDatabase: SQLDatabase {
    public let path: String
    public let dialect = SQLDialect(.sqlite)
    /// SQLite allows one writer. Writers of this process join one group at a time, one transaction and one
    /// sync for the group, instead of meeting SQLITE_BUSY and polling in SQLite's busy handler (which sleeps
    /// up to 100 ms a try); other processes (the CLI) still meet `busy_timeout`.
    private let pool: SQLConnectionPool<SQLiteConnection>

    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    ///
    /// `migrateUpTo` stops at an older schema version; only tests of migrations use it.
    public init(path: String, maximumIdleConnections: Int = 8, migrateUpTo: Int? = nil) throws(StoreError) {
        self.path = path
        pool = Self.pool(path, maximumIdle: maximumIdleConnections)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw StoreError(.io, "cannot create directory \(directory): \(error.localizedDescription)")
            }
        }
        // The file holds APNs signing keys: created readable by its owner only (SQLite gives its -wal and
        // -shm files the same permissions).
        if !FileManager.default.fileExists(atPath: path) {
            let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw StoreError(.io, "cannot create \(path): \(String(cString: strerror(errno)))") }
            close(fd)
        }
        let connection = try pool.checkOut()
        try SQLMigrations.migrate(connection, dialect: dialect, upTo: migrateUpTo)
        pool.checkIn(connection)
    }

    /// Opens an existing database as it is, without migrating it: for commands that inspect or copy a file
    /// a server (perhaps an older one) may be using.
    public init(existingAt path: String) throws(StoreError) {
        guard FileManager.default.fileExists(atPath: path) else { throw StoreError(.notFound, "no database at \(path)") }
        self.path = path
        pool = Self.pool(path, maximumIdle: 1)
        pool.checkIn(try pool.checkOut())
    }

    private static func pool(_ path: String, maximumIdle: Int) -> SQLConnectionPool<SQLiteConnection> {
        SQLConnectionPool(maximumIdle: maximumIdle, keepsWriterApart: true, connect: { () throws(StoreError) in try SQLiteConnection(path: path) })
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

    /// Writes a consistent copy of the whole database to `destination` while the server keeps running
    /// (`VACUUM INTO` reads one snapshot; writers are not blocked). The copy holds the APNs keys, so it is
    /// created readable by its owner only; an existing non-empty file is refused rather than overwritten.
    public func backup(to destination: String) throws(StoreError) {
        if let attributes = try? FileManager.default.attributesOfItem(atPath: destination),
           (attributes[.size] as? NSNumber)?.intValue ?? 0 > 0 {
            throw StoreError(.io, "\(destination) exists and is not empty; choose a new file name")
        }
        let fd = open(destination, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError(.io, "cannot create \(destination): \(String(cString: strerror(errno)))") }
        fchmod(fd, 0o600)   // an empty file that existed keeps its mode otherwise
        close(fd)
        do {
            _ = try withConnection { (connection) throws(StoreError) in
                try connection.run("VACUUM INTO ?", [.text(destination)])
            }
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw error
        }
    }
}
