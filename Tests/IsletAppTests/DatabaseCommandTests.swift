import Foundation
import Testing
import IsletCore
import IsletSQL
import IsletSQLite
@testable import IsletApp

@Suite("islet db …, islet manual")
struct DatabaseCommandTests {
    let workspace = Workspace()

    @Test func backupCopiesEveryApplicationIntoAnOwnerOnlyFileWhileTheSourceIsOpen() throws {
        let created = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        #expect(created.status == 0)
        // A connection held open (as a running server holds one) does not stop the backup.
        let open = try SQLiteDatabase(path: workspace.database)
        let copy = workspace.directory.appendingPathComponent("copy.sqlite").path
        let run = islet(["db", "backup", copy, "--database", workspace.database])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output.contains("schema version \(try open.schemaVersion())"))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: copy)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o077 == 0)
        #expect(islet(["app", "list", "--database", copy]).output == islet(["app", "list", "--database", workspace.database]).output)
        #expect(islet(["app", "list", "--database", copy]).output.contains("com.example.shop"))
    }

    @Test func backupRefusesToOverwriteAndNamesAMissingDatabase() throws {
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        let existing = workspace.file("existing.sqlite", "keep me")
        let refused = islet(["db", "backup", existing, "--database", workspace.database])
        #expect(refused.status == 1)
        #expect(refused.errors.contains("exists and is not empty"))
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
        let missing = islet(["db", "backup", workspace.directory.appendingPathComponent("b.sqlite").path,
                             "--database", workspace.directory.appendingPathComponent("none.sqlite").path])
        #expect(missing.status == 1)
        #expect(missing.errors.contains("no database at"))
    }

    /// `db version` and `db backup` look at the file as it is: they never migrate it (an older server may use it).
    @Test func versionAndBackupLeaveAnOlderSchemaAsItIs() throws {
        _ = try SQLiteDatabase(path: workspace.database, migrateUpTo: 3)
        let run = islet(["db", "version", "--database", workspace.database])
        #expect(run.output == "schema version 3 (this Islet: \(SQLMigrations.latestVersion))\n")
        let copy = workspace.directory.appendingPathComponent("old.sqlite").path
        #expect(islet(["db", "backup", copy, "--database", workspace.database]).status == 0)
        #expect(try SQLiteDatabase(existingAt: workspace.database).schemaVersion() == 3)
        #expect(try SQLiteDatabase(existingAt: copy).schemaVersion() == 3)
        let missing = islet(["db", "version", "--database", workspace.directory.appendingPathComponent("typo.sqlite").path])
        #expect(missing.status == 1 && missing.errors.contains("no database at"))
        #expect(!FileManager.default.fileExists(atPath: workspace.directory.appendingPathComponent("typo.sqlite").path), "nothing created")
    }

    @Test func theManualPageListsEveryLeafCommandAndOption() {
        let page = islet(["manual"]).output
        #expect(page.hasPrefix(".TH ISLET 1"))
        func leaves(_ command: any CLICommand.Type, _ path: String) -> [(String, CommandSpec)] {
            command.spec.subcommands.isEmpty ? [(path, command.spec)]
                : command.spec.subcommands.flatMap { leaves($0, path + " " + $0.spec.name) }
        }
        for (path, spec) in leaves(IsletCommand.self, "islet") {
            #expect(page.contains(".SS " + ManualPage.escape(path)), "\(path)")
            for option in spec.options { #expect(page.contains(ManualPage.escape(option.name)), "\(path) \(option.name)") }
        }
        // No line may start a roff request by accident.
        for line in page.split(separator: "\n") where line.hasPrefix(".") {
            #expect(["TH", "SH", "SS", "TP", "PP", "B ", "I ", "RI"].contains { line.dropFirst().hasPrefix($0) }, "\(line)")
        }
    }
}
