import Foundation
import IsletCore
import IsletStore

/// What delivery came to: per-device records, their effects (where a start landed, dead tokens), owed pushes claimed again, and the leases that fence every record.
extension SQLMessageStore: DeliveryLedger {
    public func recordJobs(_ outcomes: [JobOutcome], at date: Date) throws(StoreError) {
        guard !outcomes.isEmpty else { return }
        let leases = Set(outcomes.map(\.job.lease))
        // On PostgreSQL in a transaction of its own, beside the group commit's: the group's one connection then spends
        // its time on what API calls wait for, and the records go on another server process at once.
        try database.inClaimTransaction { (c) throws(StoreError) in
            for lease in leases { try hold(lease, c) }
            // Every job's records together (one claim holds one message of an activity at most, so no two rows are one push).
            try writeRecords(outcomes.flatMap { outcome in outcome.result.records.map { ($0, outcome.job.id) } }, at: date, c)
            for outcome in outcomes { try apply(outcome.result.effects, c) }
            let finished = outcomes.filter(\.finished)
            if !finished.isEmpty {
                // Their jobs leave the queue in one statement, then their history says they are done (the queue first, in
                // the order claims and cancels lock them).
                let ids = SQLValue.text(JSONValue.array(finished.map { .int($0.job.id) }).jsonText)
                let inList = database.dialect.isIn("CAST(value AS BIGINT)", of: "?3")
                try c.send("DELETE FROM message_queue WHERE message \(database.dialect.isIn("CAST(value AS BIGINT)", of: "?"))", [ids])
                let done = "UPDATE messages SET state = \(MessageState.done.sql), finished_at = ?1, superseded_by = \(Self.superseding("messages", claimedBySender: true))"
                if database.dialect.writesRowsTogether {
                    // In one statement, each its own cursor looked up by its id.
                    let cursors = JSONValue.object(JSONObject(finished.map { ("\($0.job.id)", .int($0.result.cursor)) }))
                    try c.send("\(done), cursor = \(database.dialect.integer(ofJSONObject: "?2", key: "CAST(id AS TEXT)")) WHERE id \(inList)",
                               [SQLValue.seconds(date), .text(cursors.jsonText), ids])
                } else {
                    for outcome in finished {
                        try c.send("\(done), cursor = ?2 WHERE id = ?3", [SQLValue.seconds(date), .int(outcome.result.cursor), .int(outcome.job.id)])
                    }
                }
                for outcome in finished { try Self.broadcastAlong(outcome.job, at: date, c) }
            }
            for outcome in outcomes where !outcome.finished {
                try c.send("UPDATE message_queue SET lease = NULL WHERE message = ?", [.int(outcome.job.id)])
                try c.send("UPDATE messages SET cursor = ? WHERE id = ?", [.int(outcome.result.cursor), .int(outcome.job.id)])
            }
            for lease in leases { try Self.endLease(lease, c) }
        }
    }

    /// The state of a push taken back from `sending` unanswered: a start that may have reached the phone
    /// (a counted copy) waits for its device's token; anything else is simply retried.
    static let backToWaiting = "CASE WHEN copies > 0 THEN \(DeliveryState.unconfirmed.sql) ELSE \(DeliveryState.retrying.sql) END"

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
        try writeRecords(result.records.map { ($0, message) }, at: date, c)
        try apply(result.effects, c)
    }

    /// Delivery records, each of its message: no two of one push (an upsert touches a row once).
    func writeRecords(_ records: [(record: DeliveryRecord, message: Int64)], at date: Date, _ c: any SQLConnection) throws(StoreError) {
        if records.count == 1 {
            try Self.write(records[0].record, message: records[0].message, at: date, c)
        } else if !database.dialect.writesRowsTogether {
            let at = SQLValue.seconds(date)
            try c.runRows(records.map { Self.columns(of: $0.record, message: $0.message, at: at) }) { values in
                "INSERT INTO deliveries \(Self.deliveryColumns) VALUES \(values) \(Self.upsertDelivery)"
            }
        } else if !records.isEmpty {
            let rows = JSONValue.array(records.map { record, message in
                [
                    "message": .int(message), "device": .int(record.device), "push_type": record.pushType.map { .string($0.rawValue) } ?? .null, "status": .int(Int64(record.status)),
                    "reason": record.reason.map { .string($0) } ?? .null, "apns_id": record.apnsID.map { .string($0) } ?? .null,
                    "attempts": .int(Int64(record.attempts)), "state": .string(record.state.rawValue),
                    "next_at": record.nextAttemptAt.map { .int(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? .null,
                    "token": record.token.map { .string($0) } ?? .null, "copies": .int(Int64(record.uncertainCopies)),
                    "priority": record.priority.map { .int(Int64($0)) } ?? .null,
                ]
            })
            let source = database.dialect.rows(ofJSONArray: "?2", columns: [
                ("message", .integer), ("device", .integer), ("push_type", .text), ("status", .integer), ("reason", .text), ("apns_id", .text), ("attempts", .integer),
                ("state", .text), ("next_at", .integer), ("token", .text), ("copies", .integer), ("priority", .integer),
            ])
            try c.send("""
                INSERT INTO deliveries \(Self.deliveryColumns)
                SELECT r.message, r.device, r.push_type, r.status, r.reason, r.apns_id, r.attempts, ?1, r.state, r.next_at, r.token, r.copies, r.priority
                FROM \(source) WHERE true
                \(Self.upsertDelivery)
                """, [SQLValue.seconds(date), .text(rows.jsonText)])
        }
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
            INSERT INTO activity_devices (activity, device, state) VALUES (?, ?, \(ActivityDeviceState.active.sql))
            ON CONFLICT (activity, device) DO UPDATE SET state = \(ActivityDeviceState.active.sql)
            """, [.int(activity), .int(device)])
    }

    /// The stored payload a push of `pushType` sends: the start's fallback alert, the Android Live Update, or the ordinary
    /// Android notification made of it (issue 46), else the Live Activity's.
    static func payload(of pushType: PushType, _ row: SQLRow) -> [UInt8]? {
        switch pushType {
        case .alert: row["fallback_payload"].blob
        case .liveUpdate: row["android_payload"].blob
        case .androidNotification: row["android_payload"].blob.flatMap(AndroidPush.notification)
        default: row["payload"].blob
        }
    }

    public func claimDueDeliveries(at date: Date, limit: Int, excluding: Set<ApplicationCode>, lease: ClaimLease,
                                   verdict: (DueDelivery, Date) -> DueVerdict) throws(StoreError) -> [DueDelivery] {
        try database.inClaimTransaction { (c) throws(StoreError) -> [DueDelivery] in
            // Workers look here whenever they find no job, and pushes are rarely owed outside an outage: a probe of
            // the owed pushes' index first. (The claim below joins five tables: planned afresh, about ten times the
            // probe's cost, and once a fifth of PostgreSQL's CPU under a load of small updates.)
            guard try !c.query("SELECT 1 FROM deliveries WHERE state IN \([DeliveryState.retrying, .unconfirmed].sqlList) AND next_at <= ? LIMIT 1",
                               [Self.milliseconds(date)], planning: .fresh).isEmpty else { return [] }
            let rows = try c.query("""
                SELECT d.message, m.code, m.application, m.event, m.activity, d.device, dev.sandbox, dev.os_version, m.channel_ids, d.state,
                       COALESCE(d.push_type, \(PushType.liveActivity.sql)) AS push_type, d.token, m.payload, m.fallback_payload, m.android_payload,
                       COALESCE(d.priority, CASE WHEN dev.frequent_updates = 1 THEN COALESCE(m.priority_frequent, m.priority)
                                                 ELSE COALESCE(m.priority_standard, m.priority) END) AS priority,
                       COALESCE(d.expires_at, m.expires_at) AS expires_at, d.attempts, d.copies, d.catch_up, a.state = \(ActivityState.ended.sql) AS ended, a.started_at,
                       EXISTS (SELECT 1 FROM messages n WHERE n.activity = m.activity AND n.id > m.id AND n.event IN \([LiveActivityEvent.update, .end].sqlList)
                               AND n.state != \(MessageState.cancelled.sql))
                           AND NOT EXISTS (SELECT 1 FROM activity_renewals r WHERE r.activity = m.activity AND r.end_message = m.id) AS newer,
                       EXISTS (SELECT 1 FROM activity_devices ad WHERE ad.activity = m.activity AND ad.device = d.device) AS running
                FROM deliveries d
                JOIN messages m ON m.id = d.message
                JOIN activities a ON a.id = m.activity
                JOIN devices dev ON dev.id = d.device
                WHERE d.state IN \([DeliveryState.retrying, .unconfirmed].sqlList) AND d.next_at <= ? \(Self.notIn(excluding, column: "m.application"))
                ORDER BY d.next_at LIMIT ? \(database.dialect.skipLocked(of: "d"))
                """, [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh)
            var claimed: [DueDelivery] = []
            var leaseID: Int64?
            for row in rows {
                guard let application = ApplicationCode(row["application"].text ?? ""), let token = row["token"].text else {
                    try c.send("UPDATE deliveries SET state = \(DeliveryState.failed.sql), next_at = NULL, reason = 'no device token stored' WHERE message = ? AND device = ?",
                               [row["message"], row["device"]])
                    continue
                }
                let pushType = row["push_type"].text.flatMap(PushType.init(rawValue:)) ?? .liveActivity
                var due = DueDelivery(
                    message: row["message"].int ?? 0, code: row["code"].text ?? "", application: application,
                    event: LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update, activity: row["activity"].int ?? 0,
                    device: row["device"].int ?? 0, gateway: row["sandbox"].bool ? .sandbox : .production,
                    state: DeliveryState(rawValue: row["state"].text ?? "") ?? .retrying, pushType: pushType, token: token,
                    payload: Self.payload(of: pushType, row) ?? [],
                    priority: Int(row["priority"].int ?? 10), expiresAt: Self.date(milliseconds: row["expires_at"].int ?? 0),
                    attempts: Int(row["attempts"].int ?? 0), uncertainCopies: Int(row["copies"].int ?? 0), catchUp: row["catch_up"].bool,
                    activityEnded: row["ended"].bool, newerMessage: row["newer"].bool, tokenReportedSince: row["running"].bool)
                due.activityStartedAt = row["started_at"].date
                due.channelIDs = row["channel_ids"].text.map(Self.decode(channelIDs:))
                due.osVersion = row["os_version"].text
                switch verdict(due, date) {
                case .settle(let state, let reason):
                    try c.send("UPDATE deliveries SET state = ?, next_at = NULL, reason = ?, at = ?, status = CASE WHEN ? = \(DeliveryState.sent.sql) THEN 200 ELSE status END WHERE message = ? AND device = ?",
                               [.text(state.rawValue), .text(reason), SQLValue.seconds(date), .text(state.rawValue), row["message"], row["device"]])
                    // A start confirmed because its device runs the activity has that row already. Touching it would wait
                    // for a token report of the phone holding it, which waits for the delivery row locked here: a
                    // deadlock on PostgreSQL.
                    if state == .sent && due.event == .start && !due.tokenReportedSince {
                        try Self.started(activity: due.activity, device: due.device, c)
                    }
                case .send:
                    // Every send of a start counts as a possible copy before it goes, so a crash cannot make a third;
                    // an answer that proves it did not land gives the count back (`DeliveryDecisions.record`).
                    if leaseID == nil { leaseID = try newLease(lease, c) }
                    let held = leaseID ?? 0
                    try c.send("UPDATE deliveries SET state = \(DeliveryState.sending.sql), next_at = NULL, copies = copies + ?, lease = ? WHERE message = ? AND device = ?",
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

    struct StartedPair: Hashable {
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
            try c.runRows(started.map { [.int($0.activity), .int($0.device), ActivityDeviceState.active.parameter] }) { values in
                "INSERT INTO activity_devices (activity, device, state) VALUES \(values) ON CONFLICT (activity, device) DO UPDATE SET state = \(ActivityDeviceState.active.sql)"
            }
        } else if !started.isEmpty {
            let rows = JSONValue.array(started.map { ["activity": .int($0.activity), "device": .int($0.device)] })
            try c.send("""
                INSERT INTO activity_devices (activity, device, state)
                SELECT r.activity, r.device, \(ActivityDeviceState.active.sql) FROM \(database.dialect.rows(ofJSONArray: "?1", columns: [("activity", .integer), ("device", .integer)]))
                WHERE true ON CONFLICT (activity, device) DO UPDATE SET state = \(ActivityDeviceState.active.sql)
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
                UPDATE activity_devices SET state = \(ActivityDeviceState.tokenDead.sql) WHERE activity = ?4 AND device = ?1 AND EXISTS (
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
                        WHERE message = ? AND device = ? AND state = \(DeliveryState.sending.sql) AND lease = ?
                        """, [Self.milliseconds(date), .int(item.message), .int(item.device), .int(lease)])
                }
                try Self.endLease(lease, c)
            }
        }
    }

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
          AND NOT EXISTS (SELECT 1 FROM message_queue WHERE lease = ?1)
          AND NOT EXISTS (SELECT 1 FROM message_shards WHERE claimed = 1 AND lease = ?1)
          AND NOT EXISTS (SELECT 1 FROM deliveries WHERE state = \(DeliveryState.sending.sql) AND lease = ?1)
        """
}
