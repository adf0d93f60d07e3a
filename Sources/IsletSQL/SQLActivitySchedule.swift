import Foundation
import IsletCore
import IsletStore

/// What waits for its time: held updates and ends (A11) and renewals (A8), taken in a write transaction when due.
extension SQLMessageStore: ActivitySchedule {
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
        SELECT s.id, s.code, s.application, s.start, s.event, s.content_state, s.payload, s.android_payload, s.priority, s.dismissal_date,
               s.due_at, s.expires_at, a.activity_id
        FROM scheduled_updates s JOIN activities a ON a.id = s.activity
        """

    /// A11: held rows that fell due join the queue as if accepted at `date`, in a write transaction; one
    /// whose session ended or was replaced meanwhile is kept as cancelled. How many left the hold.
    func release(_ rows: [SQLRow], pacing: UpdatePacing, at date: Date, _ c: any SQLConnection) throws(StoreError) -> Int {
        var released = 0
        var budgets: [ApplicationCode: UpdateBudget] = [:]
        for candidate in rows {
            guard let application = ApplicationCode(candidate["application"].text ?? "") else { continue }
            let activityID = candidate["activity_id"].text ?? ""
            guard let (activity, log, _, channel, _) = try lockedActivity(activityID, application, c) else { continue }
            // Read again under its activity's lock: another node may have released or cancelled it, or a renewal moved
            // it to the new session, since the unlocked read.
            guard let row = try c.query(Self.selectHeld + " WHERE s.id = ?", [candidate["id"]]).first else { continue }
            let event = LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update
            var sameSession = true
            if let start = row["start"].int {
                sameSession = try Self.currentStart(activity.id, c) == start
            }
            if sameSession && activity.state == .scheduled {
                // Its start has not fired yet (workers busy, or the node was down): it waits a little longer, behind it.
                try c.run("UPDATE scheduled_updates SET due_at = ? WHERE id = ?", [Self.milliseconds(date.addingTimeInterval(1)), row["id"]])
                continue
            }
            // Under its activity's lock, each row leaves the hold once, on one node.
            guard try c.run("DELETE FROM scheduled_updates WHERE id = ?", [row["id"]]) == 1 else { continue }
            let dueAt = Self.date(milliseconds: row["due_at"].int ?? 0)
            let contentState = row["content_state"].text.flatMap { try? JSONParser.parse($0).objectValue } ?? activity.contentState ?? [:]
            // An end_date's end shows the latest state, at its own time, without an alert.
            let payload = row["payload"].blob
                ?? LiveActivityPayload.scheduledEnd(contentState: contentState, timestamp: Int64(dueAt.timeIntervalSince1970)).jsonBytes
            var message = NewMessage(
                code: row["code"].text ?? "", event: event, activityID: activityID, target: nil, attributesType: nil, name: nil,
                contentState: contentState, payload: payload, fallbackPayload: nil, priority: Int(row["priority"].int ?? 5), dueAt: date,
                expiresAt: Self.date(milliseconds: row["expires_at"].int ?? 0), dismissalDate: row["dismissal_date"].int)
            message.androidPayload = row["android_payload"].blob
            if !sameSession || ActivityRules.updateRefusal(activityID, state: activity.state) != nil {
                // Its activity ended, or began again, meanwhile: kept as cancelled, so its code still answers.
                let id = try insert(message, activity: activity.id, application: application, at: date, queued: false, c)
                try c.run("UPDATE messages SET state = \(MessageState.cancelled.sql), finished_at = ? WHERE id = ?", [SQLValue.seconds(date), .int(id)])
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
    func renew(_ rows: [SQLRow], at date: Date, _ c: any SQLConnection) throws(StoreError) -> Int {
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
                try Self.endSession(activity, at: date, keepingAndroid: true, c)
                try c.run("""
                    UPDATE activities SET state = \(ActivityState.active.sql), updated_at = ?, priority_ten_log = NULL, started_at = ?, dismiss_at = NULL WHERE id = ?
                    """, [SQLValue.seconds(date), SQLValue.seconds(date), .int(activity.id)])
                // The same audience, type, priority and channel as the session it follows; no fallback alert for old iOS.
                let channel = try renewedChannel(of: start, application: application, at: date, c)
                let renewed = try c.query("""
                    INSERT INTO messages (code, application, activity, event, target, target_kind, named_devices, attributes_type, payload, priority,
                                          state, due_at, created_at, expires_at, channel_ids)
                    SELECT ?, application, activity, \(LiveActivityEvent.start.sql), target, target_kind, named_devices, attributes_type, ?, priority,
                           \(MessageState.pending.sql), ?, ?, ?, ? FROM messages WHERE id = ?
                    RETURNING id
                    """, [.text(MessageCode.next()), .blob(payload), Self.milliseconds(date), SQLValue.seconds(date),
                          Self.milliseconds(date.addingTimeInterval(lifetime)), channel, .int(start)])[0]["id"].int ?? 0
                try c.send(queueing(renewed, activity: activity.id, dueAt: Self.milliseconds(date)))
                try c.run("UPDATE scheduled_updates SET start = ? WHERE activity = ? AND start = ?", [.int(renewed), .int(activity.id), .int(start)])
                try scheduleRenewal(activity: activity.id, start: renewed, startsAt: date, c)
            }
            steps += 1
        }
        return steps
    }

    /// X5: the channel column of a renewal's new start: the channel the old session was started on, as it is
    /// now (created anew since: its new ids; deleted since: none, the plain start).
    func renewedChannel(of start: Int64, application: ApplicationCode, at date: Date, _ c: any SQLConnection) throws(StoreError) -> SQLValue {
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
    func renewalEndPending(_ end: Int64, activity: ActivityRecord, at date: Date, _ c: any SQLConnection) throws(StoreError) -> Date? {
        if try !c.query("SELECT 1 FROM message_queue WHERE activity = ? AND message <= ? LIMIT 1",
                        [.int(activity.id), .int(end)]).isEmpty {
            return date.addingTimeInterval(0.25)
        }
        guard !ActivityLifetime.isOver(startedAt: activity.startedAt, now: date) else { return nil }
        // The end's broadcast to the channel the session was started on (X5) counts as one of its pushes.
        let retry = try c.query("""
            SELECT COUNT(*) AS owed, MIN(next_at) AS next FROM (
                SELECT next_at FROM deliveries WHERE message = ?1 AND state IN \([DeliveryState.retrying, .unconfirmed, .sending].sqlList)
                UNION ALL
                SELECT b.next_at FROM broadcasts b JOIN messages m ON m.code = b.code AND m.application = b.application
                WHERE m.id = ?1 AND b.state IN \([DeliveryState.pending, .sending, .retrying].sqlList)) owed
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
}
