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
    /// Statement names by SQL text and parameter types (PostgreSQL fixes the types when preparing).
    private var statements: [String: String] = [:]
    /// Statements prepared on this connection so far: names are never reused.
    private var prepared = 0
    /// Translated SQL by the SQL the stores write.
    private var translations: [String: (sql: String, parameters: Int)] = [:]
    private let origin: String

    /// Every write transaction holds this advisory lock, with its schema's hash, to its commit: the writers
    /// of every process on one Islet database (a schema, `public` by default) are serialized, as SQLite's
    /// single writer is, so both engines decide on the same facts.
    static let writerLock: Int32 = 0x4953_4C45   // "ISLE"

    /// Seconds a session may stay idle inside a transaction before the server ends it (and its locks).
    static let idleInTransactionLimit = 5

    /// Connects to `url` (`postgresql://user:password@host:port/database?sslmode=…`); `origin` names the
    /// server in messages, without the password.
    init(url: String, origin: String) throws(StoreError) {
        self.origin = origin
        // URL values win over these defaults, which come before it.
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = ["5", "islet", url]
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
        // A process paused (SIGSTOP, a VM freeze) inside a transaction would hold the writers' lock, and every
        // node's writes with it: the server ends such a session after this. Islet's own transactions never wait
        // on anything but the database, so they are never idle this long.
        try execute("SET TIME ZONE 'UTC'; SET idle_in_transaction_session_timeout = '\(Self.idleInTransactionLimit)s'")
    }

    deinit { PQfinish(handle) }

    /// False once the server went away; the pool then drops the connection.
    var isUsable: Bool { PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE }

    func execute(_ sql: String) throws(StoreError) {
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, sql)
    }

    @discardableResult
    func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int {
        let result = try perform(sql, parameters)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow] {
        let result = try perform(sql, parameters, planning: planning)
        defer { PQclear(result) }
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
        try transaction(opening: "BEGIN; SELECT pg_advisory_xact_lock(\(Self.writerLock), hashtext(current_schema()))", body)
    }

    // MARK: - Statements

    /// Prepares (once, for a plan kept) and runs `sql` with `parameters`; the caller clears the result.
    private func perform(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning = .kept, retrying: Bool = false) throws(StoreError) -> OpaquePointer? {
        let translated = translation(of: sql)
        let types = parameters.map(Self.type)
        let key = translated.sql + "\u{0}" + types.map(String.init).joined(separator: ",")
        let name: String
        if planning == .eachRun {
            name = ""   // the unnamed statement: parsed and planned by this run, replaced by the next
        } else if let known = statements[key] {
            name = known
        } else {
            // Filter SQL varies with its conditions: keep the server's statements bounded by starting over.
            if statements.count >= 256 {
                try execute("DEALLOCATE ALL")
                statements = [:]
            }
            prepared += 1
            name = "islet_\(prepared)"
            let result = PQprepare(handle, name, translated.sql, Int32(types.count), types)
            defer { PQclear(result) }
            try check(result, sql)
            statements[key] = name
        }
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
                guard !v.utf8.contains(0) else {
                    throw StoreError(.io, "PostgreSQL cannot store text with a NUL character")
                }
                buffers.append(strdup(v)); lengths.append(0); formats.append(0)
            case .blob(let v):
                let bytes = malloc(max(v.count, 1))!.assumingMemoryBound(to: CChar.self)
                v.withUnsafeBytes { source in
                    if let base = source.baseAddress { memcpy(bytes, base, v.count) }
                }
                buffers.append(bytes); lengths.append(Int32(v.count)); formats.append(1)
            }
        }
        let values = buffers.map { UnsafePointer($0) }
        let result = name.isEmpty ? PQexecParams(handle, translated.sql, Int32(types.count), types, values, lengths, formats, 0)
                                  : PQexecPrepared(handle, name, Int32(parameters.count), values, lengths, formats, 0)
        // Another process changed a table (a migration): the statement must be prepared again. Outside a
        // transaction the call goes again at once; inside one, the next call prepares it afresh.
        if Self.sqlState(result) == "0A000" {
            statements[key] = nil
            if !retrying && PQtransactionStatus(handle) == PQTRANS_IDLE {
                PQclear(result)
                return try perform(sql, parameters, planning: planning, retrying: true)
            }
        }
        do {
            try check(result, sql)
        } catch {
            PQclear(result)
            throw error
        }
        return result
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

    private static func type(_ value: SQLValue) -> Oid {
        switch value {
        case .null: 0          // inferred from where it is used
        case .int: 20          // int8
        case .double: 701      // float8
        case .text: 25         // text
        case .blob: 17         // bytea
        }
    }

    private static func decode(_ pointer: UnsafeMutablePointer<CChar>?, type: Oid) -> SQLValue {
        guard let pointer else { return .null }
        // Integers (ids, times, counts: most cells) straight from the digits, without a String between.
        if type == 20 || type == 21 || type == 23, let value = integer(pointer) { return .int(value) }
        let text = String(cString: pointer)
        switch type {
        case 16: return .int(text == "t" ? 1 : 0)                                  // bool
        case 20, 21, 23, 26: return Int64(text).map(SQLValue.int) ?? .text(text)   // integers, oid
        case 700, 701: return Double(text).map(SQLValue.double) ?? .text(text)
        case 1700: return Int64(text).map(SQLValue.int) ?? Double(text).map(SQLValue.double) ?? .text(text)   // numeric
        case 17: return .blob(hexBytes(text))                                      // bytea, hex output
        default: return .text(text)
        }
    }

    /// A decimal integer's text output (optional `-`, digits), or nil when it is not one that fits.
    static func integer(_ pointer: UnsafePointer<CChar>) -> Int64? {
        var index = 0
        let negative = pointer[0] == 45   // "-"
        if negative { index = 1 }
        var value: Int64 = 0
        while pointer[index] != 0 {
            let digit = Int64(pointer[index]) - 48
            guard digit >= 0 && digit <= 9 else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowed) = shifted.subtractingReportingOverflow(digit)   // built negative: Int64.min fits
            guard !overflow && !overflowed else { return nil }
            value = sum
            index += 1
        }
        guard index > (negative ? 1 : 0) else { return nil }
        if negative { return value }
        return value == .min ? nil : -value
    }

    /// bytea's text output: `\x` then two hex digits a byte.
    private static func hexBytes(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8.dropFirst(2))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index + 1 < digits.count {
            bytes.append(nibble(digits[index]) << 4 | nibble(digits[index + 1]))
            index += 2
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8 {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: digit - UInt8(ascii: "A") + 10
        }
    }

    // MARK: - Errors

    private func check(_ result: OpaquePointer?, _ sql: String) throws(StoreError) {
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        guard status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK else { return }
        let message = Self.trimmed(result.map(PQresultErrorMessage) ?? PQerrorMessage(handle))
        let state = Self.sqlState(result) ?? ""
        // Class 23: integrity constraint violation (a unique value taken).
        if state.hasPrefix("23") { throw StoreError(.conflict, message) }
        // lock_not_available: a claim's lock_timeout ran out (`PostgresDatabase.inClaimTransaction`).
        if state == "55P03" { throw StoreError(.busy, "a row was locked by another transaction: \(message)") }
        if PQstatus(handle) != CONNECTION_OK {
            throw StoreError(.io, "lost the connection to PostgreSQL at \(origin): \(message)")
        }
        throw StoreError(.io, "PostgreSQL (\(origin)): \(message) (SQLSTATE \(state)) running \(sql.prefix(200))")
    }

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
