import Foundation
import IsletPostgres
import IsletSQL
import IsletSQLite
import IsletStore

/// `islet db`: the database itself (backups, schema version, moving to PostgreSQL).
struct DatabaseCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "db", abstract: "Back up the database, show its schema version, or move it to PostgreSQL.",
        subcommands: [DatabaseBackupCommand.self, DatabaseVersionCommand.self, DatabaseMigrateCommand.self])
}

struct DatabaseMigrateCommand: CLICommand {
    static let spec = CommandSpec(
        name: "migrate-to", abstract: "Copy an SQLite database into an empty PostgreSQL database.",
        discussion: """
            Copies everything (applications, tokens, APNs keys, devices, tags, filters, schemas, activities, messages
            and their deliveries, simulated devices) in one transaction: the PostgreSQL database gets all of it or
            nothing. Stop islet serve first (the copy refuses to run beside it), then start it with the URL as
            --database. The SQLite file is left as it was. Row counts of both are compared at the end.
            """,
        arguments: [ArgumentSpec(name: "url", help: "postgresql://user:password@host:port/database of an empty database.")],
        options: [Common.database])

    let source: StorageLocation
    let url: String

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        source = Common.location(arguments)
        url = arguments.argument(0)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        guard case .sqlite(let path) = source else { throw CLIError.failure("--database must be the SQLite file to copy, not \(source)") }
        guard PostgresDatabase.isURL(url) else { throw CLIError.failure("url: must be postgresql://… or postgres://…, got \(url.prefix(64))") }
        try Common.requireFile(path)
        do {
            // No server may write to the file meanwhile: the copy would miss what it accepts.
            let lock = try SQLiteServerLock(databasePath: path)
            defer { lock.release() }
            let from = try Storage(.sqlite(path: path), for: .command).database
            let destination = try Storage(.postgresql(url: url), for: .command)
            let to = destination.database
            let terminal = isatty(STDERR_FILENO) == 1
            let counts = try DatabaseCopy.copy(from: from, to: to) { table, copied, total in
                guard terminal else { return }
                let width = 30, done = total == 0 ? width : width * copied / total
                context.standardError("\r\(table.padding(toLength: 22, withPad: " ", startingAt: 0)) [\(String(repeating: "#", count: done))\(String(repeating: ".", count: width - done))] \(copied)/\(total)")
            }
            if terminal { context.standardError("\r" + String(repeating: " ", count: 80) + "\r") }
            var mismatched: [String] = []
            for count in counts {
                context.print("\(count.table.padding(toLength: 22, withPad: " ", startingAt: 0)) \(count.source) → \(count.destination)")
                if count.source != count.destination { mismatched.append(count.table) }
            }
            guard mismatched.isEmpty else { throw CLIError.failure("row counts differ for \(mismatched.joined(separator: ", "))") }
            context.print("Copied \(path) into \(destination.location): every table's rows are there. Start islet serve with --database set to that URL.")
        } catch let error as StoreError {
            throw CLIError.failure(error.message)
        }
        return 0
    }
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
        try Common.requireFile(database)
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
