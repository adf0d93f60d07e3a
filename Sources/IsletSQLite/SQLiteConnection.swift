import CSQLite
import IsletSQL
import IsletStore

/// One SQLite connection with its prepared-statement cache.
///
/// `@unchecked Sendable`: a connection is only ever used by the thread that checked it out of
/// `SQLiteDatabase`'s pool, under that pool's mutex; it is never shared while in use.
public final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: (statement: OpaquePointer, columns: SQLColumns)] = [:]
    private let path: String

    /// How much of a transaction's savepoint journal SQLite keeps in memory before it spills to a temporary file.
    /// A group commit gives each member a savepoint, and every page a member changes goes into that journal; at
    /// SQLite's default (64 KiB) a group of a few updates spilled, so each commit created, wrote and unlinked a file.
    static let statementJournalInMemory: Int32 = 16 << 20

    /// SQLite's process-wide settings, made once before the first connection opens.
    private static let configured: Int32 = islet_sqlite3_config_statement_journal_spill(statementJournalInMemory)

    init(path: String) throws(StoreError) {
        self.path = path
        // Read in every build (an assert's condition is not evaluated in release builds).
        let configured = Self.configured
        assert(configured == SQLITE_OK, "SQLite was set up before its settings were made")
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            throw StoreError(.io, "cannot open SQLite database \(path): \(message)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        // WAL lets readers (the server) and a writer (the CLI) work at once; foreign keys are off by default.
        // synchronous = FULL: a commit (an answered 200) is on disk before it returns, power loss included
        // (docs/ARCHITECTURE.md, "Durable acceptance").
        try execute("""
            PRAGMA busy_timeout = 10000;
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = FULL;
            PRAGMA foreign_keys = ON;
            """)
    }

    deinit {
        for cached in statements.values { sqlite3_finalize(cached.statement) }
        sqlite3_close_v2(handle)
    }

    private func failure(_ status: Int32, _ context: String) -> StoreError {
        let message = String(cString: sqlite3_errmsg(handle))
        if status & 0xFF == SQLITE_CONSTRAINT { return StoreError(.conflict, "\(context): \(message)") }
        return StoreError(.io, "\(context) (\(path)): \(message) (SQLite code \(sqlite3_extended_errcode(handle)), errno \(sqlite3_system_errno(handle)))")
    }

    private static let transactionControl: Set<String> = ["BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "SAVEPOINT islet_write", "RELEASE islet_write"]

    /// Runs one or more statements without parameters or results (schema, pragmas).
    public func execute(_ sql: String) throws(StoreError) {
        // BEGIN, COMMIT, SAVEPOINT and RELEASE run for every write: prepared once, not parsed each time.
        if Self.transactionControl.contains(sql) {
            _ = try step(sql, [], collect: false)
            return
        }
        var errorMessage: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if status != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? "error \(status)"
            sqlite3_free(errorMessage)
            if status & 0xFF == SQLITE_CONSTRAINT { throw StoreError(.conflict, message) }
            throw StoreError(.io, "SQLite (\(path)): \(message) (SQLite code \(sqlite3_extended_errcode(handle)), errno \(sqlite3_system_errno(handle)))")
        }
    }

    /// Runs one statement and returns how many rows it changed.
    @discardableResult
    public func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int {
        _ = try step(sql, parameters, collect: false)
        return Int(sqlite3_changes(handle))
    }

    /// Runs one query and returns all of its rows. `planning` is not needed here: SQLite plans without
    /// row counts (no ANALYZE is run), so a prepared plan does not go stale as a table grows.
    public func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow] {
        try step(sql, parameters, collect: true)
    }

    /// Runs `body` in a write transaction (BEGIN IMMEDIATE, so it never fails half-way on a lock upgrade).
    ///
    /// Any error `body` throws rolls the transaction back and is rethrown as it is.
    public func inTransaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(opening: "BEGIN IMMEDIATE", body)
    }

    private func prepared(_ sql: String) throws(StoreError) -> (statement: OpaquePointer, columns: SQLColumns) {
        if let cached = statements[sql] { return cached }
        // Filter SQL varies with its conditions: keep the cache bounded by starting over when it is full.
        if statements.count >= 256 {
            for cached in statements.values { sqlite3_finalize(cached.statement) }
            statements = [:]
        }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw failure(status, "preparing \(sql)") }
        let columns = SQLColumns((0..<sqlite3_column_count(statement)).map { String(cString: sqlite3_column_name(statement, $0)) })
        statements[sql] = (statement, columns)
        return (statement, columns)
    }

    private func step(_ sql: String, _ parameters: [SQLValue], collect: Bool) throws(StoreError) -> [SQLRow] {
        let (statement, columns) = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in parameters.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .null: status = sqlite3_bind_null(statement, index)
            case .int(let v): status = sqlite3_bind_int64(statement, index, v)
            case .double(let v): status = sqlite3_bind_double(statement, index, v)
            case .text(let v):
                // With the byte count, not -1: a NUL inside the text must not cut it short.
                var text = v
                status = text.withUTF8 { bytes in
                    guard let base = bytes.baseAddress, bytes.count > 0 else { return islet_sqlite3_bind_text(statement, index, "", 0) }
                    return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                        islet_sqlite3_bind_text(statement, index, $0, Int32(bytes.count))
                    }
                }
            case .blob(let v): status = v.withUnsafeBytes { islet_sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count)) }
            }
            guard status == SQLITE_OK else { throw failure(status, "binding parameter \(index)") }
        }
        var rows: [SQLRow] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return rows }
            guard status == SQLITE_ROW else { throw failure(status, "running \(sql)") }
            guard collect else { continue }
            let count = sqlite3_column_count(statement)
            var values: [SQLValue] = []
            values.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: values.append(.int(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: values.append(.double(sqlite3_column_double(statement, column)))
                case SQLITE_TEXT:
                    values.append(.text(String(cString: sqlite3_column_text(statement, column))))
                case SQLITE_BLOB:
                    let length = Int(sqlite3_column_bytes(statement, column))
                    if let bytes = sqlite3_column_blob(statement, column), length > 0 {
                        values.append(.blob(Array(UnsafeRawBufferPointer(start: bytes, count: length))))
                    } else {
                        values.append(.blob([]))
                    }
                default: values.append(.null)
                }
            }
            rows.append(SQLRow(columns: columns, values: values))
        }
    }
}
