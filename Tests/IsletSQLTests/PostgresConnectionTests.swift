import Foundation
import Testing
import IsletCore
import IsletPostgres
import IsletSQL
import IsletStore
import IsletTestPeers
import Synchronization

/// What only the PostgreSQL engine has: a server at the other end of a connection.
@Suite("PostgreSQL connections")
struct PostgresConnectionTests {
    /// The server drops every connection of a running Islet (a restart, a failover): the call that meets a
    /// dead connection fails with a clear error (the API answers 503, nothing changed), and the next one
    /// reconnects by itself.
    @Test func aLostConnectionFailsOneCallAndTheNextReconnects() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let name = "islet-test-\(UUID().uuidString.prefix(8))"
        let database = try PostgresDatabase(url: created.url + "&application_name=\(name)")
        let store = SQLApplicationStore(database: database)
        let code = ApplicationCode("LOSTC-00001")!
        try store.createApplication(Application(code: code, name: "x", bundleID: "com.example.x", createdAt: Date()), tokens: [], apnsKey: nil)
        try TestPostgres.administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(name)'")
        do {
            _ = try store.application(code)
            Issue.record("a call on a connection the server closed cannot succeed")
        } catch {
            #expect(error.code == .io && error.message.contains("PostgreSQL"), "\(error.message)")
            #expect(!error.message.contains("password"))
        }
        #expect(try store.application(code)?.name == "x", "the pool dropped the dead connection and connected again")
        // A write meeting a dead idle connection before any of its code ran goes again on a new one.
        try TestPostgres.administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(name)'")
        try store.addToken(TokenRecord(id: "tk_after", application: code, kind: .api, hash: Array(repeating: 7, count: 32), label: "", createdAt: Date()))
        #expect(try store.tokens(of: code).map(\.id) == ["tk_after"])
    }

    /// A statement sent once per transaction (a group's work notification) runs once however often its writes send it,
    /// and again after a rollback to a savepoint, which may have undone it.
    @Test func aStatementSentOncePerTransactionRunsOnceUntilARollback() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        let counts = try database.write { (c) throws(StoreError) -> [Int64] in
            try c.execute("CREATE TEMPORARY TABLE sent (n INTEGER) ON COMMIT DROP")
            let count = { () throws(StoreError) -> Int64 in try c.query("SELECT COUNT(*) AS n FROM sent")[0]["n"].int ?? -1 }
            let insert = "INSERT INTO sent VALUES (1)"
            try c.sendOncePerTransaction(insert)
            try c.sendOncePerTransaction(insert)
            let once = try count()
            try c.execute("SAVEPOINT member")
            try c.sendOncePerTransaction(insert)
            let stillOnce = try count()
            try c.execute("ROLLBACK TO member; RELEASE member")
            try c.sendOncePerTransaction(insert)
            return [once, stillOnce, try count()]
        }
        #expect(counts == [1, 1, 2])
    }

    /// Integers are read straight from libpq's digits: every width and sign, the extremes included.
    @Test func integersOfEveryWidthAndSignComeBackExactly() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        let row = try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT CAST(-9223372036854775808 AS BIGINT) AS lowest, CAST(9223372036854775807 AS BIGINT) AS highest,
                       CAST(0 AS BIGINT) AS zero, CAST(-1 AS INTEGER) AS minus_one, CAST(32767 AS SMALLINT) AS small,
                       CAST(? AS BIGINT) AS parameter, CAST(1.5 AS NUMERIC) AS decimal
                """, [.int(1_800_000_000_123)])[0]
        }
        #expect(row["lowest"].int == .min && row["highest"].int == .max)
        #expect(row["zero"].int == 0 && row["minus_one"].int == -1 && row["small"].int == 32767)
        #expect(row["parameter"].int == 1_800_000_000_123)
        #expect(row["decimal"] == .double(1.5), "numeric with a fraction is not an integer")
    }

    @Test func anUnreachableServerIsNamedWithoutItsPassword() {
        #expect {
            _ = try PostgresDatabase(url: "postgresql://islet:s3cret@127.0.0.1:1/islet?connect_timeout=2")
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == .io && error.message.contains("postgresql://islet:***@127.0.0.1:1/islet") && !error.message.contains("s3cret")
        }
    }

    /// A prepared query keeps the plan made at its first run: on a table known empty (ANALYZE after retention
    /// emptied it), a scan of the whole table, kept as the table grows to millions of rows until its next
    /// ANALYZE. A `.fresh` query is prepared again once its plan is `replanInterval` old (the old statement
    /// deallocated), so it is planned from the table as it is: through the partial index once the table is large.
    /// Until then its plan is reused, not made at each run. (That a kept plan stays a scan is PostgreSQL's doing,
    /// and the server may drop it early, so it is not asserted here: see BENCHMARKS.md.)
    @Test(arguments: [true, false])
    func aFreshQueryIsPreparedAgainOnceItsPlanIsOld(old: Bool) throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        // Zero: every run finds the plan old. An hour: no run does, within this test.
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, replanInterval: old ? .zero : .seconds(3600))
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("""
                CREATE TABLE jobs (id BIGINT PRIMARY KEY, state TEXT NOT NULL, due BIGINT NOT NULL) WITH (autovacuum_enabled = false);
                CREATE INDEX jobs_waiting ON jobs (due) WHERE state = 'waiting';
                ANALYZE jobs
                """)
            let sql = "SELECT MIN(due) AS due FROM jobs WHERE state = 'waiting'"
            let prepared = { () throws(StoreError) -> [SQLRow] in
                try c.query("SELECT name, generic_plans FROM pg_prepared_statements WHERE statement = ?", [.text(sql)], planning: .kept)
            }
            #expect(try c.query(sql, [], planning: .fresh)[0]["due"] == .null)
            let first = try prepared()
            #expect(first.count == 1, "prepared, not planned at each run")
            try c.run("INSERT INTO jobs SELECT n, CASE WHEN n % 10000 = 0 THEN 'waiting' ELSE 'sent' END, n FROM generate_series(1, 100000) n")
            #expect(try c.query(sql, [], planning: .fresh)[0]["due"].int == 10000)
            let second = try prepared()
            #expect(second.count == 1, "the old statement is deallocated: \(second)")
            guard first.count == 1, second.count == 1 else { return }
            if old {
                #expect(second[0]["name"] != first[0]["name"] && second[0]["generic_plans"].int == 1, "prepared and planned again")
                let name = second[0]["name"].text ?? ""
                let plan = try c.query("EXPLAIN EXECUTE \(name)", [], planning: .kept).compactMap { $0["QUERY PLAN"].text }.joined(separator: "\n")
                #expect(plan.contains("jobs_waiting"), "planned from the table as it is, the query reads the partial index: \(plan)")
                // The same query kept for good is a statement of its own, and the fresh one is still prepared again.
                _ = try c.query(sql, [], planning: .kept)
                let kept = Set(try prepared().compactMap { $0["name"].text })
                _ = try c.query(sql, [], planning: .fresh)
                let after = Set(try prepared().compactMap { $0["name"].text })
                #expect(kept.count == 2 && after.count == 2 && after != kept && !after.isDisjoint(with: kept), "kept \(kept), then \(after)")
            } else {
                #expect(second[0]["name"] == first[0]["name"] && second[0]["generic_plans"].int == 2, "the plan is reused")
            }
        }
    }

    /// A list of keys passed as a JSON parameter (a claim's message ids, a start's named devices) is looked up in the
    /// key's index. PostgreSQL takes `json_array_elements_text` for 100 rows whatever the list holds; under
    /// `IN (SELECT ...)` it hashed them and read the whole table until the table outgrew some 30,000 rows (a claim
    /// of a few messages read all of `messages`). The form it replaces is planned here too, for contrast.
    @Test func aJSONListOfKeysIsLookedUpInTheKeysIndex() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1)
        let dialect = database.dialect
        let list = SQLValue.text("[5, 17, 19000]")
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("""
                CREATE TABLE keyed (id BIGINT PRIMARY KEY, label TEXT NOT NULL) WITH (autovacuum_enabled = false);
                INSERT INTO keyed SELECT n, 'row ' || n FROM generate_series(1, 20000) n;
                ANALYZE keyed
                """)
            let plan = { (condition: String) throws(StoreError) -> String in
                try c.query("EXPLAIN SELECT id FROM keyed WHERE id \(condition)", [list], planning: .fresh)
                    .compactMap { $0["QUERY PLAN"].text }.joined(separator: "\n")
            }
            let now = try plan(dialect.isIn("CAST(value AS BIGINT)", of: "?"))
            #expect(now.contains("Index Cond: (id = ANY") && !now.contains("Seq Scan on keyed"), "\(now)")
            let before = try plan("IN (SELECT CAST(value AS BIGINT) FROM \(dialect.elements(ofJSONArray: "?")))")
            #expect(before.contains("Seq Scan on keyed"), "\(before)")
            let found = try c.query("SELECT id FROM keyed WHERE id \(dialect.isIn("CAST(value AS BIGINT)", of: "?")) ORDER BY id", [list])
            #expect(found.map { $0["id"].int } == [5, 17, 19000])
            let labels = try c.query("SELECT id FROM keyed WHERE label \(dialect.isIn("lower(value)", of: "?")) ORDER BY id", [.text(#"["ROW 7", "row 8"]"#)])
            #expect(labels.map { $0["id"].int } == [7, 8])
        }
    }

    /// A start's named devices (or users) come as a JSON list too, where a thousand names are as likely as one: a
    /// LIMIT at the list's count (a power of two above it) gives PostgreSQL the estimate, so one name is probed in the
    /// index and the list is never cut.
    @Test func aNamedListIsPlannedForItsSize() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1)
        let dialect = database.dialect
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("""
                CREATE TABLE named (id BIGINT PRIMARY KEY, hwid TEXT NOT NULL) WITH (autovacuum_enabled = false);
                CREATE INDEX named_by_hwid ON named (hwid);
                INSERT INTO named SELECT n, 'phone-' || n FROM generate_series(1, 20000) n;
                ANALYZE named
                """)
            let one = SQLValue.text(#"["PHONE-7"]"#)
            let plan = { (list: String) throws(StoreError) -> String in
                try c.query("EXPLAIN SELECT id FROM named WHERE hwid IN \(list)", [one], planning: .fresh)
                    .compactMap { $0["QUERY PLAN"].text }.joined(separator: "\n")
            }
            let now = try plan(dialect.list("lower(value)", of: "?", count: 1))
            #expect(now.contains("named_by_hwid") && !now.contains("Seq Scan on named"), "\(now)")
            let before = try plan("(SELECT lower(value) FROM \(dialect.elements(ofJSONArray: "?")))")
            #expect(before.contains("Seq Scan on named"), "\(before)")
            #expect(dialect.list("value", of: "?", count: 1000).hasSuffix("LIMIT 1024)"))
            #expect(dialect.list("value", of: "?", count: 1024).hasSuffix("LIMIT 1024)"))
            #expect(dialect.list("value", of: "?", count: 1025).hasSuffix("LIMIT 2048)"))
            let names = (1...1000).map { JSONValue.string("PHONE-\($0 * 20)") }
            let found = try c.query("SELECT id FROM named WHERE hwid IN \(dialect.list("lower(value)", of: "?", count: names.count)) ORDER BY id",
                                    [.text(JSONValue.array(names).jsonText)])
            #expect(found.map { $0["id"].int } == (1...1000).map { Int64($0 * 20) }, "every name found, none cut")
        }
    }

    /// Another node migrates the schema (a rolling upgrade): a statement this connection prepared before
    /// would fail ("cached plan must not change result type"); it is prepared again instead.
    @Test func aStatementPreparedBeforeATableChangedIsPreparedAgain() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1)
        let other = try PostgresDatabase(url: created.url, maximumIdleConnections: 1)
        _ = try database.withConnection { (c) throws(StoreError) in try c.run("CREATE TABLE widgets (id BIGINT)") }
        let read = { () throws(StoreError) -> [String] in
            try database.withConnection { (c) throws(StoreError) in try c.query("SELECT * FROM widgets", []).first?.columns.names ?? [] }
        }
        _ = try read()
        _ = try other.withConnection { (c) throws(StoreError) in
            try c.run("ALTER TABLE widgets ADD COLUMN name TEXT")
            return try c.run("INSERT INTO widgets (id, name) VALUES (1, 'a')")
        }
        #expect(try read() == ["id", "name"])
    }

    /// In a transaction, a write sent on (`send`) does not wait for its answer: here it waits for a row another
    /// session holds, and `send` has returned while that session still holds it. The next statement that needs an
    /// answer reads them all, in order: a count after 150 sends (past the pipeline's depth) sees every row.
    @Test func writesSentInATransactionGoOnWithoutWaitingAndTheNextQuerySeesThem() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE TABLE counters (id BIGINT PRIMARY KEY, n BIGINT NOT NULL); INSERT INTO counters VALUES (1, 0)")
        }
        let holder = RowHolder(database, lock: "UPDATE counters SET n = n + 100 WHERE id = 1", seconds: 3)
        let (counted, n) = try database.write { (c) throws(StoreError) -> (Int64, Int64) in
            try c.send("UPDATE counters SET n = n + 1 WHERE id = 1", [])
            holder.signal()
            for id in 2...151 { try c.send("INSERT INTO counters VALUES (?, ?)", [.int(Int64(id)), .int(Int64(id))]) }
            let count = try c.query("SELECT COUNT(*) AS count FROM counters")[0]["count"].int ?? 0
            return (count, try c.query("SELECT n FROM counters WHERE id = 1")[0]["n"].int ?? 0)
        }
        #expect(holder.signalledWhileHeld, "send returned while the row it writes was still locked")
        #expect(counted == 151 && n == 101, "the query after the sends saw all of them, in order after the other session's")
    }

    /// A sent write that fails fails the transaction's next statement (which does not run) with its own error, or
    /// the commit when nothing follows it: the transaction keeps nothing, and the connection serves the next call.
    @Test(arguments: [true, false]) func aSentWriteThatFailsFailsTheTransactionWithItsOwnError(queryAfter: Bool) throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, maximumConnections: 1)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE TABLE names (name TEXT PRIMARY KEY); CREATE TABLE touched (n BIGINT)")
        }
        do {
            try database.write { (c) throws(StoreError) in
                try c.send("INSERT INTO names VALUES ('first')", [])
                try c.send("INSERT INTO names VALUES ('first')", [])
                if queryAfter { _ = try c.query("INSERT INTO touched VALUES (1) RETURNING n") }
            }
            Issue.record("a duplicate key cannot commit")
        } catch {
            #expect(error.code == .conflict && error.message.contains("duplicate key"), "\(error.message)")
        }
        let rows = try database.withConnection { (c) throws(StoreError) in
            (try c.query("SELECT COUNT(*) AS n FROM names")[0]["n"].int, try c.query("SELECT COUNT(*) AS n FROM touched")[0]["n"].int)
        }
        #expect(rows.0 == 0 && rows.1 == 0, "nothing of the transaction was kept")
        try database.write { (c) throws(StoreError) in try c.send("INSERT INTO names VALUES ('second')", []) }
        #expect(try database.withConnection { (c) throws(StoreError) in try c.query("SELECT name FROM names").map { $0["name"].text } } == ["second"])
    }

    /// Queries run together in a transaction come back each with its own rows, in order, each having seen the
    /// writes sent before it and the queries before it; one that fails fails the call, and the transaction.
    @Test func queriesTogetherSeeWhatCameBeforeThemAndFailAsOne() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, maximumConnections: 1)
        try database.withConnection { (c) throws(StoreError) in try c.execute("CREATE TABLE names (name TEXT PRIMARY KEY)") }
        let read = try database.write { (c) throws(StoreError) -> [[SQLRow]] in
            try c.send("INSERT INTO names VALUES ('a')", [])
            return try c.queries([
                SQLStatement("SELECT COUNT(*) AS n FROM names"),
                SQLStatement("INSERT INTO names VALUES (?) RETURNING name", [.text("b")]),
                SQLStatement("SELECT name FROM names ORDER BY name", planning: .fresh),
            ])
        }
        #expect(read.count == 3)
        #expect(read[0].first?["n"].int == 1, "the first query saw the write sent before it")
        #expect(read[1].first?["name"].text == "b")
        #expect(read[2].map { $0["name"].text } == ["a", "b"], "the last saw the query before it")
        do {
            _ = try database.write { (c) throws(StoreError) -> [[SQLRow]] in
                try c.queries([SQLStatement("INSERT INTO names VALUES ('c') RETURNING name"), SQLStatement("INSERT INTO names VALUES ('a') RETURNING name"),
                               SQLStatement("SELECT 1 AS one")])
            }
            Issue.record("a duplicate key cannot commit")
        } catch {
            #expect(error.code == .conflict, "\(error.message)")
        }
        #expect(try database.withConnection { (c) throws(StoreError) in try c.query("SELECT name FROM names ORDER BY name").map { $0["name"].text } } == ["a", "b"])
    }

    /// Fresh queries whose SQL varies (the workers name the applications they leave out) are prepared up to a
    /// bound; past it they are planned by their run, answered the same, and the kept statements stay prepared.
    @Test func freshQueriesPastTheirBoundArePlannedByTheirRun() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, maximumConnections: 1)
        let counts = try database.withConnection { (c) throws(StoreError) -> (answers: [Int64?], prepared: Int64?, kept: Bool) in
            try c.execute("CREATE TABLE apps (code TEXT PRIMARY KEY); INSERT INTO apps SELECT 'app-' || n FROM generate_series(1, 100) n")
            let kept = "SELECT COUNT(*) AS n FROM apps"
            _ = try c.query(kept, [], planning: .kept)
            var answers: [Int64?] = []
            for n in 1...(PostgresDatabase.freshStatements + 8) {
                answers.append(try c.query("SELECT COUNT(*) AS n FROM apps WHERE code NOT IN ('app-\(n)')", [], planning: .fresh)[0]["n"].int)
            }
            let prepared = try c.query("SELECT COUNT(*) AS n FROM pg_prepared_statements WHERE statement LIKE 'SELECT COUNT(*) AS n FROM apps WHERE%'", [], planning: .kept)[0]["n"].int
            let stillKept = try c.query("SELECT COUNT(*) AS n FROM pg_prepared_statements WHERE statement = ?", [.text(kept)], planning: .kept)[0]["n"].int == 1
            return (answers, prepared, stillKept)
        }
        #expect(counts.answers.allSatisfy { $0 == 99 }, "\(counts.answers)")
        #expect(counts.prepared == Int64(PostgresDatabase.freshStatements), "prepared up to the bound, no more")
        #expect(counts.kept, "the kept statement was not pushed out")
    }

    /// A `.fresh` query whose plan is old is prepared again even when writes were sent ahead of it, alone or among
    /// queries: the writes are answered first, the query sees them, and the old statement is deallocated.
    @Test func aFreshQueryPreparedAgainAfterWritesSentAheadSeesThem() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, maximumConnections: 1, replanInterval: .zero)
        try database.withConnection { (c) throws(StoreError) in try c.execute("CREATE TABLE names (name TEXT PRIMARY KEY)") }
        let count = "SELECT COUNT(*) AS n FROM names", alone = "SELECT COUNT(*) AS alone FROM names"
        var names: [String: [String]] = [:]
        for round in 1...3 {
            let seen = try database.write { (c) throws(StoreError) -> (alone: Int64?, together: Int64?, last: String?) in
                try c.send("INSERT INTO names VALUES (?)", [.text("a\(round)")])
                let single = try c.query(alone, [], planning: .fresh)[0]["alone"].int
                try c.send("INSERT INTO names VALUES (?)", [.text("b\(round)")])
                let together = try c.queries([SQLStatement(count, planning: .fresh),
                                              SQLStatement("SELECT MAX(name) AS last FROM names", planning: .fresh)])
                return (single, together[0].first?["n"].int, together[1].first?["last"].text)
            }
            #expect(seen.alone == Int64(2 * round - 1) && seen.together == Int64(2 * round) && seen.last == "b\(round)", "round \(round): \(seen)")
            let prepared = try database.withConnection { (c) throws(StoreError) in
                try c.query("SELECT name, statement FROM pg_prepared_statements WHERE statement IN (?, ?)", [.text(count), .text(alone)])
            }
            #expect(prepared.count == 2, "each old statement was deallocated: \(prepared)")
            for row in prepared { names[row["statement"].text ?? "", default: []].append(row["name"].text ?? "") }
        }
        #expect(Set(names[alone] ?? []).count == 3, "the query after the writes was prepared again each time: \(names)")
        #expect(Set(names[count] ?? []).count == 3, "and the one among queries: \(names)")
    }

    /// The statement cache starts over at 256 statements (DEALLOCATE ALL): when that happens while the statements
    /// of one `queries` call are prepared, the ones prepared before it are prepared again, not sent by a dropped
    /// name. Three new statements a call, 900 in all: the cache starts over in the middle of a call several times.
    @Test func queriesSurviveTheStatementCacheStartingOver() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, maximumConnections: 1)
        for n in 0..<300 {
            let read = try database.write { (c) throws(StoreError) -> [[SQLRow]] in
                try c.queries([SQLStatement("SELECT \(n) AS a"), SQLStatement("SELECT \(n + 1000) AS b"), SQLStatement("SELECT \(n + 2000) AS c")])
            }
            #expect(read.map { $0.first?.values.first?.int } == [Int64(n), Int64(n + 1000), Int64(n + 2000)])
        }
    }

    /// PostgreSQL answers the COMMIT of a transaction in which a statement failed with a ROLLBACK: an error a caller
    /// caught (or met at a later statement, as a sent write's error is) must not pass for a commit.
    @Test func aTransactionWithACaughtErrorDoesNotPassForCommitted() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url, maximumIdleConnections: 1, maximumConnections: 1)
        try database.withConnection { (c) throws(StoreError) in try c.execute("CREATE TABLE names (name TEXT PRIMARY KEY); INSERT INTO names VALUES ('a')") }
        do {
            try database.write { (c) throws(StoreError) in
                try c.run("INSERT INTO names VALUES ('b')")
                do { try c.run("INSERT INTO names VALUES ('a')") } catch {}
            }
            Issue.record("a transaction with a failed statement cannot commit")
        } catch {
            #expect(error.code == .io && error.message.contains("rolled back at its commit"), "\(error.message)")
        }
        #expect(try database.withConnection { (c) throws(StoreError) in try c.query("SELECT name FROM names").map { $0["name"].text } } == ["a"])
    }

    /// A write with large values is not left in the pipeline: past 8 KB libpq would hand it to the server before the
    /// sync, and the server does not count such a session as idle in its transaction (its 5 s limit would not end a
    /// paused writer). Here 10 KB: it waits for the row it writes, which another session holds for a tenth of a second.
    @Test func aWriteWithLargeValuesIsAnsweredAtOnce() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL); INSERT INTO notes VALUES (1, '')")
        }
        let holder = RowHolder(database, lock: "UPDATE notes SET body = 'held' WHERE id = 1", seconds: 0.1)
        try database.write { (c) throws(StoreError) in
            try c.send("UPDATE notes SET body = ? WHERE id = 1", [.text(String(repeating: "x", count: 10_000))])
            holder.signal()
        }
        #expect(!holder.signalledWhileHeld && holder.wasReleased, "the large write waited for its row, as a statement run at once does")
        #expect(try database.withConnection { (c) throws(StoreError) in try c.query("SELECT length(body) AS n FROM notes")[0]["n"].int } == 10_000)
    }

    /// Writes of different nodes run at once and lock only their rows. One that meets a row another session holds
    /// past the write's short wait gives way and runs again in the next group; held longer than its few tries, its
    /// caller gets `.busy` (a 503 at the API) within a second, nothing of it written, while a write of another row
    /// beside it goes through at once.
    @Test func aWriteThatMeetsAHeldRowGivesWayAndRunsAgain() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL); INSERT INTO notes VALUES (1, ''), (2, '')")
        }
        // Held for half a second: past one wait, within the tries.
        let briefly = RowHolder(database, lock: "UPDATE notes SET body = 'held' WHERE id = 1", seconds: 0.5)
        var runs = 0
        try database.write { (c) throws(StoreError) in
            runs += 1
            try c.run("UPDATE notes SET body = 'written' WHERE id = 1")
        }
        #expect(runs >= 2, "the write gave way at least once, and went through once the row was let go: \(runs) runs")
        #expect(!briefly.signalledWhileHeld)

        // Held for 3 s, as by a node paused in the middle of its transaction.
        let paused = RowHolder(database, lock: "UPDATE notes SET body = 'paused' WHERE id = 1", seconds: 3)
        let besideError = Mutex<String?>("not run")
        let other = Thread {
            do {
                try database.write { (c) throws(StoreError) in _ = try c.run("UPDATE notes SET body = 'beside' WHERE id = 2") }
                besideError.withLock { $0 = nil }
            } catch {
                besideError.withLock { $0 = "\(error)" }
            }
        }
        let began = ContinuousClock.now
        other.start()
        let refused = #expect(throws: StoreError.self) {
            try database.write { (c) throws(StoreError) in try c.run("UPDATE notes SET body = 'late' WHERE id = 1") }
        }
        #expect(refused?.code == .busy, "\(String(describing: refused))")
        let waited = ContinuousClock.now - began
        #expect(waited < .seconds(1.5), "the caller got its answer within about a second: \(waited)")
        #expect(waitUntil(seconds: 1) { besideError.withLock { $0 != "not run" } })
        #expect(besideError.withLock { $0 } == nil)
        #expect(!paused.wasReleased, "the row was still held when the write gave up, and the other row's write was done")
        let bodies = try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT id, body FROM notes ORDER BY id").map { $0["body"].text ?? "" }
        }
        #expect(bodies == ["written", "beside"], "the other row was written beside it, and nothing of the write that gave up: \(bodies)")
        paused.signal()
    }

    /// Many small writes sent on, 20 KB in all: none reaches the server before the sync. libpq hands its buffer over
    /// by itself past 8 KB, so writes that would fill it go at once, with the ones ahead. Seen from another session,
    /// the writer's backend is idle in its transaction (its 5 s limit then applies), never left running statements
    /// that wait for a sync.
    @Test func writesSentOnNeverReachTheServerWithoutTheirSync() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        let observer = try PostgresDatabase(url: created.url)
        try database.withConnection { (c) throws(StoreError) in try c.execute("CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL)") }
        let states = try database.write { (c) throws(StoreError) -> Set<String> in
            let pid = try c.query("SELECT pg_backend_pid() AS pid")[0]["pid"]
            var states: Set<String> = []
            for id in 1...50 {
                try c.send("INSERT INTO notes VALUES (?, ?)", [.int(Int64(id)), .text(String(repeating: "n", count: 400))])
                states.insert(try observer.withConnection { (o) throws(StoreError) in
                    try o.query("SELECT state FROM pg_stat_activity WHERE pid = ?", [pid], planning: .fresh).first?["state"].text ?? "gone"
                })
            }
            return states
        }
        #expect(states == ["idle in transaction"], "\(states)")
        #expect(try database.withConnection { (c) throws(StoreError) in try c.query("SELECT COUNT(*) AS n FROM notes")[0]["n"].int } == 50)
    }

    /// Outside a transaction each statement commits alone: a sent write is done when `send` returns.
    @Test func aWriteSentOutsideATransactionIsDoneAtOnce() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        let other = try PostgresDatabase(url: created.url)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE TABLE names (name TEXT PRIMARY KEY)")
            try c.send("INSERT INTO names VALUES ('alone')", [])
            #expect(try other.withConnection { (o) throws(StoreError) in try o.query("SELECT name FROM names").count } == 1)
            #expect {
                try c.send("INSERT INTO names VALUES ('alone')", [])
            } throws: { ($0 as? StoreError)?.code == .conflict }
        }
    }

    @Test func passwordsAreHiddenWhereverTheURLPutsThem() {
        #expect(PostgresDatabase.redacted("postgresql://islet:s3cret@db:5432/islet?sslmode=require") == "postgresql://islet:***@db:5432/islet?sslmode=require")
        #expect(PostgresDatabase.redacted("postgresql://islet@db/islet?sslmode=require&password=s3cret") == "postgresql://islet@db/islet?sslmode=require&password=***")
        #expect(PostgresDatabase.redacted("postgresql:///islet?host=/run/postgresql") == "postgresql:///islet?host=/run/postgresql")
    }

    @Test func placeholdersBecomeNumberedParametersOutsideQuotedText() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        let row = try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT ? AS a, '?' AS quoted, ?2 AS again, -- the device's ? token
                       ? AS b, 'it''s ?' AS "what's?"
                """, [.int(7), .text("x"), .blob([0, 1, 255])])[0]
        }
        #expect(row["a"] == .int(7) && row["quoted"] == .text("?") && row["again"] == .text("x") && row["b"] == .blob([0, 1, 255]))
        #expect(row["what's?"] == .text("it's ?"), "quoted text, quoted names and comments keep their ? and apostrophes")
    }
}

/// Another session holds a row (`lock`, an UPDATE in a transaction of its own) until `signal()` or `seconds`
/// pass (well inside the server's 5 s limit on an idle transaction), then commits.
final class RowHolder: Sendable {
    private let signalled = Atomic<Bool>(false), whileHeld = Atomic<Bool>(false), released = Atomic<Bool>(false)

    init(_ database: PostgresDatabase, lock: String, seconds: Double) {
        let holding = DispatchSemaphore(value: 0)
        Thread { [self] in
            try? database.withConnection { (c) throws(StoreError) in
                try c.execute("BEGIN")
                try c.run(lock)
                holding.signal()
                _ = waitUntil(seconds: seconds) { self.signalled.load(ordering: .relaxed) }
                self.whileHeld.store(self.signalled.load(ordering: .relaxed), ordering: .relaxed)
                try c.execute("COMMIT")
                self.released.store(true, ordering: .relaxed)
            }
        }.start()
        holding.wait()
    }

    func signal() { signalled.store(true, ordering: .relaxed) }
    /// Whether `signal()` came while the row was still held (known once the other session let go of it).
    var signalledWhileHeld: Bool {
        waitUntil(seconds: 10) { released.load(ordering: .relaxed) }
        return whileHeld.load(ordering: .relaxed)
    }
    var wasReleased: Bool { released.load(ordering: .relaxed) }
}

/// Issue 14: nodes behind a pooler. Islet keeps state on each database session (prepared statements, the liveness
/// advisory lock, LISTEN), so PgBouncer works in session mode; in transaction mode the failure names the cause.
@Suite("PostgreSQL behind PgBouncer")
struct PgBouncerTests {
    @Test func sessionPoolingWorksAndTransactionPoolingIsRefusedNamingTheSetting() throws {
        let cluster = try TestPostgres.PrivateCluster()
        defer { cluster.stop() }

        // Session mode: two pools at once, each connection its own server session.
        let session = try TestPgBouncer(before: cluster, mode: "session", serverConnections: 2)
        defer { session.stop() }
        let first = try PostgresDatabase(url: session.url)
        let second = try PostgresDatabase(url: session.url, migrate: false)
        try first.write { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('POOL1-00001', 'p', 'com.example.p', 0)")
        }
        let read = try second.withConnection { (c) throws(StoreError) in
            try c.query("SELECT name FROM applications WHERE code = ?", [.text("POOL1-00001")]).first?["name"].text
        }
        #expect(read == "p")

        // Transaction mode with one server session: the second pool's first statement runs where the first pool's
        // connection prepared its statements, and the error says what to change.
        let pooled = try TestPgBouncer(before: cluster, mode: "transaction", serverConnections: 1)
        defer { pooled.stop() }
        _ = try PostgresDatabase(url: pooled.url, migrate: false)
        let refused = #expect(throws: StoreError.self) { try PostgresDatabase(url: pooled.url, migrate: false) }
        #expect(refused?.message.contains("pool_mode = session") == true, "\(String(describing: refused))")
        #expect(refused?.message.contains("SQLSTATE 42P05") == true)
    }
}
