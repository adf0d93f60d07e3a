import Foundation
import IsletCore
import IsletStore

/// Messages, their delivery jobs, activities and per-device deliveries, in either engine.
///
/// A job is a `messages` row: `state`, `due_at`, and `cursor` (the last device id done). Accepting
/// writes the message and its job in one transaction; each batch of a fan-out writes its results
/// and the new cursor in one transaction, so a crash loses nothing and a resumed job repeats at most
/// one batch, with the same stored payload bytes.
public struct SQLMessageStore: MessageStore {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    // MARK: - Accepting

    public func acceptStarts(_ messages: [NewMessage], in application: ApplicationCode, at date: Date, validateOnly: Bool) throws {
        try accept(validateOnly: validateOnly) { c in
            for (index, message) in messages.enumerated() {
                let state: ActivityState = message.dueAt > date ? .scheduled : .active
                // A scheduled start's activity starts when it fires (A8).
                let startedAt = state == .active ? SQLValue.seconds(date) : .null
                let activity: Int64
                if let existing = try activityRow(message.activityID, application, locking: true, c) {
                    let read = try c.queries([
                        SQLStatement("SELECT 1 FROM messages WHERE activity = ? LIMIT 1", [.int(existing.id)]),
                        SQLStatement("SELECT 1 FROM messages WHERE activity = ? AND state IN ('pending', 'sending') LIMIT 1", [.int(existing.id)]),
                    ])
                    let facts = ActivityRules.StartFacts(state: existing.state, hasMessages: !read[0].isEmpty, unfinished: !read[1].isEmpty)
                    if let refusal = ActivityRules.startRefusal(message.activityID, facts: facts) {
                        throw AcceptRefusal(index: index, field: "live_activity_id", message: refusal)
                    }
                    try Self.endSession(existing, at: date, c)
                    if !message.renew { try c.send("DELETE FROM activity_renewals WHERE activity = ?", [.int(existing.id)]) }
                    try c.send("""
                        UPDATE activities SET state = ?, attributes_type = ?, name = ?, content_state = ?, updated_at = ?, schema_version = ?,
                            priority_ten_log = NULL, started_at = ?, dismiss_at = NULL
                        WHERE id = ?
                        """, [.text(state.rawValue), Self.optional(message.attributesType), Self.optional(message.name),
                              .text(JSONValue.object(message.contentState).jsonText), SQLValue.seconds(date),
                              message.schemaVersion.map { .int(Int64($0)) } ?? .null, startedAt, .int(existing.id)])
                    activity = existing.id
                } else {
                    activity = try c.query("""
                        INSERT INTO activities (application, activity_id, state, attributes_type, name, content_state, updated_at, schema_version,
                                                started_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                        """, [.text(application.rawValue), .text(message.activityID), .text(state.rawValue),
                              Self.optional(message.attributesType), Self.optional(message.name),
                              .text(JSONValue.object(message.contentState).jsonText), SQLValue.seconds(date),
                              message.schemaVersion.map { .int(Int64($0)) } ?? .null, startedAt])[0]["id"].int ?? 0
                }
                guard message.scheduledEnd != nil || message.renew else {
                    // No id needed back: the insert goes with the next statements (one round trip on PostgreSQL).
                    try c.send(try insertion(message, activity: activity, application: application, at: date, budgeted: nil, dueAt: nil,
                                             channel: nil, c))
                    continue
                }
                let start = try insert(message, activity: activity, application: application, at: date, c)
                if message.scheduledEnd != nil {
                    try schedule(message, event: .end, activity: activity, application: application, start: start, at: date, c)
                }
                if message.renew {
                    try scheduleRenewal(activity: activity, start: start, startsAt: message.dueAt, c)
                }
            }
            try notifyNodes(c)
        }
    }

    /// A new session of an ended id: the old session's devices and update tokens are gone with it.
    private static func endSession(_ activity: ActivityRecord, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        try c.send("""
            UPDATE activity_tokens SET token = NULL, updated_at = ?
            WHERE activity_id = ? AND device IN (SELECT device FROM activity_devices WHERE activity = ?)
            """, [SQLValue.seconds(date), .text(activity.activityID), .int(activity.id)])
        try c.send("DELETE FROM activity_devices WHERE activity = ?", [.int(activity.id)])
    }

    /// A8: the session whose start is `start` is renewed shortly before its 8 hours.
    private func scheduleRenewal(activity: Int64, start: Int64, startsAt: Date, _ c: any SQLConnection) throws(StoreError) {
        try c.run("""
            INSERT INTO activity_renewals (activity, start, end_message, due_at) VALUES (?, ?, NULL, ?)
            ON CONFLICT (activity) DO UPDATE SET start = excluded.start, end_message = NULL, due_at = excluded.due_at
            """, [.int(activity), .int(start), Self.milliseconds(ActivityRenewal.dueAt(startedAt: startsAt))])
    }

    /// Latest state wins (issue 10): older updates of the activity not yet sent are dropped, and a
    /// fan-out of one under way stops at its next batch; pushes of older updates and ends still owed
    /// to devices are settled as superseded. Starts are never superseded by an update: the device
    /// needs the start, and is caught up with the latest state when it reports its token.
    /// `id` nil: the activity's newest message, the one this transaction just inserted (the activity is locked).
    /// `owed`: whether any push is owed at all, when the caller has read it (`owedPushesProbe`).
    /// `unfinishedUpdates`: false when the caller knows no older update can be pending or sending.
    private func supersedeOlder(than id: Int64?, activity: Int64, owed: Bool? = nil, unfinishedUpdates: Bool = true, at date: Date,
                                _ c: any SQLConnection) throws(StoreError) {
        // ?1 goes unused then (typed, so both engines accept it).
        let newest = id == nil ? "(SELECT MAX(n.id) FROM messages n WHERE n.activity = ?2)" : "?1"
        if unfinishedUpdates {
            try c.send("""
                UPDATE messages SET superseded_by = \(newest), state = CASE WHEN state = 'pending' AND claimed = 0 THEN 'done' ELSE state END,
                    finished_at = CASE WHEN state = 'pending' AND claimed = 0 THEN ?3 ELSE finished_at END
                WHERE activity = ?2 AND id < \(newest) AND event = 'update' AND state IN ('pending', 'sending') AND superseded_by IS NULL
                """, [.int(id ?? 0), .int(activity), SQLValue.seconds(date)])
        }
        // Owed pushes are rare outside an outage: one probe of their index spares listing the activity's history.
        let anyOwed: Bool
        if let owed { anyOwed = owed } else { anyOwed = try !c.query(Self.owedPushesProbe, [], planning: .fresh).isEmpty }
        guard anyOwed else { return }
        try c.send("""
            UPDATE deliveries \(database.dialect.indexedBy("deliveries_owed")) SET state = 'superseded', next_at = NULL, reason = 'a newer update or end of the activity went instead'
            WHERE state IN ('retrying', 'unconfirmed')
              AND message IN (SELECT id FROM messages WHERE activity = ?2 AND id < \(newest) AND event IN ('update', 'end'))
              AND message NOT IN (SELECT end_message FROM activity_renewals WHERE activity = ?2 AND end_message IS NOT NULL)
            """, [.int(id ?? 0), .int(activity)])
    }

    /// Whether any push is owed (a retry or an unconfirmed start), anywhere: one row of a partial index.
    static let owedPushesProbe = "SELECT 1 FROM deliveries WHERE state IN ('retrying', 'unconfirmed') LIMIT 1"

    @discardableResult
    public func acceptUpdates(_ messages: [NewMessage], in application: ApplicationCode, budget: UpdateBudget = .standard,
                              pacing: UpdatePacing = .off, at date: Date, validateOnly: Bool) throws -> [AcceptedUpdate] {
        var accepted: [AcceptedUpdate] = []
        try accept(validateOnly: validateOnly) { c in
            accepted = []
            for (index, message) in messages.enumerated() {
                // Locked to the commit: an update accepted after another is enqueued after it on every node (issue 14),
                // and the activity's priority-10 count is read and written by one transaction at a time (A7).
                var (existing, latest) = try lockedForUpdate(message.activityID, application, heldDueBy: date, c)
                // A11: what was held for this activity and is due goes first, so a newer update never goes before it.
                if let held = existing, held.heldDue,
                   try release(try c.query(Self.selectHeld + " WHERE s.activity = ? AND s.due_at <= ? ORDER BY s.due_at, s.id",
                                           [.int(held.record.id), Self.milliseconds(date)]), pacing: pacing, at: date, c) > 0 {
                    (existing, latest) = try lockedForUpdate(message.activityID, application, c)
                }
                if let refusal = ActivityRules.updateRefusal(message.activityID, state: existing?.record.state) {
                    throw AcceptRefusal(index: index, field: "live_activity_id", message: refusal)
                }
                guard let (activity, log, _, channel) = existing else { throw StoreError(.io, "U1 admitted an update of an unknown activity") }
                if message.dueAt > date {
                    // A11: held apart until due; then it joins the queue as if accepted at that time, in this session only.
                    let start = try Self.currentStart(activity.id, c)
                    try schedule(message, event: message.event, activity: activity.id, application: application, start: start, at: date, c)
                    accepted.append(AcceptedUpdate(priority: BudgetedPriority(requested: message.priority), activityStartedAt: activity.startedAt,
                                                   dueAt: message.dueAt, channel: channel.text.map(Self.decode(sessionChannel:))))
                } else {
                    accepted.append(try enqueue(message, activity: activity, log: log, channel: channel, application: application, budget: budget,
                                                pacing: pacing, latest: latest, at: date, c))
                }
            }
            try notifyNodes(c)
        }
        return accepted
    }

    /// An accepted update or end into the queue: the activity takes its state, the budget (A7) and its turn
    /// (A9) are decided, and older updates not sent yet are superseded. The activity is locked by the caller.
    private func enqueue(_ message: NewMessage, activity: ActivityRecord, log stored: PriorityTenLog, channel: SQLValue, application: ApplicationCode,
                         budget: UpdateBudget, pacing: UpdatePacing, latest: LatestUpdate? = nil, at date: Date,
                         _ c: any SQLConnection) throws(StoreError) -> AcceptedUpdate {
        // The session's latest update, locked so no claim takes it meanwhile (claims skip locked rows):
        // still waiting, it is superseded below, and this message takes its turn (A9) and its budget (A7).
        let previous: SQLRow?
        if let latest { previous = latest.row } else { previous = try c.query(latestUpdate(of: "?1"), [.int(activity.id)]).first }
        let previousState = previous.flatMap { MessageState(rawValue: $0["state"].text ?? "") }
        let waiting = previousState == .pending && previous.map { !$0["claimed"].bool } == true
        var log = stored
        if waiting, let previous { log = log.returning(Self.priorities(previous)) }
        var priority = BudgetedPriority(requested: message.priority)
        // An update iOS will not show (past the activity's 8 hours, A8) spends no budget.
        if message.priority == 10 && !ActivityLifetime.isOver(startedAt: activity.startedAt, now: date) {
            (priority, log) = budget.admit(requested: 10, log: log, now: date)
        }
        let spent = log == stored ? nil : log
        let state: ActivityState = message.event == .end ? .ended : .active
        let dismissAt = message.event == .end ? SQLValue.seconds(ActivityLifetime.dismissAt(endedAt: date, dismissalDate: message.dismissalDate)) : .null
        try c.send("""
            UPDATE activities SET state = ?, content_state = ?, updated_at = ?, priority_ten_log = COALESCE(?, priority_ten_log),
                dismiss_at = COALESCE(?, dismiss_at)
            WHERE id = ?
            """, [.text(state.rawValue), .text(JSONValue.object(message.contentState).jsonText), SQLValue.seconds(date),
                  spent.map { .text($0.json.jsonText) } ?? .null, dismissAt, .int(activity.id)])
        // A9: an update waits for its turn after the last one that went out; an end goes at once.
        var dueAt = date
        if message.event == .update, let previous {
            dueAt = pacing.dueAt(now: date, previous: UpdatePacing.Previous(
                dueAt: Self.date(milliseconds: previous["due_at"].int ?? 0), waiting: waiting))
        }
        // Its id is not read back: what it supersedes is older than the activity's newest message, itself.
        try c.send(try insertion(message, activity: activity.id, application: application, at: date, budgeted: priority, dueAt: dueAt,
                                 channel: channel, c))
        // A message is claimed only once every older one of its activity has finished: when the session's latest
        // update is done, so is every update before it, and there is nothing to supersede but owed pushes.
        try supersedeOlder(than: nil, activity: activity.id, owed: latest?.owedPushes,
                           unfinishedUpdates: previousState != .done, at: date, c)
        // An end ends the renewals too (A8).
        if message.event == .end { try c.send("DELETE FROM activity_renewals WHERE activity = ?", [.int(activity.id)]) }
        return AcceptedUpdate(priority: priority, activityStartedAt: activity.startedAt, dueAt: dueAt, channel: channel.text.map(Self.decode(sessionChannel:)))
    }

    /// A11: an update, or a start's `end_date` end (`message` is then the start), held until due; `start` is
    /// the session's start message, so it fires in that session only.
    private func schedule(_ message: NewMessage, event: LiveActivityEvent, activity: Int64, application: ApplicationCode, start: Int64?,
                          at date: Date, _ c: any SQLConnection) throws(StoreError) {
        let end = message.event == .start ? message.scheduledEnd : nil
        try c.run("""
            INSERT INTO scheduled_updates (code, application, activity, start, event, content_state, payload, priority, dismissal_date,
                                           due_at, expires_at, created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [
            .text(end?.code ?? message.code), .text(application.rawValue), .int(activity), start.map { .int($0) } ?? .null, .text(event.rawValue),
            end == nil ? .text(JSONValue.object(message.contentState).jsonText) : .null, end == nil ? .blob(message.payload) : .null,
            .int(Int64(end == nil ? message.priority : 10)), end == nil ? message.dismissalDate.map { .int($0) } ?? .null : .null,
            Self.milliseconds(end?.at ?? message.dueAt), Self.milliseconds(end?.expiresAt ?? message.expiresAt), SQLValue.seconds(date),
        ])
    }

    public func releaseScheduledUpdates(at date: Date, limit: Int, pacing: UpdatePacing) throws(StoreError) -> Int {
        // A read first: idle workers look often, and most looks find nothing to write.
        let due = try database.withConnection { (c) throws(StoreError) in
            try !c.query("""
                SELECT 1 FROM scheduled_updates WHERE due_at <= ?1 UNION ALL SELECT 1 FROM activity_renewals WHERE due_at <= ?1 LIMIT 1
                """, [Self.milliseconds(date)], planning: .fresh).isEmpty
        }
        guard due else { return 0 }
        return try database.write { (c) throws(StoreError) -> Int in
            let released = try release(try c.query(Self.selectHeld + " WHERE s.due_at <= ? ORDER BY s.due_at, s.id LIMIT ?",
                                                   [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh), pacing: pacing, at: date, c)
                + renew(try c.query("""
                    SELECT a.activity_id, a.application FROM activity_renewals r
                    JOIN activities a ON a.id = r.activity WHERE r.due_at <= ? ORDER BY r.due_at, r.activity LIMIT ?
                    """, [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh), at: date, c)
            if released > 0 { try notifyNodes(c) }
            return released
        }
    }

    /// Held updates and ends (`scheduled_updates s` with its activity `a`), as `release` reads them.
    static let selectHeld = """
        SELECT s.id, s.code, s.application, s.start, s.event, s.content_state, s.payload, s.priority, s.dismissal_date, s.due_at,
               s.expires_at, a.activity_id
        FROM scheduled_updates s JOIN activities a ON a.id = s.activity
        """

    /// A11: held rows that fell due join the queue as if accepted at `date`, in a write transaction; one
    /// whose session ended or was replaced meanwhile is kept as cancelled. How many left the hold.
    private func release(_ rows: [SQLRow], pacing: UpdatePacing, at date: Date, _ c: any SQLConnection) throws(StoreError) -> Int {
        var released = 0
        var budgets: [ApplicationCode: UpdateBudget] = [:]
        for row in rows {
            guard let application = ApplicationCode(row["application"].text ?? "") else { continue }
            let activityID = row["activity_id"].text ?? "", event = LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update
            guard let (activity, log, _, channel) = try lockedActivity(activityID, application, c) else { continue }
            var sameSession = true
            if let start = row["start"].int {
                sameSession = try Self.currentStart(activity.id, c) == start
            }
            if sameSession && activity.state == .scheduled {
                // Its start has not fired yet (workers busy, or the node was down): it waits a little longer, behind it.
                try c.run("UPDATE scheduled_updates SET due_at = ? WHERE id = ?", [Self.milliseconds(date.addingTimeInterval(1)), row["id"]])
                continue
            }
            // Writers take turns, so each row leaves the hold once, on one node.
            guard try c.run("DELETE FROM scheduled_updates WHERE id = ?", [row["id"]]) == 1 else { continue }
            let dueAt = Self.date(milliseconds: row["due_at"].int ?? 0)
            let contentState = row["content_state"].text.flatMap { try? JSONParser.parse($0).objectValue } ?? activity.contentState ?? [:]
            // An end_date's end shows the latest state, at its own time, without an alert.
            let payload = row["payload"].blob
                ?? LiveActivityPayload.scheduledEnd(contentState: contentState, timestamp: Int64(dueAt.timeIntervalSince1970)).jsonBytes
            let message = NewMessage(
                code: row["code"].text ?? "", event: event, activityID: activityID, target: nil, attributesType: nil, name: nil,
                contentState: contentState, payload: payload, fallbackPayload: nil, priority: Int(row["priority"].int ?? 5), dueAt: date,
                expiresAt: Self.date(milliseconds: row["expires_at"].int ?? 0), dismissalDate: row["dismissal_date"].int)
            if !sameSession || ActivityRules.updateRefusal(activityID, state: activity.state) != nil {
                // Its activity ended, or began again, meanwhile: kept as cancelled, so its code still answers.
                let id = try insert(message, activity: activity.id, application: application, at: date, c)
                try c.run("UPDATE messages SET state = 'cancelled', finished_at = ? WHERE id = ?", [SQLValue.seconds(date), .int(id)])
            } else {
                if budgets[application] == nil { budgets[application] = try SQLApplicationStore.updateBudget(of: application, c) }
                _ = try enqueue(message, activity: activity, log: log, channel: channel, application: application, budget: budgets[application] ?? .standard,
                                pacing: pacing, at: date, c)
            }
            released += 1
        }
        return released
    }

    /// A8, renewals that fell due, in a write transaction. First the old card's end is queued (the activity
    /// stays active, so updates meanwhile are taken and its latest state is what the new card shows); once
    /// every message of the activity has gone out, the session starts again: a new start to the same
    /// audience with the latest content-state, the held updates and ends moved to it, and its own renewal
    /// scheduled. A session ended or started again meanwhile is not renewed. How many steps were taken.
    private func renew(_ rows: [SQLRow], at date: Date, _ c: any SQLConnection) throws(StoreError) -> Int {
        var steps = 0
        for row in rows {
            guard let application = ApplicationCode(row["application"].text ?? ""),
                  let activity = try activityRow(row["activity_id"].text ?? "", application, locking: true, c),
                  // Read again under the activity's lock: another node may have taken this step meanwhile.
                  let row = try c.query("SELECT start, end_message FROM activity_renewals WHERE activity = ? AND due_at <= ?",
                                        [.int(activity.id), Self.milliseconds(date)]).first else { continue }
            let start = row["start"].int ?? 0
            guard try Self.currentStart(activity.id, c) == start, activity.state != .ended else {
                try c.run("DELETE FROM activity_renewals WHERE activity = ?", [.int(activity.id)])
                continue
            }
            if activity.state == .scheduled {
                // Its start has not fired yet (workers busy, or the node was down): it waits a little, behind it.
                try c.run("UPDATE activity_renewals SET due_at = ? WHERE activity = ?", [Self.milliseconds(date.addingTimeInterval(1)), .int(activity.id)])
                continue
            }
            if let end = row["end_message"].int, let wait = try renewalEndPending(end, activity: activity, at: date, c) {
                // The new card must not appear beside the old one: the end (and what was queued before it) goes first.
                try c.run("UPDATE activity_renewals SET due_at = ? WHERE activity = ?", [Self.milliseconds(wait), .int(activity.id)])
                continue
            }
            let contentState = activity.contentState ?? [:]
            let timestamp = Int64(date.timeIntervalSince1970)
            // The session's start, to start again as it was (only a start stored as a push-to-start payload can be).
            guard let old = try c.query("SELECT payload, due_at, expires_at FROM messages WHERE id = ?", [.int(start)]).first,
                  let payload = ActivityRenewal.startPayload(original: old["payload"].blob ?? [], contentState: contentState, timestamp: timestamp) else {
                try c.run("DELETE FROM activity_renewals WHERE activity = ?", [.int(activity.id)])
                continue
            }
            let lifetime = Self.date(milliseconds: old["expires_at"].int ?? 0).timeIntervalSince(Self.date(milliseconds: old["due_at"].int ?? 0))
            if row["end_message"].int == nil {
                let end = NewMessage(
                    code: MessageCode.next(), event: .end, activityID: activity.activityID, target: nil, attributesType: nil, name: nil,
                    contentState: contentState, payload: ActivityRenewal.endPayload(contentState: contentState, timestamp: timestamp).jsonBytes,
                    fallbackPayload: nil, priority: 10, dueAt: date, expiresAt: date.addingTimeInterval(max(lifetime, 60)), dismissalDate: timestamp)
                let id = try insert(end, activity: activity.id, application: application, at: date, c)
                try supersedeOlder(than: id, activity: activity.id, at: date, c)
                try c.run("UPDATE activity_renewals SET end_message = ?, due_at = ? WHERE activity = ?",
                          [.int(id), Self.milliseconds(date), .int(activity.id)])
            } else {
                try Self.endSession(activity, at: date, c)
                try c.run("""
                    UPDATE activities SET state = 'active', updated_at = ?, priority_ten_log = NULL, started_at = ?, dismiss_at = NULL WHERE id = ?
                    """, [SQLValue.seconds(date), SQLValue.seconds(date), .int(activity.id)])
                // The same audience, type, priority and channel as the session it follows; no fallback alert for old iOS.
                let channel = try renewedChannel(of: start, application: application, at: date, c)
                let renewed = try c.query("""
                    INSERT INTO messages (code, application, activity, event, target, attributes_type, payload, priority, state, due_at,
                                          created_at, expires_at, channel_ids)
                    SELECT ?, application, activity, 'start', target, attributes_type, ?, priority, 'pending', ?, ?, ?, ? FROM messages WHERE id = ?
                    RETURNING id
                    """, [.text(MessageCode.next()), .blob(payload), Self.milliseconds(date), SQLValue.seconds(date),
                          Self.milliseconds(date.addingTimeInterval(lifetime)), channel, .int(start)])[0]["id"].int ?? 0
                try c.run("UPDATE scheduled_updates SET start = ? WHERE activity = ? AND start = ?", [.int(renewed), .int(activity.id), .int(start)])
                try scheduleRenewal(activity: activity.id, start: renewed, startsAt: date, c)
            }
            steps += 1
        }
        return steps
    }

    /// X5: the channel column of a renewal's new start: the channel the old session was started on, as it is
    /// now (created anew since: its new ids; deleted since: none, the plain start).
    private func renewedChannel(of start: Int64, application: ApplicationCode, at date: Date, _ c: any SQLConnection) throws(StoreError) -> SQLValue {
        guard let old = try c.query("SELECT channel_ids FROM messages WHERE id = ?", [.int(start)]).first?["channel_ids"].text
            .map(Self.decode(sessionChannel:)) else { return .null }
        guard let name = old.name else { return .text(Self.encode(channelIDs: old.ids, name: nil)) }
        var ids: [Gateway: String] = [:]
        for row in try c.query("SELECT gateway, apns_channel_id FROM channels WHERE application = ? AND name = ?", [.text(application.rawValue), .text(name)]) {
            if let gateway = Gateway(rawValue: row["gateway"].text ?? ""), let id = row["apns_channel_id"].text { ids[gateway] = id }
        }
        guard !ids.isEmpty else { return .null }
        try SQLChannelStore.markUsed(name, in: application, at: date, c)
        return .text(Self.encode(channelIDs: ids, name: name))
    }

    /// When to look again at a renewal whose end is still going out; nil once it has gone: the messages up to
    /// the end are out and each push of the end, and its broadcast, is settled (a retry waits for its next attempt). Past the old
    /// session's 8 hours iOS has ended the card itself, so its end's retries are not waited for.
    private func renewalEndPending(_ end: Int64, activity: ActivityRecord, at date: Date, _ c: any SQLConnection) throws(StoreError) -> Date? {
        if try !c.query("SELECT 1 FROM messages WHERE activity = ? AND id <= ? AND state IN ('pending', 'sending') LIMIT 1",
                        [.int(activity.id), .int(end)]).isEmpty {
            return date.addingTimeInterval(0.25)
        }
        guard !ActivityLifetime.isOver(startedAt: activity.startedAt, now: date) else { return nil }
        // The end's broadcast to the channel the session was started on (X5) counts as one of its pushes.
        let retry = try c.query("""
            SELECT COUNT(*) AS owed, MIN(next_at) AS next FROM (
                SELECT next_at FROM deliveries WHERE message = ?1 AND state IN ('retrying', 'unconfirmed', 'sending')
                UNION ALL
                SELECT b.next_at FROM broadcasts b JOIN messages m ON m.code = b.code AND m.application = b.application
                WHERE m.id = ?1 AND b.state IN ('pending', 'sending', 'retrying')) owed
            """, [.int(end)])[0]
        guard (retry["owed"].int ?? 0) > 0 else { return nil }
        return max(date.addingTimeInterval(0.25), Self.date(milliseconds: retry["next"].int ?? 0))
    }

    /// The next renewal of an activity started with `renew` (A8); nil when it is not renewed.
    public func renewal(ofActivity activity: Int64) throws(StoreError) -> Date? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT due_at FROM activity_renewals WHERE activity = ?", [.int(activity)]).first.map {
                Self.date(milliseconds: $0["due_at"].int ?? 0)
            }
        }
    }

    /// Wakes the other nodes when this transaction commits (PostgreSQL's NOTIFY; nothing on SQLite).
    private func notifyNodes(_ c: any SQLConnection) throws(StoreError) {
        if let notify = database.dialect.notifyWork { try c.send(notify) }
    }

    /// Runs `body` in one write transaction, rolled back when only validating.
    private func accept(validateOnly: Bool, _ body: (any SQLConnection) throws -> Void) throws {
        struct RollBack: Error {}
        do {
            try database.write(rethrowing: { c in
                try body(c)
                // A dry run answers for the writes sent on too: their errors come before the rollback, which drops them.
                if validateOnly {
                    try c.flush()
                    throw RollBack()
                }
            })
        } catch is RollBack {
            return
        }
    }

    /// `budgeted`: the priority by kind of device when the update budget lowered it (A7); stored only then.
    /// `dueAt`: a paced update's turn (A9), its expiry moved with it. `channel`: the session's channel column,
    /// when the caller has read it (an update or end copies its start's, X5).
    @discardableResult
    private func insert(_ message: NewMessage, activity: Int64, application: ApplicationCode, at date: Date,
                        budgeted: BudgetedPriority? = nil, dueAt: Date? = nil, channel: SQLValue? = nil, _ c: any SQLConnection) throws(StoreError) -> Int64 {
        let insertion = try insertion(message, activity: activity, application: application, at: date, budgeted: budgeted, dueAt: dueAt,
                                      channel: channel, c)
        return try c.query(insertion.sql + " RETURNING id", insertion.parameters)[0]["id"].int ?? 0
    }

    /// The statement that inserts `message` (see `insert`), for a caller that needs no id back.
    private func insertion(_ message: NewMessage, activity: Int64, application: ApplicationCode, at date: Date,
                           budgeted: BudgetedPriority?, dueAt: Date?, channel: SQLValue?, _ c: any SQLConnection) throws(StoreError) -> SQLStatement {
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
        return SQLStatement("""
            INSERT INTO messages (code, application, activity, event, target, attributes_type, payload, fallback_payload,
                                  priority, priority_standard, priority_frequent, state, due_at, created_at, expires_at, channel_ids)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)
            """, [
            .text(message.code), .text(application.rawValue), .int(activity), .text(message.event.rawValue),
            message.target.map { .text(Self.encode($0).jsonText) } ?? .null, Self.optional(message.attributesType),
            .blob(message.payload), message.fallbackPayload.map { .blob($0) } ?? .null, .int(Int64(message.priority)),
            lowered.map { .int(Int64($0.standard)) } ?? .null, lowered.map { .int(Int64($0.frequent)) } ?? .null,
            Self.milliseconds(due), SQLValue.seconds(date), Self.milliseconds(expires), column,
        ])
    }

    // MARK: - Jobs

    /// What a claim takes on the messages it claims (PostgreSQL): a lock no other claim takes (they skip the rows),
    /// that does not stop a write's foreign-key check (a delivery row, a catch-up, a shard naming the message: key
    /// share locks), as a claim changes no key. FOR UPDATE made such a write wait, holding the writers' lock, for
    /// the claim's commit.
    var claimLock: String { database.dialect.skipLocked(of: "m", updatingKey: false) }

    public func claimNextJob(at date: Date, excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>,
                             sharding: ShardPolicy, leavingSmall: Int?, lease: ClaimLease) throws(StoreError) -> MessageJob? {
        // One transaction: the claim, its lease, the activity's id and the decoded target, so a failure leaves nothing claimed.
        try database.inClaimTransaction { (c) throws(StoreError) -> MessageJob? in
            // First a shard of a fan-out under way, so a large message is sent by several workers (and nodes) at once.
            if let shard = try c.query("""
                SELECT s.message, s.shard, s.up_to, s.cursor FROM message_shards s JOIN messages m ON m.id = s.message
                WHERE s.state != 'done' AND s.claimed = 0 \(Self.notIn(excluding.union(shardsExcluding), column: "m.application"))
                ORDER BY m.due_at, s.message, s.shard LIMIT 1 \(database.dialect.skipLocked(of: "s"))
                """, [], planning: .fresh).first, let message = shard["message"].int, let number = shard["shard"].int {
                let leaseID = try newLease(lease, c)
                try c.run("UPDATE message_shards SET state = 'sending', claimed = 1, lease = ? WHERE message = ? AND shard = ?",
                          [.int(leaseID), .int(message), .int(number)])
                guard var job = try loadJob(message, at: date, c) else { return nil }
                job.shard = (Int(number), shard["up_to"].int ?? .max)
                job.lease = leaseID
                return MessageJob(copying: job, cursor: shard["cursor"].int ?? 0)
            }
            guard let id = try c.query("""
                SELECT m.id FROM messages m WHERE \(Self.claimable) \(Self.notIn(excluding, column: "m.application"))
                    \(Self.fanOutsNotIn(shardsExcluding)) \(leavingSmall.map { "AND NOT \(Self.smallMessage(devicesAtMost: $0))" } ?? "")
                ORDER BY m.due_at, m.id LIMIT 1 \(claimLock)
                """, [Self.milliseconds(date)], planning: .fresh).first?["id"].int else { return nil }
            let leaseID = try newLease(lease, c)
            try c.run("UPDATE messages SET state = 'sending', claimed = 1, lease = ? WHERE id = ?", [.int(leaseID), .int(id)])
            guard var job = try loadJob(id, at: date, c) else { return nil }
            job.lease = leaseID
            // A start to a large audience, claimed for the first time: split it, and take the first shard.
            guard job.event == .start, job.target != nil, job.cursor == 0,
                  let range = try c.query("SELECT MIN(id) AS lowest, MAX(id) AS highest FROM devices WHERE application = ?",
                                          [.text(job.application.rawValue)]).first,
                  let lowest = range["lowest"].int, let highest = range["highest"].int else { return job }
            let shards = sharding.shards(lowest: lowest, highest: highest)
            guard let first = shards.first else { return job }
            for (number, shard) in shards.enumerated() {
                try c.run("""
                    INSERT INTO message_shards (message, shard, after_id, up_to, cursor, state, claimed, lease) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, [.int(id), .int(Int64(number)), .int(shard.after), .int(shard.upTo), .int(shard.after),
                          .text(number == 0 ? "sending" : "pending"), .int(number == 0 ? 1 : 0), number == 0 ? .int(leaseID) : .null])
            }
            // The shards carry the claims from here; other nodes take the rest.
            try c.run("UPDATE messages SET claimed = 0, lease = NULL WHERE id = ?", [.int(id)])
            try notifyNodes(c)
            var sharded = MessageJob(copying: job, cursor: first.after)
            sharded.shard = (0, first.upTo)
            return sharded
        }
    }

    public func claimSmallJobs(at date: Date, limit: Int, devicesAtMost: Int, excluding: Set<ApplicationCode>,
                               lease: ClaimLease) throws(StoreError) -> [MessageJob] {
        guard limit > 0 else { return [] }
        return try database.inClaimTransaction { (c) throws(StoreError) -> [MessageJob] in
            // `claimable` lets only the oldest unfinished message of an activity through, so one claim never
            // holds two of the same activity. Small: no device past the first `devicesAtMost` (an index probe).
            let claimed = try c.query("""
                SELECT m.id, m.event FROM messages m
                WHERE \(Self.claimable) \(Self.notIn(excluding, column: "m.application")) AND \(Self.smallMessage(devicesAtMost: devicesAtMost))
                ORDER BY m.due_at, m.id LIMIT ? \(claimLock)
                """, [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh)
            let ids = claimed.compactMap { $0["id"].int }
            guard !ids.isEmpty else { return [] }
            let leaseID = try newLease(lease, c)
            let idList = SQLValue.text(JSONValue.array(ids.map { .int($0) }).jsonText)
            let inList = database.dialect.isIn("CAST(value AS BIGINT)", of: "?1")
            try c.send("UPDATE messages SET state = 'sending', claimed = 1, lease = ?2 WHERE id \(inList)", [idList, .int(leaseID)])
            // A start's scheduled activity is active from its claim, as on the job path. Updates alone (the usual claim)
            // skip the statement: it found nothing, for 0.5 ms of PostgreSQL's time a claim under the updates load.
            if claimed.contains(where: { $0["event"].text == LiveActivityEvent.start.rawValue }) {
                try c.send("""
                    UPDATE activities SET state = 'active', updated_at = ?2, started_at = ?2
                    WHERE state = 'scheduled' AND id IN (SELECT activity FROM messages WHERE event = 'start' AND id \(inList))
                    """, [idList, SQLValue.seconds(date)])
            }
            var jobs: [MessageJob] = []
            for row in try c.query("\(Self.selectJobs) WHERE m.id \(inList) ORDER BY m.due_at, m.id", [idList]) {
                if var job = try Self.job(row, c) {
                    job.lease = leaseID
                    jobs.append(job)
                }
            }
            return jobs
        }
    }

    public func recordJobs(_ outcomes: [JobOutcome], at date: Date) throws(StoreError) {
        guard !outcomes.isEmpty else { return }
        let leases = Set(outcomes.map(\.job.lease))
        try database.write { (c) throws(StoreError) in
            for lease in leases { try hold(lease, c) }
            for outcome in outcomes {
                let job = outcome.job
                try write(outcome.result, message: job.id, at: date, c)
                if outcome.finished {
                    try c.send("UPDATE messages SET state = 'done', claimed = 0, lease = NULL, finished_at = ?, cursor = ? WHERE id = ?",
                              [SQLValue.seconds(date), .int(outcome.result.cursor), .int(job.id)])
                    try Self.broadcastAlong(job, at: date, c)
                } else {
                    try c.send("UPDATE messages SET claimed = 0, lease = NULL, cursor = ? WHERE id = ? AND state = 'sending'",
                              [.int(outcome.result.cursor), .int(job.id)])
                }
            }
            for lease in leases { try Self.endLease(lease, c) }
        }
    }

    /// The condition that message `m` is small, what `claimSmallJobs` takes: an update or end of an activity
    /// with at most `devicesAtMost` devices (an index probe, not a count), or a start to a short list of
    /// devices named in the request (the per-order pattern; a list over 4 KB of hwids takes the job path).
    static func smallMessage(devicesAtMost: Int) -> String {
        """
        ((m.event != 'start' AND NOT EXISTS (SELECT 1 FROM activity_devices ad WHERE ad.activity = m.activity
                                            ORDER BY ad.device LIMIT 1 OFFSET \(max(0, devicesAtMost))))
         OR (m.event = 'start' AND m.target LIKE '{"devices":%' AND length(m.target) <= 4096))
        """
    }

    /// A message's job as a worker needs it; a start marks its scheduled activity active.
    private func loadJob(_ id: Int64, at date: Date, _ c: any SQLConnection) throws(StoreError) -> MessageJob? {
        guard let row = try c.query("\(Self.selectJobs) WHERE m.id = ?", [.int(id)]).first else { return nil }
        if row["event"].text == LiveActivityEvent.start.rawValue {
            try c.run("UPDATE activities SET state = 'active', updated_at = ?1, started_at = ?1 WHERE id = ?2 AND state = 'scheduled'",
                      [SQLValue.seconds(date), row["activity"]])
        }
        return try Self.job(row, c)
    }

    /// Messages `m` with their activity `a`, as `job` reads them.
    static let selectJobs = """
        SELECT m.id, m.code, m.application, m.event, m.activity, m.target, m.attributes_type, m.payload, m.fallback_payload,
               m.priority, m.priority_standard, m.priority_frequent, m.cursor, m.expires_at, m.due_at, m.channel_ids, a.activity_id, a.started_at
        FROM messages m JOIN activities a ON a.id = m.activity
        """

    /// A row of `selectJobs` as a job, its stored target decoded.
    static func job(_ row: SQLRow, _ c: any SQLConnection) throws(StoreError) -> MessageJob? {
        guard let application = ApplicationCode(row["application"].text ?? "") else { return nil }
        let target = try row["target"].text.map { (text) throws(StoreError) in try decodeTarget(text, application, c) }
        var job = MessageJob(
            id: row["id"].int ?? 0, code: row["code"].text ?? "", application: application,
            event: LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update, activity: row["activity"].int ?? 0,
            activityID: row["activity_id"].text ?? "", target: target, attributesType: row["attributes_type"].text,
            payload: row["payload"].blob ?? [], fallbackPayload: row["fallback_payload"].blob, priority: priorities(row),
            cursor: row["cursor"].int ?? 0, expiresAt: date(milliseconds: row["expires_at"].int ?? 0),
            dueAt: date(milliseconds: row["due_at"].int ?? 0))
        job.activityStartedAt = row["started_at"].date
        let channel = row["channel_ids"].text.map(Self.decode(sessionChannel:))
        job.channelIDs = channel?.ids
        job.channel = channel?.name
        return job
    }

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
        (SELECT s.channel_ids FROM messages s WHERE s.activity = \(activity) AND s.event = 'start' AND s.state != 'cancelled'
         ORDER BY s.id DESC LIMIT 1)
        """
    }

    /// The channel column of an activity's current start, read on its own.
    static func sessionChannel(_ activity: Int64, _ c: any SQLConnection) throws(StoreError) -> String? {
        try c.query("SELECT \(sessionChannel(of: "?")) AS channel_ids", [.int(activity)]).first?["channel_ids"].text
    }

    /// X5: an update or end of an activity started on a channel goes to the channel too, once, as the message
    /// finishes: after the activity's earlier messages, like its pushes. One request per environment of the
    /// start's channel; none for a message a newer one superseded (that one goes instead). A channel deleted
    /// or created anew since the start is no longer the one the phones listen to: recorded as failed.
    static func broadcastAlong(_ job: MessageJob, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        // Not for a message gone with its application, nor one superseded.
        guard job.event != .start, let ids = job.channelIDs, !ids.isEmpty,
              let message = try c.query("SELECT superseded_by FROM messages WHERE id = ?", [.int(job.id)]).first,
              message["superseded_by"].int == nil else { return }
        var used: Set<String> = []
        for gateway in Gateway.all {
            guard let id = ids[gateway] else { continue }
            var lookup = "SELECT name, storage_policy FROM channels WHERE application = ? AND gateway = ? AND apns_channel_id = ?"
            var parameters: [SQLValue] = [.text(job.application.rawValue), .text(gateway.rawValue), .text(id)]
            if let name = job.channel {
                lookup += " AND name = ?"
                parameters.append(.text(name))
            }
            let channel = try c.query(lookup, parameters).first
            if let name = channel?["name"].text, used.insert(name).inserted { try SQLChannelStore.markUsed(name, in: job.application, at: date, c) }
            let policy = channel.flatMap { BroadcastChannels.StoragePolicy(rawValue: $0["storage_policy"].text ?? "") } ?? .none
            try SQLBroadcastStore.insert(code: job.code, application: job.application, channel: channel?["name"].text ?? job.channel ?? "",
                                         gateway: gateway.rawValue, channelID: id, payload: job.payload, priority: job.priority.standard,
                                         expiration: BroadcastChannels.expiration(policy, expiresAt: job.expiresAt), expiresAt: job.expiresAt,
                                         failure: channel == nil ? BroadcastChannels.channelGone : nil, at: date, c)
        }
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
        codes.isEmpty ? "" : "AND (m.event != 'start' OR m.target LIKE '{\"devices\":%' OR (1 = 1 \(notIn(codes, column: "m.application"))))"
    }

    /// The state of a push taken back from `sending` unanswered: a start that may have reached the phone
    /// (a counted copy) waits for its device's token; anything else is simply retried.
    static let backToWaiting = "CASE WHEN copies > 0 THEN 'unconfirmed' ELSE 'retrying' END"

    /// The id of an activity's current start (the latest one not cancelled); `activity` is a column or `?1`.
    /// D5 admits the devices it addressed, catch-up sends what came after it, retention keeps it.
    static func currentStart(of activity: String) -> String {
        "(SELECT MAX(id) FROM messages WHERE activity = \(activity) AND event = 'start' AND state != 'cancelled')"
    }

    /// The id of an activity's current start, read on its own; nil when it has none.
    static func currentStart(_ activity: Int64, _ c: any SQLConnection) throws(StoreError) -> Int64? {
        try c.query("SELECT \(currentStart(of: "?")) AS start", [.int(activity)])[0]["start"].int
    }

    static func date(milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// Jobs a worker may take now (`?` is now): due and waiting, or left by a crashed run — and only when
    /// no earlier message of the same activity is unfinished, so one activity's messages go out in order.
    /// Its terms are a range of the `messages_waiting` index's first column and that index's condition, so a
    /// claim reads the due part of that index only: not every message ever sent, nor the updates held for
    /// later (paced ones are most of the waiting messages under a stream of updates). A message left
    /// `sending` by a crashed run (or released between batches) was due when it was claimed, and `due_at`
    /// never changes, so the range keeps it; only a node whose clock is behind the claimer's waits out the
    /// difference, as it does for any pending message.
    static let claimable = "m.due_at <= ? AND \(takeable)"

    /// Messages a worker could take once due: waiting and not claimed, first of their activity's unfinished ones, not
    /// split into shards. Shared by the claims and the read of when the next falls due, so the two cannot drift.
    static let takeable = """
        m.state IN ('pending', 'sending') AND (m.state = 'pending' OR m.claimed = 0)
        AND NOT EXISTS (SELECT 1 FROM messages e WHERE e.activity = m.activity AND e.id < m.id AND e.state IN ('pending', 'sending'))
        AND NOT EXISTS (SELECT 1 FROM message_shards s WHERE s.message = m.id)
        """

    public func nextDueDate(excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>) throws(StoreError) -> Date? {
        // Only jobs a worker could take when due: not those claimed, nor those waiting behind their activity.
        // The first term is the `messages_waiting` index's condition: that index, not every message ever sent.
        try database.withConnection { (c) throws(StoreError) in
            let job = try c.query("""
                SELECT MIN(m.due_at) AS due FROM messages m
                WHERE \(Self.takeable) \(Self.notIn(excluding, column: "m.application")) \(Self.fanOutsNotIn(shardsExcluding))
                """, [], planning: .fresh)[0]["due"].int
            let shard = try c.query("""
                SELECT MIN(m.due_at) AS due FROM message_shards s JOIN messages m ON m.id = s.message
                WHERE s.state != 'done' AND s.claimed = 0 \(Self.notIn(excluding.union(shardsExcluding), column: "m.application"))
                """, [], planning: .fresh)[0]["due"].int
            // A11 and A8: held updates join the queue, and renewals are taken, when due.
            let held = try c.query("""
                SELECT MIN(due) AS due FROM (SELECT MIN(due_at) AS due FROM scheduled_updates UNION ALL SELECT MIN(due_at) FROM activity_renewals) x
                """, [], planning: .fresh)[0]["due"].int
            // Applications at their share of workers are left out: their due work must not wake idle workers.
            let delivery = try c.query(excluding.isEmpty ? "SELECT MIN(next_at) AS due FROM deliveries WHERE state IN ('retrying', 'unconfirmed')" : """
                SELECT MIN(d.next_at) AS due FROM deliveries d JOIN messages m ON m.id = d.message
                WHERE d.state IN ('retrying', 'unconfirmed') \(Self.notIn(excluding, column: "m.application"))
                """, [], planning: .fresh)[0]["due"].int
            return [job, shard, delivery, held].compactMap { $0 }.min().map { Self.date(milliseconds: $0) }
        }
    }

    public func pruneFinished(before cutoff: Date, limit: Int) throws(StoreError) -> (deliveries: Int, messages: Int) {
        try database.write { (c) throws(StoreError) -> (deliveries: Int, messages: Int) in
            let broadcasts = try c.run(Self.pruneBroadcasts, [SQLValue.seconds(cutoff), .int(Int64(limit))])
            guard let message = try c.query("""
                SELECT m.id FROM messages m \(database.dialect.indexedBy("messages_finished")) JOIN activities a ON a.id = m.activity
                WHERE m.state IN ('done', 'cancelled') AND m.finished_at < ?1
                  AND (a.state = 'ended' OR a.updated_at < ?1
                       -- a live activity keeps its current start (D5) and its latest update or end (catch-up)
                       OR (m.id != COALESCE(\(Self.currentStart(of: "m.activity")), 0)
                           AND m.id != COALESCE((SELECT MAX(id) FROM messages WHERE activity = m.activity AND event IN ('update', 'end')
                                                 AND state != 'cancelled'), 0)))
                ORDER BY m.finished_at LIMIT 1
                """, [SQLValue.seconds(cutoff)]).first?["id"] else { return (broadcasts, 0) }
            let deleted = try c.run("""
                DELETE FROM deliveries WHERE message = ?1 AND device IN (SELECT device FROM deliveries WHERE message = ?1 LIMIT ?2)
                """, [message, .int(Int64(limit))])
            guard deleted < limit else { return (deleted + broadcasts, 0) }
            try c.run("DELETE FROM message_shards WHERE message = ?", [message])
            let messages = try c.run("DELETE FROM messages WHERE id = ?", [message])
            return (deleted + broadcasts, messages)
        }
    }

    /// Settled broadcasts (X5) are delivery records too, deleted whole (every environment of one settled), oldest first
    /// (`?1` the cutoff, `?2` the batch). Ids follow creation, so the rows to look at end at the first one younger than
    /// the cutoff: without that bound each batch of the pruner read every broadcast kept once none was old enough
    /// (18 ms at 200,000 of them, in the writers' transaction). One created out of order waits for the next pass.
    static let pruneBroadcasts = """
        DELETE FROM broadcasts WHERE id IN (
            SELECT b.id FROM broadcasts b WHERE b.created_at < ?1
               AND b.id < COALESCE((SELECT y.id FROM broadcasts y WHERE y.created_at >= ?1 ORDER BY y.id LIMIT 1), 9223372036854775807)
               AND NOT EXISTS (SELECT 1 FROM broadcasts o WHERE o.application = b.application AND o.code = b.code
                               AND o.state NOT IN ('sent', 'failed', 'expired', 'superseded'))
            ORDER BY b.id LIMIT ?2)
        """

    public func queueStatistics(at date: Date) throws(StoreError) -> DeliveryQueueStatistics {
        // Both read partial indexes (messages_waiting, deliveries_due): their size is the backlog, not the history.
        try database.withConnection { (c) throws(StoreError) -> DeliveryQueueStatistics in
            var statistics = DeliveryQueueStatistics()
            let now = Self.milliseconds(date)
            let jobs = try c.query("""
                SELECT COUNT(*) FILTER (WHERE due_at <= ?1) AS due, MIN(due_at) FILTER (WHERE due_at <= ?1) AS oldest,
                       COUNT(*) FILTER (WHERE due_at > ?1) AS scheduled
                FROM messages \(database.dialect.indexedBy("messages_waiting")) WHERE state IN ('pending', 'sending')
                """, [now])[0]
            statistics.jobsDue = Int(jobs["due"].int ?? 0)
            statistics.oldestDueAt = jobs["oldest"].int.map(Self.date(milliseconds:))
            statistics.jobsScheduled = Int(jobs["scheduled"].int ?? 0)
            for row in try c.query("""
                SELECT state, COUNT(*) AS owed, MIN(next_at) FILTER (WHERE next_at <= ?) AS oldest
                FROM deliveries \(database.dialect.indexedBy("deliveries_due")) WHERE state IN ('retrying', 'unconfirmed') GROUP BY state
                """, [now]) {
                let owed = Int(row["owed"].int ?? 0)
                if row["state"].text == DeliveryState.retrying.rawValue {
                    statistics.retrying = owed
                    statistics.oldestRetryDueAt = row["oldest"].int.map(Self.date(milliseconds:))
                } else {
                    statistics.unconfirmed = owed
                }
            }
            return statistics
        }
    }

    public func updateTargets(activity: Int64, afterID: Int64, limit: Int) throws(StoreError) -> [UpdateTarget] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT \(SQLDeviceStore.deviceColumns), NULL AS push_to_start, d.application, t.token, t.device IS NOT NULL AS reported,
                       ad.state
                FROM activity_devices ad
                JOIN devices d ON d.id = ad.device
                JOIN activities a ON a.id = ad.activity
                LEFT JOIN activity_tokens t ON t.device = ad.device AND t.activity_id = a.activity_id
                WHERE ad.activity = ? AND ad.device > ?
                ORDER BY ad.device LIMIT ?
                """, [.int(activity), .int(afterID), .int(Int64(limit))]).map { row in
                let device = SQLDeviceStore.device(row, ApplicationCode(row["application"].text ?? "") ?? ApplicationCode("XXXXX-XXXXX")!)
                let token = row["token"].text
                return UpdateTarget(device: device, updateToken: token, endedOnDevice: row["reported"].bool && token == nil,
                                    tokenDead: row["state"].text == "token-dead")
            }
        }
    }

    public func recordBatch(_ result: BatchResult, of job: MessageJob, at date: Date) throws(StoreError) {
        // A page of a fan-out: up to a thousand rows, which an update's write arriving beside it does not wait behind.
        try database.write(bulk: true) { (c) throws(StoreError) in
            try hold(job.lease, c)
            try write(result, message: job.id, at: date, c)
            if let shard = job.shard {
                try c.send("UPDATE message_shards SET cursor = ? WHERE message = ? AND shard = ?",
                           [.int(result.cursor), .int(job.id), .int(Int64(shard.number))])
            } else {
                try c.send("UPDATE messages SET cursor = ? WHERE id = ?", [.int(result.cursor), .int(job.id)])
            }
        }
    }

    /// A batch's delivery records and what they change beyond themselves (its cursor is the caller's): on
    /// PostgreSQL in one statement (a round trip each was most of a batch's time), on SQLite in multi-row
    /// statements (a statement per row: a third of a fan-out's CPU, with the starts' activity_devices rows), then its effects.
    func write(_ result: BatchResult, message: Int64, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        if result.records.count == 1 {
            try Self.write(result.records[0], message: message, at: date, c)
        } else if !database.dialect.writesRowsTogether {
            let at = SQLValue.seconds(date)
            try c.runRows(result.records.map { Self.columns(of: $0, message: message, at: at) }) { values in
                "INSERT INTO deliveries \(Self.deliveryColumns) VALUES \(values) \(Self.upsertDelivery)"
            }
        } else if !result.records.isEmpty {
            let rows = JSONValue.array(result.records.map { record in
                [
                    "device": .int(record.device), "push_type": record.pushType.map { .string($0.rawValue) } ?? .null, "status": .int(Int64(record.status)),
                    "reason": record.reason.map { .string($0) } ?? .null, "apns_id": record.apnsID.map { .string($0) } ?? .null,
                    "attempts": .int(Int64(record.attempts)), "state": .string(record.state.rawValue),
                    "next_at": record.nextAttemptAt.map { .int(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? .null,
                    "token": record.token.map { .string($0) } ?? .null, "copies": .int(Int64(record.uncertainCopies)),
                    "priority": record.priority.map { .int(Int64($0)) } ?? .null,
                ]
            })
            let source = database.dialect.rows(ofJSONArray: "?3", columns: [
                ("device", .integer), ("push_type", .text), ("status", .integer), ("reason", .text), ("apns_id", .text), ("attempts", .integer),
                ("state", .text), ("next_at", .integer), ("token", .text), ("copies", .integer), ("priority", .integer),
            ])
            try c.send("""
                INSERT INTO deliveries \(Self.deliveryColumns)
                SELECT ?1, r.device, r.push_type, r.status, r.reason, r.apns_id, r.attempts, ?2, r.state, r.next_at, r.token, r.copies, r.priority
                FROM \(source) WHERE true
                \(Self.upsertDelivery)
                """, [.int(message), SQLValue.seconds(date), .text(rows.jsonText)])
        }
        try apply(result.effects, c)
    }

    /// What writing a delivery over an earlier record of the same push keeps: the attempts add up, a token stays.
    /// A catch-up for another token wins: the device reported it after the batch read its targets, so the
    /// batch's record (skipped for want of a token, or sent to the old one) is older news.
    static let upsertDelivery = """
        ON CONFLICT (message, device) DO UPDATE SET push_type = excluded.push_type, status = excluded.status,
            reason = excluded.reason, apns_id = excluded.apns_id, attempts = deliveries.attempts + excluded.attempts, at = excluded.at,
            state = excluded.state, next_at = excluded.next_at, token = COALESCE(excluded.token, deliveries.token), copies = excluded.copies,
            priority = COALESCE(excluded.priority, deliveries.priority), lease = NULL
        WHERE deliveries.catch_up = 0 OR excluded.token IS NOT DISTINCT FROM deliveries.token
        """

    static func write(_ record: DeliveryRecord, message: Int64, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        try c.send(writeDelivery, columns(of: record, message: message, at: .seconds(date)))
    }

    static let deliveryColumns = "(message, device, push_type, status, reason, apns_id, attempts, at, state, next_at, token, copies, priority)"
    static let writeDelivery = "INSERT INTO deliveries \(deliveryColumns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \(upsertDelivery)"

    /// A delivery record's values in the order of `deliveryColumns`.
    static func columns(of record: DeliveryRecord, message: Int64, at: SQLValue) -> [SQLValue] {
        [.int(message), .int(record.device), optional(record.pushType?.rawValue), .int(Int64(record.status)),
         optional(record.reason), optional(record.apnsID), .int(Int64(record.attempts)), at,
         .text(record.state.rawValue), record.nextAttemptAt.map { milliseconds($0) } ?? .null, optional(record.token),
         .int(Int64(record.uncertainCopies)), record.priority.map { .int(Int64($0)) } ?? .null]
    }

    static func started(activity: Int64, device: Int64, _ c: any SQLConnection) throws(StoreError) {
        try c.send("""
            INSERT INTO activity_devices (activity, device, state) VALUES (?, ?, 'active')
            ON CONFLICT (activity, device) DO UPDATE SET state = 'active'
            """, [.int(activity), .int(device)])
    }

    // MARK: - Due deliveries (retries, unconfirmed starts, catch-ups)

    public func claimDueDeliveries(at date: Date, limit: Int, excluding: Set<ApplicationCode>, lease: ClaimLease,
                                   verdict: (DueDelivery, Date) -> DueVerdict) throws(StoreError) -> [DueDelivery] {
        try database.inClaimTransaction { (c) throws(StoreError) -> [DueDelivery] in
            // Workers look here whenever they find no job, and pushes are rarely owed outside an outage: a probe of
            // the owed pushes' index first. (The claim below joins five tables: planned afresh, about ten times the
            // probe's cost, and once a fifth of PostgreSQL's CPU under a load of small updates.)
            guard try !c.query("SELECT 1 FROM deliveries WHERE state IN ('retrying', 'unconfirmed') AND next_at <= ? LIMIT 1",
                               [Self.milliseconds(date)], planning: .fresh).isEmpty else { return [] }
            let rows = try c.query("""
                SELECT d.message, m.code, m.application, m.event, m.activity, d.device, dev.sandbox, dev.os_version, m.channel_ids, d.state,
                       COALESCE(d.push_type, \(PushType.liveActivity.sql)) AS push_type, d.token, m.payload, m.fallback_payload,
                       COALESCE(d.priority, CASE WHEN dev.frequent_updates = 1 THEN COALESCE(m.priority_frequent, m.priority)
                                                 ELSE COALESCE(m.priority_standard, m.priority) END) AS priority,
                       COALESCE(d.expires_at, m.expires_at) AS expires_at, d.attempts, d.copies, d.catch_up, a.state = 'ended' AS ended, a.started_at,
                       EXISTS (SELECT 1 FROM messages n WHERE n.activity = m.activity AND n.id > m.id AND n.event IN ('update', 'end')
                               AND n.state != 'cancelled')
                           AND NOT EXISTS (SELECT 1 FROM activity_renewals r WHERE r.activity = m.activity AND r.end_message = m.id) AS newer,
                       EXISTS (SELECT 1 FROM activity_devices ad WHERE ad.activity = m.activity AND ad.device = d.device) AS running
                FROM deliveries d
                JOIN messages m ON m.id = d.message
                JOIN activities a ON a.id = m.activity
                JOIN devices dev ON dev.id = d.device
                WHERE d.state IN ('retrying', 'unconfirmed') AND d.next_at <= ? \(Self.notIn(excluding, column: "m.application"))
                ORDER BY d.next_at LIMIT ? \(database.dialect.skipLocked(of: "d"))
                """, [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh)
            var claimed: [DueDelivery] = []
            var leaseID: Int64?
            for row in rows {
                guard let application = ApplicationCode(row["application"].text ?? ""), let token = row["token"].text else {
                    try c.send("UPDATE deliveries SET state = 'failed', next_at = NULL, reason = 'no device token stored' WHERE message = ? AND device = ?",
                               [row["message"], row["device"]])
                    continue
                }
                let pushType = row["push_type"].text.flatMap(PushType.init(rawValue:)) ?? .liveActivity
                var due = DueDelivery(
                    message: row["message"].int ?? 0, code: row["code"].text ?? "", application: application,
                    event: LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update, activity: row["activity"].int ?? 0,
                    device: row["device"].int ?? 0, gateway: row["sandbox"].bool ? .sandbox : .production,
                    state: DeliveryState(rawValue: row["state"].text ?? "") ?? .retrying, pushType: pushType, token: token,
                    payload: (pushType == .alert ? row["fallback_payload"].blob : row["payload"].blob) ?? [],
                    priority: Int(row["priority"].int ?? 10), expiresAt: Self.date(milliseconds: row["expires_at"].int ?? 0),
                    attempts: Int(row["attempts"].int ?? 0), uncertainCopies: Int(row["copies"].int ?? 0), catchUp: row["catch_up"].bool,
                    activityEnded: row["ended"].bool, newerMessage: row["newer"].bool, tokenReportedSince: row["running"].bool)
                due.activityStartedAt = row["started_at"].date
                due.channelIDs = row["channel_ids"].text.map(Self.decode(channelIDs:))
                due.osVersion = row["os_version"].text
                switch verdict(due, date) {
                case .settle(let state, let reason):
                    try c.send("UPDATE deliveries SET state = ?, next_at = NULL, reason = ?, at = ?, status = CASE WHEN ? = 'sent' THEN 200 ELSE status END WHERE message = ? AND device = ?",
                               [.text(state.rawValue), .text(reason), SQLValue.seconds(date), .text(state.rawValue), row["message"], row["device"]])
                    // A start confirmed because its device runs the activity has that row already. Touching it would wait
                    // for a token report of the phone holding it, which waits for the delivery row locked here: a
                    // deadlock on PostgreSQL, where claims do not take the writers' lock.
                    if state == .sent && due.event == .start && !due.tokenReportedSince {
                        try Self.started(activity: due.activity, device: due.device, c)
                    }
                case .send:
                    // Every send of a start counts as a possible copy before it goes, so a crash cannot make a third;
                    // an answer that proves it did not land gives the count back (`DeliveryDecisions.record`).
                    if leaseID == nil { leaseID = try newLease(lease, c) }
                    let held = leaseID ?? 0
                    try c.send("UPDATE deliveries SET state = 'sending', next_at = NULL, copies = copies + ?, lease = ? WHERE message = ? AND device = ?",
                               [.int(due.event == .start && due.pushType == .liveActivity ? 1 : 0), .int(held), row["message"], row["device"]])
                    due.lease = held
                    claimed.append(due)
                }
            }
            return claimed
        }
    }

    public func recordRetries(_ result: RetryResult, lease: Int64, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try hold(lease, c)
            for (message, record) in result.records { try Self.write(record, message: message, at: date, c) }
            try apply(result.effects, c)
            try Self.endLease(lease, c)
        }
    }

    private struct StartedPair: Hashable {
        let activity: Int64
        let device: Int64
    }

    func apply(_ effects: DeliveryEffects, _ c: any SQLConnection) throws(StoreError) {
        // Where the batch's starts landed, in one statement, each pair once (an upsert may touch a row once).
        var pairs = Set<StartedPair>()
        let started = effects.startedOn.filter { pairs.insert(StartedPair(activity: $0.activity, device: $0.device)).inserted }
        if started.count == 1 {
            try Self.started(activity: started[0].activity, device: started[0].device, c)
        } else if !database.dialect.writesRowsTogether {
            try c.runRows(started.map { [.int($0.activity), .int($0.device), .text("active")] }) { values in
                "INSERT INTO activity_devices (activity, device, state) VALUES \(values) ON CONFLICT (activity, device) DO UPDATE SET state = 'active'"
            }
        } else if !started.isEmpty {
            let rows = JSONValue.array(started.map { ["activity": .int($0.activity), "device": .int($0.device)] })
            try c.send("""
                INSERT INTO activity_devices (activity, device, state)
                SELECT r.activity, r.device, 'active' FROM \(database.dialect.rows(ofJSONArray: "?1", columns: [("activity", .integer), ("device", .integer)]))
                WHERE true ON CONFLICT (activity, device) DO UPDATE SET state = 'active'
                """, [.text(rows.jsonText)])
        }
        // A token registered again after APNs found it invalid (the 410's timestamp) is alive: keep it. The
        // cast types the parameter for PostgreSQL, which cannot infer the type of a NULL compared with NULL.
        let since = "CAST(?3 AS BIGINT)"
        let notRenewed = "(\(since) IS NULL OR updated_at * 1000 <= \(since))"
        for dead in effects.deadPushToStartTokens {
            try c.send("DELETE FROM push_to_start_tokens WHERE device = ?1 AND token = ?2 AND \(notRenewed)", Self.parameters(dead))
        }
        for (activity, dead) in effects.deadUpdateTokens {
            try c.send("""
                UPDATE activity_devices SET state = 'token-dead' WHERE activity = ?4 AND device = ?1 AND EXISTS (
                    SELECT 1 FROM activity_tokens t JOIN activities a ON a.id = ?4
                    WHERE t.device = ?1 AND t.activity_id = a.activity_id AND t.token = ?2 AND (\(since) IS NULL OR t.updated_at * 1000 <= \(since)))
                """, Self.parameters(dead) + [.int(activity)])
        }
        for dead in effects.deadPushTokens {
            try c.send("UPDATE devices SET push_token = NULL WHERE id = ?1 AND push_token = ?2 AND \(notRenewed)", Self.parameters(dead))
        }
    }

    public func requeue(_ due: [DueDelivery], at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            // Those of a lease that was rescued are another node's already.
            for (lease, items) in Dictionary(grouping: due, by: \.lease) where try holds(lease, c) {
                for item in items {
                    try c.run("""
                        UPDATE deliveries SET state = \(Self.backToWaiting), next_at = ?, lease = NULL
                        WHERE message = ? AND device = ? AND state = 'sending' AND lease = ?
                        """, [Self.milliseconds(date), .int(item.message), .int(item.device), .int(lease)])
                }
                try Self.endLease(lease, c)
            }
        }
    }

    public func supersededBy(_ job: MessageJob) throws(StoreError) -> Int64? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT superseded_by FROM messages WHERE id = ?", [.int(job.id)]).first?["superseded_by"].int
        }
    }

    public func finish(_ job: MessageJob, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try hold(job.lease, c)
            if let shard = job.shard {
                try c.run("UPDATE message_shards SET state = 'done', claimed = 0, lease = NULL WHERE message = ? AND shard = ?",
                          [.int(job.id), .int(Int64(shard.number))])
            }
            // A sharded message is done with its last shard.
            try c.run("""
                UPDATE messages SET state = 'done', claimed = 0, lease = NULL, finished_at = ?1
                WHERE id = ?2 AND NOT EXISTS (SELECT 1 FROM message_shards WHERE message = ?2 AND state != 'done')
                """, [SQLValue.seconds(date), .int(job.id)])
            try Self.broadcastAlong(job, at: date, c)
            try Self.endLease(job.lease, c)
        }
    }

    public func release(_ job: MessageJob) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            // A lease that was rescued: the job is another node's already.
            guard try holds(job.lease, c) else { return }
            if let shard = job.shard {
                try c.run("UPDATE message_shards SET claimed = 0, lease = NULL WHERE message = ? AND shard = ?", [.int(job.id), .int(Int64(shard.number))])
            } else {
                try c.run("UPDATE messages SET claimed = 0, lease = NULL WHERE id = ? AND state = 'sending'", [.int(job.id)])
            }
            try Self.endLease(job.lease, c)
        }
    }

    // MARK: - Leases (issue 14)

    /// A new lease of `lease.owner`, timed on the database's clock; its id is the claim's fencing token.
    func newLease(_ lease: ClaimLease, _ c: any SQLConnection) throws(StoreError) -> Int64 {
        guard let id = try c.query("""
            INSERT INTO leases (owner, until_ms, created_at) VALUES (?, \(database.dialect.nowMilliseconds) + ?, ?) RETURNING id
            """, [.text(lease.owner.rawValue), .int(Int64((lease.duration * 1000).rounded())), SQLValue.seconds(Date())]).first?["id"].int
        else { throw StoreError(.io, "a new lease has no id") }
        return id
    }

    /// Locks the lease's row to the commit, so no rescue can delete it while this transaction writes what
    /// its work came to; false when it was rescued already. A key-share lock: it stops a delete, not the
    /// renewal of the lease's expiry, so renewals and these writes never wait for each other.
    func holds(_ lease: Int64, _ c: any SQLConnection) throws(StoreError) -> Bool {
        try !c.query("SELECT id FROM leases WHERE id = ? \(database.dialect.forKeyShare)", [.int(lease)]).isEmpty
    }

    /// `holds`, or `.leaseLost`: the fencing check of every write of a claim's outcome.
    func hold(_ lease: Int64, _ c: any SQLConnection) throws(StoreError) {
        guard try holds(lease, c) else {
            throw StoreError(.leaseLost, "lease \(lease) was rescued (it expired or its node was taken for gone); its work went to another node")
        }
    }

    /// Deletes the lease once nothing claimed names it any more.
    static func endLease(_ lease: Int64, _ c: any SQLConnection) throws(StoreError) {
        try c.send(endLeaseStatement, [.int(lease)])
    }

    /// Run after every record of a claim's work: each probe reads a partial index of claimed rows by lease.
    static let endLeaseStatement = """
        DELETE FROM leases WHERE id = ?1
          AND NOT EXISTS (SELECT 1 FROM messages WHERE claimed = 1 AND lease = ?1)
          AND NOT EXISTS (SELECT 1 FROM message_shards WHERE claimed = 1 AND lease = ?1)
          AND NOT EXISTS (SELECT 1 FROM deliveries WHERE state = 'sending' AND lease = ?1)
        """

    // MARK: - Reading and cancelling

    public func cancelMessage(code: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> CancelResult {
        try database.write { (c) throws(StoreError) -> CancelResult in
            // Locked: a node claiming it at this moment either has it (then it is sending) or skips it.
            guard let row = try c.query("SELECT id, state, event, activity FROM messages WHERE code = ? AND application = ? \(database.dialect.forUpdate)",
                                        [.text(code), .text(application.rawValue)]).first else {
                // A11: an update or end still held for later is taken back, and kept as a cancelled message so its code
                // still answers (an end_date's end had no payload yet).
                guard try c.run("""
                    INSERT INTO messages (code, application, activity, event, payload, priority, state, due_at, created_at, finished_at, expires_at)
                    SELECT code, application, activity, event, COALESCE(payload, ?3), priority, 'cancelled', due_at, created_at, ?4, expires_at
                    FROM scheduled_updates WHERE code = ?1 AND application = ?2
                    """, [.text(code), .text(application.rawValue), .blob([]), SQLValue.seconds(date)]) == 1 else { return .notFound }
                try c.run("DELETE FROM scheduled_updates WHERE code = ? AND application = ?", [.text(code), .text(application.rawValue)])
                return .cancelled
            }
            let state = MessageState(rawValue: row["state"].text ?? "") ?? .done
            let event = LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update
            // Updates and ends changed the activity when accepted: only a start that has not fired can be taken back.
            guard state == .pending, event == .start else { return .notCancellable(state: state, event: event) }
            try c.run("UPDATE messages SET state = 'cancelled', finished_at = ? WHERE id = ?", [SQLValue.seconds(date), row["id"]])
            // The activity never started: its id is free again.
            try c.run("UPDATE activities SET state = 'ended', updated_at = ? WHERE id = ? AND state IN ('scheduled', 'active')",
                      [SQLValue.seconds(date), row["activity"]])
            try c.run("DELETE FROM activity_renewals WHERE activity = ?", [row["activity"]])
            return .cancelled
        }
    }

    public func messageDetails(code: String, in application: ApplicationCode) throws(StoreError) -> MessageDetails? {
        try database.withConnection { (c) throws(StoreError) -> MessageDetails? in
            if let held = try c.query("""
                SELECT s.event, a.activity_id, s.due_at, s.expires_at, s.created_at FROM scheduled_updates s JOIN activities a ON a.id = s.activity
                WHERE s.code = ? AND s.application = ?
                """, [.text(code), .text(application.rawValue)]).first {
                // A11: held until due, nothing sent yet.
                return MessageDetails(code: code, event: LiveActivityEvent(rawValue: held["event"].text ?? "") ?? .update,
                                      activityID: held["activity_id"].text ?? "", state: .pending,
                                      createdAt: held["created_at"].date ?? Date(timeIntervalSince1970: 0),
                                      dueAt: Self.date(milliseconds: held["due_at"].int ?? 0), finishedAt: nil, targeted: 0, sent: 0, failed: 0,
                                      skipped: [:], reasons: [:], expiresAt: Self.date(milliseconds: held["expires_at"].int ?? 0))
            }
            guard let row = try c.query("""
                SELECT m.id, m.event, a.activity_id, m.state, m.created_at, m.due_at, m.finished_at, m.expires_at, m.priority,
                       (SELECT s.code FROM messages s WHERE s.id = m.superseded_by) AS superseded_by
                FROM messages m JOIN activities a ON a.id = m.activity WHERE m.code = ? AND m.application = ?
                """, [.text(code), .text(application.rawValue)]).first else { return nil }
            let id = row["id"]
            var skipped: [String: Int] = [:], reasons: [String: Int] = [:], byState: [DeliveryState: Int] = [:]
            var targeted = 0, caughtUp: Int64 = 0, lowered: Int64 = 0, nextAt: Int64?
            // One statement, so the counts and the next attempt come from one snapshot: read apart, a retry
            // claimed in between would be counted as waiting yet have no next attempt.
            for group in try c.query("""
                SELECT state, COALESCE(reason, '') AS reason, COUNT(*) AS count, MIN(next_at) AS next_at, COALESCE(SUM(catch_up), 0) AS caught_up,
                       COALESCE(SUM(CASE WHEN priority = 5 THEN 1 ELSE 0 END), 0) AS low
                FROM deliveries WHERE message = ? GROUP BY 1, 2
                """, [id]) {
                let state = DeliveryState(rawValue: group["state"].text ?? "") ?? .failed, count = Int(group["count"].int ?? 0)
                targeted += count
                byState[state, default: 0] += count
                caughtUp += group["caught_up"].int ?? 0
                lowered += group["low"].int ?? 0
                if state == .retrying || state == .unconfirmed, let next = group["next_at"].int { nextAt = min(nextAt ?? next, next) }
                if state == .skipped { skipped[group["reason"].text ?? "", default: 0] += count }
                if state == .failed { reasons[group["reason"].text ?? "", default: 0] += count }
            }
            return MessageDetails(
                code: code, event: LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update, activityID: row["activity_id"].text ?? "",
                state: MessageState(rawValue: row["state"].text ?? "") ?? .pending,
                createdAt: row["created_at"].date ?? Date(timeIntervalSince1970: 0),
                dueAt: Self.date(milliseconds: row["due_at"].int ?? 0),
                finishedAt: row["finished_at"].date,
                targeted: targeted, sent: byState[.sent] ?? 0, failed: byState[.failed] ?? 0, skipped: skipped, reasons: reasons,
                pending: byState.filter { ![.sent, .failed, .skipped].contains($0.key) }, nextAttemptAt: nextAt.map { Self.date(milliseconds: $0) },
                caughtUp: Int(caughtUp), supersededBy: row["superseded_by"].text,
                expiresAt: row["expires_at"].int.map { Self.date(milliseconds: $0) },
                overBudget: row["priority"].int == 10 ? Int(lowered) : 0)
        }
    }

    public func activity(_ activityID: String, in application: ApplicationCode) throws(StoreError) -> ActivityRecord? {
        try database.withConnection { (c) throws(StoreError) in try activityRow(activityID, application, locking: false, c) }
    }

    public func activityDevices(activity: Int64, after: Int64, limit: Int) throws(StoreError) -> [ActivityDevice] {
        // Each device's latest delivery of this activity through deliveries_by_device: a page costs the same
        // however many devices and messages the activity has.
        try database.withConnection { (c) throws(StoreError) in
            // For the health flags (A10): when APNs accepted the device's start of the current session, the app's
            // first report of an update token since that start was accepted by Islet, and when the device's push
            // token or gateway last changed (a BadDeviceToken before that is no longer news).
            try c.query("""
                SELECT d.id, d.hwid, d.sandbox, d.os_version, sm.channel_ids, ad.state, dl.status, dl.reason, dl.at, m.code, dl.state AS delivery_state, dl.catch_up,
                       dl.attempts, dl.next_at, a.state AS activity_state, a.activity_id,
                       (SELECT t.updated_at FROM activity_tokens t WHERE t.device = ad.device AND t.activity_id = a.activity_id AND t.token IS NOT NULL) AS token_updated_at,
                       s.at AS start_accepted_at,
                       (SELECT MAX(h.at) FROM token_history h WHERE h.device = ad.device AND h.kind = 'push') AS push_token_changed_at,
                       (SELECT MIN(h.at) FROM token_history h WHERE h.device = ad.device AND h.kind = 'update' AND h.slot = a.activity_id
                                                                AND h.token IS NOT NULL AND h.at >= sm.created_at) AS token_reported_at
                FROM activity_devices ad JOIN devices d ON d.id = ad.device JOIN activities a ON a.id = ad.activity
                LEFT JOIN deliveries dl ON dl.device = ad.device AND dl.message = (
                    SELECT MAX(x.message) FROM deliveries x JOIN messages y ON y.id = x.message WHERE x.device = ad.device AND y.activity = ?1)
                LEFT JOIN messages m ON m.id = dl.message
                LEFT JOIN messages sm ON sm.id = (SELECT MAX(y.id) FROM messages y WHERE y.activity = ?1 AND y.event = 'start')
                LEFT JOIN deliveries s ON s.device = ad.device AND s.message = sm.id AND s.push_type = \(PushType.liveActivity.sql) AND s.state = \(DeliveryState.sent.sql)
                WHERE ad.activity = ?1 AND ad.device > ?2 ORDER BY ad.device LIMIT ?3
                """, [.int(activity), .int(after), .int(Int64(limit))]).map { row in
                // After the end, a device where it ran shows "ended", not "active".
                let joined = row["state"].text ?? ""
                let state = joined == "active" && row["activity_state"].text == ActivityState.ended.rawValue ? "ended" : joined
                var device = ActivityDevice(hwid: row["hwid"].text ?? "", state: state, lastStatus: row["status"].int.map { Int($0) },
                                            lastReason: row["reason"].text, lastMessage: row["code"].text,
                                            lastState: row["delivery_state"].text.flatMap(DeliveryState.init(rawValue:)), caughtUp: row["catch_up"].bool)
                device.id = row["id"].int ?? 0
                device.attempts = row["attempts"].int.map { Int($0) }
                // A retry's next attempt, or when an unconfirmed start is sent once more (`next_at` is kept only for those).
                if device.lastState == .retrying || device.lastState == .unconfirmed {
                    device.nextAttemptAt = row["next_at"].int.map { Self.date(milliseconds: $0) }
                }
                device.tokenUpdatedAt = row["token_updated_at"].date
                let gateway: Gateway = row["sandbox"].bool ? .sandbox : .production
                // A start that subscribed the device to a channel (X5) brings no update token to wait for.
                let onChannel = BroadcastChannels.startsOnChannel(ids: row["channel_ids"].text.map(Self.decode(channelIDs:)), gateway: gateway,
                                                                  osVersion: row["os_version"].text)
                device.health = DeviceHealth.Facts(
                    gateway: gateway,
                    starts: onChannel ? [] : row["start_accepted_at"].date.map {
                        [DeviceHealth.Start(activityID: row["activity_id"].text ?? "", acceptedAt: $0, tokenReportedAt: row["token_reported_at"].date)]
                    } ?? [],
                    rejections: row["reason"].text == "BadDeviceToken" && (row["at"].int ?? 0) >= (row["push_token_changed_at"].int ?? 0)
                        ? [DeviceHealth.Rejection(reason: "BadDeviceToken", at: row["at"].date ?? .distantPast)] : [])
                return device
            }
        }
    }

    public func activityDeviceCount(activity: Int64) throws(StoreError) -> Int {
        try database.withConnection { (c) throws(StoreError) -> Int in
            Int(try c.query("SELECT COUNT(*) AS count FROM activity_devices WHERE activity = ?", [.int(activity)])[0]["count"].int ?? 0)
        }
    }

    public func unconfirmedStarts(activity: Int64) throws(StoreError) -> UnconfirmedStarts {
        try database.withConnection { (c) throws(StoreError) -> UnconfirmedStarts in
            // Through deliveries_owed: only the owed pushes of the session's start are read, not its whole fan-out (SQLite
            // takes a partial index when named, and when the query repeats the index's condition).
            let row = try c.query("""
                SELECT COUNT(*) AS count, MIN(next_at) AS next_at FROM deliveries \(database.dialect.indexedBy("deliveries_owed"))
                WHERE message = (\(Self.currentStart(of: "?1"))) AND state IN ('retrying', 'unconfirmed') AND state = 'unconfirmed'
                """, [.int(activity)])[0]
            return UnconfirmedStarts(count: Int(row["count"].int ?? 0), nextAttemptAt: row["next_at"].int.map { Self.date(milliseconds: $0) })
        }
    }

    // MARK: - Rows

    /// An activity; `locking` it to the commit (PostgreSQL) when a decision and an enqueue depend on it.
    private func activityRow(_ activityID: String, _ application: ApplicationCode, locking: Bool,
                             _ c: any SQLConnection) throws(StoreError) -> ActivityRecord? {
        try activityQuery(activityID, application, locking: locking, c).map(Self.activity)
    }

    /// The activity locked to the commit, with its priority-10 updates of the last hour (A7) and the channel
    /// column of its current start (X5: its updates and ends copy it).
    private func lockedActivity(_ activityID: String, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> LockedActivity? {
        try activityQuery(activityID, application, locking: true, c).map { Self.locked($0, heldDueBy: nil) }
    }

    typealias LockedActivity = (record: ActivityRecord, log: PriorityTenLog, heldDue: Bool, channel: SQLValue)

    /// A row of `activityStatement(locking: true)` as `LockedActivity`; with `heldDueBy`, whether it has held updates
    /// due by then (A11), read in the same statement.
    private static func locked(_ row: SQLRow, heldDueBy: Date?) -> LockedActivity {
        (activity(row), PriorityTenLog(json: row["priority_ten_log"].text), heldDueBy != nil && row["held_due"].bool, row["session_channel"])
    }

    /// What `enqueue` reads besides the activity: its session's latest update (locked), and whether any push is owed.
    struct LatestUpdate {
        let row: SQLRow?
        let owedPushes: Bool
    }

    /// The session's latest update of the activity `activity` (a column, a parameter or a subquery), locked.
    func latestUpdate(of activity: String) -> String {
        """
        SELECT due_at, state, claimed, priority, priority_standard, priority_frequent FROM messages
        WHERE activity = \(activity) AND event = 'update' AND state != 'cancelled' AND id > COALESCE(\(Self.currentStart(of: activity)), 0)
        ORDER BY id DESC LIMIT 1 \(database.dialect.forUpdate)
        """
    }

    /// `lockedActivity` with what an update reads next (`LatestUpdate`): one round trip on PostgreSQL, where the
    /// three queries go together. The update is read by the activity's key, as its id is not known yet.
    private func lockedForUpdate(_ activityID: String, _ application: ApplicationCode, heldDueBy: Date? = nil, _ c: any SQLConnection)
        throws(StoreError) -> (activity: LockedActivity?, latest: LatestUpdate) {
        let key: [SQLValue] = [.text(application.rawValue), .text(activityID)]
        let read = try c.queries([
            activityStatement(activityID, application, locking: true, heldDueBy: heldDueBy),
            SQLStatement(latestUpdate(of: "(SELECT k.id FROM activities k WHERE k.application = ?1 AND k.activity_id = ?2)"), key),
            SQLStatement(Self.owedPushesProbe, [], planning: .fresh),
        ])
        return (read[0].first.map { Self.locked($0, heldDueBy: heldDueBy) }, LatestUpdate(row: read[1].first, owedPushes: !read[2].isEmpty))
    }

    private func activityQuery(_ activityID: String, _ application: ApplicationCode, locking: Bool, heldDueBy: Date? = nil,
                               _ c: any SQLConnection) throws(StoreError) -> SQLRow? {
        let statement = activityStatement(activityID, application, locking: locking, heldDueBy: heldDueBy)
        return try c.query(statement.sql, statement.parameters).first
    }

    private func activityStatement(_ activityID: String, _ application: ApplicationCode, locking: Bool, heldDueBy: Date? = nil) -> SQLStatement {
        let held = heldDueBy == nil ? "" : ", EXISTS (SELECT 1 FROM scheduled_updates s WHERE s.activity = activities.id AND s.due_at <= ?3) AS held_due"
        let channel = locking ? ", \(Self.sessionChannel(of: "activities.id")) AS session_channel" : ""
        return SQLStatement("""
            SELECT id, activity_id, state, attributes_type, name, content_state, updated_at, priority_ten_log, started_at, dismiss_at\(held)\(channel)
            FROM activities WHERE application = ?1 AND activity_id = ?2 \(locking ? database.dialect.forUpdate : "")
            """, [.text(application.rawValue), .text(activityID)] + (heldDueBy.map { [Self.milliseconds($0)] } ?? []))
    }

    static func activity(_ row: SQLRow) -> ActivityRecord {
        ActivityRecord(
            id: row["id"].int ?? 0, activityID: row["activity_id"].text ?? "", state: ActivityState(rawValue: row["state"].text ?? "") ?? .ended,
            attributesType: row["attributes_type"].text, name: row["name"].text,
            contentState: row["content_state"].text.flatMap { try? JSONParser.parse($0).objectValue },
            updatedAt: row["updated_at"].date ?? Date(timeIntervalSince1970: 0),
            startedAt: row["started_at"].date,
            dismissAt: row["dismiss_at"].date)
    }

    static func tagTypes(_ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> [String: TagType] {
        var types: [String: TagType] = [:]
        for row in try c.query("SELECT name, type FROM tag_types WHERE application = ?", [.text(application.rawValue)]) {
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
                let types = try Self.tagTypes(application, c)
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
