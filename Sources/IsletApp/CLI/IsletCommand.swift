import Foundation
import IsletAPI
import IsletCore
import IsletCrypto
import IsletSQL
import IsletSQLite
import IsletStore

/// `islet`: the root of the command tree.
struct IsletCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "islet",
        abstract: "Islet: a self-hosted Live Activity push server.",
        options: [OptionSpec.flag("--version", "Print the version (as islet version does).")],
        subcommands: [ServeCommand.self, AppCommand.self, SimulatorCommand.self, SchemaCommand.self, DatabaseCommand.self,
                      ClusterCommand.self, ConsoleCommand.self, ManualCommand.self, VersionCommand.self])
}

/// Options and helpers several commands share.
enum Common {
    static let database = OptionSpec(
        name: "--database", valueName: "path|url", help: "SQLite database file, or postgresql://user:password@host:port/database.",
        environment: "ISLET_DATABASE", defaultValue: ServerConfiguration.defaultDatabase)
    static let json = OptionSpec.flag("--json", "Print JSON instead of text.")

    static func openStore(_ arguments: ParsedArguments) throws -> SQLApplicationStore {
        let masterKey = try masterKey(arguments.environment)
        return try openStorage(arguments).applications(masterKey: masterKey)
    }

    /// The database a command works on, opened and migrated.
    static func openStorage(_ arguments: ParsedArguments) throws -> Storage {
        do {
            return try Storage(location(arguments), for: .command)
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    /// The audit log the CLI appends to: the one `islet serve` writes, as `ISLET_AUDIT_LOG` names it.
    static func audit(_ arguments: ParsedArguments) -> AuditLog {
        AuditLog(setting: arguments.environment["ISLET_AUDIT_LOG"], directory: location(arguments).localDirectory)
    }

    /// The database a command works on, as given: `--database`, `ISLET_DATABASE`, or the default.
    static func databaseSetting(_ arguments: ParsedArguments) -> String {
        arguments.value("--database") ?? ServerConfiguration.defaultDatabase
    }

    static func location(_ arguments: ParsedArguments) -> StorageLocation { StorageLocation(databaseSetting(arguments)) }

    /// Refuses a command on an SQLite file that is not there (opening would create an empty one).
    static func requireFile(_ path: String, _ consequence: String = "") throws {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CLIError.failure("no database at \(path); set --database or ISLET_DATABASE\(consequence)")
        }
    }

    /// The master key APNs keys are sealed with: `ISLET_MASTER_KEY` (64 hex digits or base64 of 32 bytes),
    /// or the file `ISLET_MASTER_KEY_FILE` (or `file`) names, readable by its owner only. Nil when neither is set.
    static func masterKey(_ environment: [String: String], file: String? = nil) throws -> MasterKey? {
        let path = file ?? environment["ISLET_MASTER_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        if let text = environment["ISLET_MASTER_KEY"], !text.isEmpty {
            guard path == nil else { throw CLIError.usage("give the master key once: ISLET_MASTER_KEY or a key file, not both") }
            guard let key = MasterKey(text: text) else { throw CLIError.usage("ISLET_MASTER_KEY: not 32 bytes as 64 hex digits or base64 (openssl rand -hex 32)") }
            return key
        }
        guard let path else { return nil }
        return try readMasterKey(path, name: file == nil ? "ISLET_MASTER_KEY_FILE" : "--master-key-file")
    }

    static func readMasterKey(_ path: String, name: String) throws -> MasterKey {
        let text = try readSecretFile(path, name: name)
        guard let key = MasterKey(text: text) else {
            throw CLIError.usage("\(name): \(path) does not hold 32 bytes as 64 hex digits or base64 (openssl rand -hex 32)")
        }
        return key
    }

    /// A file holding a secret, refused unless only its owner can read it.
    static func readSecretFile(_ path: String, name: String) throws -> String {
        // The file itself, not a link to it (a mounted secret is often a link), decides the permissions.
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved),
              let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CLIError.usage("\(name): cannot read \(path)")
        }
        if let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            throw CLIError.usage("\(name): \(path) is readable by other users (mode \(String(mode, radix: 8))); chmod 600 it")
        }
        return text
    }

    static func applicationCode(_ text: String) throws -> ApplicationCode {
        guard let code = ApplicationCode(text) else {
            throw CLIError.usage("'\(text)' is not an application code; codes look like ABCDE-12345")
        }
        return code
    }

    /// A `JSONValue` pretty enough for a terminal: one line, as the API sends it.
    static func printJSON(_ value: JSONValue, _ context: CLIContext) { context.print(value.jsonText) }

    /// Runs `body`, a refusal of the API's rules or of the store as the command's failure (its message, exit status 1).
    static func failing<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as APIError {
            throw CLIError.failure(error.message)
        } catch let error as StoreError {
            throw CLIError.failure(error.message)
        }
    }
}
