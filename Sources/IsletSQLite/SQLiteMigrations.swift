import Foundation
import IsletStore

/// The SQLite schema, as an ordered list of migrations recorded in `schema_migrations`.
///
/// Never edit a migration that has shipped; add a new one.
enum SQLiteMigrations {
    struct Migration {
        let version: Int
        let name: String
        let sql: String
    }

    static let all: [Migration] = [
        Migration(version: 1, name: "applications and tokens", sql: """
            CREATE TABLE applications (
                code TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                created_at INTEGER NOT NULL
            ) STRICT;
            CREATE TABLE tokens (
                id TEXT PRIMARY KEY,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                kind TEXT NOT NULL CHECK (kind IN ('api', 'device')),
                hash BLOB NOT NULL UNIQUE,
                label TEXT NOT NULL DEFAULT '',
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            ) STRICT;
            CREATE INDEX tokens_by_application ON tokens (application, kind);
            """),
        Migration(version: 2, name: "APNs signing keys", sql: """
            CREATE TABLE apns_keys (
                application TEXT PRIMARY KEY REFERENCES applications(code) ON DELETE CASCADE,
                team_id TEXT NOT NULL,
                key_id TEXT NOT NULL,
                environment TEXT NOT NULL CHECK (environment IN ('production', 'sandbox', 'both')),
                pem TEXT NOT NULL,
                updated_at INTEGER NOT NULL
            ) STRICT;
            """),
    ]

    static var latestVersion: Int { all.last!.version }

    static func currentVersion(_ connection: SQLiteConnection) throws(StoreError) -> Int {
        let rows = try connection.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        return Int(rows.first?[0].int ?? 0)
    }

    private static func newerSchema(_ current: Int) -> StoreError {
        StoreError(.newerSchema, "the database is at schema version \(current), newer than this Islet knows (\(latestVersion)); upgrade Islet")
    }

    /// Applies every migration above the file's version, each in its own transaction.
    static func migrate(_ connection: SQLiteConnection, upTo target: Int? = nil) throws(StoreError) {
        try connection.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at INTEGER NOT NULL
            ) STRICT;
            """)
        let target = target ?? latestVersion
        for migration in all where migration.version <= target {
            // Re-check inside the transaction: another process may be migrating the same file.
            try connection.transaction { () throws(StoreError) in
                let current = try currentVersion(connection)
                if current > latestVersion {
                    throw newerSchema(current)
                }
                guard current < migration.version else { return }
                try connection.execute(migration.sql)
                try connection.run(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    [.int(Int64(migration.version)), .text(migration.name), .int(Int64(Date().timeIntervalSince1970))])
            }
        }
        let current = try currentVersion(connection)
        if current > latestVersion {
            throw newerSchema(current)
        }
    }
}
