import Foundation
import IsletCore
import IsletStore

/// Waiting updates (issue 43): a plain update accepted while nothing of its activity waits in the queue is written as
/// its message and its activity's change, and the activity names it as its waiting update, with its turn (A9); no job
/// is queued for it. An update accepted after it, before its turn, supersedes it there and then (by its id, as one in
/// the queue would be) and takes its place. Delivery queues the waiting update when its turn comes: a claim's
/// transaction begins by queueing those whose turn has come, many activities in two statements. Every other writer of an
/// activity's queue (ends, held updates released, starts, renewals) queues its waiting update first, under the
/// activity's lock, so the order of an activity's messages in the queue is the order of acceptance.
extension SQLMessageStore {
    /// Whether `message` may be accepted as its activity's waiting update: a plain update due now, on SQLite (PostgreSQL
    /// writes its plain updates together, `UpdatesTogether`, and queues them at once), with no push owed anywhere (an
    /// acceptance that queues at once settles those) and nothing of its activity waiting in the queue (it would be
    /// superseded there).
    func mayWait(_ message: NewMessage, latest: LatestUpdate, at date: Date) -> Bool {
        !database.dialect.writesRowsTogether && message.event == .update && message.dueAt <= date
            && latest.owedPushes == false && !latest.waitsInQueue
    }

    /// Accepts `message` as its activity's waiting update (see `mayWait`): the budget (A7) and its turn (A9) decided as
    /// for one queued at once (`UpdateDecision`), its message written, the waiting update it replaces superseded, and
    /// the activity changed and made to name it.
    func acceptWaiting(_ message: NewMessage, activity: ActivityRecord, log: PriorityTenLog, channel: SQLValue, latest: LatestUpdate,
                       application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing, at date: Date,
                       _ c: any SQLConnection) throws(StoreError) -> AcceptedUpdate {
        let decision = UpdateDecision(message, activity: activity, log: log, latest: latest, budget: budget, pacing: pacing, at: date)
        let insertion = try insertion(message, activity: activity.id, application: application, at: date, budgeted: decision.priority,
                                      dueAt: decision.dueAt, channel: channel, c)
        try c.send(insertion.message)
        let inserted = database.dialect.lastInsertedID
        if latest.unqueued, let previous = latest.row?["id"] {
            try c.send("""
                UPDATE messages SET superseded_by = \(inserted), state = \(MessageState.done.sql), finished_at = ? WHERE id = ? AND state = \(MessageState.pending.sql)
                """, [SQLValue.seconds(date), previous])
        }
        try c.send(SQLStatement("""
            UPDATE activities SET state = ?, content_state = ?, updated_at = ?, priority_ten_log = COALESCE(?, priority_ten_log),
                dismiss_at = COALESCE(?, dismiss_at), waiting_update = \(inserted), waiting_due_at = ?
            WHERE id = ?
            """, decision.activityChange(message, at: date) + [insertion.dueAt, .int(activity.id)]))
        return decision.accepted(activity, channel: channel)
    }

    /// The waiting updates whose turn has come by `date`, queued (at most `limit`, the earliest turns first).
    /// A claim's transaction begins with it. On PostgreSQL an activity another transaction holds is left for the next.
    func queueWaitingUpdates(dueBy date: Date, limit: Int, _ c: any SQLConnection) throws(StoreError) {
        let rows = try c.query("""
            SELECT id, waiting_update FROM activities
            WHERE waiting_update IS NOT NULL AND waiting_due_at <= ? ORDER BY waiting_due_at LIMIT ? \(database.dialect.skipLocked(of: "activities", updatingKey: false))
            """, [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh)
        try queueWaiting(rows.compactMap { row in row["id"].int.flatMap { id in row["waiting_update"].int.map { (id, $0) } } }, c)
    }

    /// The waiting update `waiting` of the activity `activity`, locked by the caller, queued now whatever its turn (it
    /// keeps it).
    func queueWaitingUpdate(_ waiting: Int64, of activity: Int64, _ c: any SQLConnection) throws(StoreError) {
        try queueWaiting([(activity, waiting)], c)
    }

    /// The waiting updates of activities into the queue at their turns, and the activities naming none, by two
    /// statements for all; then pushes owed for their older messages superseded.
    private func queueWaiting(_ waiting: [(activity: Int64, update: Int64)], _ c: any SQLConnection) throws(StoreError) {
        guard !waiting.isEmpty else { return }
        let ids = SQLValue.text(JSONValue.array(waiting.map { .int($0.activity) }).jsonText)
        let inList = database.dialect.isIn("CAST(value AS BIGINT)", of: "?1")
        try c.send("""
            INSERT INTO message_queue (message, activity, due_at)
            SELECT waiting_update, id, waiting_due_at FROM activities WHERE id \(inList) AND waiting_update IS NOT NULL
            """, [ids])
        try c.send("UPDATE activities SET waiting_update = NULL, waiting_due_at = NULL WHERE id \(inList)", [ids])
        guard try !c.query(Self.owedPushesProbe, [], planning: .fresh).isEmpty else { return }
        for (activity, update) in waiting { try supersedeOwedPushes(olderThan: update, activity: activity, owed: true, c) }
    }
}
