import Foundation
import IsletCore
import IsletStore

/// Accepting messages: starts and updates into the queue, all or none, and a start taken back before it fires.
extension SQLMessageStore: MessageIntake {
    public func acceptStarts(_ messages: [NewMessage], in application: ApplicationCode, at date: Date, validateOnly: Bool) throws {
        try accept(validateOnly: validateOnly, startsWrite(messages, in: application, at: date))
    }

    public func acceptStarts(_ messages: [NewMessage], in application: ApplicationCode, at date: Date, validateOnly: Bool,
                             then: @escaping @Sendable ((any Error)?) -> Void) {
        let write = startsWrite(messages, in: application, at: date)
        accept(validateOnly: validateOnly, reading: nil, { c, _ in try write(c) }, then: then)
    }

    /// The write of `acceptStarts`: each activity created or started again (S3), its start stored, its end and renewal
    /// scheduled.
    private func startsWrite(_ messages: [NewMessage], in application: ApplicationCode, at date: Date) -> (any SQLConnection) throws -> Void {
        { [self] c in
            for (index, message) in messages.enumerated() {
                let state: ActivityState = message.dueAt > date ? .scheduled : .active
                // A scheduled start's activity starts when it fires (A8).
                let startedAt = state == .active ? SQLValue.seconds(date) : .null
                let activity: Int64
                if let existing = try activityRow(message.activityID, application, locking: true, c) {
                    let read = try c.queries([
                        SQLStatement("SELECT 1 FROM messages WHERE activity = ? LIMIT 1", [.int(existing.id)]),
                        SQLStatement("SELECT 1 FROM message_queue WHERE activity = ? LIMIT 1", [.int(existing.id)]),
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
                    // Another node may be starting the same new id at this moment: the second to insert finds the first's
                    // row, and this write runs again (`StoreError.busy`), this time on the activity that exists.
                    guard let id = try c.query("""
                        INSERT INTO activities (application, activity_id, state, attributes_type, name, content_state, updated_at, schema_version,
                                                started_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (application, activity_id) DO NOTHING RETURNING id
                        """, [.text(application.rawValue), .text(message.activityID), .text(state.rawValue),
                              Self.optional(message.attributesType), Self.optional(message.name),
                              .text(JSONValue.object(message.contentState).jsonText), SQLValue.seconds(date),
                              message.schemaVersion.map { .int(Int64($0)) } ?? .null, startedAt]).first?["id"].int else {
                        throw StoreError(.busy, "activity \(message.activityID) was created by another write at this moment")
                    }
                    activity = id
                }
                guard message.scheduledEnd != nil || message.renew else {
                    // No id needed back: the insert goes with the next statements (one round trip on PostgreSQL).
                    try send(message, activity: activity, application: application, at: date, budgeted: nil, dueAt: nil, channel: nil, c)
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
    /// `keepingAndroid`: a renewal (A8), which iPhones need and Android phones do not: their Live Update runs on, and
    /// they stay the activity's devices (issue 46).
    static func endSession(_ activity: ActivityRecord, at date: Date, keepingAndroid: Bool = false, _ c: any SQLConnection) throws(StoreError) {
        try c.send("""
            UPDATE activity_tokens SET token = NULL, updated_at = ?
            WHERE activity_id = ? AND device IN (SELECT device FROM activity_devices WHERE activity = ?)
            """, [SQLValue.seconds(date), .text(activity.activityID), .int(activity.id)])
        let android = keepingAndroid ? " AND device NOT IN (SELECT id FROM devices WHERE platform = \(DevicePlatform.android.sql))" : ""
        try c.send("DELETE FROM activity_devices WHERE activity = ?\(android)", [.int(activity.id)])
    }

    /// A8: the session whose start is `start` is renewed shortly before its 8 hours.
    func scheduleRenewal(activity: Int64, start: Int64, startsAt: Date, _ c: any SQLConnection) throws(StoreError) {
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
    func supersedeOlder(than id: Int64?, activity: Int64, owed: Bool? = nil, unfinishedUpdates: Bool = true, at date: Date,
                                _ c: any SQLConnection) throws(StoreError) {
        // ?1 goes unused then (typed, so both engines accept it).
        let newest = id == nil ? "(SELECT MAX(n.id) FROM messages n WHERE n.activity = ?2)" : "?1"
        // Only waiting messages are marked: one a sender holds (claimed) learns of the newer message by reading
        // (`superseding`), and one a claim is taking at this moment (its job locked) is being sent. Neither is written nor
        // waited for here, so a node paused in the middle of a claim or a record holds up no update of the activity,
        // and a node paused in the middle of an update holds up no sender. One not sent at all is done, and leaves the
        // queue; one released between two batches of its fan-out stops at its next.
        if unfinishedUpdates {
            try c.send("""
                UPDATE messages SET superseded_by = \(newest), state = CASE WHEN state = \(MessageState.pending.sql) THEN \(MessageState.done.sql) ELSE state END,
                    finished_at = CASE WHEN state = \(MessageState.pending.sql) THEN ?3 ELSE finished_at END
                WHERE id IN (SELECT q.message FROM message_queue q JOIN messages o ON o.id = q.message
                             WHERE q.activity = ?2 AND q.message < \(newest) AND q.lease IS NULL AND o.event = \(LiveActivityEvent.update.sql)
                               AND o.superseded_by IS NULL \(database.dialect.skipLocked(of: "q", updatingKey: false)))
                """, [.int(id ?? 0), .int(activity), SQLValue.seconds(date)])
            try c.send("""
                DELETE FROM message_queue WHERE message IN (
                    SELECT q.message FROM message_queue q JOIN messages o ON o.id = q.message WHERE q.activity = ? AND o.state = \(MessageState.done.sql))
                """, [.int(activity)])
        }
        try supersedeOwedPushes(newest: newest, id: id, activity: activity, owed: owed, c)
    }

    /// Pushes still owed (retrying, or an unconfirmed start's) for the updates and ends of `activity` older than its
    /// message `id`, settled as superseded; `owed` as for `supersedeOlder`.
    func supersedeOwedPushes(olderThan id: Int64, activity: Int64, owed: Bool?, _ c: any SQLConnection) throws(StoreError) {
        try supersedeOwedPushes(newest: "?1", id: id, activity: activity, owed: owed, c)
    }

    /// `newest`: the newest message's id, `?1` (`id`) or an expression of the activity (`?2`).
    private func supersedeOwedPushes(newest: String, id: Int64?, activity: Int64, owed: Bool?, _ c: any SQLConnection) throws(StoreError) {
        // Owed pushes are rare outside an outage: one probe of their index spares listing the activity's history.
        let anyOwed: Bool
        if let owed { anyOwed = owed } else { anyOwed = try !c.query(Self.owedPushesProbe, [], planning: .fresh).isEmpty }
        guard anyOwed else { return }
        // Pushes a retry is taking at this moment (locked) are being sent: skipped, not waited for.
        let notHeld = database.dialect.skipLocked(of: "o", updatingKey: false)
        try c.send("""
            UPDATE deliveries SET state = \(DeliveryState.superseded.sql), next_at = NULL, reason = 'a newer update or end of the activity went instead'
            WHERE (message, device) IN (
                SELECT o.message, o.device FROM deliveries o \(database.dialect.indexedBy("deliveries_owed"))
                WHERE o.state IN \([DeliveryState.retrying, .unconfirmed].sqlList)
                  AND o.message IN (SELECT id FROM messages WHERE activity = ?2 AND id < \(newest) AND event IN \([LiveActivityEvent.update, .end].sqlList))
                  AND o.message NOT IN (SELECT end_message FROM activity_renewals WHERE activity = ?2 AND end_message IS NOT NULL) \(notHeld))
            """, [.int(id ?? 0), .int(activity)])
    }

    /// Whether any push is owed (a retry or an unconfirmed start), anywhere: one row of a partial index.
    static let owedPushesProbe = "SELECT 1 FROM deliveries WHERE state IN \([DeliveryState.retrying, .unconfirmed].sqlList) LIMIT 1"

    @discardableResult
    public func acceptUpdates(_ messages: [NewMessage], in application: ApplicationCode, budget: UpdateBudget = .standard,
                              pacing: UpdatePacing = .off, at date: Date, validateOnly: Bool) throws -> [AcceptedUpdate] {
        let acceptance = updateAcceptance(messages, application, budget: budget, pacing: pacing, at: date, validateOnly: validateOnly)
        try accept(validateOnly: validateOnly, reading: acceptance.reads, acceptance.write)
        return acceptance.decided()
    }

    public func acceptUpdates(_ messages: [NewMessage], in application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing,
                              at date: Date, validateOnly: Bool, then: @escaping @Sendable (Result<[AcceptedUpdate], any Error>) -> Void) {
        let acceptance = updateAcceptance(messages, application, budget: budget, pacing: pacing, at: date, validateOnly: validateOnly)
        accept(validateOnly: validateOnly, reading: acceptance.reads, acceptance.write) { error in
            then(error.map { .failure($0) } ?? .success(acceptance.decided()))
        }
    }

    /// What each update of one `acceptUpdates` call came to, set by its write on the group leader's thread before the
    /// call's answer reads it.
    private final class UpdateOutcome {
        var accepted: [AcceptedUpdate] = []
        var ranAlone = false
    }

    /// One `acceptUpdates` call, for the call that waits for the commit and the one that does not: what it reads first,
    /// its write, and what it decided once written (alone, or together with others).
    private func updateAcceptance(_ messages: [NewMessage], _ application: ApplicationCode, budget: UpdateBudget, pacing: UpdatePacing,
                                  at date: Date, validateOnly: Bool)
        -> (reads: GroupReads?, write: (any SQLConnection, [[SQLRow]]) throws -> Void, decided: () -> [AcceptedUpdate]) {
        // Each activity locked and read first, with the reads of the writes grouped with this one (one round trip on
        // PostgreSQL); a request that names one activity twice reads the second after the first's writes.
        let keys = messages.map { Self.lockKey($0.activityID, application) }
        let apart = Set(keys).count == keys.count
        // PostgreSQL: plain updates of the requests grouped with this one are written together (`UpdatesTogether`).
        let together = apart && !validateOnly && database.dialect.writesRowsTogether
            ? UpdatesTogether(store: self, messages: messages, application: application, budget: budget, pacing: pacing, at: date) : nil
        let reads = apart
            ? GroupReads(messages.flatMap { lockedForUpdate($0.activityID, application, heldDueBy: date) }, keys: Set(keys), together: together)
            : nil
        let perMessage = reads.map { $0.statements.count / messages.count } ?? 0
        let outcome = UpdateOutcome()
        let write = { (c: any SQLConnection, readAhead: [[SQLRow]]) throws in
            outcome.ranAlone = true
            outcome.accepted = []
            for (index, message) in messages.enumerated() {
                // Locked to the commit: an update accepted after another is enqueued after it on every node (issue 14),
                // and the activity's priority-10 count is read and written by one transaction at a time (A7).
                var (existing, latest) = reads == nil ? try lockedForUpdate(message.activityID, application, heldDueBy: date, c)
                    : Self.lockedForUpdate(readAhead[index * perMessage..<(index + 1) * perMessage], heldDueBy: date)
                // X2: checked by the caller against the schema its activity started with, before anything is written.
                if let record = existing?.record, !message.checkedSchema.holds(for: record.schema) { throw SchemaCheckOutdated(index: index) }
                // A11: what was held for this activity and is due goes first, so a newer update never goes before it.
                if let held = existing, held.heldDue,
                   try release(try c.query(Self.selectHeld + " WHERE s.activity = ? AND s.due_at <= ? ORDER BY s.due_at, s.id",
                                           [.int(held.record.id), Self.milliseconds(date)]), pacing: pacing, at: date, c) > 0 {
                    (existing, latest) = try lockedForUpdate(message.activityID, application, c)
                }
                if let ended = existing?.record, ActivityRules.isRepeatedEnd(message.event, state: ended.state) {
                    let last = try c.query("SELECT code FROM messages WHERE activity = ? ORDER BY id DESC LIMIT 1", [.int(ended.id)]).first?["code"].text
                    var repeated = AcceptedUpdate(priority: BudgetedPriority(requested: message.priority), activityStartedAt: ended.startedAt, dueAt: date)
                    repeated.endedBy = last ?? ""
                    outcome.accepted.append(repeated)
                    continue
                }
                if let refusal = ActivityRules.updateRefusal(message.activityID, state: existing?.record.state) {
                    throw AcceptRefusal(index: index, field: "live_activity_id", message: refusal)
                }
                guard let (activity, log, _, channel, waiting) = existing else { throw StoreError(.io, "U1 admitted an update of an unknown activity") }
                if message.dueAt > date {
                    // A11: held apart until due; then it joins the queue as if accepted at that time, in this session only.
                    let start = try Self.currentStart(activity.id, c)
                    try schedule(message, event: message.event, activity: activity.id, application: application, start: start, at: date, c)
                    outcome.accepted.append(AcceptedUpdate(priority: BudgetedPriority(requested: message.priority),
                                                           activityStartedAt: activity.startedAt, dueAt: message.dueAt,
                                                           channel: channel.text.map(Self.decode(sessionChannel:))))
                } else if mayWait(message, latest: latest, at: date) {
                    outcome.accepted.append(try acceptWaiting(message, activity: activity, log: log, channel: channel, latest: latest,
                                                              application: application, budget: budget, pacing: pacing, at: date, c))
                } else {
                    if let waiting {
                        // Its waiting update goes first: this one supersedes it in the queue, or follows it there.
                        try queueWaitingUpdate(waiting, of: activity.id, c)
                        latest = try latestUpdate(of: activity.id, c)
                    }
                    outcome.accepted.append(try enqueue(message, activity: activity, log: log, channel: channel, application: application,
                                                        budget: budget, pacing: pacing, latest: latest, at: date, c))
                }
            }
            try notifyNodes(c)
        }
        return (reads, write, {
            if !outcome.ranAlone, let made = together?.accepted { return made }
            return outcome.accepted
        })
    }

    /// An accepted update or end into the queue: the activity takes its state, the budget (A7) and its turn
    /// (A9) are decided, and older updates not sent yet are superseded. The activity is locked by the caller.
    func enqueue(_ message: NewMessage, activity: ActivityRecord, log stored: PriorityTenLog, channel: SQLValue, application: ApplicationCode,
                         budget: UpdateBudget, pacing: UpdatePacing, latest given: LatestUpdate? = nil, at date: Date,
                         _ c: any SQLConnection) throws(StoreError) -> AcceptedUpdate {
        // The session's latest update, locked so no claim takes it meanwhile (claims skip locked rows):
        // still waiting, it is superseded below, and this message takes its turn (A9) and its budget (A7).
        // One a claim holds at this moment is being sent: not waiting.
        let latest: LatestUpdate
        if let read = given { latest = read } else { latest = try latestUpdate(of: activity.id, c) }
        let decision = UpdateDecision(message, activity: activity, log: stored, latest: latest, budget: budget, pacing: pacing, at: date)
        let change = SQLStatement("""
            UPDATE activities SET state = ?, content_state = ?, updated_at = ?, priority_ten_log = COALESCE(?, priority_ten_log),
                dismiss_at = COALESCE(?, dismiss_at)
            WHERE id = ?
            """, decision.activityChange(message, at: date) + [.int(activity.id)])
        // Its id is not read back: what it supersedes is older than the activity's newest message, itself. The activity's
        // change goes with it.
        try send(message, activity: activity.id, application: application, at: date, budgeted: decision.priority, dueAt: decision.dueAt,
                 channel: channel, along: change, c)
        try supersedeOlder(than: nil, activity: activity.id, owed: latest.owedPushes, unfinishedUpdates: decision.unfinishedUpdates, at: date, c)
        // An end ends the renewals too (A8).
        if message.event == .end { try c.send("DELETE FROM activity_renewals WHERE activity = ?", [.int(activity.id)]) }
        return decision.accepted(activity, channel: channel)
    }

    /// A11: an update, or a start's `end_date` end (`message` is then the start), held until due; `start` is
    /// the session's start message, so it fires in that session only.
    func schedule(_ message: NewMessage, event: LiveActivityEvent, activity: Int64, application: ApplicationCode, start: Int64?,
                          at date: Date, _ c: any SQLConnection) throws(StoreError) {
        let end = message.event == .start ? message.scheduledEnd : nil
        try c.run("""
            INSERT INTO scheduled_updates (code, application, activity, start, event, content_state, payload, priority, dismissal_date,
                                           due_at, expires_at, created_at, android_payload)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [
            .text(end?.code ?? message.code), .text(application.rawValue), .int(activity), start.map { .int($0) } ?? .null, .text(event.rawValue),
            end == nil ? .text(JSONValue.object(message.contentState).jsonText) : .null, end == nil ? .blob(message.payload) : .null,
            .int(Int64(end == nil ? message.priority : 10)), end == nil ? message.dismissalDate.map { .int($0) } ?? .null : .null,
            Self.milliseconds(end?.at ?? message.dueAt), Self.milliseconds(end?.expiresAt ?? message.expiresAt), SQLValue.seconds(date),
            // An end_date's end dismisses the Android Live Update where the start made one (issue 46).
            (end == nil ? message.androidPayload
                : message.androidPayload.map { _ in AndroidLiveUpdate(operation: .end, id: message.activityID, hash: end?.code).dataBytes })
                .map { .blob($0) } ?? .null,
        ])
    }

    public func cancelMessage(code: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> CancelResult {
        try database.write { (c) throws(StoreError) -> CancelResult in
            // Its activity first, locked as every writer of an activity's messages locks it (no claim takes a start
            // of it meanwhile, no update of it goes in between); then the message or the held update itself.
            let key: [SQLValue] = [.text(code), .text(application.rawValue)]
            guard let activity = try c.query("""
                SELECT activity FROM messages WHERE code = ?1 AND application = ?2
                UNION ALL SELECT activity FROM scheduled_updates WHERE code = ?1 AND application = ?2
                """, key).first?["activity"] else { return .notFound }
            _ = try c.query("SELECT id FROM activities WHERE id = ? \(database.dialect.forNoKeyUpdate)", [activity])
            // Its job before its row, in the order a claim takes them: a claim under way is waited for (and has made it a
            // sending message), and none takes it from here on.
            _ = try c.query("""
                SELECT message FROM message_queue WHERE message = (SELECT id FROM messages WHERE code = ? AND application = ?) \(database.dialect.forUpdate)
                """, key)
            guard let row = try c.query("SELECT id, state, event, activity FROM messages WHERE code = ? AND application = ? \(database.dialect.forUpdate)",
                                        key).first else {
                // A11: an update or end still held for later is taken back, and kept as a cancelled message so its code
                // still answers (an end_date's end had no payload yet). Released meanwhile, it is a message now.
                guard try c.run("""
                    INSERT INTO messages (code, application, activity, event, payload, priority, state, due_at, created_at, finished_at, expires_at)
                    SELECT code, application, activity, event, COALESCE(payload, ?3), priority, \(MessageState.cancelled.sql), due_at, created_at, ?4, expires_at
                    FROM scheduled_updates WHERE code = ?1 AND application = ?2
                    """, key + [.blob([]), SQLValue.seconds(date)]) == 1 else { return .notFound }
                try c.run("DELETE FROM scheduled_updates WHERE code = ? AND application = ?", key)
                return .cancelled
            }
            let state = MessageState(rawValue: row["state"].text ?? "") ?? .done
            let event = LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update
            // Updates and ends changed the activity when accepted: only a start that has not fired can be taken back.
            guard state == .pending, event == .start else { return .notCancellable(state: state, event: event) }
            try c.run("UPDATE messages SET state = \(MessageState.cancelled.sql), finished_at = ? WHERE id = ?", [SQLValue.seconds(date), row["id"]])
            try c.run("DELETE FROM message_queue WHERE message = ?", [row["id"]])
            // The activity never started: its id is free again.
            try c.run("UPDATE activities SET state = \(ActivityState.ended.sql), updated_at = ? WHERE id = ? AND state IN \([ActivityState.scheduled, .active].sqlList)",
                      [SQLValue.seconds(date), row["activity"]])
            try c.run("DELETE FROM activity_renewals WHERE activity = ?", [row["activity"]])
            return .cancelled
        }
    }
}
