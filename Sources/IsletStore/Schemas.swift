import Foundation
import IsletCore

/// A published Live Activity schema version (X2), as written by its author.
public struct StoredSchema: Sendable, Equatable {
    public let attributesType: String
    public let version: Int
    public let contentState: JSONValue
    public let attributes: JSONValue
    public let description: String?
    public let createdAt: Date

    public init(attributesType: String, version: Int, contentState: JSONValue, attributes: JSONValue, description: String?, createdAt: Date) {
        self.attributesType = attributesType
        self.version = version
        self.contentState = contentState
        self.attributes = attributes
        self.description = description
        self.createdAt = createdAt
    }

    /// The parsed schema; stored schemas were validated when set.
    public var schema: LiveActivitySchema? {
        guard let state = try? LiveActivitySchema.parseFields(contentState, path: "content_state"),
              let attributes = try? LiveActivitySchema.parseFields(attributes, path: "attributes") else { return nil }
        return LiveActivitySchema(contentState: state, attributes: attributes)
    }
}

/// Versioned schemas per (application, attributes type): each set makes a new version.
public protocol SchemaStore: Sendable {
    func saveSchema(_ contentState: JSONValue, attributes: JSONValue, description: String?, attributesType: String,
                    in application: ApplicationCode, at date: Date) throws(StoreError) -> Int
    /// The newest version, unless the schema was deleted since.
    func currentSchema(_ attributesType: String, in application: ApplicationCode) throws(StoreError) -> StoredSchema?
    func schema(_ attributesType: String, version: Int, in application: ApplicationCode) throws(StoreError) -> StoredSchema?
    /// Every version of one type (in version order, after the version `after`), or the current version of
    /// every type when `attributesType` is nil (in type order, after the type `after`); at most `limit` (nil: all).
    func schemas(_ attributesType: String?, in application: ApplicationCode, after: String?, limit: Int?) throws(StoreError) -> [StoredSchema]
    func deleteSchema(_ attributesType: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> Bool
    /// The schema version an activity started with.
    func activitySchemaVersion(_ activityID: String, in application: ApplicationCode) throws(StoreError) -> (attributesType: String, version: Int)?
}

extension SchemaStore {
    /// Every version of one type, or the current version of every type when `attributesType` is nil.
    public func schemas(_ attributesType: String?, in application: ApplicationCode) throws(StoreError) -> [StoredSchema] {
        try schemas(attributesType, in: application, after: nil, limit: nil)
    }
}
