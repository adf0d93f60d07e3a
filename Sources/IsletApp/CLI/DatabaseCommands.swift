import Foundation
import IsletSQL
import IsletSQLite
import IsletStore

/// `islet db`: the database file itself (backups, schema version).
struct DatabaseCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "db", abstract: "Back up the database and show its schema version.",
        subcommands: [DatabaseBackupCommand.self, DatabaseVersionCommand.self])
}

struct DatabaseBackupCommand: CLICommand {
    static let spec = CommandSpec(
        name: "backup", abstract: "Write a consistent copy of the database to a new file, while the server runs.",
        discussion: """
            The copy is one snapshot of every table (SQLite's VACUUM INTO): the server keeps accepting and sending
            meanwhile. It holds the APNs keys, so it is created readable by its owner only (0600). To restore, stop
            the server and put the copy in place of the database file (removing any -wal and -shm files beside it).
            On PostgreSQL, back up with PostgreSQL's own tools (pg_dump, or your provider's snapshots).
            """,
        arguments: [ArgumentSpec(name: "file", help: "The new file; it must not exist, or be empty.")],
        options: [Common.database])

    let location: StorageLocation
    let destination: String

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        location = Common.location(arguments)
        destination = arguments.argument(0)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        guard case .sqlite(let database) = location else {
            throw CLIError.failure("\(location) is PostgreSQL: back it up with pg_dump (or your provider's snapshots); islet db backup copies SQLite files")
        }
        guard FileManager.default.fileExists(atPath: database) else {
            throw CLIError.failure("no database at \(database); set --database or ISLET_DATABASE")
        }
        do {
            // As it is: a backup taken before an upgrade must still open with the Islet that made it.
            let opened = try SQLiteDatabase(existingAt: database)
            try opened.backup(to: destination)
            context.print("Backed up \(database) (schema version \(try opened.schemaVersion())) to \(destination)")
        } catch {
            throw CLIError.failure(error.message)
        }
        return 0
    }
}

struct DatabaseVersionCommand: CLICommand {
    static let spec = CommandSpec(
        name: "version", abstract: "Print the database's schema version and the newest this Islet knows.",
        discussion: "Shows the file as it is (this command migrates nothing); islet serve applies the migrations it lacks, and refuses a database from a newer Islet.",
        options: [Common.database])

    let location: StorageLocation

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        location = Common.location(arguments)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        do {
            let version = try Storage.schemaVersion(of: location)
            context.print("schema version \(version) (this Islet: \(SQLMigrations.latestVersion))")
        } catch {
            throw CLIError.failure(error.message)
        }
        return 0
    }
}
