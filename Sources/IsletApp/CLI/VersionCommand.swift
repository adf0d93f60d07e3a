import IsletCore

/// `islet version`, also spelled `islet --version` (the spelling most tools answer to).
struct VersionCommand: CLICommand {
    static let spec = CommandSpec(name: "version", abstract: "Print the version of this islet (also: islet --version).")

    init(_ arguments: ParsedArguments, context: CLIContext) throws {}

    func run(_ context: CLIContext) throws -> Int32 {
        context.print(IsletVersion.line)
        return 0
    }
}
