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
    /// The schema an activity started with.
    func activitySchemaVersion(_ activityID: String, in application: ApplicationCode) throws(StoreError) -> ActivitySchema?
    /// Whether the application ever saved a schema (deleted ones count: an activity may have started with one).
    func hasSchemas(in application: ApplicationCode) throws(StoreError) -> Bool
}

/// The schema an activity's session started with (X2): its attributes type and version.
public struct ActivitySchema: Sendable, Hashable {
    public let attributesType: String
    public let version: Int

    public init(attributesType: String, version: Int) {
        self.attributesType = attributesType
        self.version = version
    }
}

/// What an update's content-state was checked against (X2) before it was offered to the store, which refuses the
/// update (`SchemaCheckOutdated`) when its activity started with another schema, or with one where none was assumed.
public enum CheckedSchema: Sendable, Equatable {
    /// Not checked here: the store takes it as it is (starts, and callers that check nothing).
    case unchecked
    /// Checked against this schema, or, nil, against none.
    case against(ActivitySchema?)

    /// Whether a check made so still holds for an activity that started with `schema`.
    public func holds(for schema: ActivitySchema?) -> Bool {
        switch self {
        case .unchecked: true
        case .against(let checked): checked == schema
        }
    }
}

/// An update whose schema check (`CheckedSchema`) does not hold for its activity: nothing of its request was written;
/// the caller checks it against the activity's schema and offers it again.
public struct SchemaCheckOutdated: Error, Sendable {
    /// The update's place in its request.
    public let index: Int

    public init(index: Int) { self.index = index }
}

extension SchemaStore {
    /// Every version of one type, or the current version of every type when `attributesType` is nil.
    public func schemas(_ attributesType: String?, in application: ApplicationCode) throws(StoreError) -> [StoredSchema] {
        try schemas(attributesType, in: application, after: nil, limit: nil)
    }
}
