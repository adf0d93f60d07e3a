import Foundation
import IsletSQL
import IsletStore
import Testing

/// Migration 20: SQLite's CHECK constraints on value lists, written so it tests them in place.
@Suite("SQLite check lists")
struct SQLiteCheckListsTests {
    @Test func writesListsOfThreeOrMoreOut() {
        let table = """
            CREATE TABLE t (
                kind TEXT NOT NULL CHECK (kind IN ('api', 'device')),
                state TEXT NOT NULL CHECK (state IN ('sent', 'failed', 'token-dead')), note TEXT DEFAULT 'a, b'
            ) STRICT
            """
        #expect(SQLiteCheckLists.inPlace(table) == """
            CREATE TABLE t (
                kind TEXT NOT NULL CHECK (kind IN ('api', 'device')),
                state TEXT NOT NULL CHECK (state = 'sent' OR state = 'failed' OR state = 'token-dead'), note TEXT DEFAULT 'a, b'
            ) STRICT
            """)
        #expect(SQLiteCheckLists.inPlace("CREATE TABLE u (x INTEGER CHECK (x = 1))") == "CREATE TABLE u (x INTEGER CHECK (x = 1))")
    }

    /// The statement that writes a delivery record (one per push of a fan-out) builds no temporary index.
    static let deliveryInsert = """
        EXPLAIN INSERT INTO deliveries (message, device, push_type, status, reason, apns_id, attempts, at, state, next_at, token, copies, priority)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
        """
    static let messageInsert = """
        EXPLAIN INSERT INTO messages (code, application, activity, event, payload, priority, state, due_at, created_at)
        VALUES ('c', 'a', 1, 'update', x'', 10, 'pending', 0, 0)
        """

    static func opcodes(_ database: any SQLDatabase, _ explain: String) throws -> [String] {
        try database.withConnection { (c) throws(StoreError) in try c.query(explain).compactMap { $0["opcode"].text } }
    }

    @Test func aFreshDatabaseHasNoListForSQLiteToIndex() throws {
        let db = try Engine.sqlite.open()
        let tables = try db.database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT name, sql FROM sqlite_schema WHERE type = 'table'").map { ($0["name"].text ?? "", $0["sql"].text ?? "") }
        }
        #expect(tables.count > 10)
        for (name, sql) in tables { #expect(SQLiteCheckLists.inPlace(sql) == sql, "table \(name)") }
        for explain in [Self.deliveryInsert, Self.messageInsert] {
            let opcodes = try Self.opcodes(db.database, explain)
            #expect(opcodes.contains("Insert") || opcodes.contains("IdxInsert"))
            #expect(!opcodes.contains("OpenEphemeral"))
        }
    }

    @Test func theConstraintsStillHold() throws {
        let db = try Engine.sqlite.open()
        #expect {
            _ = try db.database.withConnection { (c) throws(StoreError) in
                try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('ABCDE-12345', 'Shop', 'com.example.shop', 0)")
                return try c.run("INSERT INTO apns_keys (application, team_id, key_id, environment, pem, updated_at) VALUES ('ABCDE-12345', 'T', 'K', 'staging', 'P', 0)")
            }
        } throws: { error in
            (error as? StoreError)?.code == .conflict && "\(error)".contains("CHECK constraint failed")
        }
    }

    /// A database of version 19 (lists indexed at each write) upgraded: a connection opened before the upgrade
    /// reads the new constraint text at its next statement (the schema version went up), and data stays.
    @Test func upgradesInPlaceForConnectionsAlreadyOpen() throws {
        let db = try Engine.sqlite.open(migrateUpTo: 19)
        #expect(try Self.opcodes(db.database, Self.deliveryInsert).contains("OpenEphemeral"), "version 19 indexes the list")
        _ = try db.database.withConnection { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('ABCDE-12345', 'Shop', 'com.example.shop', 0)")
        }
        let upgraded = try db.reopen()
        #expect(try upgraded.schemaVersion() == SQLMigrations.latestVersion)
        // Its next statement finds the schema version changed and reads the schema again (a statement it had
        // prepared is prepared again when it runs; an EXPLAIN of one is not, hence a new text).
        _ = try db.database.withConnection { (c) throws(StoreError) in try c.query("SELECT COUNT(*) AS n FROM applications") }
        #expect(!(try Self.opcodes(db.database, Self.deliveryInsert + " -- again")).contains("OpenEphemeral"), "the older handle reads the new text")
        let names = try upgraded.withConnection { (c) throws(StoreError) in try c.query("SELECT name FROM applications").compactMap { $0["name"].text } }
        #expect(names == ["Shop"])
        let check = try upgraded.withConnection { (c) throws(StoreError) in try c.query("PRAGMA integrity_check").first?["integrity_check"].text }
        #expect(check == "ok")
    }
}
