import Foundation
import IsletConsole
import IsletCore
import IsletStore

/// `islet console`: the web console's own credential (issue 17).
struct ConsoleCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "console", abstract: "Manage the web console (served at /console by islet serve).",
        subcommands: [ConsoleSetPasswordCommand.self])
}

struct ConsoleSetPasswordCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set-password", abstract: "Set the console password, which signs in to every application.",
        discussion: """
            The console signs in with an application's server API token (that application only) or with this
            password (every application: an operator's credential). The password is read from the first line of
            standard input, or from --password-file (readable by its owner only), never from the command line;
            at least 12 characters. Only a PBKDF2-SHA256 hash of it is stored. Setting it again signs out every
            console session opened with the old one.
            """,
        options: [
            OptionSpec(name: "--password-file", valueName: "path", help: "Read the password from this file (its first line) instead of standard input."),
            Common.database,
        ])

    let arguments: ParsedArguments

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let password: String
        if let path = arguments.value("--password-file") {
            let text = try Common.readSecretFile(path, name: "--password-file")
            password = String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        } else {
            guard let line = context.standardInput() else {
                throw CLIError.usage("no password: give it on the first line of standard input, or with --password-file")
            }
            password = line
        }
        if let problem = ConsoleCredentials.passwordProblem(password) { throw CLIError.usage("the console password \(problem)") }
        if case .sqlite(let path) = Common.location(arguments) { try Common.requireFile(path, " (start islet serve once to create it)") }
        do {
            try Common.openStorage(arguments).console.setConsolePassword(ConsoleCredentials.passwordRecord(password), at: Date())
        } catch let error as StoreError {
            throw CLIError.failure(error.message)
        }
        context.print("console password set; console sessions opened with the previous one are signed out")
        return 0
    }
}
