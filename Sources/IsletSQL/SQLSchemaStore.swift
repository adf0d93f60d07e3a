import Foundation
import IsletCore
import IsletStore

/// Live Activity schemas, every version kept, in either engine.
public struct SQLSchemaStore: SchemaStore {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    public func saveSchema(_ contentState: JSONValue, attributes: JSONValue, description: String?, attributesType: String,
                           in application: ApplicationCode, at date: Date) throws(StoreError) -> Int {
        try database.write { (c) throws(StoreError) -> Int in
            // Saves of one type's schema on two nodes take turns for the next version number.
            try database.dialect.takeTurn(on: "schema/\(application.rawValue)/\(attributesType)", c)
            let next = Int(try c.query("SELECT COALESCE(MAX(version), 0) + 1 AS next FROM live_activity_schemas WHERE application = ? AND attributes_type = ?",
                                       [.text(application.rawValue), .text(attributesType)])[0]["next"].int ?? 1)
            try c.run("""
                INSERT INTO live_activity_schemas (application, attributes_type, version, content_state, attributes, description, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """, [.text(application.rawValue), .text(attributesType), .int(Int64(next)), .text(contentState.jsonText),
                      .text(attributes.jsonText), description.map { .text($0) } ?? .null, .int(Int64(date.timeIntervalSince1970))])
            return next
        }
    }

    public func currentSchema(_ attributesType: String, in application: ApplicationCode) throws(StoreError) -> StoredSchema? {
        try query(" WHERE application = ? AND attributes_type = ? ORDER BY version DESC LIMIT 1",
                  [.text(application.rawValue), .text(attributesType)]).first.flatMap { $0.deleted ? nil : $0.schema }
    }

    public func schema(_ attributesType: String, version: Int, in application: ApplicationCode) throws(StoreError) -> StoredSchema? {
        try query(" WHERE application = ? AND attributes_type = ? AND version = ?",
                  [.text(application.rawValue), .text(attributesType), .int(Int64(version))]).first?.schema
    }

    public func schemas(_ attributesType: String?, in application: ApplicationCode, after: String?, limit: Int?) throws(StoreError) -> [StoredSchema] {
        let page = limit == nil ? "" : " LIMIT ?", limitParameter = limit.map { [SQLValue.int(Int64($0))] } ?? []
        if let attributesType {
            return try query(" WHERE application = ? AND attributes_type = ? AND version > ? ORDER BY version" + page,
                             [.text(application.rawValue), .text(attributesType), .int(after.flatMap { Int64($0) } ?? 0)] + limitParameter)
                .map(\.schema)
        }
        return try query("""
             s WHERE application = ? AND deleted_at IS NULL \(after == nil ? "" : "AND attributes_type > ?")
               AND version = (SELECT MAX(version) FROM live_activity_schemas m WHERE m.application = s.application AND m.attributes_type = s.attributes_type)
             ORDER BY attributes_type
            """ + page, [.text(application.rawValue)] + (after.map { [SQLValue.text($0)] } ?? []) + limitParameter).map(\.schema)
    }

    public func deleteSchema(_ attributesType: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) in
            try c.run("UPDATE live_activity_schemas SET deleted_at = ? WHERE application = ? AND attributes_type = ? AND deleted_at IS NULL",
                      [.int(Int64(date.timeIntervalSince1970)), .text(application.rawValue), .text(attributesType)]) > 0
        }
    }

    public func activitySchemaVersion(_ activityID: String, in application: ApplicationCode) throws(StoreError) -> ActivitySchema? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT attributes_type, schema_version FROM activities WHERE application = ? AND activity_id = ?",
                        [.text(application.rawValue), .text(activityID)]).first.flatMap(ActivitySchema.init)
        }
    }

    public func hasSchemas(in application: ApplicationCode) throws(StoreError) -> Bool {
        try database.withConnection { (c) throws(StoreError) in
            !(try c.query("SELECT 1 FROM live_activity_schemas WHERE application = ? LIMIT 1", [.text(application.rawValue)]).isEmpty)
        }
    }

    private func query(_ clause: String, _ parameters: [SQLValue]) throws(StoreError) -> [(schema: StoredSchema, deleted: Bool)] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT attributes_type, version, content_state, attributes, description, created_at, deleted_at FROM live_activity_schemas"
                        + clause, parameters).map { row in
                (StoredSchema(attributesType: row["attributes_type"].text ?? "", version: Int(row["version"].int ?? 0),
                              contentState: (try? JSONParser.parse(row["content_state"].text ?? "")) ?? [:],
                              attributes: (try? JSONParser.parse(row["attributes"].text ?? "")) ?? [:],
                              description: row["description"].text, createdAt: row["created_at"].date ?? Date(timeIntervalSince1970: 0)),
                 !row["deleted_at"].isNull)
            }
        }
    }
}

extension ActivitySchema {
    /// The schema of a row of `activities` (its `attributes_type` and `schema_version`); nil when it started with none.
    init?(_ row: SQLRow) {
        guard let type = row["attributes_type"].text, let version = row["schema_version"].int else { return nil }
        self.init(attributesType: type, version: Int(version))
    }
}
