import Foundation
import IsletStore

/// A value bound to or read from a statement, in either engine.
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])

    public var int: Int64? {
        switch self {
        case .int(let v): v
        // PostgreSQL answers NUMERIC (SUM of BIGINT) and custom tags as text.
        case .text(let s): Int64(s)
        case .double(let d): d.rounded(.towardZero) == d ? Int64(exactly: d) : nil
        default: nil
        }
    }
    public var text: String? { if case .text(let v) = self { v } else if case .int(let v) = self { String(v) } else { nil } }
    public var blob: [UInt8]? {
        switch self {
        case .blob(let v): v
        case .text(let s): Array(s.utf8)
        default: nil
        }
    }
    public var bool: Bool { int.map { $0 != 0 } ?? false }
    public var isNull: Bool { self == .null }
}

extension SQLValue {
    /// A date as the stores keep it: whole seconds since 1970.
    public static func seconds(_ date: Date) -> SQLValue { .int(Int64(date.timeIntervalSince1970)) }

    /// A date kept as `seconds(_:)` keeps it; nil for NULL.
    public var date: Date? { int.map { Date(timeIntervalSince1970: Double($0)) } }
}

/// The names of a result's columns, shared by its rows.
public final class SQLColumns: Sendable {
    public let names: [String]

    public init(_ names: [String]) {
        // Two columns of one name would make a read by name ambiguous: alias one of them.
        precondition(Set(names).count == names.count, "result has two columns of one name: \(names)")
        self.names = names
    }

    /// A scan, not a dictionary: results have a few short names, which compare as two machine words, while
    /// hashing each read cost a tenth of a 500,000-device filter's time on PostgreSQL.
    func position(_ name: String) -> Int {
        guard let position = names.firstIndex(of: name) else { preconditionFailure("result has no column '\(name)': \(names)") }
        return position
    }
}

/// One result row, read by column name (an expression needs an `AS` alias).
public struct SQLRow: Sendable {
    public let columns: SQLColumns
    public let values: [SQLValue]

    public init(columns: SQLColumns, values: [SQLValue]) {
        self.columns = columns
        self.values = values
    }

    public subscript(name: String) -> SQLValue { values[columns.position(name)] }
}

/// Whether a query's plan is kept for good or made afresh every second.
public enum SQLPlanning: Sendable {
    /// Prepared once per connection, planned once: most statements, whose best plan does not change.
    case kept
    /// Planned from the tables as they are, a second ago at most (PostgreSQL prepares it again once its plan is
    /// that old). For the queries that find rare rows through a partial index of a table that grows fast (due
    /// deliveries among millions sent, unclaimed jobs): a plan made while the table was empty scans it whole, and
    /// PostgreSQL keeps a prepared plan until the table's next ANALYZE (in a million-push fan-out, each idle
    /// worker's poll read the whole table: up to 47 ms a poll). Planning them at every run cost more than
    /// running them: the owed-push probe of every update, and each worker's polls.
    case fresh
}

/// One statement with its parameters, for `SQLConnection.queries`.
public struct SQLStatement: Sendable {
    public let sql: String
    public let parameters: [SQLValue]
    public let planning: SQLPlanning

    public init(_ sql: String, _ parameters: [SQLValue] = [], planning: SQLPlanning = .kept) {
        self.sql = sql
        self.parameters = parameters
        self.planning = planning
    }
}

/// What a write reads before it decides, to be read with the reads of the writes grouped with it (`GroupCommit`):
/// one round trip for the group's reads on PostgreSQL, not one a write. `keys` name what the reads' answers depend
/// on (the rows they lock): writes whose keys meet are read one after the other's writes, never ahead of them.
public struct GroupReads: Sendable {
    public let statements: [SQLStatement]
    public let keys: Set<String>
    /// When set, the write can also be made together with the writes of its kind grouped with it (`WriteTogether`).
    public let together: (any WriteTogether)?

    public init(_ statements: [SQLStatement], keys: Set<String>, together: (any WriteTogether)? = nil) {
        self.statements = statements
        self.keys = keys
        self.together = together
    }
}

/// A write that can be made together with the others of its kind in its group (`GroupCommit`): one statement per
/// table for all of them, not a savepoint and statements each. Those it cannot make so (a refusal, a case out of the
/// ordinary) run their own bodies after, each in its savepoint, as every other write does. Its results are kept in
/// the object itself, which its caller reads once its write has returned. Touched by the group's leader only, while
/// its caller waits.
public protocol WriteTogether: AnyObject, Sendable {
    /// Makes the writes of `members` (this one among them; all of one type, their keys apart) that it can, in the
    /// group's transaction, and says which it made. Throwing: none is made; all run their own bodies.
    func write(together members: [any WriteTogether], _ connection: any SQLConnection) throws -> [Bool]
}

/// One connection of an engine. A connection is used by one thread at a time, the one that checked it
/// out of its database's pool.
public protocol SQLConnection: AnyObject {
    /// Runs statements without parameters or results (schema, settings).
    func execute(_ sql: String) throws(StoreError)
    /// Runs one statement (`?` or `?N` placeholders) and returns how many rows it changed.
    @discardableResult
    func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int
    /// Runs one query and returns all of its rows, its plan kept for the next run or made afresh (`planning`).
    func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow]
    /// Runs one write whose outcome the caller does not read. In a transaction an engine may send it on without
    /// waiting for its answer (PostgreSQL's pipeline: one round trip for several writes); its error is then thrown
    /// by the next statement of the transaction, by `flush`, or by the commit. So a write whose error the caller
    /// handles itself (a conflict it expects) goes through `run`.
    func send(_ sql: String, _ parameters: [SQLValue]) throws(StoreError)
    /// `send` a statement without parameters whose effect a transaction needs once however often its writes ask for it (a
    /// notification delivered at the commit): skipped when this transaction sent it already and has not rolled back since.
    func sendOncePerTransaction(_ sql: String) throws(StoreError)
    /// Waits for the answers of the writes `send` sent on; throws the first error among them.
    func flush() throws(StoreError)
    /// Runs queries one after the other (each sees what the ones before it did) and returns each one's rows. In a
    /// transaction an engine may send them together (PostgreSQL: one round trip, with the writes sent ahead).
    func queries(_ statements: [SQLStatement]) throws(StoreError) -> [[SQLRow]]
    /// Runs `body` in a write transaction (SQLite: BEGIN IMMEDIATE, the one writer; PostgreSQL: READ COMMITTED,
    /// writers of different nodes at once, each locking the rows it decides on). Any error `body` throws rolls
    /// the transaction back and is rethrown as it is.
    func inTransaction<T>(_ body: () throws -> T) throws -> T
    /// How many statements this connection has issued: a group commit numbers each member's statements by it.
    var statementsIssued: Int { get }
    /// After an error in a transaction: reads the answers of the statements sent ahead, then names the first
    /// statement that failed since the transaction began or last rolled back (by its number among those issued),
    /// with its error. Nil when none did, or when the engine runs each statement as it is issued (its error is
    /// then thrown by that statement, to its caller).
    func firstFailure() -> (statement: Int, error: StoreError)?
}

extension SQLConnection {
    /// Engines that answer each statement at once run a sent write as `run` does.
    public func send(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) { try run(sql, parameters) }
    public func sendOncePerTransaction(_ sql: String) throws(StoreError) { try send(sql, []) }
    public func flush() throws(StoreError) {}
    public var statementsIssued: Int { 0 }
    public func firstFailure() -> (statement: Int, error: StoreError)? { nil }

    public func queries(_ statements: [SQLStatement]) throws(StoreError) -> [[SQLRow]] { try queriesOneByOne(statements) }

    /// `queries` as separate round trips.
    public func queriesOneByOne(_ statements: [SQLStatement]) throws(StoreError) -> [[SQLRow]] {
        var rows: [[SQLRow]] = []
        for statement in statements { rows.append(try query(statement.sql, statement.parameters, planning: statement.planning)) }
        return rows
    }

    public func send(_ sql: String) throws(StoreError) { try send(sql, []) }
    public func send(_ statement: SQLStatement) throws(StoreError) { try send(statement.sql, statement.parameters) }

    public func transaction<T>(rethrowing body: () throws -> T) throws -> T { try inTransaction(body) }

    /// `transaction(rethrowing:)` for bodies that throw only `StoreError`.
    public func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try onlyStoreErrors { try inTransaction(body) }
    }

    @discardableResult
    public func run(_ sql: String) throws(StoreError) -> Int { try run(sql, []) }

    public func query(_ sql: String) throws(StoreError) -> [SQLRow] { try query(sql, [], planning: .kept) }
    public func query(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> [SQLRow] { try query(sql, parameters, planning: .kept) }

    /// Writes many rows with multi-row statements: `statement(values)` is the statement around its `VALUES`
    /// list of `(?, ?, ...)` groups, one per row. Rows go in chunks of up to 64, each chunk's size a power of two,
    /// so a page of a thousand rows takes about twenty statements of at most seven shapes (each prepared once).
    /// Rows are applied in order, also within a statement (SQLite decides an upsert row by row; PostgreSQL
    /// refuses one statement that touches a row twice, and writes many rows with `rows(ofJSONArray:columns:)`).
    public func runRows(_ rows: [[SQLValue]], _ statement: (_ values: String) -> String) throws(StoreError) {
        guard let width = rows.first?.count else { return }
        let group = "(" + Array(repeating: "?", count: width).joined(separator: ", ") + ")"
        var start = 0
        while start < rows.count {
            var size = 64
            while size > rows.count - start { size /= 2 }
            let values = Array(repeating: group, count: size).joined(separator: ", ")
            var parameters: [SQLValue] = []
            parameters.reserveCapacity(size * width)
            for row in rows[start..<start + size] {
                precondition(row.count == width, "every row of one statement has the same columns")
                parameters += row
            }
            try send(statement(values), parameters)
            start += size
        }
    }
}

/// A database of either engine: connections from a pool, and write transactions that are serialized
/// (one writer at a time, as SQLite allows), so both engines make the same decisions on the same facts.
public protocol SQLDatabase: Sendable {
    var dialect: SQLDialect { get }
    /// Runs `body` with a connection of its own, outside a transaction (each statement commits alone).
    func withConnection<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T
    /// Runs `body` inside one write transaction; any error it throws rolls back and is rethrown. `bulk`: a write
    /// of many rows (a fan-out page's records) that the writes waiting beside it need not queue behind.
    func inWriteTransaction<T>(bulk: Bool, _ body: (any SQLConnection) throws -> T) throws -> T
    /// `inWriteTransaction` for a body that begins with `reads` and is given their rows, read with the reads of the
    /// writes grouped with it (`GroupReads`).
    func inWriteTransaction<T>(reading reads: GroupReads, _ body: (any SQLConnection, [[SQLRow]]) throws -> T) throws -> T
    /// `inWriteTransaction` that does not wait (an API call whose connection waits suspended): `then` gets what `body`
    /// returned, or the error, once the write is committed or failed, on the thread that committed it. `then` must not
    /// wait, nor write.
    func inWriteTransaction<T>(reading reads: GroupReads?, _ body: @escaping (any SQLConnection, [[SQLRow]]) throws -> T,
                               then: @escaping (Result<T, any Error>) -> Void)
    /// Runs a claim, or the records of a claim's small jobs, in a transaction of its own. SQLite: a write transaction
    /// like any other. PostgreSQL: one outside the group commit, with a short wait for locks, so the nodes' claims run
    /// at once, each skipping the rows another is claiming (`SQLDialect.skipLocked`), and records take no turn in the
    /// group that API calls wait for.
    func inClaimTransaction<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T
}

extension SQLDatabase {
    /// Runs `body` inside one write transaction; any error it throws rolls back and is rethrown.
    public func inWriteTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try inWriteTransaction(bulk: false, body)
    }

    /// Runs `body` inside one write transaction; any error it throws rolls back and is rethrown.
    @discardableResult
    public func write<T>(rethrowing body: (any SQLConnection) throws -> T) throws -> T {
        try inWriteTransaction(body)
    }

    /// Runs `body` inside one write transaction.
    @discardableResult
    public func write<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try write(bulk: false, body)
    }

    /// Runs `body` inside one write transaction (`bulk`: see `inWriteTransaction`).
    @discardableResult
    public func write<T>(bulk: Bool, _ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try onlyStoreErrors { try inWriteTransaction(bulk: bulk) { (c) throws -> T in try body(c) } }
    }

    public func inClaimTransaction<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try write(body)
    }

    /// The schema version the database is at (it is not migrated here).
    public func schemaVersion() throws(StoreError) -> Int {
        try withConnection { (c) throws(StoreError) in try SQLMigrations.currentVersion(c) }
    }
}

/// A transaction around a body that throws only `StoreError` rethrows only that: the untyped transaction
/// API adds nothing of its own.
private func onlyStoreErrors<T>(_ body: () throws -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch let error as StoreError {
        throw error
    } catch {
        preconditionFailure("only StoreError can come out of a StoreError transaction: \(error)")
    }
}

/// The few places where SQLite and PostgreSQL spell the same statement differently. Everything else
/// the stores say is SQL both engines run as it is.
public struct SQLDialect: Sendable {
    public enum Engine: String, Sendable { case sqlite, postgresql }
    public let engine: Engine

    public init(_ engine: Engine) { self.engine = engine }

    /// SQLite picks a partial index only when told; PostgreSQL's planner finds it alone.
    public func indexedBy(_ index: String) -> String { engine == .sqlite ? "INDEXED BY \(index)" : "" }

    /// A column that must not drive the index choice (SQLite's unary `+`): another condition has the better index.
    public func unindexed(_ column: String) -> String { engine == .sqlite ? "+\(column)" : column }

    /// The strings of a JSON array parameter as a one-column (`value`) table.
    public func elements(ofJSONArray placeholder: String) -> String {
        engine == .sqlite ? "json_each(\(placeholder))" : "json_array_elements_text(CAST(\(placeholder) AS json))"
    }

    /// "Is one of the elements of this JSON array parameter", after a key column (`WHERE id \(isIn("CAST(value AS BIGINT)",
    /// of: "?1"))`), for a short list; `element` is an expression of each one's text, `value`. PostgreSQL takes a
    /// set-returning function for 100 rows whatever it holds: under `IN (SELECT ...)`, a claim of a few messages hashed
    /// them and read all of `messages` (2–5 ms a statement at 8,000 messages, more as it grows, until the planner turned
    /// to the index). An array compared with `= ANY` is looked up in the key's index.
    public func isIn(_ element: String, of placeholder: String) -> String {
        let values = "SELECT \(element) FROM \(elements(ofJSONArray: placeholder))"
        return engine == .sqlite ? "IN (\(values))" : "= ANY (ARRAY(\(values)))"
    }

    /// The elements of a JSON array parameter that holds `count` of them, as a subquery for `IN`; `element` is an
    /// expression of each one's text, `value`. PostgreSQL takes the set-returning function for 100 rows whatever it
    /// holds: a start to one named device hashed that one and read the application's devices three times over
    /// (until the table outgrew some 30,000 rows), where probing their indexes once was the plan. A LIMIT at the count
    /// (rounded up to a power of two, so that few statement texts are prepared; it never cuts the list) is the
    /// estimate it uses instead: index probes for a few, the hashed scan still for a thousand names of 2,000.
    public func list(_ element: String, of placeholder: String, count: Int) -> String {
        let values = "SELECT \(element) FROM \(elements(ofJSONArray: placeholder))"
        guard engine == .postgresql else { return "(\(values))" }
        let cap = 1 << (Int.bitWidth - (max(1, count) - 1).leadingZeroBitCount)
        return "(\(values) LIMIT \(cap))"
    }

    /// The integer a JSON object parameter holds under the key `key` (an expression of text): a value per row of a
    /// statement that writes many rows, looked up by each row's key.
    public func integer(ofJSONObject placeholder: String, key: String) -> String {
        // SQLite's `->>` reads a label of digits as no key: the path quotes it.
        engine == .postgresql ? "CAST(CAST(\(placeholder) AS json) ->> \(key) AS BIGINT)" : "json_extract(\(placeholder), '$.\"' || \(key) || '\"')"
    }

    /// Whether many rows are better written with one statement (`rows(ofJSONArray:columns:)`) than in chunks of
    /// multi-row `VALUES` (`SQLConnection.runRows`): PostgreSQL's statements are network round trips; SQLite's are
    /// calls into the process, cheaper than building and parsing the JSON (a fan-out on SQLite was 10–20% slower with it).
    public var writesRowsTogether: Bool { engine == .postgresql }

    /// The type of a column of `rows(ofJSONArray:columns:)`.
    public enum ColumnType: Sendable { case integer, text }

    /// The objects of a JSON array parameter as a table `r` with these columns (a missing key or JSON null is NULL):
    /// many rows written with one statement.
    public func rows(ofJSONArray placeholder: String, columns: [(name: String, type: ColumnType)]) -> String {
        if engine == .postgresql {
            let declared = columns.map { "\($0.name) \($0.type == .integer ? "BIGINT" : "TEXT")" }.joined(separator: ", ")
            return "json_to_recordset(CAST(\(placeholder) AS json)) AS r(\(declared))"
        }
        let picked = columns.map { "value ->> '$.\($0.name)' AS \($0.name)" }.joined(separator: ", ")
        return "(SELECT \(picked) FROM json_each(\(placeholder))) AS r"
    }

    /// After rows were copied in with their ids: the statement that moves a table's id sequence past them
    /// (PostgreSQL's identity columns), nil when the engine needs none.
    public func identityReset(_ table: String) -> String? {
        guard engine == .postgresql, ["devices", "activities", "messages", "token_history", "scheduled_updates", "channels", "broadcasts"].contains(table) else { return nil }
        return "SELECT setval(pg_get_serial_sequence('\(table)', 'id'), COALESCE(MAX(id), 0) + 1, false) AS next FROM \(table)"
    }

    /// Locks the rows a claim's query returns from `table` (its alias), skipping those another transaction
    /// holds: PostgreSQL's claims run at once (`inClaimTransaction`); SQLite's single writer needs none.
    /// `updatingKey: false` takes the weaker lock of an update that leaves the key alone (FOR NO KEY UPDATE), which
    /// rows held FOR KEY SHARE (`forKeyShare`) do not block.
    public func skipLocked(of table: String, updatingKey: Bool = true) -> String {
        engine == .postgresql ? "FOR \(updatingKey ? "UPDATE" : "NO KEY UPDATE") OF \(table) SKIP LOCKED" : ""
    }

    /// The id the connection's last insert gave its row (SQLite's rowid, PostgreSQL's last identity value), for the
    /// statement sent right after it.
    public var lastInsertedID: String { engine == .postgresql ? "lastval()" : "last_insert_rowid()" }

    /// Locks the row read until the transaction ends (a decision made on it must not race a claim).
    public var forUpdate: String { engine == .postgresql ? "FOR UPDATE" : "" }

    /// Locks the row read until the transaction ends, for a change of its other columns than its key: the writers
    /// deciding on it take turns, while rows referring to it (a message of an activity, which takes FOR KEY SHARE
    /// of it) can still be written. PostgreSQL's FOR NO KEY UPDATE; SQLite's single writer needs none.
    public var forNoKeyUpdate: String { engine == .postgresql ? "FOR NO KEY UPDATE" : "" }

    /// Makes the transactions of every node that take it with the same `key` (a short text) take turns until their
    /// commits: for decisions on a fact no single row stands for yet (a schema being migrated, a provider token
    /// not stored yet). PostgreSQL's transaction advisory lock on the schema's `advisoryClass` and the key's hash; nil
    /// on SQLite, whose single writer takes turns already.
    /// With no key, the turn is the whole schema's: the lock every write took when Islet serialized all writers
    /// (before 2026-12), so a migration also waits for the writes of such a node during a rolling upgrade.
    public func takingTurns(on key: String?) -> SQLStatement? {
        guard engine == .postgresql else { return nil }
        guard let key else { return SQLStatement("SELECT pg_advisory_xact_lock(\(Self.turnsClass), hashtext(current_schema())) AS turn") }
        return SQLStatement("SELECT pg_advisory_xact_lock(\(Self.turnsClass), hashtext(current_schema() || '/' || ?)) AS turn", [.text(key)])
    }

    /// Waits, in the transaction of `c`, for the turn `takingTurns(on:)` names (at once on SQLite).
    public func takeTurn(on key: String?, _ c: any SQLConnection) throws(StoreError) {
        if let turn = takingTurns(on: key) { _ = try c.query(turn.sql, turn.parameters) }
    }

    /// The advisory lock class of `takingTurns` ("ISLE").
    public static let turnsClass: Int32 = 0x4953_4C45

    /// Lifts a write transaction's short wait for locks (PostgreSQL's `lock_timeout`), for a transaction that must
    /// wait its turn however long it takes and is not run again (a migration); nil on SQLite.
    public var waitingAsLongAsItTakes: String? { engine == .postgresql ? "SET LOCAL lock_timeout = 0" : nil }

    /// Keeps the row read from being deleted until the transaction ends, without stopping updates of its
    /// other columns (PostgreSQL's FOR KEY SHARE; SQLite's single writer needs none).
    public var forKeyShare: String { engine == .postgresql ? "FOR KEY SHARE" : "" }

    /// The database's clock in milliseconds since 1970: leases are timed on it, so nodes' clocks may differ.
    public var nowMilliseconds: String {
        engine == .postgresql ? "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
            : "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    }

    /// The notification channel of this database's nodes (a schema of its own per Islet database).
    public static let workChannel = "'islet.' || current_schema()"

    /// Wakes the other nodes at commit (PostgreSQL's NOTIFY; nil on SQLite, which has one server).
    public var notifyWork: String? { engine == .postgresql ? "SELECT pg_notify(\(Self.workChannel), '')" : nil }

    /// The advisory lock a node holds for as long as it runs, keyed by its number (`?` or a column): the
    /// schema's hash and the number, as PostgreSQL's `pg_locks` shows them. Key 0 of the class is the delivery
    /// lock (`PostgresNodeSession`): shared by every node, exclusive for a simulator node.
    public static let nodeLockClass = "hashtext(current_schema() || '.islet-node')"

    /// The nodes (alias `n`) whose liveness lock is held; nil where the engine has no such lock (SQLite).
    public var nodeIsAlive: String? {
        guard engine == .postgresql else { return nil }
        return """
            EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
                    AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND k.classid = CAST(\(Self.nodeLockClass) AS oid) AND k.objid = CAST(n.number AS oid))
            """
    }

    /// The column that orders tokens as they were inserted.
    public var insertionOrder: String { engine == .sqlite ? "rowid" : "seq" }

    /// A custom tag's value in `device_tags` (alias `t`): SQLite keeps integers and strings in one column,
    /// PostgreSQL keeps integers in a column of their own (`number`), beside their text.
    public func tagValue(integer: Bool) -> String { engine == .postgresql && integer ? "t.number" : "t.value" }

    /// The columns a tag value is stored in, after `device` and `name`: SQLite's `value` holds an integer
    /// or a string; PostgreSQL's `value` is always text, with an integer also in `number`.
    public var tagValueColumns: [String] { engine == .postgresql ? ["value", "number"] : ["value"] }

    /// A tag value as `tagValueColumns` store it.
    public func storedTag(_ value: SQLValue) -> [SQLValue] {
        guard engine == .postgresql else { return [value] }
        let number: SQLValue = if case .int = value { value } else { .null }
        return [.text(value.text ?? ""), number]
    }

    /// Inserts one tag value: parameters (device, name, then `storedTag(value)`).
    public func insertTag(_ value: SQLValue) -> (sql: String, value: [SQLValue]) {
        let columns = tagValueColumns
        return ("INSERT INTO device_tags (device, name, \(columns.joined(separator: ", "))) VALUES (?, ?, \(columns.map { _ in "?" }.joined(separator: ", ")))",
                storedTag(value))
    }
}
