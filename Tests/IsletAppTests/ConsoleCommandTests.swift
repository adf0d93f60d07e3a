import Foundation
import Testing
import IsletConsole
import IsletSQL
import IsletSQLite
@testable import IsletApp

/// `islet console set-password` (issue 17): from standard input or a private file, never the command line.
@Suite("islet console set-password")
struct ConsoleCommandTests {
    let workspace = Workspace()

    func storedRecord() throws -> String? { try SQLConsoleStore(database: try SQLiteDatabase(path: workspace.database)).consolePassword() }

    @Test func thePasswordIsReadFromStandardInputAndOnlyItsHashIsStored() throws {
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        let run = islet(["console", "set-password", "--database", workspace.database], input: ["correct horse battery"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output.hasPrefix("console password set"))
        let record = try #require(try storedRecord())
        #expect(record.hasPrefix("pbkdf2-sha256$600000$") && !record.contains("correct"))
        #expect(ConsoleCredentials.passwordMatches("correct horse battery", record: record))
    }

    @Test func aShortOrMissingPasswordIsRefused() throws {
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        let short = islet(["console", "set-password", "--database", workspace.database], input: ["short"])
        #expect(short.status != 0 && short.errors.contains("the console password must be at least 12 characters"))
        let none = islet(["console", "set-password", "--database", workspace.database])
        #expect(none.status != 0 && none.errors.contains("no password"))
        #expect(try storedRecord() == nil)
    }

    @Test func aPasswordFileMustBeTheOwnersAlone() throws {
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        let open = workspace.file("open.txt", "correct horse battery\n", mode: 0o644)
        let refused = islet(["console", "set-password", "--password-file", open, "--database", workspace.database])
        #expect(refused.status != 0 && refused.errors.contains("is readable by other users"))
        let closed = workspace.file("closed.txt", "correct horse battery\n")
        #expect(islet(["console", "set-password", "--password-file", closed, "--database", workspace.database]).status == 0)
        #expect(ConsoleCredentials.passwordMatches("correct horse battery", record: try #require(try storedRecord())), "the first line, without its newline")
    }
}
