import Foundation
import IsletCore
import IsletStore

/// Messages, their delivery jobs, activities and per-device deliveries, in either engine.
///
/// A message's job is its row of `message_queue` (when it is due, the lease of the claim that holds it) from its
/// acceptance until it finishes; the `messages` row keeps its history (`state`, `cursor`: the last device id done,
/// what superseded it). Accepting writes the message and its job in one transaction; each batch of a fan-out writes
/// its results and the new cursor in one transaction, so a crash loses nothing and a resumed job repeats at most
/// one batch, with the same stored payload bytes.
public struct SQLMessageStore: Sendable {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    /// Wakes the other nodes when this transaction commits (PostgreSQL's NOTIFY; nothing on SQLite): once, however many
    /// writes of a group ask (PostgreSQL delivers identical notifications of a transaction once anyway).
    func notifyNodes(_ c: any SQLConnection) throws(StoreError) {
        if let notify = database.dialect.notifyWork { try c.sendOncePerTransaction(notify) }
    }

    /// Runs `body` in one write transaction, rolled back when only validating.
    func accept(validateOnly: Bool, _ body: (any SQLConnection) throws -> Void) throws {
        try accept(validateOnly: validateOnly, reading: nil) { c, _ in try body(c) }
    }

    /// `accept` for a body that begins with `reads` and is given their rows (`GroupReads`: read with the reads of the
    /// writes grouped with it).
    func accept(validateOnly: Bool, reading reads: GroupReads?, _ body: (any SQLConnection, [[SQLRow]]) throws -> Void) throws {
        do {
            try withoutActuallyEscaping(body) { body in
                let write = { (c: any SQLConnection, rows: [[SQLRow]]) throws in
                    try body(c, rows)
                    try Self.endDryRun(validateOnly, c)
                }
                if let reads {
                    try database.inWriteTransaction(reading: reads, write)
                } else {
                    try database.write(rethrowing: { c in try write(c, []) })
                }
            }
        } catch is RollBack {
            return
        }
    }

    /// `accept` that does not wait for the commit: `then` gets nil once the write is committed (a dry run: rolled back),
    /// or its error, on the thread that committed it.
    func accept(validateOnly: Bool, reading reads: GroupReads?, _ body: @escaping (any SQLConnection, [[SQLRow]]) throws -> Void,
                then: @escaping ((any Error)?) -> Void) {
        database.inWriteTransaction(reading: reads, { c, rows in
            try body(c, rows)
            try Self.endDryRun(validateOnly, c)
        }, then: { result in
            guard case .failure(let error) = result, !(error is RollBack) else { return then(nil) }
            then(error)
        })
    }

    /// A dry run's write, its statements run, rolls back (`RollBack`). It answers for the writes sent on too: their
    /// errors come before the rollback, which drops them.
    private static func endDryRun(_ validateOnly: Bool, _ c: any SQLConnection) throws {
        guard validateOnly else { return }
        try c.flush()
        throw RollBack()
    }

    /// `budgeted`: the priority by kind of device when the update budget lowered it (A7); stored only then.
    /// `dueAt`: a paced update's turn (A9), its expiry moved with it. `channel`: the session's channel column,
    /// when the caller has read it (an update or end copies its start's, X5).
    /// `queued` false: stored as history only, for a caller that marks it cancelled at once.
    @discardableResult
    func insert(_ message: NewMessage, activity: Int64, application: ApplicationCode, at date: Date,
                        budgeted: BudgetedPriority? = nil, dueAt: Date? = nil, channel: SQLValue? = nil, queued: Bool = true,
                        _ c: any SQLConnection) throws(StoreError) -> Int64 {
        let insertion = try insertion(message, activity: activity, application: application, at: date, budgeted: budgeted, dueAt: dueAt,
                                      channel: channel, c)
        let id = try c.query(insertion.message.sql + " RETURNING id", insertion.message.parameters)[0]["id"].int ?? 0
        if queued { try c.send(queueing(id, activity: activity, dueAt: insertion.dueAt)) }
        return id
    }

    /// Stores `message` and queues its job (see `insert`), for a caller that needs no id back: on PostgreSQL in one
    /// statement, which goes with the next statements, in one round trip.
    /// `along`: a write that neither reads what the insert writes nor the other way round (the activity's change), sent
    /// before it; on PostgreSQL in the same statement. Its placeholders are plain `?`.
    func send(_ message: NewMessage, activity: Int64, application: ApplicationCode, at date: Date,
              budgeted: BudgetedPriority?, dueAt: Date?, channel: SQLValue?, along: SQLStatement? = nil,
              _ c: any SQLConnection) throws(StoreError) {
        let insertion = try insertion(message, activity: activity, application: application, at: date, budgeted: budgeted, dueAt: dueAt,
                                      channel: channel, c)
        guard database.dialect.writesRowsTogether else {
            if let along { try c.send(along) }
            try c.send(insertion.message)
            try c.send(queueing(nil, activity: activity, dueAt: insertion.dueAt))
            return
        }
        // PostgreSQL: all in one statement, which costs the server about what one of them did.
        try c.send(SQLStatement("""
            WITH \(along.map { "a AS (\($0.sql)), " } ?? "")m AS (\(insertion.message.sql) RETURNING id)
            INSERT INTO message_queue (message, activity, due_at) SELECT id, ?, ? FROM m
            """, (along?.parameters ?? []) + insertion.message.parameters + [.int(activity), insertion.dueAt]))
    }

    /// The job of the message `id` into the queue; nil: of the message the connection inserted last.
    func queueing(_ id: Int64?, activity: Int64, dueAt: SQLValue) -> SQLStatement {
        guard let id else {
            return SQLStatement("INSERT INTO message_queue (message, activity, due_at) VALUES (\(database.dialect.lastInsertedID), ?, ?)",
                                [.int(activity), dueAt])
        }
        return SQLStatement("INSERT INTO message_queue (message, activity, due_at) VALUES (?, ?, ?)", [.int(id), .int(activity), dueAt])
    }

    /// The statement that stores `message` (see `insert`), and the time its job falls due.
    func insertion(_ message: NewMessage, activity: Int64, application: ApplicationCode, at date: Date,
                           budgeted: BudgetedPriority?, dueAt: Date?, channel: SQLValue?, _ c: any SQLConnection) throws(StoreError)
        -> (message: SQLStatement, dueAt: SQLValue) {
        let lowered = budgeted.flatMap { $0 == BudgetedPriority(requested: message.priority) ? nil : $0 }
        let due = dueAt ?? message.dueAt, expires = message.expiresAt.addingTimeInterval(due.timeIntervalSince(message.dueAt))
        let column: SQLValue
        if let channel {
            column = channel
        } else if message.event == .start {
            column = message.channelIDs.map { .text(Self.encode(channelIDs: $0, name: message.channel)) } ?? .null
            // A scheduled start uses its channel when it goes out: kept from deletion until then.
            if let name = message.channel { try SQLChannelStore.markUsed(name, in: application, at: max(date, message.dueAt), c) }
        } else {
            column = try Self.sessionChannel(activity, c).map { .text($0) } ?? .null
        }
        return (SQLStatement(Self.insertingMessage, [
            .text(message.code), .text(application.rawValue), .int(activity), .text(message.event.rawValue),
            message.target.map { .text(Self.encode($0).jsonText) } ?? .null, message.target.map { $0.kind.parameter } ?? .null,
            message.target?.namedDevices.map { .int(Int64($0)) } ?? .null, Self.optional(message.attributesType),
            .blob(message.payload), message.fallbackPayload.map { .blob($0) } ?? .null,
            try androidPayload(of: message, activity: activity, c).map { .blob($0) } ?? .null, .int(Int64(message.priority)),
            lowered.map { .int(Int64($0.standard)) } ?? .null, lowered.map { .int(Int64($0.frequent)) } ?? .null,
            Self.milliseconds(due), SQLValue.seconds(date), Self.milliseconds(expires), column,
            message.unknownTargets > 0 ? .int(Int64(message.unknownTargets)) : .null,
        ]), Self.milliseconds(due))
    }

    /// An update's Android Live Update as stored (issue 46): with the title and text it does not give taken from the
    /// activity's last message that had them, as the SDK draws the notification anew from each push. Every stored one
    /// is whole, so one message back is enough; read only for an update that needs it.
    func androidPayload(of message: NewMessage, activity: Int64, _ c: any SQLConnection) throws(StoreError) -> [UInt8]? {
        guard let data = message.androidPayload, message.event == .update, AndroidPush.lacksTexts(data) else { return message.androidPayload }
        let earlier = try c.query("""
            SELECT android_payload FROM messages WHERE activity = ? AND android_payload IS NOT NULL AND event != \(LiveActivityEvent.end.sql)
            ORDER BY id DESC LIMIT 1
            """, [.int(activity)]).first?["android_payload"].blob
        return AndroidPush.liveUpdate(data, carrying: earlier.map { [$0] } ?? [])
    }

    /// `insertion`'s statement, made once: a message of every accepted start and update is inserted with it.
    static let insertingMessage = """
        INSERT INTO messages (\(insertedColumns.map(\.name).joined(separator: ", ")), state)
        VALUES (\(Array(repeating: "?", count: insertedColumns.count).joined(separator: ", ")), \(MessageState.pending.sql))
        """

    /// The columns of `messages` that `insertion` gives values for, in the order of its parameters, each with its
    /// PostgreSQL type in a row of JSON (`UpdatesTogether`, where bytes travel as base64); `state` is always pending.
    static let insertedColumns: [(name: String, json: String)] = [
        ("code", "text"), ("application", "text"), ("activity", "bigint"), ("event", "text"), ("target", "text"), ("target_kind", "text"),
        ("named_devices", "bigint"), ("attributes_type", "text"), ("payload", "bytea"), ("fallback_payload", "bytea"), ("android_payload", "bytea"),
        ("priority", "bigint"),
        ("priority_standard", "bigint"), ("priority_frequent", "bigint"), ("due_at", "bigint"), ("created_at", "bigint"),
        ("expires_at", "bigint"), ("channel_ids", "text"), ("unknown_targets", "bigint"),
    ]

    /// A start's channel (X5) as stored: `{"name": name, "production": id, "sandbox": id}`; its session's updates
    /// and ends copy it.
    static func encode(channelIDs: [Gateway: String], name: String?) -> String {
        var entries = name.map { [(key: "name", value: JSONValue.string($0))] } ?? []
        entries += Gateway.all.compactMap { gateway in channelIDs[gateway].map { (gateway.rawValue, .string($0)) } }
        return JSONValue.object(JSONObject(entries)).jsonText
    }

    static func decode(sessionChannel text: String) -> SessionChannel {
        let object = (try? JSONParser.parse(text))?.objectValue
        var ids: [Gateway: String] = [:]
        for (key, value) in object?.entries ?? [] {
            if let gateway = Gateway(rawValue: key), let id = value.stringValue { ids[gateway] = id }
        }
        return SessionChannel(name: object?["name"]?.stringValue, ids: ids)
    }

    /// The channel column of an activity's current start, `activity` a column or `?`: NULL when it was not started
    /// on a channel (X5). Newest first through messages_by_activity, stopping at the session's start.
    static func sessionChannel(of activity: String) -> String {
        """
        (SELECT s.channel_ids FROM messages s WHERE s.activity = \(activity) AND s.event = \(LiveActivityEvent.start.sql) AND s.state != \(MessageState.cancelled.sql)
         ORDER BY s.id DESC LIMIT 1)
        """
    }

    /// The channel column of an activity's current start, read on its own.
    static func sessionChannel(_ activity: Int64, _ c: any SQLConnection) throws(StoreError) -> String? {
        try c.query("SELECT \(sessionChannel(of: "?")) AS channel_ids", [.int(activity)]).first?["channel_ids"].text
    }

    static func decode(channelIDs text: String) -> [Gateway: String] { decode(sessionChannel: text).ids }

    /// A message's priority by kind of device: the one asked, unless the update budget lowered it (A7).
    static func priorities(_ row: SQLRow) -> BudgetedPriority {
        let asked = Int(row["priority"].int ?? 5)
        return BudgetedPriority(standard: row["priority_standard"].int.map { Int($0) } ?? asked,
                                frequent: row["priority_frequent"].int.map { Int($0) } ?? asked)
    }

    /// `AND column NOT IN ('A', 'B')` for application codes (their syntax admits no quote).
    static func notIn(_ codes: Set<ApplicationCode>, column: String) -> String {
        codes.isEmpty ? "" : "AND \(column) NOT IN (\(codes.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ")))"
    }

    /// Starts to a filter or to users may be large fan-outs: for these applications only updates, ends
    /// and starts to named devices are taken, so the worker they keep free serves small messages.
    static func fanOutsNotIn(_ codes: Set<ApplicationCode>) -> String {
        codes.isEmpty ? "" : "AND (m.event != \(LiveActivityEvent.start.sql) OR m.target_kind = \(TargetKind.devices.sql) OR (1 = 1 \(notIn(codes, column: "m.application"))))"
    }

    /// The id of an activity's current start (the latest one not cancelled); `activity` is a column or `?1`.
    /// D5 admits the devices it addressed, catch-up sends what came after it, retention keeps it.
    static func currentStart(of activity: String) -> String {
        "(SELECT MAX(id) FROM messages WHERE activity = \(activity) AND event = \(LiveActivityEvent.start.sql) AND state != \(MessageState.cancelled.sql))"
    }

    /// The id of an activity's current start, read on its own; nil when it has none.
    static func currentStart(_ activity: Int64, _ c: any SQLConnection) throws(StoreError) -> Int64? {
        try c.query("SELECT \(currentStart(of: "?")) AS start", [.int(activity)])[0]["start"].int
    }

    static func date(milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// An activity; `locking` it to the commit (PostgreSQL) when a decision and an enqueue depend on it.
    func activityRow(_ activityID: String, _ application: ApplicationCode, locking: Bool,
                             _ c: any SQLConnection) throws(StoreError) -> ActivityRecord? {
        try (locking ? lockedRow(activityID, application, c) : activityQuery(activityID, application, locking: false, c)).map(Self.activity)
    }

    /// The activity locked to the commit, with its priority-10 updates of the last hour (A7) and the channel
    /// column of its current start (X5: its updates and ends copy it).
    func lockedActivity(_ activityID: String, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> LockedActivity? {
        try lockedRow(activityID, application, c).map { row in
            var locked = Self.locked(row, heldDueBy: nil)
            locked.waiting = nil
            return locked
        }
    }

    /// The activity's row locked to the commit, its waiting update queued first (`queueWaitingUpdate`), so what the
    /// caller queues for it goes after.
    private func lockedRow(_ activityID: String, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> SQLRow? {
        guard let row = try activityQuery(activityID, application, locking: true, c) else { return nil }
        if let activity = row["id"].int, let waiting = row["waiting_update"].int { try queueWaitingUpdate(waiting, of: activity, c) }
        return row
    }

    /// `waiting`: the activity's waiting update, accepted and not queued yet (`queueWaitingUpdates`).
    typealias LockedActivity = (record: ActivityRecord, log: PriorityTenLog, heldDue: Bool, channel: SQLValue, waiting: Int64?)

    /// A row of `activityStatement(locking: true)` as `LockedActivity`; with `heldDueBy`, whether it has held updates
    /// due by then (A11), read in the same statement.
    static func locked(_ row: SQLRow, heldDueBy: Date?) -> LockedActivity {
        (activity(row), PriorityTenLog(json: row["priority_ten_log"].text), heldDueBy != nil && row["held_due"].bool, row["session_channel"],
         row["waiting_update"].int)
    }

    /// What `enqueue` reads besides the activity: its session's latest update, whether this transaction holds it,
    /// and whether any push is owed.
    struct LatestUpdate {
        let row: SQLRow?
        /// The latest update is locked by this transaction, so no claim takes it before the commit. False when a
        /// sender holds it (claimed), or a claim of another transaction is taking it at this moment: it is being
        /// sent, and is neither locked, waited for nor counted as waiting (a node paused in the middle of a claim
        /// or a record holds up no update of that activity, and no update holds up a sender).
        let held: Bool
        /// Nil when not read with it.
        let owedPushes: Bool?
        /// It is its activity's waiting update: accepted, not queued yet, so no claim can take it (`queueWaitingUpdates`).
        let unqueued: Bool

        /// From the row `latestUpdate` read (nil: the session has no update yet); `waiting`: the activity's waiting update.
        init(_ row: SQLRow?, owedPushes: Bool?, waiting: Int64? = nil) {
            self.row = row
            held = row.map { $0["held"] != .null } ?? false
            self.owedPushes = owedPushes
            unqueued = waiting != nil && row?["id"].int == waiting
        }

        /// It waits in the queue, unclaimed and locked by this transaction: a newer update supersedes it there.
        var waitsInQueue: Bool {
            guard let row, held, MessageState(rawValue: row["state"].text ?? "") == .pending else { return false }
            return !row["claimed"].bool
        }
    }

    /// The session's latest update of the activity `activity` (a column, a parameter or a subquery), and in `held`
    /// its id when this statement locked it: unless a sender holds it (claimed) or another transaction is claiming it
    /// (`LatestUpdate.held`). One row at most, so the lock is taken once.
    func latestUpdate(of activity: String, _ parameters: [SQLValue]) -> SQLStatement {
        SQLStatement("""
            SELECT m.id, m.due_at, m.state, \(Self.claimed("m")) AS claimed, m.priority, m.priority_standard, m.priority_frequent,
                   (SELECT l.message FROM message_queue l WHERE l.message = m.id AND l.lease IS NULL \(database.dialect.skipLocked(of: "l", updatingKey: false))) AS held
            FROM messages m WHERE m.id = (
                SELECT id FROM messages
                WHERE activity = \(activity) AND event = \(LiveActivityEvent.update.sql) AND state != \(MessageState.cancelled.sql) AND id > COALESCE(\(Self.currentStart(of: activity)), 0)
                ORDER BY id DESC LIMIT 1)
            """, parameters)
    }

    /// The message that superseded the message `m` (an alias), if any. A waiting message is marked when a newer update
    /// or end is accepted (`supersedeOlder`); one a sender holds (claimed) is never written by another transaction, so
    /// its sender is never made to wait for the writer, nor the writer for it: for it the first newer update or end of its
    /// activity is the one, and its sender stores it when it finishes. `claimedBySender`: whether a sender holds it, when
    /// the caller knows (its sender finishing it); nil: read from the queue.
    static func superseding(_ m: String, claimedBySender: Bool? = nil) -> String {
        if claimedBySender == false { return "\(m).superseded_by" }
        let held = claimedBySender == true ? "" : "\(claimed(m)) AND "
        return """
        COALESCE(\(m).superseded_by, CASE WHEN \(held)\(m).event = \(LiveActivityEvent.update.sql) THEN (
            SELECT MIN(n.id) FROM messages n WHERE n.activity = \(m).activity AND n.id > \(m).id
              AND n.event IN \([LiveActivityEvent.update, .end].sqlList) AND n.state != \(MessageState.cancelled.sql)) END)
        """
    }

    /// Whether a sender holds the message `m` (an alias): its job is claimed under a lease.
    static func claimed(_ m: String) -> String {
        "EXISTS (SELECT 1 FROM message_queue c WHERE c.message = \(m).id AND c.lease IS NOT NULL)"
    }

    /// `latestUpdate` of an activity by its id.
    func latestUpdate(of activity: Int64, _ c: any SQLConnection) throws(StoreError) -> LatestUpdate {
        let statement = latestUpdate(of: "?1", [.int(activity)])
        return LatestUpdate(try c.query(statement.sql, statement.parameters).first, owedPushes: nil)
    }

    /// `lockedActivity` with what an update reads next (`LatestUpdate`): one round trip on PostgreSQL, where the
    /// queries go together. The update is read by the activity's key, as its id is not known yet.
    func lockedForUpdate(_ activityID: String, _ application: ApplicationCode, heldDueBy: Date? = nil, _ c: any SQLConnection)
        throws(StoreError) -> (activity: LockedActivity?, latest: LatestUpdate) {
        Self.lockedForUpdate(try c.queries(lockedForUpdate(activityID, application, heldDueBy: heldDueBy))[...], heldDueBy: heldDueBy)
    }

    /// The statements of `lockedForUpdate`, to be read ahead (`GroupReads`).
    func lockedForUpdate(_ activityID: String, _ application: ApplicationCode, heldDueBy: Date?) -> [SQLStatement] {
        let key: [SQLValue] = [.text(application.rawValue), .text(activityID)]
        return [
            activityStatement(activityID, application, locking: true, heldDueBy: heldDueBy),
            latestUpdate(of: "(SELECT k.id FROM activities k WHERE k.application = ?1 AND k.activity_id = ?2)", key),
            SQLStatement(Self.owedPushesProbe, [], planning: .fresh),
        ]
    }

    /// `lockedForUpdate` from the rows its statements read.
    static func lockedForUpdate(_ read: ArraySlice<[SQLRow]>, heldDueBy: Date?) -> (activity: LockedActivity?, latest: LatestUpdate) {
        let rows = Array(read)
        let activity = rows[0].first.map { locked($0, heldDueBy: heldDueBy) }
        return (activity, LatestUpdate(rows[1].first, owedPushes: !rows[2].isEmpty, waiting: activity?.waiting))
    }

    /// What an activity's writers lock first, as `GroupReads` name it.
    static func lockKey(_ activityID: String, _ application: ApplicationCode) -> String { "activity \(application.rawValue) \(activityID)" }

    func activityQuery(_ activityID: String, _ application: ApplicationCode, locking: Bool, heldDueBy: Date? = nil,
                               _ c: any SQLConnection) throws(StoreError) -> SQLRow? {
        let statement = activityStatement(activityID, application, locking: locking, heldDueBy: heldDueBy)
        return try c.query(statement.sql, statement.parameters).first
    }

    func activityStatement(_ activityID: String, _ application: ApplicationCode, locking: Bool, heldDueBy: Date? = nil) -> SQLStatement {
        let held = heldDueBy == nil ? "" : ", EXISTS (SELECT 1 FROM scheduled_updates s WHERE s.activity = activities.id AND s.due_at <= ?3) AS held_due"
        let channel = locking ? ", waiting_update, \(Self.sessionChannel(of: "activities.id")) AS session_channel" : ""
        return SQLStatement("""
            SELECT id, activity_id, state, attributes_type, name, content_state, updated_at, priority_ten_log, started_at, dismiss_at,
                   schema_version\(held)\(channel)
            FROM activities WHERE application = ?1 AND activity_id = ?2 \(locking ? database.dialect.forNoKeyUpdate : "")
            """, [.text(application.rawValue), .text(activityID)] + (heldDueBy.map { [Self.milliseconds($0)] } ?? []))
    }

    static func activity(_ row: SQLRow) -> ActivityRecord {
        var record = ActivityRecord(
            id: row["id"].int ?? 0, activityID: row["activity_id"].text ?? "", state: ActivityState(rawValue: row["state"].text ?? "") ?? .ended,
            attributesType: row["attributes_type"].text, name: row["name"].text,
            contentState: row["content_state"].text.flatMap { try? JSONParser.parse($0).objectValue },
            updatedAt: row["updated_at"].date ?? Date(timeIntervalSince1970: 0),
            startedAt: row["started_at"].date,
            dismissAt: row["dismiss_at"].date)
        record.schema = ActivitySchema(row)
        return record
    }

    /// The types of the application's custom tags; with `named`, of those names only (looked up by the key, never a
    /// read of every name the application has).
    static func tagTypes(_ application: ApplicationCode, named: Set<String>? = nil, _ c: any SQLConnection) throws(StoreError) -> [String: TagType] {
        var sql = "SELECT name, type FROM tag_types WHERE application = ?"
        var parameters: [SQLValue] = [.text(application.rawValue)]
        if let named {
            guard !named.isEmpty else { return [:] }
            sql += " AND name IN (\(Array(repeating: "?", count: named.count).joined(separator: ", ")))"
            parameters += named.sorted().map { .text($0) }
        }
        var types: [String: TagType] = [:]
        for row in try c.query(sql, parameters) {
            types[row["name"].text ?? ""] = TagType(rawValue: row["type"].text ?? "")
        }
        return types
    }

    /// A target as stored with its message: a filter keeps its definition, so deleting the filter later changes nothing.
    static func encode(_ target: TargetSelection) -> JSONValue {
        switch target {
        case .filter(let filter): ["filter": filter.json]
        case .devices(let list): ["devices": .array(list.map { .string($0) })]
        case .users(let list): ["users": .array(list.map { .string($0) })]
        }
    }

    static func decodeTarget(_ text: String, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> TargetSelection {
        do {
            let object = try JSONParser.parse(text).objectValue ?? [:]
            if let filter = object["filter"]?.objectValue {
                let types = try Self.tagTypes(application, named: FilterDefinition.tagNames(in: filter["conditions"]), c)
                return .filter(try FilterDefinition.parse(
                    name: filter["name"]?.stringValue ?? "", join: FilterJoin(rawValue: filter["operator"]?.stringValue ?? "") ?? .and,
                    conditions: filter["conditions"], tagTypes: types))
            }
            let strings = { (key: String) in object[key]?.arrayValue?.compactMap(\.stringValue) }
            if let devices = strings("devices") { return .devices(devices) }
            if let users = strings("users") { return .users(users) }
        } catch {
            throw StoreError(.io, "stored target is unreadable: \(error)")
        }
        throw StoreError(.io, "stored target is unreadable: \(text)")
    }

    static func parameters(_ dead: DeadToken) -> [SQLValue] {
        [.int(dead.device), .text(dead.token), dead.invalidSince.map { .int($0) } ?? .null]
    }

    static func optional(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
    static func milliseconds(_ date: Date) -> SQLValue { .int(Int64((date.timeIntervalSince1970 * 1000).rounded())) }
}

/// Thrown by a dry run's write after its statements ran, so its transaction rolls back and nothing is kept.
private struct RollBack: Error {}
