import Foundation
import Testing
@testable import IsletApp

/// Golden `--help` output: a change to any command's help shows up as a diff of these files.
@Suite("CLI --help (golden)")
struct HelpGoldenTests {
    static let commands = ["", "serve", "app", "app create", "app list", "app show", "app token", "app token create",
                           "app token revoke", "app set-apns-key", "app set-fcm", "app set-update-budget", "app set-user-id-source", "app tag", "app tag list", "app tag set-type", "app tag delete", "app rotate-master-key", "simulator", "simulator run", "simulator device",
                           "simulator device add", "simulator device set", "simulator show", "schema", "schema set", "schema get",
                           "schema list", "schema delete", "schema infer", "db", "db backup", "db version", "db migrate-to", "cluster",
                           "cluster status", "console", "console set-password", "manual", "version"]

    static func golden(_ command: String) throws -> String {
        let name = (["islet"] + command.split(separator: " ").map(String.init)).joined(separator: "-")
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden/\(name).txt")
        return try String(contentsOf: url, encoding: .utf8)
    }

    @Test(arguments: commands)
    func helpMatchesTheGoldenFile(command: String) throws {
        let words = command.split(separator: " ").map(String.init)
        let run = islet(words + ["--help"])
        #expect(run.status == 0)
        #expect(run.errors.isEmpty)
        #expect(run.output == (try Self.golden(command)))
        #expect(islet(words + ["-h"]).output == run.output)
    }

    @Test func groupsWithoutASubcommandPrintTheirHelp() throws {
        #expect(islet([]).output == (try Self.golden("")))
        #expect(islet(["app", "token"]).output == (try Self.golden("app token")))
    }

    @Test func everyCommandInTheTreeHasAGoldenFile() {
        func walk(_ command: any CLICommand.Type, _ path: [String]) -> [String] {
            [path.joined(separator: " ")] + command.spec.subcommands.flatMap { walk($0, path + [$0.spec.name]) }
        }
        #expect(Set(walk(IsletCommand.self, [])) == Set(Self.commands))
    }
}
