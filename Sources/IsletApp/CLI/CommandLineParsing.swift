/// A usage or runtime failure of the CLI: one line on stderr and a non-zero exit, never a trap.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    public let message: String
    /// 64 (EX_USAGE) for bad arguments, 1 for failures while running.
    public let exitCode: Int32

    public static func usage(_ message: String) -> CLIError { CLIError(message: message, exitCode: 64) }
    public static func failure(_ message: String) -> CLIError { CLIError(message: message, exitCode: 1) }

    public var description: String { message }
}

/// An option (`--name VALUE`) or flag (`--json`) of a command.
struct OptionSpec: Sendable {
    let name: String
    /// nil for a flag.
    let valueName: String?
    let help: String
    var required = false
    /// Environment variable that gives the value when the option is absent (the option wins).
    var environment: String? = nil
    /// Shown in the help; applied by the command, not the parser.
    var defaultValue: String? = nil

    static func flag(_ name: String, _ help: String) -> OptionSpec { OptionSpec(name: name, valueName: nil, help: help) }
}

/// A positional argument.
struct ArgumentSpec: Sendable {
    let name: String
    let help: String
}

/// Everything the parser and the help text know of one command.
struct CommandSpec: Sendable {
    let name: String
    let abstract: String
    var discussion: String? = nil
    var arguments: [ArgumentSpec] = []
    var options: [OptionSpec] = []
    var subcommands: [any CLICommand.Type] = []
}

/// The words of one invocation, checked against a `CommandSpec`.
struct ParsedArguments: Sendable {
    private(set) var values: [String: String] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []
    let commandPath: String
    /// The process environment, for settings that are not options (the master key).
    let environment: [String: String]

    /// Parses `words`; options may be written `--name VALUE` or `--name=VALUE`.
    init(_ words: [String], spec: CommandSpec, commandPath: String, environment: [String: String]) throws(CLIError) {
        self.commandPath = commandPath
        self.environment = environment
        var index = 0
        var onlyPositionals = false
        while index < words.count {
            let word = words[index]
            index += 1
            if onlyPositionals || !word.hasPrefix("-") || word == "-" {
                positionals.append(word)
                continue
            }
            if word == "--" { onlyPositionals = true; continue }
            let parts = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard let option = spec.options.first(where: { $0.name == name }) else {
                throw .usage("\(commandPath): unknown option '\(name)'; see '\(commandPath) --help'")
            }
            guard option.valueName != nil else {
                guard parts.count == 1 else { throw .usage("\(commandPath): \(name) takes no value") }
                flags.insert(name)
                continue
            }
            guard values[name] == nil else { throw .usage("\(commandPath): \(name) is given more than once") }
            if parts.count == 2 {
                values[name] = String(parts[1])
            } else {
                let next = index < words.count ? words[index] : nil
                if next == nil || spec.options.contains(where: { next == $0.name || next!.hasPrefix($0.name + "=") }) {
                    throw .usage("\(commandPath): \(name) needs a value <\(option.valueName!)>")
                }
                values[name] = words[index]
                index += 1
            }
        }
        guard positionals.count <= spec.arguments.count else {
            throw .usage("\(commandPath): unexpected argument '\(positionals[spec.arguments.count])'; see '\(commandPath) --help'")
        }
        guard positionals.count == spec.arguments.count else {
            throw .usage("\(commandPath): missing argument <\(spec.arguments[positionals.count].name)>; see '\(commandPath) --help'")
        }
        for option in spec.options where option.valueName != nil && values[option.name] == nil {
            if let variable = option.environment, let value = environment[variable], !value.isEmpty {
                values[option.name] = value
            }
        }
        for option in spec.options where option.required && values[option.name] == nil {
            throw .usage("\(commandPath): missing \(option.name) <\(option.valueName ?? "")>")
        }
    }

    func value(_ name: String) -> String? { values[name] }
    func flag(_ name: String) -> Bool { flags.contains(name) }
    func argument(_ index: Int) -> String { positionals[index] }
}
