import Foundation
import Testing
import IsletSQL
import IsletStore
import Synchronization

/// Issue 13: writes of concurrent requests share a transaction and its sync to disk, yet each request keeps
/// its own outcome.
@Suite("Group commit, on both engines")
struct GroupCommitTests {
    struct Refused: Error, Equatable { let n: Int }

    @Test(arguments: Engine.allCases) func aFailedWriteRollsBackOnlyItselfWhileItsGroupCommits(_ engine: Engine) async throws {
        let db = try engine.open()
        let database = db.database
        _ = try database.withConnection { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('GROUP-00001', 'g', 'com.example.g', 0)")
        }
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for n in 0..<40 {
                group.addTask {
                    do {
                        try database.write(rethrowing: { c in
                            try c.run("INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('GROUP-00001', ?, 'AND', '[]', 0)",
                                      [.text("f\(n)")])
                            if n % 5 == 0 { throw Refused(n: n) }   // after its insert: the insert must not survive
                        })
                        return (n, true)
                    } catch let refused as Refused {
                        #expect(refused == Refused(n: n), "each writer gets its own error")
                        return (n, false)
                    }
                }
            }
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        let stored = try database.withConnection { (c) throws(StoreError) in
            Set(try c.query("SELECT name FROM filters").compactMap { $0["name"].text })
        }
        #expect(stored == Set((0..<40).filter { $0 % 5 != 0 }.map { "f\($0)" }))
        #expect(outcomes.filter { !$0.value }.keys.sorted() == Array(stride(from: 0, to: 40, by: 5)))
    }

    /// SQLite: the pages a group's savepoints change are journalled in memory, not in a temporary file made and
    /// unlinked at every commit (SQLite's default spills past 64 KiB: a group of a few updates did).
    @Test func aSavepointJournalStaysInMemoryOnSQLite() throws {
        let db = try Engine.sqlite.open()
        let database = db.database
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE TABLE journal_probe (id INTEGER PRIMARY KEY, v TEXT)")
            try c.run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO journal_probe SELECT i, printf('%.1000c', 'x') FROM n")
        }
        var made: Set<String> = [], changed = 0
        try database.write(rethrowing: { c in
            let before = try Self.sqliteTemporaryFiles()
            try c.execute("SAVEPOINT probe")
            // About 400 KB of pages that existed before the transaction, each journalled by the savepoint.
            changed = try c.run("UPDATE journal_probe SET v = v || 'y'")
            made = try Self.sqliteTemporaryFiles().subtracting(before)
            try c.execute("RELEASE probe")
        })
        #expect(changed == 400)
        #expect(made.isEmpty, "a savepoint journal spilled to \(made)")
    }

    /// The temporary files SQLite has open in this process (named `etilqs_…`, unlinked once open).
    static func sqliteTemporaryFiles() throws -> Set<String> {
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
        #expect(!fds.isEmpty, "this process's descriptors are listed")
        return Set(fds.compactMap { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")).flatMap { $0.contains("/etilqs_") ? "\(fd) \($0)" : nil }
        })
    }

    /// A failing statement sent on without waiting for its answer (`send`, PostgreSQL's pipeline) fails its own
    /// writer only: 39 writes queue behind a leader and run as one group (a savepoint each), every fifth sending a
    /// duplicate key. Their answers come in a later member's round trip or before the commit; the first statement
    /// that failed names its writer, which is rolled back, and the members whose statements were skipped run again.
    @Test(arguments: Engine.allCases) func aSentWriteThatFailsFailsOnlyItsWriter(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        try Self.application("GROUP-00004", withAFilterNamed: "taken", in: database)
        let (outcomes, transactions) = Self.oneGroup(database, writers: 40) { n, c in
            let insert = "INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('GROUP-00004', ?, 'AND', '[]', 0)"
            try c.send(insert, [.text("f\(n)")])
            if n % 5 == 0 { try c.send(insert, [.text("taken")]) }
            try c.send("UPDATE applications SET name = ? WHERE code = 'GROUP-00004'", [.text("g\(n)")])
        }
        let stored = try database.withConnection { (c) throws(StoreError) in
            Set(try c.query("SELECT name FROM filters").compactMap { $0["name"].text })
        }
        #expect(transactions == 2, "the leader alone, then the 39 in one group")
        #expect(stored == Set((0..<40).filter { $0 % 5 != 0 }.map { "f\($0)" } + ["taken"]))
        #expect(outcomes.filter { $0.value == StoreError.Code.conflict.rawValue }.keys.sorted() == Array(stride(from: 0, to: 40, by: 5)))
        #expect(outcomes.filter { $0.value == "ok" }.count == 32)
    }

    static func application(_ code: String, withAFilterNamed filter: String, in database: any SQLDatabase) throws {
        try database.withConnection { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES (?, 'g', 'com.example.g', 0)", [.text(code)])
            try c.run("INSERT INTO filters (application, name, operator, conditions, created_at) VALUES (?, ?, 'AND', '[]', 0)", [.text(code), .text(filter)])
        }
    }

    /// Runs `count` writers of `body` through one `GroupCommit` on `database`: writer 0 leads a group of its own and
    /// holds it until all the others wait, so writers 1..<count run as one group. Each writer's outcome ("ok", its
    /// `StoreError`'s code, or "refused n"), and how many transactions ran.
    static func oneGroup(_ database: any SQLDatabase, writers count: Int,
                         _ body: @escaping @Sendable (Int, any SQLConnection) throws -> Void) -> (outcomes: [Int: String], transactions: Int) {
        oneGroup(database, writers: count, reads: { _ in nil }, { n, c, _ in try body(n, c) })
    }

    /// `oneGroup` for writers that read first (`reads`: each writer's `GroupReads`, or nil), given their rows.
    static func oneGroup(_ database: any SQLDatabase, writers count: Int, reads: @escaping @Sendable (Int) -> GroupReads?,
                         wrapping wrap: @escaping @Sendable (any SQLConnection) -> any SQLConnection = { $0 },
                         _ body: @escaping @Sendable (Int, any SQLConnection, [[SQLRow]]) throws -> Void) -> (outcomes: [Int: String], transactions: Int) {
        let commit = GroupCommit(budget: .seconds(600))
        let release = DispatchSemaphore(value: 0), leading = Atomic<Bool>(false), finished = Atomic<Int>(0)
        let outcomes = Mutex<[Int: String]>([:]), transactions = Atomic<Int>(0)
        func write(_ n: Int) {
            Thread {
                var outcome = "ok"
                do {
                    try commit.write(bulk: false, reading: reads(n), { c, rows in
                        if n == 0 {
                            leading.store(true, ordering: .relaxed)
                            release.wait()
                        }
                        try body(n, c, rows)
                    }, transaction: { group in
                        transactions.add(1, ordering: .relaxed)
                        try database.inWriteTransaction { c in try group(wrap(c)) }
                    })
                } catch let error as StoreError {
                    outcome = error.code.rawValue
                } catch let refused as Refused {
                    outcome = "refused \(refused.n)"
                } catch {
                    outcome = "\(error)"
                }
                outcomes.withLock { $0[n] = outcome }
                finished.add(1, ordering: .relaxed)
            }.start()
        }
        write(0)
        #expect(waitUntil(seconds: 30) { leading.load(ordering: .relaxed) })
        for n in 1..<count {
            write(n)
            #expect(waitUntil(seconds: 30) { commit.waiting == n })
        }
        release.signal()
        #expect(waitUntil(seconds: 60) { finished.load(ordering: .relaxed) == count })
        return (outcomes.withLock { $0 }, transactions.load(ordering: .relaxed))
    }

    /// A member's writes go out with the next member's first query (one round trip a member on PostgreSQL), so
    /// their error surfaces in that member's body: it is still the writer's whose statement failed. Writers
    /// alternate: one sends an insert (every third a taken name), the next reads, then sends; one refuses in Swift
    /// before any statement, right after a failing writer; one meets a conflict of its own and refuses. Only the
    /// failing writers and the refusing ones fail, each with its own error, and every other write commits.
    @Test(arguments: Engine.allCases) func aSentWriteThatFailsInTheNextWritersRoundTripFailsOnlyItsWriter(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        try Self.application("GROUP-00005", withAFilterNamed: "taken", in: database)
        let seen = Mutex<[Int: Int64]>([:])
        let (outcomes, transactions) = Self.oneGroup(database, writers: 24) { n, c in
            let insert = "INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('GROUP-00005', ?, 'AND', '[]', 0)"
            if n == 8 { throw Refused(n: n) }   // right after writer 7, which fails
            if n == 20 {
                // Its own statement fails and it says what that means: the group keeps its word, not the database's.
                do { try c.run(insert, [.text("taken")]) } catch { throw Refused(n: n) }
            }
            if n % 2 == 1 {
                try c.send(insert, [.text(n % 3 == 1 ? "taken" : "f\(n)")])
            } else {
                let count = try c.query("SELECT COUNT(*) AS count FROM filters WHERE application = 'GROUP-00005'")[0]["count"].int ?? -1
                seen.withLock { $0[n] = count }
                try c.send(insert, [.text("f\(n)")])
            }
        }
        let failing = (0..<24).filter { $0 % 2 == 1 && $0 % 3 == 1 }   // 1, 7, 13, 19
        var expected = Dictionary(uniqueKeysWithValues: (0..<24).map { ($0, "ok") })
        for n in failing { expected[n] = StoreError.Code.conflict.rawValue }
        expected[8] = "refused 8"
        expected[20] = "refused 20"
        #expect(outcomes == expected)
        #expect(transactions == 2, "the leader alone, then the 23 in one group")
        let stored = try database.withConnection { (c) throws(StoreError) in
            Set(try c.query("SELECT name FROM filters WHERE application = 'GROUP-00005'").compactMap { $0["name"].text })
        }
        let refusing: Set = [8, 20]
        #expect(stored == Set((0..<24).filter { !failing.contains($0) && !refusing.contains($0) }.map { "f\($0)" } + ["taken"]))
        // Each reader saw the writes of the members before it that committed: none of a failed one.
        for (n, count) in seen.withLock({ $0 }) where n > 0 {
            let before = (0..<n).filter { !failing.contains($0) && !refusing.contains($0) }.count
            #expect(count == Int64(before + 1), "writer \(n) read \(count)")
        }
    }

    /// Writes that read first (`GroupReads`) have their reads made together, one round trip for as many members as
    /// read different keys: 23 writers over 6 keys, each counting the filters of its key and then adding one. A writer
    /// whose key an earlier member of the group wrote reads after that member's writes, so each counts exactly the
    /// writers of its key before it; the group asks 4 times (`queries`), never a query per member.
    @Test(arguments: Engine.allCases) func aGroupsReadsGoTogetherYetEachSeesTheWritesBeforeIt(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        try Self.application("GROUP-00006", withAFilterNamed: "taken", in: database)
        let seen = Mutex<[Int: Int64]>([:])
        let asked = AskCounting.Notes()
        let (outcomes, transactions) = Self.oneGroup(database, writers: 24, reads: { n in Self.countingReads(n) },
                                                     wrapping: { AskCounting($0, asked) }) { n, c, rows in
            seen.withLock { $0[n] = rows[0][0]["count"].int ?? -1 }
            try c.send("INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('GROUP-00006', ?, 'AND', '[]', 0)",
                       [.text("key\(n % 6)-\(n)")])
        }
        #expect(outcomes == Dictionary(uniqueKeysWithValues: (0..<24).map { ($0, "ok") }))
        #expect(transactions == 2, "the leader alone, then the 23 in one group")
        for (n, count) in seen.withLock({ $0 }) where n > 0 {
            #expect(count == Int64((0..<n).filter { $0 % 6 == n % 6 }.count), "writer \(n) read \(count)")
        }
        // The leader's one query, then members 1–6, 7–12, 13–18 and 19–23 (a key repeats every sixth member).
        #expect(asked.entries.withLock { $0 } == ["queries 1", "queries 6", "queries 6", "queries 6", "queries 5"])
    }

    /// A write's reads that fail when read ahead (here a statement the server refuses; in production a row lock not
    /// granted in time) are rolled back and made again by each member alone: only the failing writer fails. A member's
    /// sent write that fails surfaces in the next reads' round trip and still fails its own writer only.
    @Test(arguments: Engine.allCases) func aReadAheadThatFailsFailsOnlyItsWriter(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        try Self.application("GROUP-00007", withAFilterNamed: "taken", in: database)
        let (outcomes, _) = Self.oneGroup(database, writers: 24, reads: { n in
            n == 9 ? GroupReads([SQLStatement("SELECT no_such_column AS count FROM filters")], keys: ["key\(n % 6)"]) : Self.countingReads(n)
        }) { n, c, rows in
            let insert = "INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('GROUP-00007', ?, 'AND', '[]', 0)"
            #expect(rows.count == 1)
            try c.send(insert, [.text(n == 18 ? "taken" : "key\(n % 6)-\(n)")])
        }
        var expected = Dictionary(uniqueKeysWithValues: (0..<24).map { ($0, "ok") })
        expected[9] = StoreError.Code.io.rawValue
        expected[18] = StoreError.Code.conflict.rawValue
        #expect(outcomes == expected)
        let stored = try database.withConnection { (c) throws(StoreError) in
            Set(try c.query("SELECT name FROM filters WHERE application = 'GROUP-00007'").compactMap { $0["name"].text })
        }
        #expect(stored == Set((0..<24).filter { $0 != 9 && $0 != 18 }.map { "key\($0 % 6)-\($0)" } + ["taken"]))
    }

    /// Writes that can be made together (`GroupReads.together`) are offered to one write a wave, the wave's keys apart:
    /// those it makes run no body, those it leaves run their own, and a wave whose write together fails runs all of its
    /// members alone. 24 writers over 6 keys, so waves 1–6, 7–12, 13–18 and 19–23; the write together makes the even
    /// writers and leaves the odd ones, but makes all of the last wave. Two waves fail, each on a name taken, and on
    /// PostgreSQL each failure surfaces later: writer 14's in writer 13's reads, writer 22's at the group's last flush.
    @Test(arguments: Engine.allCases) func writesMadeTogetherRunNoBodyAndTheOthersRunAlone(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        try Self.application("GROUP-00009", withAFilterNamed: "taken", in: database)
        let bodies = Mutex<Set<Int>>([]), notes = FilterTogether.Notes()
        let (outcomes, transactions) = Self.oneGroup(database, writers: 24, reads: { n in
            GroupReads([SQLStatement("SELECT 1 AS one")], keys: ["key\(n % 6)"], together: FilterTogether(n: n, notes))
        }) { n, c, _ in
            bodies.withLock { _ = $0.insert(n) }
            try c.send(FilterTogether.insert, [.text("alone-\(n)")])
        }
        #expect(outcomes == Dictionary(uniqueKeysWithValues: (0..<24).map { ($0, "ok") }))
        #expect(transactions == 2, "the leader alone, then the 23 in one group")
        #expect(notes.waves.withLock { $0 } == [Array(1...6), Array(7...12), Array(13...18), Array(19...23)])
        let alone = Set([0] + (1..<24).filter { $0 % 2 == 1 || $0 >= 13 })
        #expect(bodies.withLock { $0 } == alone)
        let stored = try database.withConnection { (c) throws(StoreError) in
            Set(try c.query("SELECT name FROM filters WHERE application = 'GROUP-00009'").compactMap { $0["name"].text })
        }
        #expect(stored == Set(alone.map { "alone-\($0)" } + (0..<24).filter { !alone.contains($0) }.map { "together-\($0)" } + ["taken"]))
    }

    /// A write made together: a filter `together-n` for even writers and those from 19 on, made by one member for its wave.
    final class FilterTogether: WriteTogether, @unchecked Sendable {
        final class Notes: Sendable { let waves = Mutex<[[Int]]>([]) }
        static let insert = "INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('GROUP-00009', ?, 'AND', '[]', 0)"
        let n: Int
        let notes: Notes
        init(n: Int, _ notes: Notes) {
            self.n = n
            self.notes = notes
        }

        func write(together members: [any WriteTogether], _ c: any SQLConnection) throws -> [Bool] {
            let writers = members.compactMap { ($0 as? FilterTogether)?.n }
            notes.waves.withLock { $0.append(writers) }
            let made = writers.map { $0 % 2 == 0 || $0 >= 19 }
            for (n, made) in zip(writers, made) where made { try c.send(Self.insert, [.text(n == 14 || n == 22 ? "taken" : "together-\(n)")]) }
            return made
        }
    }

    /// Writer `n`'s read: how many filters of its key (`n % 6`) there are.
    static func countingReads(_ n: Int) -> GroupReads {
        GroupReads([SQLStatement("SELECT COUNT(*) AS count FROM filters WHERE name LIKE ?", [.text("key\(n % 6)-%")])], keys: ["key\(n % 6)"])
    }

    /// A connection that notes each `query` and `queries` asked of it, with how many statements, and passes it on.
    final class AskCounting: SQLConnection, @unchecked Sendable {
        final class Notes: Sendable { let entries = Mutex<[String]>([]) }
        let wrapped: any SQLConnection
        let asked: Notes
        init(_ wrapped: any SQLConnection, _ asked: Notes) {
            self.wrapped = wrapped
            self.asked = asked
        }
        func execute(_ sql: String) throws(StoreError) { try wrapped.execute(sql) }
        func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int { try wrapped.run(sql, parameters) }
        func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow] {
            asked.entries.withLock { $0.append("query") }
            return try wrapped.query(sql, parameters, planning: planning)
        }
        func send(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) { try wrapped.send(sql, parameters) }
        func flush() throws(StoreError) { try wrapped.flush() }
        func queries(_ statements: [SQLStatement]) throws(StoreError) -> [[SQLRow]] {
            asked.entries.withLock { $0.append("queries \(statements.count)") }
            return try wrapped.queries(statements)
        }
        func inTransaction<T>(_ body: () throws -> T) throws -> T { try wrapped.inTransaction(body) }
        var statementsIssued: Int { wrapped.statementsIssued }
        func firstFailure() -> (statement: Int, error: StoreError)? { wrapped.firstFailure() }
    }

    @Test(arguments: Engine.allCases) func aLoneWriteThatFailsLeavesNothing(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        // Alone in its group (no other writer runs), so it has no savepoint: the transaction itself rolls back.
        #expect(throws: Refused.self) {
            try database.write(rethrowing: { c in
                try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('GROUP-00003', 'g', 'com.example.g', 0)")
                throw Refused(n: 1)
            })
        }
        let count = try database.withConnection { (c) throws(StoreError) -> Int64 in
            try c.query("SELECT COUNT(*) AS count FROM applications WHERE code = 'GROUP-00003'")[0]["count"].int ?? -1
        }
        #expect(count == 0)
        try database.write { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('GROUP-00003', 'g', 'com.example.g', 0)")
        }
    }

    @Test(arguments: Engine.allCases) func aWriteSeesTheWritesCommittedBeforeIt(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        try database.write { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('GROUP-00002', 'g', 'com.example.g', 0)")
        }
        let count = try database.write { (c) throws(StoreError) -> Int64 in
            try c.query("SELECT COUNT(*) AS count FROM applications WHERE code = 'GROUP-00002'")[0]["count"].int ?? 0
        }
        #expect(count == 1)
    }

    /// A connection that accepts every statement: the order and grouping of the bodies is what is tested.
    final class NullConnection: SQLConnection, @unchecked Sendable {
        func execute(_ sql: String) throws(StoreError) {}
        func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int { 0 }
        func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow] { [] }
        func inTransaction<T>(_ body: () throws -> T) throws -> T { try body() }
    }

    /// A small write (an API update) that arrives behind two fan-out pages runs before them in the next group;
    /// with a budget spent by each body, every member commits in a transaction of its own.
    @Test(arguments: [false, true]) func smallWritesGoFirstAndTheBudgetSplitsAGroup(tightBudget: Bool) throws {
        let commit = GroupCommit(budget: tightBudget ? .zero : .seconds(600))
        let order = Mutex<[String]>([])
        let transactions = Atomic<Int>(0), finished = Atomic<Int>(0)
        let release = DispatchSemaphore(value: 0)
        let connection = NullConnection()
        func write(_ name: String, bulk: Bool, holding: Bool = false) {
            Thread {
                try? commit.write(bulk: bulk, { _ in
                    order.withLock { $0.append(name) }
                    if holding { release.wait() }
                }, transaction: { group in
                    transactions.add(1, ordering: .relaxed)
                    try group(connection)
                })
                finished.add(1, ordering: .relaxed)
            }.start()
        }
        func waitFor(_ condition: () -> Bool) {
            let deadline = ContinuousClock.now + .seconds(30)
            while !condition() && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
        }
        write("leader", bulk: false, holding: true)
        waitFor { order.withLock { $0 } == ["leader"] }
        write("page 1", bulk: true)
        waitFor { commit.waiting == 1 }
        write("page 2", bulk: true)
        waitFor { commit.waiting == 2 }
        write("update", bulk: false)
        waitFor { commit.waiting == 3 }
        #expect(commit.waiting == 3, "three writes wait while the leader's group runs")
        release.signal()
        waitFor { finished.load(ordering: .relaxed) == 4 }
        #expect(finished.load(ordering: .relaxed) == 4)
        #expect(order.withLock { $0 } == ["leader", "update", "page 1", "page 2"])
        #expect(transactions.load(ordering: .relaxed) == (tightBudget ? 4 : 2))
    }

    /// A group whose transaction cannot begin (the database went away) fails all its members at once: none is
    /// left to try again alone, each waiting out its own failure.
    @Test func aTransactionThatCannotBeginFailsTheWholeGroup() throws {
        let commit = GroupCommit(budget: .zero)
        let transactions = Atomic<Int>(0), failed = Atomic<Int>(0), finished = Atomic<Int>(0)
        let release = DispatchSemaphore(value: 0)
        let connection = NullConnection()
        func write(bulk: Bool, holding: Bool = false) {
            Thread {
                do {
                    try commit.write(bulk: bulk, { _ in if holding { release.wait() } }, transaction: { group in
                        // The first transaction (the leader's) begins; the next cannot.
                        if transactions.add(1, ordering: .relaxed).newValue > 1 { throw Refused(n: 0) }
                        try group(connection)
                    })
                } catch {
                    failed.add(1, ordering: .relaxed)
                }
                finished.add(1, ordering: .relaxed)
            }.start()
        }
        func waitFor(_ condition: () -> Bool) {
            let deadline = ContinuousClock.now + .seconds(30)
            while !condition() && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
        }
        write(bulk: false, holding: true)
        waitFor { transactions.load(ordering: .relaxed) == 1 }
        for n in 1...3 {
            write(bulk: n == 2)
            waitFor { commit.waiting == n }
        }
        #expect(commit.waiting == 3)
        release.signal()
        waitFor { finished.load(ordering: .relaxed) == 4 }
        #expect(failed.load(ordering: .relaxed) == 3, "the three waiting writes fail together")
        #expect(transactions.load(ordering: .relaxed) == 2, "one failed attempt for all three")
    }
}
