import Foundation
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
            """,
        arguments: [ArgumentSpec(name: "file", help: "The new file; it must not exist, or be empty.")],
        options: [Common.database])

    let database: String
    let destination: String

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        database = arguments.value("--database") ?? ServerConfiguration.defaultDatabase
        destination = arguments.argument(0)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        guard FileManager.default.fileExists(atPath: database) else {
            throw CLIError.failure("no database at \(database); set --database or ISLET_DATABASE")
        }
        do {
            let opened = try SQLiteDatabase(path: database)
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
        discussion: "Opening a database applies the migrations it lacks; a database from a newer Islet is refused.",
        options: [Common.database])

    let database: String

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        database = arguments.value("--database") ?? ServerConfiguration.defaultDatabase
    }

    func run(_ context: CLIContext) throws -> Int32 {
        do {
            let version = try SQLiteDatabase(path: database).schemaVersion()
            context.print("schema version \(version) (this Islet: \(SQLiteDatabase.latestSchemaVersion))")
        } catch {
            throw CLIError.failure(error.message)
        }
        return 0
    }
}
