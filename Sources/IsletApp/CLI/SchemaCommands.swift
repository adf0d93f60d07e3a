import Foundation
import IsletAPI
import IsletCore
import IsletSQL
import IsletSQLite
import IsletStore

/// `islet schema`: Live Activity schemas (X2).
struct SchemaCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "schema", abstract: "Publish Live Activity schemas so starts and updates the app could not decode are refused.",
        subcommands: [SchemaSetCommand.self, SchemaGetCommand.self, SchemaListCommand.self, SchemaDeleteCommand.self, SchemaInferCommand.self])
}

private func schemaStore(_ arguments: ParsedArguments) throws -> SQLSchemaStore {
    try Common.openStorage(arguments).schemas
}

private let codeArgument = ArgumentSpec(name: "code", help: "The application code.")
private let typeArgument = ArgumentSpec(name: "attributes-type", help: "The ActivityAttributes type name, e.g. FoodDeliveryAttributes.")

struct SchemaSetCommand: ApplicationCodeCommand {
    static let spec = CommandSpec(
        name: "set", abstract: "Publish a new version of a schema from a JSON file.",
        discussion: """
            The file holds {"content_state": {field: type}, "attributes": {field: type}}. Types: string number integer boolean
            date object array, with ? when optional; {…} for a nested struct; [type] for an array. A date is seconds since
            1970: decode it with .secondsSince1970 (Swift's default Date coding counts from 2001).
            """,
        arguments: [codeArgument, typeArgument],
        options: [
            OptionSpec(name: "--file", valueName: "path", help: "The schema file.", required: true),
            OptionSpec(name: "--description", valueName: "text", help: "What the activity is for."),
            Common.database,
        ])

    let arguments: ParsedArguments
    let code: ApplicationCode

    func run(_ context: CLIContext) throws -> Int32 {
        let path = arguments.value("--file")!
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError.failure("cannot read \(path)") }
        do {
            let document = try FieldReader(try JSONParser.parse(Array(data)), path: path)
            guard let state = document.value("content_state") else { throw APIError.invalid("\(path).content_state", "is required") }
            _ = try LiveActivitySchema.parseFields(state, path: "content_state")
            let attributes = document.value("attributes") ?? [:]
            _ = try LiveActivitySchema.parseFields(attributes, path: "attributes")
            guard try Common.openStorage(arguments).applications(masterKey: nil).application(code) != nil else { throw CLIError.failure("application \(code) does not exist") }
            let type = arguments.argument(1)
            let version = try schemaStore(arguments).saveSchema(state, attributes: attributes, description: arguments.value("--description"),
                                                                attributesType: type, in: code, at: Date())
            Common.audit(arguments).record(.schemaSet, application: code, actor: "cli",
                                           details: ["attributes_type": .string(type), "version": .int(Int64(version))])
            context.print("Published \(type) schema version \(version) for \(code).")
            return 0
        } catch let error as APIError {
            throw CLIError.failure(error.message)
        } catch let error as JSONSyntaxError {
            throw CLIError.failure("\(path): malformed JSON: \(error)")
        } catch let error as StoreError {
            throw CLIError.failure(error.message)
        }
    }
}

struct SchemaGetCommand: ApplicationCodeCommand {
    static let spec = CommandSpec(
        name: "get", abstract: "Print a schema (the current version, or every version with --all).",
        arguments: [codeArgument, typeArgument], options: [OptionSpec.flag("--all", "Every version."), Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode

    func run(_ context: CLIContext) throws -> Int32 {
        let store = try schemaStore(arguments), type = arguments.argument(1)
        let found = arguments.flag("--all") ? try store.schemas(type, in: code) : [try store.currentSchema(type, in: code)].compactMap { $0 }
        guard !found.isEmpty else { throw CLIError.failure("no schema for '\(type)' in \(code)") }
        for schema in found { Common.printJSON(SchemaMethods.describe(schema), context) }
        return 0
    }
}

struct SchemaListCommand: ApplicationCodeCommand {
    static let spec = CommandSpec(name: "list", abstract: "List the current schemas of an application.",
                                  arguments: [codeArgument], options: [Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode

    func run(_ context: CLIContext) throws -> Int32 {
        let schemas = try schemaStore(arguments).schemas(nil, in: code)
        if schemas.isEmpty { context.print("No schemas. Publish one with: islet schema set \(code) TYPE --file schema.json") }
        for schema in schemas {
            context.print("\(schema.attributesType)  version \(schema.version)  \(schema.description ?? "")".trimmingCharacters(in: .whitespaces))
        }
        return 0
    }
}

struct SchemaDeleteCommand: ApplicationCodeCommand {
    static let spec = CommandSpec(name: "delete", abstract: "Stop checking an attributes type (its versions stay for running activities).",
                                  arguments: [codeArgument, typeArgument], options: [Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode

    func run(_ context: CLIContext) throws -> Int32 {
        let type = arguments.argument(1)
        guard try schemaStore(arguments).deleteSchema(type, in: code, at: Date()) else { throw CLIError.failure("no schema for '\(type)' in \(code)") }
        Common.audit(arguments).record(.schemaDeleted, application: code, actor: "cli", details: ["attributes_type": .string(type)])
        context.print("Deleted the \(type) schema of \(code).")
        return 0
    }
}

struct SchemaInferCommand: CLICommand {
    static let spec = CommandSpec(
        name: "infer", abstract: "Suggest a schema from an example content-state (a JSON object in a file).",
        discussion: "Every field comes out required; mark optional ones with ? and dates as date before publishing.",
        arguments: [ArgumentSpec(name: "file", help: "A JSON file with an example content-state.")])

    let arguments: ParsedArguments
    init(_ arguments: ParsedArguments, context: CLIContext) throws { self.arguments = arguments }

    func run(_ context: CLIContext) throws -> Int32 {
        let path = arguments.argument(0)
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError.failure("cannot read \(path)") }
        guard let example = (try? JSONParser.parse(Array(data)))?.objectValue else { throw CLIError.failure("\(path) must hold a JSON object") }
        Common.printJSON(["content_state": LiveActivitySchema.json(LiveActivitySchema.infer(example)), "attributes": [:]], context)
        return 0
    }
}
