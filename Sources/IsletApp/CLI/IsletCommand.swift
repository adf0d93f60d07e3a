import Foundation
import IsletCore
import IsletSQLite
import IsletStore

/// `islet`: the root of the command tree.
struct IsletCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "islet",
        abstract: "Islet: a self-hosted Live Activity push server.",
        subcommands: [ServeCommand.self, AppCommand.self, SimulatorCommand.self, SchemaCommand.self, DatabaseCommand.self,
                      ManualCommand.self])
}

/// Options and helpers several commands share.
enum Common {
    static let database = OptionSpec(
        name: "--database", valueName: "path", help: "SQLite database file.",
        environment: "ISLET_DATABASE", defaultValue: ServerConfiguration.defaultDatabase)
    static let json = OptionSpec.flag("--json", "Print JSON instead of text.")

    static func openStore(_ arguments: ParsedArguments) throws -> SQLiteApplicationStore {
        let path = arguments.value("--database") ?? ServerConfiguration.defaultDatabase
        do {
            return SQLiteApplicationStore(database: try SQLiteDatabase(path: path))
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    static func applicationCode(_ text: String) throws -> ApplicationCode {
        guard let code = ApplicationCode(text) else {
            throw CLIError.usage("'\(text)' is not an application code; codes look like ABCDE-12345")
        }
        return code
    }

    /// A `JSONValue` pretty enough for a terminal: one line, as the API sends it.
    static func printJSON(_ value: JSONValue, _ context: CLIContext) { context.print(value.jsonText) }
}
