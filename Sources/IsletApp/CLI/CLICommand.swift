import Foundation
import IsletCore

/// Where a command writes and what it may read: the process's streams and environment, or a test's.
public struct CLIContext: Sendable {
    public let environment: [String: String]
    public let standardOutput: @Sendable (String) -> Void
    public let standardError: @Sendable (String) -> Void
    /// One line of standard input (nil at its end), for secrets that must not be on the command line.
    public let standardInput: @Sendable () -> String?

    public init(environment: [String: String], standardOutput: @escaping @Sendable (String) -> Void,
                standardError: @escaping @Sendable (String) -> Void, standardInput: @escaping @Sendable () -> String? = { readLine() }) {
        self.environment = environment
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.standardInput = standardInput
    }

    /// The real process: stdout, stderr and the environment.
    public static var process: CLIContext {
        CLIContext(
            environment: ProcessInfo.processInfo.environment,
            standardOutput: { FileHandle.standardOutput.write(Data($0.utf8)) },
            standardError: { FileHandle.standardError.write(Data($0.utf8)) })
    }

    func print(_ line: String = "") { standardOutput(line + "\n") }
}

/// One node of the command tree: parsed and validated in `init`, then run.
protocol CLICommand: Sendable {
    static var spec: CommandSpec { get }
    init(_ arguments: ParsedArguments, context: CLIContext) throws
    func run(_ context: CLIContext) throws -> Int32
}

/// A command whose first argument is an application code; it gets `arguments` and the parsed `code`.
protocol ApplicationCodeCommand: CLICommand {
    init(arguments: ParsedArguments, code: ApplicationCode)
}

extension ApplicationCodeCommand {
    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.init(arguments: arguments, code: try Common.applicationCode(arguments.argument(0)))
    }
}

/// A node that only groups subcommands; the tool prints its help instead of running it.
protocol CLIGroup: CLICommand {}

extension CLIGroup {
    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        throw CLIError.usage("\(arguments.commandPath): choose a subcommand; see '\(arguments.commandPath) --help'")
    }
    func run(_ context: CLIContext) throws -> Int32 { 64 }
}

/// Walks the command tree, handles `--help`, and turns every failure into a message and an exit code.
public enum CommandLineTool {
    public static func main(_ words: [String], context: CLIContext) -> Int32 {
        var command: any CLICommand.Type = IsletCommand.self
        var path = "islet"
        // The root's `--version` is the `version` command by its other name, so both print the same line.
        var rest = words.first == "--version" ? ["version"] + words.dropFirst() : words
        while let next = rest.first, let sub = command.spec.subcommands.first(where: { $0.spec.name == next }) {
            command = sub
            path += " " + next
            rest.removeFirst()
        }
        if rest.contains("--help") || rest.contains("-h") {
            context.print(HelpFormatter.help(for: command.spec, path: path))
            return 0
        }
        if !command.spec.subcommands.isEmpty {
            if let word = rest.first {
                context.standardError("error: \(path): unknown command '\(word)'; see '\(path) --help'\n")
                return 64
            }
            context.print(HelpFormatter.help(for: command.spec, path: path))
            return 0
        }
        do {
            let parsed = try ParsedArguments(rest, spec: command.spec, commandPath: path, environment: context.environment)
            return try command.init(parsed, context: context).run(context)
        } catch let error as CLIError {
            context.standardError("error: \(error.message)\n")
            return error.exitCode
        } catch {
            context.standardError("error: \(error)\n")
            return 1
        }
    }
}

/// Renders `--help` from a `CommandSpec`, so help and parsing never disagree.
enum HelpFormatter {
    static func help(for spec: CommandSpec, path: String) -> String {
        var lines = ["OVERVIEW: \(spec.abstract)"]
        if let discussion = spec.discussion { lines += ["", discussion] }
        lines += ["", "USAGE: \(usage(for: spec, path: path))"]
        if !spec.arguments.isEmpty {
            lines += ["", "ARGUMENTS:"]
            lines += spec.arguments.map { row("<\($0.name)>", $0.help) }
        }
        lines += ["", "OPTIONS:"]
        for option in spec.options {
            var help = option.help
            if let value = option.defaultValue { help += " (default: \(value))" }
            if let variable = option.environment { help += " [env: \(variable)]" }
            lines.append(row(option.valueName.map { "\(option.name) <\($0)>" } ?? option.name, help))
        }
        lines.append(row("-h, --help", "Show help information."))
        if !spec.subcommands.isEmpty {
            lines += ["", "SUBCOMMANDS:"]
            lines += spec.subcommands.map { row($0.spec.name, $0.spec.abstract) }
            lines += ["", "  See '\(path) <subcommand> --help' for detailed help."]
        }
        return lines.joined(separator: "\n")
    }

    static func usage(for spec: CommandSpec, path: String) -> String {
        if !spec.subcommands.isEmpty { return "\(path) <subcommand>" }
        var words = [path]
        words += spec.arguments.map { "<\($0.name)>" }
        for option in spec.options {
            let text = option.valueName.map { "\(option.name) <\($0)>" } ?? option.name
            words.append(option.required ? text : "[\(text)]")
        }
        return words.joined(separator: " ")
    }

    private static func row(_ left: String, _ right: String) -> String {
        let padded = "  " + left
        guard padded.count < 30 else { return padded + "\n" + String(repeating: " ", count: 30) + right }
        return padded.padding(toLength: 30, withPad: " ", startingAt: 0) + right
    }
}
