import CPostgres
import Foundation
import IsletSQL
import IsletStore

/// One libpq connection with its prepared statements.
///
/// `@unchecked Sendable`: a connection is only ever used by the thread that checked it out of
/// `PostgresDatabase`'s pool; it is never shared while in use.
final class PostgresConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    /// Prepared statements by SQL text and parameter types (PostgreSQL fixes the types when preparing).
    private var statements: [String: Prepared] = [:]
    /// A statement prepared on the server: its name, and for `.fresh` planning when it is prepared again.
    private struct Prepared {
        let name: String
        let replanAt: ContinuousClock.Instant?
    }
    /// How old a `.fresh` statement's plan may be before the statement is prepared (and planned) again.
    private let replanInterval: Duration
    /// Statements prepared on this connection so far: names are never reused.
    private var prepared = 0
    /// How many times the statement cache started over (`DEALLOCATE ALL`).
    private var cacheStartedOver = 0
    /// Translated SQL by the SQL the stores write.
    private var translations: [String: (sql: String, parameters: Int)] = [:]
    private let origin: String
    /// Writes sent ahead in pipeline mode (`send`) whose answers are not read yet, in order: the SQL (for
    /// messages) and the prepared statement's key (forgotten if the server no longer knows it).
    private var unanswered: [Unanswered] = []
    /// At most this many writes wait unanswered: their answers are small, so the server never blocks writing
    /// them while this side blocks sending (libpq's warning about pipelines on a blocking connection).
    static let pipelineDepth = 64
    /// And at most about this many bytes on the wire: libpq hands its buffer to the server by itself once it holds
    /// 8 KB, and statements the server holds without a sync do not count as idle in the transaction.
    static let pipelineBytes = 6 * 1024
    private var unansweredBytes = 0
    /// Statements issued on this connection so far, each numbered by this count before it.
    private(set) var statementsIssued = 0
    /// The first statement that failed since the transaction began or last rolled back (a statement after it in
    /// the transaction fails too, or is skipped in a pipeline): its number and its error.
    private var firstFailed: (statement: Int, error: StoreError)?
    /// What `sendOncePerTransaction` sent in this transaction.
    private var sentOnce: Set<String> = []

    /// How long a write waits for a row another transaction holds, in milliseconds. Writes of different nodes
    /// run at once and lock only the rows they change (an update its activity): they meet only on the same rows,
    /// for the few milliseconds of a group. Past this, the member that waited gives way (`.busy`) and the group
    /// commit runs it again in its next group, so a node paused holding a row (SIGSTOP, a VM freeze) holds up
    /// the calls on that row only, and briefly, never every writer of the cluster; two groups locking the
    /// same activities in opposite orders part after this wait too, long before PostgreSQL's
    /// one-second `deadlock_timeout`.
    static let writeLockWait = 200

    /// A write transaction's first round trip. Its shared hold of the schema's turn (`SQLDialect.takingTurns(on: nil)`)
    /// costs nothing among writers, who all share it, and keeps them apart from a migration, and from the writes of
    /// a node of an older Islet during a rolling upgrade, which took that lock alone.
    static let beginWrite = "BEGIN; SET LOCAL lock_timeout = '\(writeLockWait)ms'; "
        + "SELECT pg_advisory_xact_lock_shared(\(SQLDialect.turnsClass), hashtext(current_schema()))"

    /// Seconds a session may stay idle inside a transaction before the server ends it (and its locks).
    static let idleInTransactionLimit = 5

    /// Connects to `url` (`postgresql://user:password@host:port/database?sslmode=…`); `origin` names the
    /// server in messages, without the password.
    /// `name`: the session's `application_name` (what `pg_stat_activity` shows), unless the URL sets one.
    init(url: String, origin: String, name: String = "islet", replanInterval: Duration = PostgresDatabase.replanInterval) throws(StoreError) {
        self.origin = origin
        self.replanInterval = replanInterval
        // URL values win over these defaults, which come before it. A network that drops every packet (a cut route,
        // a partition) must not hold a call for minutes: a statement whose bytes go unacknowledged fails after
        // `tcp_user_timeout` (ms), and an idle connection (the liveness session's) is found dead by keepalives.
        let keywords = ["connect_timeout", "tcp_user_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "application_name", "dbname"]
        let values = ["5", "\(Self.unacknowledgedLimit)", "1", "5", "1", "3", name, url]
        let connection = keywords.withCStrings { keywordPointers in
            values.withCStrings { valuePointers in PQconnectdbParams(keywordPointers, valuePointers, 1) }
        }
        guard let connection else { throw StoreError(.io, "cannot connect to PostgreSQL at \(origin): out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw StoreError(.io, "cannot connect to PostgreSQL at \(origin): \(message)")
        }
        handle = connection
        islet_pq_quiet(connection)
        // A process paused (SIGSTOP, a VM freeze) inside a transaction would hold its row locks, and the writes
        // of other nodes to those rows: the server ends such a session after this. Islet's own transactions never
        // wait on anything but the database, so they are never idle this long.
        try execute("SET TIME ZONE 'UTC'; SET idle_in_transaction_session_timeout = '\(Self.idleInTransactionLimit)s'")
    }

    deinit { PQfinish(handle) }

    /// How long bytes sent may go unacknowledged before the connection counts as lost, in milliseconds, counted by
    /// Linux from the first retransmission (a retransmission timeout after the send, 200 ms at least): a call to a
    /// database cut off by the network fails within a second (a 503), rather than after TCP's retransmissions (about
    /// 15 minutes). Acknowledgements come within milliseconds on any working network, and this leaves room for a
    /// retransmission or two.
    static let unacknowledgedLimit = 400

    /// True once the connection lost its server (it was closed, or a network failure ended it).
    var lostServer: Bool { PQstatus(handle) == CONNECTION_BAD }

    /// True once the connection was lost because the server stopped acknowledging (`unacknowledgedLimit`, keepalives):
    /// it is out of reach, where a server that closed the connection is there to answer a new one.
    var lostToSilence: Bool {
        lostServer && String(cString: PQerrorMessage(handle)).contains(String(cString: strerror(ETIMEDOUT)))
    }

    /// False once the server went away; the pool then drops the connection.
    var isUsable: Bool {
        PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE && PQpipelineStatus(handle) == PQ_PIPELINE_OFF
    }

    func execute(_ sql: String) throws(StoreError) {
        // Rolled back (to a savepoint too), what was sent once is gone: the next write sends it again.
        if sql.hasPrefix("BEGIN") || sql.hasPrefix("ROLLBACK") || sql == "COMMIT" { sentOnce = [] }
        if !unanswered.isEmpty {
            // One statement (COMMIT, RELEASE) joins the writes sent ahead: one round trip for all of them. A
            // rollback runs whatever they said (they are what it undoes), so it goes after their answers.
            if !sql.contains(";") && !sql.hasPrefix("ROLLBACK") {
                try enqueue(sql, [], planning: nil, wanted: true)
                let result = try drainPipeline()[0]
                defer { PQclear(result) }
                try checkCommitted(result, sql)
                return
            }
            do {
                try drainPipeline().forEach { PQclear($0) }
            } catch where !sql.hasPrefix("ROLLBACK") {
                throw error
            } catch {}
        }
        let number = issue()
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        do { try check(result, sql) } catch { noteFailure(number, error); throw error }
        try checkCommitted(result, sql)
        // A transaction that begins or rolls back has no failed statement in it.
        if sql.hasPrefix("BEGIN") || sql.hasPrefix("ROLLBACK") { firstFailed = nil }
    }

    /// A COMMIT of a transaction in which a statement failed succeeds as a ROLLBACK: an error a caller caught (or
    /// one that surfaced at a statement whose caller caught it) must not pass for a commit.
    private func checkCommitted(_ result: OpaquePointer?, _ sql: String) throws(StoreError) {
        guard sql == "COMMIT", let result, String(cString: PQcmdStatus(result)) == "ROLLBACK" else { return }
        throw StoreError(.io, "PostgreSQL (\(origin)): the transaction was rolled back at its commit, as a statement in it had failed; nothing of it was kept")
    }

    @discardableResult
    func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int {
        let result = try perform(sql, parameters)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// Inside a transaction, a write whose answer nobody reads now goes out without waiting for it (libpq's
    /// pipeline mode): the next statement that needs an answer, or `flush`, or the COMMIT, reads the answers
    /// of all of them in one round trip, and throws the first error among them. The server runs them in
    /// order, so later statements see them. Outside a transaction it runs at once, as `run`.
    func send(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) {
        guard !unanswered.isEmpty || PQtransactionStatus(handle) == PQTRANS_INTRANS else {
            try run(sql, parameters)
            return
        }
        // Writes that would fill libpq's buffer go at once (with the writes ahead): past 8 KB libpq hands the pipeline
        // to the server before its sync, and the server does not count a session whose statements wait for a sync as
        // idle in its transaction, so a process paused then would hold its row locks past
        // `idle_in_transaction_session_timeout`. Held back until the sync, they are never on the server alone.
        let bytes = Self.size(of: parameters)
        if unansweredBytes + bytes > Self.pipelineBytes {
            try run(sql, parameters)
            return
        }
        if unanswered.count >= Self.pipelineDepth { try flush() }
        try enqueue(sql, parameters, planning: .kept, wanted: false)
        unansweredBytes += bytes
    }

    func sendOncePerTransaction(_ sql: String) throws(StoreError) {
        guard !unanswered.isEmpty || PQtransactionStatus(handle) == PQTRANS_INTRANS else {
            try run(sql, [])
            return
        }
        guard sentOnce.insert(sql).inserted else { return }
        try send(sql, [])
    }

    /// A generous estimate of what a prepared statement run with `parameters` takes on the wire: its Bind, Describe
    /// and Execute messages (names, lengths, format codes) and the values.
    private static func size(of parameters: [SQLValue]) -> Int {
        parameters.reduce(64) { total, value in
            switch value {
            case .null: total + 8
            case .int, .double: total + 32
            case .text(let text): total + text.utf8.count + 8
            case .blob(let bytes): total + bytes.count + 8
            }
        }
    }

    /// Waits for the answers of the writes sent ahead; throws the first error among them.
    func flush() throws(StoreError) {
        guard !unanswered.isEmpty else { return }
        precondition(!unanswered.contains(where: \.wanted), "rows a caller waits for are read by that caller, not dropped by a flush")
        try drainPipeline().forEach { PQclear($0) }
    }

    /// In a transaction, the queries go out together, after the writes sent ahead: one round trip for all.
    func queries(_ statements: [SQLStatement]) throws(StoreError) -> [[SQLRow]] {
        guard !statements.isEmpty else { return [] }
        guard !unanswered.isEmpty || PQtransactionStatus(handle) == PQTRANS_INTRANS else { return try queriesOneByOne(statements) }
        // Prepared first: preparing waits for an answer, which would end the pipeline between two of them. Again if
        // the cache started over meanwhile (DEALLOCATE ALL), which dropped the ones prepared before.
        var cacheStarts: Int
        repeat {
            cacheStarts = cacheStartedOver
            for statement in statements { _ = try prepared(statement.sql, statement.parameters, planning: statement.planning) }
        } while cacheStarts != cacheStartedOver
        // Refused values are refused before any statement goes: none is left in the pipeline unread.
        for statement in statements { try Self.checkStorable(statement.parameters) }
        for statement in statements { try enqueue(statement.sql, statement.parameters, planning: statement.planning, wanted: true) }
        let results = try drainPipeline()
        defer { results.forEach { PQclear($0) } }
        return results.map(rows(of:))
    }

    func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow] {
        let result = try perform(sql, parameters, planning: planning)
        defer { PQclear(result) }
        return rows(of: result)
    }

    private func rows(of result: OpaquePointer?) -> [SQLRow] {
        let rowCount = PQntuples(result), columnCount = PQnfields(result)
        let columns = SQLColumns((0..<columnCount).map { String(cString: PQfname(result, $0)) })
        let types = (0..<columnCount).map { PQftype(result, $0) }
        var rows: [SQLRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) == 1 {
                    values.append(.null)
                } else {
                    values.append(Self.decode(PQgetvalue(result, row, column), type: types[Int(column)]))
                }
            }
            rows.append(SQLRow(columns: columns, values: values))
        }
        return rows
    }

    /// Waits up to `timeout` for a notification on a channel this connection LISTENs to: true if one (or more)
    /// came, false if none; throws when the connection is lost.
    /// `interrupt`, when readable, ends the wait early (a shutdown).
    func waitForNotification(timeout: Duration, interrupt: Int32) throws(StoreError) -> Bool {
        if drainNotifications() { return true }
        let socket = PQsocket(handle)
        guard socket >= 0, PQstatus(handle) == CONNECTION_OK else { throw StoreError(.io, "the liveness connection to \(origin) is closed") }
        var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: interrupt, events: Int16(POLLIN), revents: 0)]
        let milliseconds = Int32(max(0, min(60_000, timeout / .milliseconds(1))))
        let ready = poll(&descriptors, 2, milliseconds)
        if ready < 0 && errno == EINTR { return false }
        guard ready >= 0 else { throw StoreError(.io, "waiting on the liveness connection to \(origin) failed") }
        guard descriptors[0].revents != 0 else { return false }
        guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
            throw StoreError(.io, "the liveness connection to \(origin) was lost: \(Self.trimmed(PQerrorMessage(handle)))")
        }
        return drainNotifications()
    }

    private func drainNotifications() -> Bool {
        var any = false
        while let notification = PQnotifies(handle) {
            any = true
            PQfreemem(notification)
        }
        return any
    }

    func inTransaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(opening: Self.beginWrite, body)
    }

    // MARK: - Statements

    /// Prepares (once, for a plan kept) and runs `sql` with `parameters`; the caller clears the result. Writes
    /// sent ahead go in the same round trip, their errors first.
    private func perform(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning = .kept, retrying: Bool = false) throws(StoreError) -> OpaquePointer? {
        if !unanswered.isEmpty {
            // An old plan is made again before the pipeline goes on (preparing answers the writes ahead first).
            if planning == .fresh { _ = try prepared(sql, parameters, planning: planning) }
            try enqueue(sql, parameters, planning: planning, wanted: true)
            return try drainPipeline()[0]
        }
        try Self.checkStorable(parameters)
        let statement = try prepared(sql, parameters, planning: planning)
        let number = issue()
        let result = Self.withParameters(parameters) { values, lengths, formats in
            statement.name.isEmpty ? PQexecParams(handle, statement.sql, Int32(parameters.count), statement.types, values, lengths, formats, 0)
                                   : PQexecPrepared(handle, statement.name, Int32(parameters.count), values, lengths, formats, 0)
        }
        // Another process changed a table (a migration): the statement must be prepared again. Outside a
        // transaction the call goes again at once; inside one, the next call prepares it afresh.
        if Self.sqlState(result) == "0A000" {
            statements[statement.key] = nil
            if !retrying && PQtransactionStatus(handle) == PQTRANS_IDLE {
                PQclear(result)
                return try perform(sql, parameters, planning: planning, retrying: true)
            }
        }
        do {
            try check(result, sql)
        } catch {
            noteFailure(number, error)
            PQclear(result)
            throw error
        }
        return result
    }

    /// The server's statement for `sql` with these parameters' types, prepared now if new: kept for good
    /// (`.kept`), prepared again once its plan is `replanInterval` old (`.fresh`, unless `replanning` is false: a
    /// statement in a pipeline cannot wait for a new one), or the unnamed statement (nil: planned by its run).
    /// Preparing waits for an answer, so writes sent ahead are answered first.
    private func prepared(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning?, replanning: Bool = true)
        throws(StoreError) -> (name: String, sql: String, types: [Oid], key: String) {
        let translated = translation(of: sql)
        let types = parameters.map(Self.type)
        // The planning is part of the key: a query kept for good and the same query fresh are two statements.
        let key = translated.sql + "\u{0}" + types.map(String.init).joined(separator: ",") + (planning == .fresh ? "\u{0}fresh" : "")
        guard let planning else { return ("", translated.sql, types, key) }
        let now = ContinuousClock.now
        if let known = statements[key] {
            guard replanning, let replanAt = known.replanAt, now >= replanAt else { return (known.name, translated.sql, types, key) }
            try flush()
            try execute("DEALLOCATE \(known.name)")
            statements[key] = nil
        }
        // The workers' queries name the applications they leave out, so their SQL varies: past `freshStatements`
        // prepared, a fresh query is planned by its run, and does not push kept statements out of the cache.
        if planning == .fresh, statements.values.count(where: { $0.replanAt != nil }) >= PostgresDatabase.freshStatements {
            return ("", translated.sql, types, key)
        }
        try flush()
        // Filter SQL varies with its conditions: keep the server's statements bounded by starting over.
        if statements.count >= 256 {
            try execute("DEALLOCATE ALL")
            statements = [:]
            cacheStartedOver += 1
        }
        prepared += 1
        let name = "islet_\(prepared)"
        let result = PQprepare(handle, name, translated.sql, Int32(types.count), types)
        defer { PQclear(result) }
        // A statement that cannot be prepared fails as the statement about to be issued.
        do { try check(result, sql) } catch { noteFailure(statementsIssued, error); throw error }
        statements[key] = Prepared(name: name, replanAt: planning == .fresh ? now + replanInterval : nil)
        return (name, translated.sql, types, key)
    }

    /// Refuses a text with a NUL character, which PostgreSQL cannot store.
    private static func checkStorable(_ parameters: [SQLValue]) throws(StoreError) {
        for case .text(let v) in parameters where v.utf8.contains(0) {
            throw StoreError(.io, "PostgreSQL cannot store text with a NUL character")
        }
    }

    /// `parameters` as libpq's arrays (text, binary for blobs) for the length of `body`.
    private static func withParameters<R>(_ parameters: [SQLValue],
                                          _ body: ([UnsafePointer<CChar>?], [Int32], [Int32]) -> R) -> R {
        var buffers: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = [], formats: [Int32] = []
        defer { buffers.forEach { free($0) } }
        for value in parameters {
            switch value {
            case .null:
                buffers.append(nil); lengths.append(0); formats.append(0)
            case .int(let v):
                buffers.append(strdup(String(v))); lengths.append(0); formats.append(0)
            case .double(let v):
                buffers.append(strdup(String(v))); lengths.append(0); formats.append(0)
            case .text(let v):
                buffers.append(strdup(v)); lengths.append(0); formats.append(0)
            case .blob(let v):
                let bytes = malloc(max(v.count, 1))!.assumingMemoryBound(to: CChar.self)
                v.withUnsafeBytes { source in
                    if let base = source.baseAddress { memcpy(bytes, base, v.count) }
                }
                buffers.append(bytes); lengths.append(Int32(v.count)); formats.append(1)
            }
        }
        return body(buffers.map { UnsafePointer($0) }, lengths, formats)
    }

    // MARK: - Pipeline

    /// A statement sent in the pipeline: its SQL (for messages), its prepared statement's key (forgotten if the
    /// server no longer knows it), and whether its caller reads its rows.
    private struct Unanswered {
        let sql: String
        let key: String
        let wanted: Bool
        /// Its number among the statements issued (`statementsIssued`).
        let number: Int
    }

    /// Numbers the statement about to be issued.
    private func issue() -> Int {
        defer { statementsIssued += 1 }
        return statementsIssued
    }

    private func noteFailure(_ statement: Int, _ error: StoreError) {
        if firstFailed == nil { firstFailed = (statement, error) }
    }

    /// Reads the answers of the statements sent ahead (their errors noted, not thrown), then returns the first
    /// statement that failed since the transaction began or last rolled back.
    func firstFailure() -> (statement: Int, error: StoreError)? {
        if !unanswered.isEmpty { _ = try? drainPipeline().forEach { PQclear($0) } }
        return firstFailed
    }

    /// Sends `sql` into the pipeline, entering pipeline mode first if needed.
    private func enqueue(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning?, wanted: Bool) throws(StoreError) {
        try Self.checkStorable(parameters)
        let statement = try prepared(sql, parameters, planning: planning, replanning: false)
        if unanswered.isEmpty && PQenterPipelineMode(handle) != 1 {
            throw StoreError(.io, "PostgreSQL (\(origin)): cannot enter pipeline mode: \(Self.trimmed(PQerrorMessage(handle)))")
        }
        let number = issue()
        let sent = Self.withParameters(parameters) { values, lengths, formats in
            statement.name.isEmpty
                ? PQsendQueryParams(handle, statement.sql, Int32(parameters.count), statement.types, values, lengths, formats, 0)
                : PQsendQueryPrepared(handle, statement.name, Int32(parameters.count), values, lengths, formats, 0)
        }
        guard sent == 1 else {
            let failure = PQstatus(handle) == CONNECTION_OK
                ? StoreError(.io, "PostgreSQL (\(origin)): cannot send \(sql.prefix(200)): \(Self.trimmed(PQerrorMessage(handle)))")
                : lostConnection()
            // What went ahead is answered first: its own error, if any, is the one that happened first.
            try drainPipeline().forEach { PQclear($0) }
            throw failure
        }
        unanswered.append(Unanswered(sql: sql, key: statement.key, wanted: wanted, number: number))
    }

    /// Ends the pipeline: a sync point, then the answer of each statement sent, in order, then the sync's. Returns
    /// the results of the statements whose rows are wanted, in order (the caller clears them), or throws the first
    /// error (a statement after it did not run). A lost connection leaves the pipeline as it is: `isUsable` is
    /// then false and the pool drops the connection.
    private func drainPipeline() throws(StoreError) -> [OpaquePointer] {
        let sent = unanswered
        unanswered = []
        unansweredBytes = 0
        guard PQpipelineSync(handle) == 1 else { throw lostConnection() }
        var failure: StoreError?
        var results: [OpaquePointer] = []
        for statement in sent {
            guard let result = PQgetResult(handle) else {
                failure = failure ?? lostConnection()
                break
            }
            // Each statement's answer is followed by a NULL.
            while let extra = PQgetResult(handle) { PQclear(extra) }
            if failure == nil {
                if Self.sqlState(result) == "0A000" { statements[statement.key] = nil }
                do {
                    try check(result, statement.sql)
                } catch {
                    failure = error
                    noteFailure(statement.number, error)
                }
            }
            if failure == nil && statement.wanted {
                results.append(result)
            } else {
                PQclear(result)
            }
        }
        // The sync's own answer; then the connection can leave pipeline mode.
        var nulls = 0
        while nulls < 3 && PQstatus(handle) == CONNECTION_OK {
            guard let result = PQgetResult(handle) else {
                nulls += 1
                continue
            }
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        if PQexitPipelineMode(handle) != 1 && failure == nil {
            failure = StoreError(.io, "PostgreSQL (\(origin)): cannot leave pipeline mode: \(Self.trimmed(PQerrorMessage(handle)))")
        }
        if let failure {
            results.forEach { PQclear($0) }
            throw failure
        }
        return results
    }

    private func lostConnection() -> StoreError {
        StoreError(.io, "lost the connection to PostgreSQL at \(origin): \(Self.trimmed(PQerrorMessage(handle)))")
    }

    /// `?` and `?N` placeholders (as SQLite numbers them: a bare `?` is one more than the largest so far)
    /// as PostgreSQL's `$N`, leaving quoted text, quoted names and `--` comments alone.
    private func translation(of sql: String) -> (sql: String, parameters: Int) {
        if let known = translations[sql] { return known }
        var output = "", largest = 0
        var closing: Character?   // the end of the quoted text or comment we are in
        var characters = sql.makeIterator(), pending: Character? = nil, previous: Character = " "
        while let character = pending ?? characters.next() {
            pending = nil
            defer { previous = character }
            if let end = closing {
                if character == end { closing = nil }
                output.append(character)
                continue
            }
            if character == "'" || character == "\"" { closing = character }
            if character == "-" && previous == "-" { closing = "\n" }
            guard character == "?" else { output.append(character); continue }
            var digits = ""
            while let next = characters.next() {
                if next.isASCII && next.isNumber { digits.append(next) } else { pending = next; break }
            }
            let number = Int(digits) ?? largest + 1
            largest = max(largest, number)
            output += "$\(number)"
        }
        translations[sql] = (output, largest)
        return (output, largest)
    }

    // MARK: - Errors

    private func check(_ result: OpaquePointer?, _ sql: String) throws(StoreError) {
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        guard status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK else { return }
        let message = Self.trimmed(result.map(PQresultErrorMessage) ?? PQerrorMessage(handle))
        let state = Self.sqlState(result) ?? ""
        // foreign_key_violation: a row referred to went at this moment (pruned, ended) in another transaction: the
        // write runs again on what is there now. Otherwise class 23: integrity constraint violation (a unique value taken).
        if state == "23503" { throw StoreError(.busy, "a row referred to changed in another transaction: \(message)") }
        if state.hasPrefix("23") { throw StoreError(.conflict, message) }
        // lock_not_available: a lock_timeout ran out (a claim's, or a write's); deadlock_detected and
        // serialization_failure: PostgreSQL chose this transaction to give way. Each is worth trying again.
        if ["55P03", "40P01", "40001"].contains(state) {
            throw StoreError(.busy, "a row was locked by another transaction: \(message)")
        }
        if PQstatus(handle) != CONNECTION_OK {
            throw StoreError(.io, "lost the connection to PostgreSQL at \(origin): \(message)")
        }
        // A prepared statement of this connection's that exists already, or no longer: a pooler ran this connection's
        // statements on another server session (PgBouncer's transaction or statement mode).
        let advice = state == "42P05" || state == "26000" ? ". \(Self.sessionPoolingNeeded)" : ""
        throw StoreError(.io, "PostgreSQL (\(origin)): \(message) (SQLSTATE \(state)) running \(sql.prefix(200))\(advice)")
    }

    /// What a pooler between Islet and PostgreSQL must do (docs/PRODUCTION.md).
    public static let sessionPoolingNeeded = "Islet keeps prepared statements on its database sessions, and a node's advisory locks and "
        + "LISTEN on one of them: a pooler in between must give each of its connections one server session (PgBouncer: "
        + "pool_mode = session, not transaction or statement)"

    private static func sqlState(_ result: OpaquePointer?) -> String? {
        result.flatMap(islet_pq_sqlstate).map { String(cString: $0) }
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        message.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "unknown error"
    }
}

extension Array where Element == String {
    /// The strings as a NULL-terminated array of C strings, for the length of `body`.
    func withCStrings<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let pointers = copies.map { UnsafePointer($0) } + [nil]
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
