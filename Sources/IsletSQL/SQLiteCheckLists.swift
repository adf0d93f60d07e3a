import IsletStore

/// `CHECK (column IN ('a', 'b', 'c'))` as `CHECK (column = 'a' OR column = 'b' OR column = 'c')`: the same
/// constraint, which SQLite tests in place. The list form of three values or more makes SQLite build a
/// temporary index of the list (OpenEphemeral) each time a statement writes the row.
public enum SQLiteCheckLists {
    /// A table's `CREATE TABLE` text with each such list written out; lists of one or two values, and
    /// everything else, are left as they are.
    public static func inPlace(_ createTable: String) -> String {
        createTable.replacing(/CHECK \((\w+) IN \(('[^',]*'(?:, '[^',]*')+)\)\)/) { match in
            let column = String(match.output.1)
            let values = match.output.2.split(separator: ", ")
            guard values.count > 2 else { return String(match.output.0) }
            return "CHECK (" + values.map { "\(column) = \($0)" }.joined(separator: " OR ") + ")"
        }
    }

    /// Rewrites the stored `CREATE TABLE` text of every table that has such a list, inside the caller's
    /// transaction. SQLite's documented way to change a constraint without copying the table
    /// (sqlite.org/lang_altertable.html, "other kinds of table schema changes"); safe here because the new
    /// constraint accepts exactly the rows the old one did. The schema version goes up by one, so every
    /// connection reads the new text before its next statement.
    static func rewriteTables(_ c: any SQLConnection) throws(StoreError) {
        let tables = try c.query("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND sql LIKE '%CHECK (%'")
        let changed = tables.compactMap { row -> (name: String, sql: String)? in
            guard let name = row["name"].text, let sql = row["sql"].text else { return nil }
            let rewritten = inPlace(sql)
            return rewritten == sql ? nil : (name, rewritten)
        }
        try storeTableTexts(changed, c)
    }

    /// Stores new `CREATE TABLE` texts of tables, inside the caller's transaction, and raises the schema version so
    /// every connection reads them before its next statement. Only for a text whose constraints accept every row the
    /// old text's did.
    static func storeTableTexts(_ tables: [(name: String, sql: String)], _ c: any SQLConnection) throws(StoreError) {
        guard !tables.isEmpty else { return }
        let version = try c.query("PRAGMA schema_version").first?["schema_version"].int ?? 0
        try c.execute("PRAGMA writable_schema = ON")
        do {
            for table in tables {
                _ = try c.run("UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?", [.text(table.sql), .text(table.name)])
            }
            try c.execute("PRAGMA schema_version = \(version + 1)")
        } catch {
            try? c.execute("PRAGMA writable_schema = OFF")
            throw error
        }
        try c.execute("PRAGMA writable_schema = OFF")
    }
}
