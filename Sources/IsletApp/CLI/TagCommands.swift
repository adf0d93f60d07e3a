import Foundation
import IsletAPI
import IsletCore
import IsletStore

/// `islet app tag`: an application's custom tags from the server side (issue 44).
struct TagCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "tag", abstract: "List an application's custom tags, set a tag's type, delete a tag.",
        subcommands: [TagListCommand.self, TagSetTypeCommand.self, TagDeleteCommand.self])
}

/// Runs `body` with the application's tag administration, its refusals as the command's failure.
private func tagAdmin<T>(_ arguments: ParsedArguments, _ body: (TagAdmin) throws -> T) throws -> T {
    let storage = try Common.openStorage(arguments)
    return try Common.failing { try body(TagAdmin(store: storage.devices, audit: Common.audit(arguments))) }
}

struct TagListCommand: ApplicationCodeCommand {
    static let spec = CommandSpec(
        name: "list", abstract: "List the application's custom tags: type, and how many devices hold a value.",
        arguments: [ArgumentSpec(name: "code", help: "The application code.")],
        options: [Common.database, Common.json])

    let arguments: ParsedArguments
    let code: ApplicationCode

    func run(_ context: CLIContext) throws -> Int32 {
        let tags = try tagAdmin(arguments) { try $0.tags(of: code) }
        if arguments.flag("--json") {
            Common.printJSON(["tags": .array(tags.map { tag in
                ["name": .string(tag.name), "type": .string(tag.type.rawValue), "devices": .int(Int64(tag.devices))]
            })], context)
            return 0
        }
        guard !tags.isEmpty else {
            context.print("\(code) has no custom tags yet.")
            return 0
        }
        let width = max(4, tags.map(\.name.count).max() ?? 0)
        context.print("NAME".padding(toLength: width, withPad: " ", startingAt: 0) + "  TYPE     DEVICES")
        for tag in tags {
            context.print(tag.name.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                          + tag.type.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0) + "  \(tag.devices)")
        }
        return 0
    }
}

struct TagSetTypeCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set-type", abstract: "Give a tag its type, before any device sets it or over the type its first value gave it.",
        arguments: [ArgumentSpec(name: "code", help: "The application code."), ArgumentSpec(name: "name", help: "The tag's name."),
                    ArgumentSpec(name: "type", help: "string, integer, list, boolean or date (yyyy-MM-dd HH:mm, UTC).")],
        options: [
            .flag("--drop-values", "Changing the type deletes the values devices hold of the tag: do so."),
            Common.database,
        ])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let name: String
    let type: TagType

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        self.name = arguments.argument(1)
        let text = arguments.argument(2)
        guard let type = TagType(rawValue: text), TagAdministration.customTypes.contains(type) else {
            throw CLIError.usage("type: '\(text)' must be one of \(TagAdministration.customTypes.map(\.rawValue).joined(separator: ", "))")
        }
        self.type = type
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let (before, deleted) = try tagAdmin(arguments) { try $0.setType(type, of: name, in: code, droppingValues: arguments.flag("--drop-values")) }
        switch before.type {
        case nil: context.print("Tag '\(name)' of \(code) is now of type \(type.rawValue); devices' values of another type will be skipped.")
        case type?: context.print("Tag '\(name)' of \(code) was already of type \(type.rawValue).")
        case let previous?: context.print("Tag '\(name)' of \(code) is now of type \(type.rawValue) (was \(previous.rawValue)); the values of \(deleted) device\(deleted == 1 ? "" : "s") were deleted.")
        }
        return 0
    }
}

struct TagDeleteCommand: CLICommand {
    static let spec = CommandSpec(
        name: "delete", abstract: "Delete a tag and every device's value of it; the next value a device sets defines it again.",
        arguments: [ArgumentSpec(name: "code", help: "The application code."), ArgumentSpec(name: "name", help: "The tag's name.")],
        options: [Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let name: String

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        self.name = arguments.argument(1)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let facts = try tagAdmin(arguments) { try $0.delete(name, in: code) }
        context.print("Deleted tag '\(name)' of \(code) and the values of \(facts.devices) device\(facts.devices == 1 ? "" : "s").")
        return 0
    }
}
