import Foundation
import IsletCore
import IsletStore

/// Filters and the audiences they, or a start's named devices and users, select (X1, S4).
extension SQLDeviceStore {
    // MARK: - Filters

    public func createFilter(_ filter: FilterDefinition, in application: ApplicationCode, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            do throws(StoreError) {
                try c.run("INSERT INTO filters (application, name, operator, conditions, created_at) VALUES (?, ?, ?, ?, ?)", [
                    .text(application.rawValue), .text(filter.name), .text(filter.join.rawValue),
                    .text(JSONValue.array(filter.conditions.map(\.json)).jsonText), SQLValue.seconds(date),
                ])
            } catch where error.code == .conflict {
                throw StoreError(.conflict, "a filter named '\(filter.name)' already exists")
            }
        }
    }

    public func filters(in application: ApplicationCode, after: String?, limit: Int?) throws(StoreError) -> [FilterDefinition] {
        try loadFilters("SELECT name, operator, conditions FROM filters WHERE application = ?"
                        + (after == nil ? "" : " AND name > ?") + " ORDER BY name" + (limit == nil ? "" : " LIMIT ?"),
                        [.text(application.rawValue)] + [after.map { .text($0) }, limit.map { .int(Int64($0)) }].compactMap { $0 }, application)
    }

    public func filter(named name: String, in application: ApplicationCode) throws(StoreError) -> FilterDefinition? {
        try loadFilters("SELECT name, operator, conditions FROM filters WHERE application = ? AND name = ?",
                        [.text(application.rawValue), .text(name)], application).first
    }

    public func deleteFilter(named name: String, in application: ApplicationCode) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) in
            try c.run("DELETE FROM filters WHERE application = ? AND name = ?", [.text(application.rawValue), .text(name)]) == 1
        }
    }

    private func loadFilters(_ sql: String, _ parameters: [SQLValue], _ application: ApplicationCode) throws(StoreError) -> [FilterDefinition] {
        let rows = try database.withConnection { (c) throws(StoreError) in try c.query(sql, parameters) }
        guard !rows.isEmpty else { return [] }
        let parsed = rows.map { row in (row, try? JSONParser.parse(row["conditions"].text ?? "")) }
        let types = try tagTypes(in: application, named: parsed.reduce(into: Set<String>()) { $0.formUnion(FilterDefinition.tagNames(in: $1.1)) })
        var filters: [FilterDefinition] = []
        for (row, read) in parsed {
            let name = row["name"].text ?? ""
            // Stored definitions were validated when created; tag types never change, so they parse again.
            do {
                guard let conditions = read else { throw StoreError(.io, "its conditions are not JSON") }
                filters.append(try FilterDefinition.parse(name: name, join: FilterJoin(rawValue: row["operator"].text ?? "") ?? .and,
                                                          conditions: conditions, tagTypes: types))
            } catch {
                throw StoreError(.io, "stored filter '\(name)' is unreadable: \(error)")
            }
        }
        return filters
    }

    // MARK: - Targeting

    public func targets(_ selection: TargetSelection, in application: ApplicationCode, attributesType: String?,
                        afterID: Int64, limit: Int) throws(StoreError) -> [Device] {
        let (sql, parameters) = targetsQuery(selection, in: application, attributesType: attributesType, afterID: afterID, limit: limit)
        return try database.withConnection { (c) throws(StoreError) in
            try c.query(sql, parameters).map { Self.device($0, application) }
        }
    }

    /// The query of `targets`, with its parameters.
    func targetsQuery(_ selection: TargetSelection, in application: ApplicationCode, attributesType: String?,
                      afterID: Int64, limit: Int) -> (sql: String, parameters: [SQLValue]) {
        let app = SQLValue.text(application.rawValue)
        var parameters: [SQLValue] = []
        var pushToStart = "NULL AS push_to_start"
        if let attributesType {
            // A token registered for this attributes type wins over the generic one ("").
            pushToStart = """
                (SELECT p.token FROM push_to_start_tokens p WHERE p.device = d.id AND p.attributes_type IN (?, '')
                 ORDER BY p.attributes_type = '' LIMIT 1) AS push_to_start
                """
            parameters.append(.text(attributesType))
        }
        let (condition, conditionParameters) = sql(for: selection, app: app, after: afterID)
        parameters += [app, .int(afterID)] + conditionParameters + [.int(Int64(limit))]
        // A filter's audience is registered devices, walked in id order; devices or users named outright come back
        // even when unregistered, so a start can count them with their reason (S7), and are found through their
        // list: walking the application's devices instead (SQLite's choice) read all of them for a start to one phone.
        let registered: String, ownedBy: String
        if case .filter = selection {
            (registered, ownedBy) = ("d.push_token IS NOT NULL AND ", "d.application")
        } else {
            (registered, ownedBy) = ("", database.dialect.unindexed("d.application"))
        }
        return ("""
            SELECT \(Self.deviceColumns), \(pushToStart) FROM devices d
            WHERE \(ownedBy) = ? AND \(registered)d.id > ? AND (\(condition))
            ORDER BY d.id LIMIT ?
            """, parameters)
    }

    public func unknownTargets(_ selection: TargetSelection, in application: ApplicationCode) throws(StoreError) -> [String] {
        let entries: [String], condition: String
        switch selection {
        case .filter: return []
        case .devices(let list):
            entries = list
            condition = """
                NOT EXISTS (SELECT 1 FROM devices d WHERE d.application = ?2 AND d.hwid = e.value)
                AND NOT EXISTS (SELECT 1 FROM devices d WHERE d.push_token = lower(e.value) AND \(database.dialect.unindexed("d.application")) = ?2)
                """
        case .users(let list):
            entries = list
            condition = "NOT EXISTS (SELECT 1 FROM devices d WHERE d.user_id = e.value AND \(database.dialect.unindexed("d.application")) = ?2)"
        }
        guard !entries.isEmpty else { return [] }
        let unknown = try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT e.value FROM \(database.dialect.elements(ofJSONArray: "?1")) e WHERE \(condition)",
                        [.text(JSONValue.array(entries.map { .string($0) }).jsonText), .text(application.rawValue)])
        }
        let names = Set(unknown.compactMap { $0["value"].text })
        return entries.filter { names.contains($0) }
    }

    /// The WHERE clause (over `devices d`) that picks a selection's devices, with its parameters.
    /// With `after`, a page's lower bound: tag conditions repeat it so PostgreSQL's planner starts its scan
    /// of `device_tags` there too, not at the first device (88 ms a page over 500k devices instead of 2 ms).
    func sql(for selection: TargetSelection, app: SQLValue, after: Int64? = nil) -> (String, [SQLValue]) {
        let dialect = database.dialect
        switch selection {
        case .devices(let entries):
            // Each entry is a HWID or a push token; tokens are compared lowercased (D4).
            let list = SQLValue.text(JSONValue.array(entries.map { .string($0) }).jsonText)
            return ("""
                d.id IN (SELECT id FROM devices WHERE application = ? AND hwid IN \(dialect.list("value", of: "?", count: entries.count))
                         UNION SELECT id FROM devices
                         WHERE push_token IN \(dialect.list("lower(value)", of: "?", count: entries.count)) AND \(dialect.unindexed("application")) = ?)
                """, [app, list, list, app])
        case .users(let users):
            let list = SQLValue.text(JSONValue.array(users.map { .string($0) }).jsonText)
            return ("""
                d.id IN (SELECT id FROM devices WHERE user_id IN \(dialect.list("value", of: "?", count: users.count))
                         AND \(dialect.unindexed("application")) = ?)
                """, [list, app])
        case .filter(let filter):
            var clauses: [String] = []
            var parameters: [SQLValue] = []
            for condition in filter.conditions {
                let (clause, values) = sql(for: condition, after: after)
                clauses.append("(\(clause))")
                parameters += values
            }
            return (clauses.joined(separator: filter.join == .and ? " AND " : " OR "), parameters)
        }
    }

    /// One condition as SQL. Built-in tags are device columns; custom tags are rows of `device_tags`.
    func sql(for condition: FilterCondition, after: Int64? = nil) -> (String, [SQLValue]) {
        // Booleans and dates are stored as integers (0 or 1, seconds since 1970), and compared so.
        let values = condition.values.map { scalar -> SQLValue in
            if case .text(let s) = scalar { return .text(s) }
            return .int(scalar.number ?? 0)
        }
        let placeholders = Array(repeating: "?", count: values.count).joined(separator: ", ")
        let comparison: String
        switch condition.op {
        case .eq, .notEq: comparison = "= ?"
        case .in, .notIn: comparison = "IN (\(placeholders))"
        case .gte: comparison = ">= ?"
        case .lte: comparison = "<= ?"
        default: comparison = "BETWEEN ? AND ?"
        }
        let negated = condition.op == .notEq || condition.op == .notIn
        if let builtIn = condition.builtIn {
            let column: String
            switch builtIn {
            case .language: column = "d.language"
            case .timezone: column = "d.timezone"
            case .userID: column = "d.user_id"
            case .platform: column = "d.platform"
            default: column = "d.os_version_key"
            }
            // A device without the value matches NOTEQ/NOTIN: it is not equal to it.
            return negated ? ("\(column) IS NULL OR \(column) NOT IN (\(placeholders))", values) : ("\(column) \(comparison)", values)
        }
        // Correlated, so each candidate device costs one primary-key probe, whatever the page.
        let integer = condition.values.contains { if case .text = $0 { false } else { true } }
        let bound = after == nil ? "" : "t.device > ? AND "
        let subquery = "SELECT 1 FROM device_tags t WHERE t.device = d.id AND \(bound)t.name = ? AND \(database.dialect.tagValue(integer: integer)) \(comparison)"
        return ("\(negated ? "NOT EXISTS" : "EXISTS") (\(subquery))", (after.map { [.int($0)] } ?? []) + [.text(condition.tag)] + values)
    }
}
