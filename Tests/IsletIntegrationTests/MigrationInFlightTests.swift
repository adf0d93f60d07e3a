import Foundation
import Testing
import IsletCore
import IsletSQL
import IsletPostgres
import IsletSQLite
import IsletStore
import IsletTestPeers
#if canImport(Glibc)
import Glibc
#endif

/// Issue 43: a database an older Islet left with work in flight is migrated in place by this one on its first start,
/// and what was in flight is delivered. The fixtures were made by `Fixtures/make-in-flight-v22.sh` with the
/// islet-test-server of commit 75abecd (schema version 22), killed with kill -9: a start by filter to 120 phones a
/// third of the way through its fan-out (claimed, under a lease), and three live activities each with an update held
/// for later and one more accepted just before the kill. SQLite: the file; PostgreSQL: a pg_dump of its schema.
@Suite("An older database with work in flight")
struct MigrationInFlightTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// Moves the fixture's times forward as if it had been made ten minutes ago. Rules that follow the clock (an
    /// activity's 8 hours, A8: updates past them are not sent; a message's expiry) would otherwise judge it by the day
    /// it was made, and the test would fail from 8 hours after that on.
    static func madeTenMinutesAgo(_ database: any SQLDatabase) throws {
        try database.withConnection { (c) throws(StoreError) in
            let made = try c.query("SELECT MAX(created_at) AS made FROM messages")[0]["made"].int ?? 0
            let seconds = max(0, Int64(Date().timeIntervalSince1970) - 600 - made)
            let inSeconds = ["activities": ["started_at", "updated_at", "dismiss_at"], "messages": ["created_at", "finished_at"],
                             "scheduled_updates": ["created_at"], "deliveries": ["at"], "devices": ["updated_at"]]
            let inMilliseconds = ["messages": ["due_at", "expires_at"], "scheduled_updates": ["due_at", "expires_at"],
                                  "deliveries": ["next_at"], "activity_renewals": ["due_at"], "leases": ["until_ms"]]
            for (columns, delta) in [(inSeconds, seconds), (inMilliseconds, seconds * 1000)] {
                for (table, names) in columns {
                    try c.run("UPDATE \(table) SET " + names.map { "\($0) = \($0) + ?1" }.joined(separator: ", "), [.int(delta)])
                }
            }
        }
    }

    @Test func isMigratedOnItsFirstStartAndDeliversWhatWasInFlight() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-in-flight-\(UUID().uuidString)")
        defer { IntegrationEngine.remove(directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // The database, as the older Islet left it; opened as it is (never migrated) to look at.
        let location = try IntegrationEngine.database(in: directory)
        let open: () throws -> any SQLDatabase
        if IntegrationEngine.isPostgreSQL {
            let name = try #require(location.components(separatedBy: "search_path%3D").last)
            try TestPostgres.load(dump: Self.fixtures.appendingPathComponent("in-flight-v22.postgresql.sql").path, schema: "fixture",
                                  into: TestPostgres.Database(name: name, url: location))
            open = { try PostgresDatabase(url: location, maximumIdleConnections: 1, maximumConnections: 1, migrate: false) }
        } else {
            try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent("in-flight-v22.sqlite"), to: URL(fileURLWithPath: location))
            open = { try SQLiteDatabase(existingAt: location) }
        }

        let old = try open()
        #expect(try old.schemaVersion() == 22)
        let half = try #require(try old.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT m.code, m.state, m.claimed, (SELECT COUNT(*) FROM deliveries d WHERE d.message = m.id) AS recorded
                FROM messages m JOIN activities a ON a.id = m.activity WHERE a.activity_id = 'HALF'
                """).first
        })
        #expect(half["state"].text == "sending" && half["claimed"].int == 1, "killed mid fan-out, still claimed")
        let recordedBefore = Int(half["recorded"].int ?? 0)
        #expect(recordedBefore > 0 && recordedBefore < 120, "a start half sent: \(recordedBefore) of 120 recorded")
        let held = try old.withConnection { (c) throws(StoreError) in try c.query("SELECT COUNT(*) AS n FROM scheduled_updates")[0]["n"].int }
        #expect(held == 3, "an update held for later on each live activity")
        let code = try #require(half["code"].text as String?)
        try Self.madeTenMinutesAgo(old)

        let record = directory.appendingPathComponent("pushes.jsonl")
        let server = try ServeProcess(executable: "islet-test-server", arguments: [
            "--database", location, "--record", record.path, "--batch-size", "10", "--batch-delay-ms", "2", "--workers", "2",
        ], directory: directory)
        defer {
            kill(server.process.processIdentifier, SIGTERM)
            _ = server.waitForExit()
        }
        #expect(try open().schemaVersion() == SQLMigrations.latestVersion, "migrated in place")

        // The start resumes where the killed run left it (its lease long gone) and reaches every phone.
        let details = #"{"request":{"auth":"SECRET_API_TOKEN","message":"\#(code)"}}"#
        func message() -> JSONObject? {
            (try? request(server.port, "/json/1.3/getMessageDetails", body: details))?.json?.objectValue?["response"]?.objectValue?["message"]?.objectValue
        }
        #expect(eventually(30) { message()?["status"] == "done" })
        #expect(message()?["counts"]?.objectValue?["sent"] == 120)

        // Each live activity: the update held for later (step 2, due a minute or two after the fixture was made, its
        // payload stamped with that time) is released as if accepted then, so it is the activity's latest state: the
        // phone gets it last. The update accepted just before the kill (step 3) went before it, or was superseded by it.
        func recorded() -> [JSONObject] {
            ((try? String(contentsOf: record, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue }
        }
        func steps(_ token: String) -> [Int64] {
            recorded().filter { $0["token"]?.stringValue == token }.compactMap { push -> Int64? in
                let payload = try? JSONParser.parse(push["payload"]?.stringValue ?? "")
                return payload?.objectValue?["aps"]?.objectValue?["content-state"]?.objectValue?["step"]?.intValue
            }
        }
        for k in 0..<3 {
            let token = String(format: "%080x", k + 2_000_000)
            #expect(eventually(30) { steps(token).contains(2) }, "LIVE_\(k)'s held update delivered: \(steps(token))")
            let sent = steps(token)
            #expect(sent.last == 2 && (sent.lastIndex(of: 3) ?? -1) < (sent.lastIndex(of: 2) ?? -1),
                    "LIVE_\(k): the held update last, nothing older after it: \(sent)")
        }
        let after = try open()
        #expect(eventually(10) {
            let rest = try? after.withConnection { (c) throws(StoreError) in
                try c.query("SELECT (SELECT COUNT(*) FROM scheduled_updates) AS held, (SELECT COUNT(*) FROM messages WHERE state IN ('pending', 'sending')) AS unfinished")[0]
            }
            return rest?["held"].int == 0 && rest?["unfinished"].int == 0
        }, "nothing left waiting")
    }
}
