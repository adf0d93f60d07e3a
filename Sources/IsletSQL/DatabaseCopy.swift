import IsletStore

/// Copies every row of an SQLite Islet database into another, empty one at the same schema version (`islet
/// db migrate-to`, to PostgreSQL): table by table in dependency order, large tables a page at a
/// time in key order, all in one transaction of the destination, so it is all there or none of it is.
public enum DatabaseCopy {
    /// A table and the primary key its pages are read in (nil: small, read whole).
    struct Table {
        let name: String
        let key: [String]?
    }

    /// Parents before children, so foreign keys hold at every insert.
    static let tables = [
        Table(name: "applications", key: nil), Table(name: "tokens", key: nil), Table(name: "apns_keys", key: nil), Table(name: "fcm_accounts", key: nil),
        Table(name: "devices", key: ["id"]), Table(name: "tag_types", key: nil), Table(name: "device_tags", key: ["device", "name", "value"]),
        Table(name: "push_to_start_tokens", key: ["device", "attributes_type"]), Table(name: "activity_tokens", key: ["device", "activity_id"]),
        Table(name: "filters", key: nil), Table(name: "simulated_devices", key: nil), Table(name: "live_activity_schemas", key: nil),
        Table(name: "activities", key: ["id"]), Table(name: "messages", key: ["id"]),
        Table(name: "message_queue", key: ["message"]), Table(name: "message_shards", key: ["message", "shard"]),
        Table(name: "deliveries", key: ["message", "device"]), Table(name: "activity_devices", key: ["activity", "device"]),
        Table(name: "token_history", key: ["id"]), Table(name: "scheduled_updates", key: ["id"]),
        Table(name: "activity_renewals", key: ["activity"]), Table(name: "channels", key: ["id"]),
        Table(name: "broadcasts", key: ["id"]),
        Table(name: "simulated_channels", key: nil), Table(name: "simulated_tokens", key: nil), Table(name: "console_password", key: nil),
    ]
    /// What a node keeps of its own (its liveness, leases, the provider tokens it signed): not carried over.
    /// Console sessions are not either: they are signed in again against the new database.
    static let notCopied: Set<String> = ["schema_migrations", "nodes", "leases", "provider_tokens", "console_sessions"]

    /// Copies `source` into `destination`; `progress(table, copied, total)` is called as rows go in.
    /// Returns each table with its row count in the source and in the destination afterwards.
    public static func copy(from source: any SQLDatabase, to destination: any SQLDatabase, pageSize: Int = 5_000,
                            progress: (String, Int, Int) -> Void) throws -> [(table: String, source: Int, destination: Int)] {
        let from = try source.schemaVersion(), to = try destination.schemaVersion()
        guard from == to else {
            throw StoreError(.conflict, "the source is at schema version \(from), the destination at \(to); open both with this Islet first")
        }
        return try destination.write(rethrowing: { target in
            guard try rowCount("applications", target) == 0 else {
                throw StoreError(.conflict, "the destination already holds applications; migrate into an empty database")
            }
            var counts: [(table: String, source: Int, destination: Int)] = []
            for table in tables {
                let total = try source.withConnection { (c) throws(StoreError) in try rowCount(table.name, c) }
                var copied = 0
                progress(table.name, 0, total)
                try source.withConnection { (reader) throws(StoreError) in
                    var after: [SQLValue]?
                    repeat {
                        let rows = try page(table, after: after, limit: pageSize, source.dialect, reader)
                        try insert(rows, into: table.name, destination.dialect, target)
                        copied += rows.count
                        progress(table.name, copied, total)
                        after = rows.count == pageSize && table.key != nil ? table.key!.map { rows.last![$0] } : nil
                    } while after != nil
                }
                if let reset = destination.dialect.identityReset(table.name) { _ = try target.query(reset) }
                counts.append((table.name, total, try rowCount(table.name, target)))
            }
            return counts
        })
    }

    static func rowCount(_ table: String, _ c: any SQLConnection) throws(StoreError) -> Int {
        Int(try c.query("SELECT COUNT(*) AS count FROM \(table)")[0]["count"].int ?? 0)
    }

    /// The next page in key order after the key values `after` (keyset paging: each page costs the same).
    static func page(_ table: Table, after: [SQLValue]?, limit: Int, _ dialect: SQLDialect, _ c: any SQLConnection) throws(StoreError) -> [SQLRow] {
        // Tokens keep their order (the first API token is listed first): SQLite's rowid, PostgreSQL's seq.
        guard let key = table.key else {
            return try c.query("SELECT * FROM \(table.name)" + (table.name == "tokens" ? " ORDER BY created_at, \(dialect.insertionOrder)" : ""))
        }
        let columns = key.joined(separator: ", ")
        let condition = after == nil ? "" : "WHERE (\(columns)) > (\(key.map { _ in "?" }.joined(separator: ", ")))"
        return try c.query("SELECT * FROM \(table.name) \(condition) ORDER BY \(columns) LIMIT \(limit)", after ?? [])
    }

    /// Multi-row INSERTs, at most ~30,000 parameters each (PostgreSQL allows 65,535, SQLite 32,766).
    static func insert(_ rows: [SQLRow], into table: String, _ dialect: SQLDialect, _ c: any SQLConnection) throws(StoreError) {
        guard let first = rows.first else { return }
        var columns = first.columns.names
        var values = rows.map(\.values)
        // An SQLite tag value (integer or string in one column) goes into the destination's tag columns.
        if table == "device_tags", let position = columns.firstIndex(of: "value") {
            columns.remove(at: position)
            columns += dialect.tagValueColumns
            values = values.map { row in
                var row = row
                let value = row.remove(at: position)
                return row + dialect.storedTag(value)
            }
        }
        let perStatement = max(1, 30_000 / columns.count)
        let tuple = "(" + columns.map { _ in "?" }.joined(separator: ", ") + ")"
        var start = 0
        while start < values.count {
            let chunk = values[start..<min(values.count, start + perStatement)]
            try c.run("INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES "
                      + Array(repeating: tuple, count: chunk.count).joined(separator: ", "), chunk.flatMap { $0 })
            start += chunk.count
        }
    }
}
