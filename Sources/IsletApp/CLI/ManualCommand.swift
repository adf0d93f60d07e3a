/// `islet manual`: the man page, made from the same command tree as `--help`, so the two cannot disagree.
struct ManualCommand: CLICommand {
    static let spec = CommandSpec(
        name: "manual", abstract: "Print the islet(1) manual page (roff), made from the --help of every command.",
        discussion: "The Debian package installs it; read it with: islet manual | man -l -")

    init(_ arguments: ParsedArguments, context: CLIContext) throws {}

    func run(_ context: CLIContext) throws -> Int32 {
        context.standardOutput(ManualPage.render(IsletCommand.self))
        return 0
    }
}

/// Renders the command tree as a roff man page, section 1.
enum ManualPage {
    static func render(_ root: any CLICommand.Type) -> String {
        var out = """
            .TH ISLET 1 "" "Islet" "User Commands"
            .SH NAME
            islet \\- \(escape(root.spec.abstract))
            .SH SYNOPSIS
            .B islet
            .I command
            .RI [ options ]
            .SH DESCRIPTION
            Every command prints its help with \\fB\\-\\-help\\fR. Errors are one line on standard error; the exit status
            is 64 for usage errors and 1 for failures.
            .SH COMMANDS\n
            """
        func walk(_ command: any CLICommand.Type, _ path: String) {
            let spec = command.spec
            if spec.subcommands.isEmpty {
                out += ".SS \(escape(HelpFormatter.usage(for: spec, path: path)))\n"
                out += escape(spec.abstract) + "\n"
                if let discussion = spec.discussion { out += ".PP\n" + escape(discussion) + "\n" }
                for argument in spec.arguments {
                    out += ".TP\n.I \(escape(argument.name))\n\(escape(argument.help))\n"
                }
                for option in spec.options {
                    var help = option.help
                    if let value = option.defaultValue { help += " (default: \(value))" }
                    if let variable = option.environment { help += " [env: \(variable)]" }
                    let name = option.valueName.map { "\\fB\(escape(option.name))\\fR \\fI\(escape($0))\\fR" } ?? "\\fB\(escape(option.name))\\fR"
                    out += ".TP\n\(name)\n\(escape(help))\n"
                }
            }
            for sub in spec.subcommands { walk(sub, path + " " + sub.spec.name) }
        }
        walk(root, "islet")
        out += """
            .SH FILES
            .TP
            .I /etc/islet/islet.env
            Settings of the packaged service (ISLET_LISTEN, ISLET_DATABASE, ISLET_APNS, ...).
            .TP
            .I /var/lib/islet/islet.sqlite
            The packaged service's database; it holds the APNs keys and is readable by the islet user only.
            .SH SEE ALSO
            The README, docs/API.md and docs/PRODUCTION.md of the Islet source tree.\n
            """
        return out
    }

    /// Escapes roff: backslashes, and a leading dot or quote that would read as a request.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : String(line) }
            .joined(separator: "\n")
    }
}
