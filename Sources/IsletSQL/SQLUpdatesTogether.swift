import Foundation
import IsletCore
import IsletStore

/// What an accepted update or end of a live activity does, decided from the activity and its session's latest update:
/// its budget (A7), its turn (A9), the activity's new state, and whether an older update may be waiting still.
struct UpdateDecision {
    let priority: BudgetedPriority
    /// The activity's priority-10 log once this update spent from it (A7); nil: unchanged.
    let spent: PriorityTenLog?
    let state: ActivityState
    /// An end's dismissal time; nil: unchanged.
    let dismissAt: Date?
    /// When it goes out: now, or its turn after the last update that went out (A9).
    let dueAt: Date
    /// An older update of the session may still be waiting, to be superseded once this one is in. When the session's
    /// latest update is done, so is every one before it: a message is claimed only once every older one has finished.
    let unfinishedUpdates: Bool

    init(_ message: NewMessage, activity: ActivityRecord, log stored: PriorityTenLog, latest: SQLMessageStore.LatestUpdate,
         budget: UpdateBudget, pacing: UpdatePacing, at date: Date) {
        // The session's latest update, locked by the reader so no claim takes it meanwhile (claims skip locked rows):
        // still waiting, it is superseded, and this message takes its turn (A9) and its budget (A7). One a claim holds
        // at this moment is being sent: not waiting.
        let previous = latest.row
        let previousState = previous.flatMap { MessageState(rawValue: $0["state"].text ?? "") }
        // One accepted as its activity's waiting update is not queued yet: no claim can have taken it.
        let waiting = latest.waitsInQueue || latest.unqueued
        var log = stored
        if waiting, let previous { log = log.returning(SQLMessageStore.priorities(previous)) }
        var priority = BudgetedPriority(requested: message.priority)
        // An update iOS will not show (past the activity's 8 hours, A8) spends no budget.
        if message.priority == 10 && !ActivityLifetime.isOver(startedAt: activity.startedAt, now: date) {
            (priority, log) = budget.admit(requested: 10, log: log, now: date)
        }
        self.priority = priority
        spent = log == stored ? nil : log
        state = message.event == .end ? .ended : .active
        dismissAt = message.event == .end ? ActivityLifetime.dismissAt(endedAt: date, dismissalDate: message.dismissalDate) : nil
        // A9: an update waits for its turn after the last one that went out; an end goes at once.
        var dueAt = date
        if message.event == .update, let previous {
            dueAt = pacing.dueAt(now: date, previous: UpdatePacing.Previous(
                dueAt: SQLMessageStore.date(milliseconds: previous["due_at"].int ?? 0), waiting: waiting))
        }
        self.dueAt = dueAt
        unfinishedUpdates = previousState != .done
    }

    /// The activity's new state, content-state, time, priority-10 log (NULL: kept) and dismissal time (NULL: kept).
    func activityChange(_ message: NewMessage, at date: Date) -> [SQLValue] {
        [.text(state.rawValue), .text(JSONValue.object(message.contentState).jsonText), SQLValue.seconds(date),
         spent.map { .text($0.json.jsonText) } ?? .null, dismissAt.map { SQLValue.seconds($0) } ?? .null]
    }

    /// What its caller is told.
    func accepted(_ activity: ActivityRecord, channel: SQLValue) -> AcceptedUpdate {
        AcceptedUpdate(priority: priority, activityStartedAt: activity.startedAt, dueAt: dueAt,
                       channel: channel.text.map(SQLMessageStore.decode(sessionChannel:)))
    }
}

/// The plain updates of several requests written together (PostgreSQL, `WriteTogether`): their activities locked and
/// read by one statement, their sessions' latest updates by a second, each decided as when alone (`UpdateDecision`),
/// and the activities' changes, the messages and their jobs written by one statement for all. A request with an update
/// out of the ordinary (an end, a refusal, one held for later or with held ones due before it, A11) runs its own body
/// instead, as every write did before: that path (`acceptUpdates`) is the reference this one must agree with.
final class UpdatesTogether: WriteTogether, @unchecked Sendable {
    let store: SQLMessageStore
    let messages: [NewMessage]
    let application: ApplicationCode
    let budget: UpdateBudget
    let pacing: UpdatePacing
    let date: Date
    /// Its request's outcomes once made together; read by its caller when the write has returned.
    private(set) var accepted: [AcceptedUpdate]?

    init(store: SQLMessageStore, messages: [NewMessage], application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing,
         at date: Date) {
        self.store = store
        self.messages = messages
        self.application = application
        self.budget = budget
        self.pacing = pacing
        self.date = date
    }

    func write(together members: [any WriteTogether], _ c: any SQLConnection) throws -> [Bool] {
        let requests = members.compactMap { $0 as? UpdatesTogether }
        guard requests.count == members.count else { return members.map { _ in false } }
        // One row per update: its place in the wave and the activity it names, in the order of their keys, which is the
        // order the activities are locked in, as `GroupCommit` reads ahead.
        var keys: [(lock: String, row: JSONValue)] = []
        for request in requests {
            for message in request.messages {
                keys.append((SQLMessageStore.lockKey(message.activityID, request.application),
                             ["ord": .int(Int64(keys.count)), "application": .string(request.application.rawValue),
                              "activity_id": .string(message.activityID), "now": .int(SQLMessageStore.milliseconds(request.date).int ?? 0)]))
            }
        }
        let key = SQLValue.text(JSONValue.array(keys.sorted { $0.lock < $1.lock }.map(\.row)).jsonText)
        let read = try c.queries([
            SQLStatement(Self.locking, [key]),
            // A statement of its own after the locks, so it reads what the transactions it waited for committed.
            SQLStatement(Self.latest(store), [key]),
            SQLStatement(SQLMessageStore.owedPushesProbe, [], planning: .fresh),
        ])
        let activities = Dictionary(read[0].map { ($0["ord"].int ?? -1, $0) }, uniquingKeysWith: { first, _ in first })
        let latest = Dictionary(read[1].map { ($0["ord"].int ?? -1, $0) }, uniquingKeysWith: { first, _ in first })
        let owed = !read[2].isEmpty
        var made: [Bool] = []
        var rows: [JSONValue] = []
        var superseding: [(activity: Int64, unfinishedUpdates: Bool, date: Date)] = []
        var first: Int64 = 0
        for request in requests {
            defer { first += Int64(request.messages.count) }
            var outcomes: [AcceptedUpdate] = []
            var requestRows: [JSONValue] = []
            var requestSuperseding: [(activity: Int64, unfinishedUpdates: Bool, date: Date)] = []
            for (offset, message) in request.messages.enumerated() {
                let ord = first + Int64(offset)
                guard let row = activities[ord] else { break }
                let locked = SQLMessageStore.locked(row, heldDueBy: request.date)
                guard message.event == .update, message.dueAt <= request.date, !locked.heldDue, locked.waiting == nil, message.checkedSchema.holds(for: locked.record.schema),
                      ActivityRules.updateRefusal(message.activityID, state: locked.record.state) == nil else { break }
                let session = SQLMessageStore.LatestUpdate(latest[ord], owedPushes: owed)
                let decision = UpdateDecision(message, activity: locked.record, log: locked.log, latest: session, budget: request.budget,
                                              pacing: request.pacing, at: request.date)
                let insertion = try store.insertion(message, activity: locked.record.id, application: request.application, at: request.date,
                                                    budgeted: decision.priority, dueAt: decision.dueAt, channel: locked.channel, c)
                var columns: [(key: String, value: JSONValue)] = [("ord", .int(ord))]
                for (name, value) in zip(Self.changedColumns, decision.activityChange(message, at: request.date)) {
                    columns.append((name, Self.json(value)))
                }
                for (column, value) in zip(SQLMessageStore.insertedColumns, insertion.message.parameters) {
                    columns.append((column.name, Self.json(value)))
                }
                requestRows.append(.object(JSONObject(columns)))
                if decision.unfinishedUpdates || owed { requestSuperseding.append((locked.record.id, decision.unfinishedUpdates, request.date)) }
                outcomes.append(decision.accepted(locked.record, channel: locked.channel))
            }
            // All of a request's updates, or none: the request then runs alone.
            let whole = outcomes.count == request.messages.count
            made.append(whole)
            guard whole else { continue }
            rows += requestRows
            superseding += requestSuperseding
            request.accepted = outcomes
        }
        guard !rows.isEmpty else { return made }
        try c.send(Self.writing, [.text(JSONValue.array(rows).jsonText)])
        // Older updates still waiting, and pushes still owed, are superseded as when alone: rare outside an outage.
        for (activity, unfinishedUpdates, date) in superseding {
            try store.supersedeOlder(than: nil, activity: activity, owed: owed, unfinishedUpdates: unfinishedUpdates, at: date, c)
        }
        try store.notifyNodes(c)
        return made
    }

    /// The keys of a wave (`?1`, a JSON array): `ord`, `application`, `activity_id`, and `now` (milliseconds).
    static let keys = "json_to_recordset(CAST(?1 AS json)) AS k(ord bigint, application text, activity_id text, now bigint)"

    /// The activities of a wave locked to the commit, one after the other in the order of the keys, each by its key
    /// (LATERAL: a join of the list with the table was planned as a scan of every activity), with what
    /// `SQLMessageStore.locked` reads of each (A7's log, A11's held updates due, X5's session channel).
    static let locking = """
        SELECT k.ord, a.* FROM \(keys) CROSS JOIN LATERAL (
            SELECT a.id, a.activity_id, a.state, a.attributes_type, a.name, a.content_state, a.updated_at, a.priority_ten_log, a.started_at,
                   a.dismiss_at, a.schema_version, a.waiting_update, EXISTS (SELECT 1 FROM scheduled_updates s WHERE s.activity = a.id AND s.due_at <= k.now) AS held_due,
                   \(SQLMessageStore.sessionChannel(of: "a.id")) AS session_channel
            FROM activities a WHERE a.application = k.application AND a.activity_id = k.activity_id FOR NO KEY UPDATE OF a) a
        """

    /// The sessions' latest updates of a wave (`SQLMessageStore.latestUpdate`), each by its activity's key. The LIMIT keeps
    /// each a read of its own by the keys: without it the read was merged into the join and planned as a scan of every message.
    static func latest(_ store: SQLMessageStore) -> String {
        let each = store.latestUpdate(of: "(SELECT x.id FROM activities x WHERE x.application = k.application AND x.activity_id = k.activity_id)", [])
        return "SELECT k.ord, l.* FROM \(keys) CROSS JOIN LATERAL (\(each.sql) LIMIT 1) l"
    }

    /// The columns of `UpdateDecision.activityChange`, in its order, as a row of `writing` names them.
    static let changedColumns = ["new_state", "content_state", "updated_at", "ten_log", "dismiss_at"]

    /// The activities' changes, the messages and their jobs of a wave, from a JSON array of rows (`?1`).
    static let writing: String = {
        let inserted = SQLMessageStore.insertedColumns
        let types = ["new_state text", "content_state text", "updated_at bigint", "ten_log text", "dismiss_at bigint"]
            + inserted.map { "\($0.name) \($0.json == "bytea" ? "text" : $0.json)" }
        let values = inserted.map { $0.json == "bytea" ? "decode(v.\($0.name), 'base64')" : "v.\($0.name)" }
        return """
            WITH v AS (SELECT * FROM json_to_recordset(CAST(?1 AS json)) AS v(ord bigint, \(types.joined(separator: ", ")))),
            a AS (UPDATE activities SET state = v.new_state, content_state = v.content_state, updated_at = v.updated_at,
                      priority_ten_log = COALESCE(v.ten_log, activities.priority_ten_log), dismiss_at = COALESCE(v.dismiss_at, activities.dismiss_at)
                  FROM v WHERE activities.id = v.activity),
            m AS (INSERT INTO messages (\(inserted.map(\.name).joined(separator: ", ")), state)
                  SELECT \(values.joined(separator: ", ")), \(MessageState.pending.sql) FROM v ORDER BY v.ord RETURNING id, activity, due_at)
            INSERT INTO message_queue (message, activity, due_at) SELECT id, activity, due_at FROM m
            """
    }()

    /// A value as a JSON row carries it (bytes as base64, decoded by `writing`).
    static func json(_ value: SQLValue) -> JSONValue {
        switch value {
        case .null: .null
        case .int(let v): .int(v)
        case .double(let v): .double(v)
        case .text(let v): .string(v)
        case .blob(let v): .string(Data(v).base64EncodedString())
        }
    }
}
