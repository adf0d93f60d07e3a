import Testing
import IsletSQL
import IsletStore

@Suite("Many rows written with multi-row statements")
struct RunRowsTests {
    /// 100 rows go as chunks of 64, 32 and 4; the last one repeats the first row's key and is applied after it,
    /// as a statement per row would. On SQLite a key may also repeat within a chunk (row 3 of the first one);
    /// PostgreSQL refuses an upsert that touches a row twice in one statement (it writes pages as one JSON statement).
    @Test(arguments: Engine.allCases) func everyRowIsWrittenInOrderAcrossChunks(_ engine: Engine) throws {
        let db = try engine.open()
        try db.database.write { (c) throws(StoreError) in
            try c.run("CREATE TABLE run_rows (id BIGINT PRIMARY KEY, label TEXT NOT NULL, hits BIGINT NOT NULL)")
            var rows = (1...99).map { [SQLValue.int(Int64($0)), .text("row \($0)"), .int(1)] }
            if engine == .sqlite { rows[2] = [.int(2), .text("row 2"), .int(1)] }
            rows.append([.int(1), .text("again"), .int(1)])
            try c.runRows(rows) { values in
                "INSERT INTO run_rows (id, label, hits) VALUES \(values) ON CONFLICT (id) DO UPDATE SET label = excluded.label, hits = run_rows.hits + excluded.hits"
            }
            try c.runRows([]) { _ in "this statement is never run" }
        }
        let rows = try db.database.withConnection { (c) throws(StoreError) in try c.query("SELECT id, label, hits FROM run_rows ORDER BY id") }
        #expect(rows.count == (engine == .sqlite ? 98 : 99))
        #expect(rows.first?["label"].text == "again" && rows.first?["hits"].int == 2)
        #expect(rows.dropFirst().allSatisfy { $0["label"].text == "row \($0["id"].int ?? 0)" })
        #expect(rows.dropFirst().map { $0["hits"].int } == rows.dropFirst().map { $0["id"].int == 2 && engine == .sqlite ? 2 : 1 })
    }
}
