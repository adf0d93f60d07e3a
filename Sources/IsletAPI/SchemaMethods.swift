import Foundation
import IsletCore
import IsletStore

/// Live Activity schemas (X2): `setLiveActivitySchema`, `getLiveActivitySchemas`, `deleteLiveActivitySchema`.
public struct SchemaMethods: Sendable {
    let store: any SchemaStore
    let audit: AuditLog

    public init(store: any SchemaStore, audit: AuditLog = .disabled) {
        self.store = store
        self.audit = audit
    }

    public var all: [APIMethod] { [setSchema, getSchemas, deleteSchema] }

    var setSchema: APIMethod {
        APIMethod(name: "setLiveActivitySchema", access: .server) { [store, audit] call in
            let body = call.request
            let type = try body.requiredString("attributes_type")
            let description = try body.string("description")
            try LiveActivitySchema.checkNaming(attributesType: type, description: description)
            guard let contentState = body.value("content_state") else { throw APIError.invalid("content_state", "is required: an object of field: type") }
            _ = try LiveActivitySchema.parseFields(contentState, path: "content_state")
            let attributes = body.value("attributes") ?? [:]
            _ = try LiveActivitySchema.parseFields(attributes, path: "attributes")
            let version = try store.saveSchema(contentState, attributes: attributes, description: description,
                                               attributesType: type, in: call.application.code, at: call.receivedAt)
            audit.record(.schemaSet, application: call.application.code, actor: call.actor,
                         details: ["attributes_type": .string(type), "version": .int(Int64(version))])
            return ["attributes_type": .string(type), "version": .int(Int64(version))]
        }
    }

    var getSchemas: APIMethod {
        APIMethod(name: "getLiveActivitySchemas", access: .server, effect: .reads) { [store] call in
            // One type's versions are paged by version; the current schema of every type, by type.
            let type = try call.request.string("attributes_type")
            let paging = try ListPaging(call.request, method: "getLiveActivitySchemas", numeric: type != nil)
            let (schemas, nextCursor) = paging.page(try store.schemas(type, in: call.application.code, after: paging.cursor, limit: paging.fetch)) {
                type == nil ? $0.attributesType : String($0.version)
            }
            return ["schemas": .array(schemas.map(Self.describe)), "next_cursor": nextCursor]
        }
    }

    var deleteSchema: APIMethod {
        APIMethod(name: "deleteLiveActivitySchema", access: .server) { [store, audit] call in
            let type = try call.request.requiredString("attributes_type")
            guard try store.deleteSchema(type, in: call.application.code, at: call.receivedAt) else {
                throw APIError.invalid("attributes_type", "no schema for '\(type)' in this application")
            }
            audit.record(.schemaDeleted, application: call.application.code, actor: call.actor, details: ["attributes_type": .string(type)])
            return [:]
        }
    }

    public static func describe(_ schema: StoredSchema) -> JSONValue {
        [
            "attributes_type": .string(schema.attributesType), "version": .int(Int64(schema.version)),
            "content_state": schema.contentState, "attributes": schema.attributes,
            "description": schema.description.map { .string($0) } ?? .null, "created_at": .string(schema.createdAt.formatted(.iso8601)),
        ]
    }
}

/// Checks a content-state (and, for starts, attributes) against a schema, as the device would decode them.
enum SchemaValidation {
    /// Throws the first decoding error (with how many more); returns warnings for unknown fields.
    static func validate(_ value: JSONObject, _ fields: [String: SchemaField], path: String, ignoring: Set<String> = []) throws -> [String] {
        let check = LiveActivitySchema.check(value, against: fields, path: path)
        if let first = check.errors.first {
            let more = check.errors.count > 1 ? " (and \(check.errors.count - 1) more)" : ""
            throw APIError(.badRequest, first + more)
        }
        return check.unknownFields.filter { !ignoring.contains($0) }.map { "\($0): unknown field; the app's Codable type ignores it" }
    }
}
