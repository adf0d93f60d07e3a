import Foundation
import IsletCore
import IsletStore

/// The server side of an application's custom tags (issue 44), in either engine.
extension SQLDeviceStore: TagAdministrationStore {
    public func tagSummaries(in application: ApplicationCode) throws(StoreError) -> [TagSummary] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT y.name, y.type, (\(Self.holders("y.name", application: "y.application"))) AS devices
                FROM tag_types y WHERE y.application = ? ORDER BY y.name
                """, [.text(application.rawValue)]).compactMap { row in
                guard let name = row["name"].text, let type = TagType(rawValue: row["type"].text ?? "") else { return nil }
                return TagSummary(name: name, type: type, devices: Int(row["devices"].int ?? 0))
            }
        }
    }

    public func setTagType(_ type: TagType, of name: String, in application: ApplicationCode,
                           check: (TagFacts) throws -> Void) throws -> (before: TagFacts, valuesDeleted: Int) {
        try database.write(rethrowing: { c in
            let facts = try facts(name, application, c)
            try check(facts)
            var deleted = 0
            if let current = facts.type, current != type {
                deleted = facts.devices
                try Self.deleteValues(name, application, c)
            }
            try c.run("""
                INSERT INTO tag_types (application, name, type) VALUES (?, ?, ?) ON CONFLICT (application, name) DO UPDATE SET type = excluded.type
                """, [.text(application.rawValue), .text(name), .text(type.rawValue)])
            return (facts, deleted)
        })
    }

    public func deleteTag(_ name: String, in application: ApplicationCode, check: (TagFacts) throws -> Void) throws -> TagFacts? {
        try database.write(rethrowing: { c in
            let facts = try facts(name, application, c)
            guard facts.type != nil else { return nil }
            try check(facts)
            try Self.deleteValues(name, application, c)
            try c.run("DELETE FROM tag_types WHERE application = ? AND name = ?", [.text(application.rawValue), .text(name)])
            return facts
        })
    }

    /// The devices of the application `application` (a column or `?`) holding a value of the tag `name` (the same).
    static func holders(_ name: String, application: String) -> String {
        "SELECT COUNT(DISTINCT t.device) FROM device_tags t JOIN devices d ON d.id = t.device WHERE t.name = \(name) AND d.application = \(application)"
    }

    /// A tag's facts, its row locked (PostgreSQL) so two changes of one tag take turns.
    func facts(_ name: String, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> TagFacts {
        let key: [SQLValue] = [.text(application.rawValue), .text(name)]
        let type = try c.query("SELECT type FROM tag_types WHERE application = ? AND name = ? \(database.dialect.forUpdate)", key).first
            .flatMap { TagType(rawValue: $0["type"].text ?? "") }
        let devices = Int(try c.query("SELECT (\(Self.holders("?2", application: "?1"))) AS devices", key)[0]["devices"].int ?? 0)
        let filters = try c.query("SELECT name, conditions FROM filters WHERE application = ? ORDER BY name", [.text(application.rawValue)])
            .compactMap { row -> String? in
                let conditions = row["conditions"].text.flatMap { try? JSONParser.parse($0) }
                return FilterDefinition.tagNames(in: conditions).contains(name) ? row["name"].text : nil
            }
        return TagFacts(type: type, devices: devices, filters: filters)
    }

    static func deleteValues(_ name: String, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) {
        try c.run("DELETE FROM device_tags WHERE name = ? AND device IN (SELECT id FROM devices WHERE application = ?)",
                  [.text(name), .text(application.rawValue)])
    }
}
