import Foundation
import IsletCore
import IsletStore

/// The queue of delivery jobs: claims under a lease, shards of large fan-outs, when the next job falls due, a job's end, retention.
extension SQLMessageStore: JobQueue {
    /// What a claim takes on the jobs it claims (PostgreSQL): a lock no other claim takes (they skip the rows), and
    /// that a writer of the message (an update superseding it, a cancel) takes first too, as a claim changes no key.
    var claimLock: String { database.dialect.skipLocked(of: "q", updatingKey: false) }

    /// The queue `q` with each job's message `m`.
    static let queueWithMessages = "message_queue q JOIN messages m ON m.id = q.message"

    /// A claim of the jobs of `ids` (a JSON array parameter, `?1`) under the lease `?2`: the queue holds the claim, and
    /// the message's history says it is being sent.
    func claiming(_ c: any SQLConnection, ids: SQLValue, lease: Int64) throws(StoreError) {
        let inList = database.dialect.isIn("CAST(value AS BIGINT)", of: "?1")
        try c.send("UPDATE message_queue SET lease = ?2 WHERE message \(inList)", [ids, .int(lease)])
        try c.send("UPDATE messages SET state = \(MessageState.sending.sql) WHERE id \(inList) AND state = \(MessageState.pending.sql)", [ids])
    }

    public func claimNextJob(at date: Date, excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>,
                             sharding: ShardPolicy, leavingSmall: Int?, lease: ClaimLease) throws(StoreError) -> MessageJob? {
        // One transaction: the claim, its lease, the activity's id and the decoded target, so a failure leaves nothing claimed.
        try database.inClaimTransaction { (c) throws(StoreError) -> MessageJob? in
            try queueWaitingUpdates(dueBy: date, limit: Self.waitingUpdatesQueuedAtOnce, c)
            // First a shard of a fan-out under way, so a large message is sent by several workers (and nodes) at once.
            if let shard = try c.query("""
                SELECT s.message, s.shard, s.up_to, s.cursor FROM message_shards s JOIN messages m ON m.id = s.message
                WHERE s.state != \(MessageState.done.sql) AND s.claimed = 0 \(Self.notIn(excluding.union(shardsExcluding), column: "m.application"))
                ORDER BY m.due_at, s.message, s.shard LIMIT 1 \(database.dialect.skipLocked(of: "s"))
                """, [], planning: .fresh).first, let message = shard["message"].int, let number = shard["shard"].int {
                let leaseID = try newLease(lease, c)
                try c.run("UPDATE message_shards SET state = \(MessageState.sending.sql), claimed = 1, lease = ? WHERE message = ? AND shard = ?",
                          [.int(leaseID), .int(message), .int(number)])
                guard var job = try loadJob(message, at: date, c) else { return nil }
                job.shard = (Int(number), shard["up_to"].int ?? .max)
                job.lease = leaseID
                return MessageJob(copying: job, cursor: shard["cursor"].int ?? 0)
            }
            guard let id = try c.query("""
                SELECT q.message AS id FROM \(Self.queueWithMessages) WHERE \(Self.claimable) \(Self.notIn(excluding, column: "m.application"))
                    \(Self.fanOutsNotIn(shardsExcluding)) \(leavingSmall.map { "AND NOT \(Self.smallMessage(devicesAtMost: $0))" } ?? "")
                ORDER BY q.due_at, q.message LIMIT 1 \(claimLock)
                """, [Self.milliseconds(date)], planning: .fresh).first?["id"].int else { return nil }
            let leaseID = try newLease(lease, c)
            try claiming(c, ids: .text("[\(id)]"), lease: leaseID)
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
                          (number == 0 ? MessageState.sending : MessageState.pending).parameter, .int(number == 0 ? 1 : 0), number == 0 ? .int(leaseID) : .null])
            }
            // The shards carry the claims from here; other nodes take the rest.
            try c.run("UPDATE message_queue SET lease = NULL WHERE message = ?", [.int(id)])
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
            try queueWaitingUpdates(dueBy: date, limit: Self.waitingUpdatesQueuedAtOnce, c)
            // `claimable` lets only the oldest unfinished message of an activity through, so one claim never
            // holds two of the same activity. Small: no device past the first `devicesAtMost` (an index probe).
            let claimed = try c.query("""
                SELECT m.id, m.event FROM \(Self.queueWithMessages)
                WHERE \(Self.claimable) \(Self.notIn(excluding, column: "m.application")) AND \(Self.smallMessage(devicesAtMost: devicesAtMost))
                ORDER BY q.due_at, q.message LIMIT ? \(claimLock)
                """, [Self.milliseconds(date), .int(Int64(limit))], planning: .fresh)
            let ids = claimed.compactMap { $0["id"].int }
            guard !ids.isEmpty else { return [] }
            let leaseID = try newLease(lease, c)
            let idList = SQLValue.text(JSONValue.array(ids.map { .int($0) }).jsonText)
            let inList = database.dialect.isIn("CAST(value AS BIGINT)", of: "?1")
            try claiming(c, ids: idList, lease: leaseID)
            // A start's scheduled activity is active from its claim, as on the job path. Updates alone (the usual claim)
            // skip the statement: it found nothing, for 0.5 ms of PostgreSQL's time a claim under the updates load.
            if claimed.contains(where: { $0["event"].text == LiveActivityEvent.start.rawValue }) {
                try c.send("""
                    UPDATE activities SET state = \(ActivityState.active.sql), updated_at = ?2, started_at = ?2
                    WHERE state = \(ActivityState.scheduled.sql) AND id IN (SELECT activity FROM messages WHERE event = \(LiveActivityEvent.start.sql) AND id \(inList))
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

    /// Waiting updates a claim queues before it looks (`queueWaitingUpdates`): more than a claim takes, so it finds
    /// the updates whose turn has come in the queue.
    static let waitingUpdatesQueuedAtOnce = 200

    /// The condition that message `m` is small, what `claimSmallJobs` takes: an update or end of an activity
    /// with at most `devicesAtMost` devices (an index probe, not a count), or a start to a short list of
    /// devices named in the request (the per-order pattern; a list of more takes the job path). Never NULL, so
    /// `NOT` of it is the job path's exact complement.
    static func smallMessage(devicesAtMost: Int) -> String {
        """
        ((m.event != \(LiveActivityEvent.start.sql) AND NOT EXISTS (SELECT 1 FROM activity_devices ad WHERE ad.activity = m.activity
                                            ORDER BY ad.device LIMIT 1 OFFSET \(max(0, devicesAtMost))))
         OR (m.event = \(LiveActivityEvent.start.sql) AND COALESCE(m.target_kind, '') = \(TargetKind.devices.sql)
             AND COALESCE(m.named_devices, \(Int32.max)) <= \(max(0, devicesAtMost))))
        """
    }

    /// A message's job as a worker needs it; a start marks its scheduled activity active.
    func loadJob(_ id: Int64, at date: Date, _ c: any SQLConnection) throws(StoreError) -> MessageJob? {
        guard let row = try c.query("\(Self.selectJobs) WHERE m.id = ?", [.int(id)]).first else { return nil }
        if row["event"].text == LiveActivityEvent.start.rawValue {
            try c.run("UPDATE activities SET state = \(ActivityState.active.sql), updated_at = ?1, started_at = ?1 WHERE id = ?2 AND state = \(ActivityState.scheduled.sql)",
                      [SQLValue.seconds(date), row["activity"]])
        }
        return try Self.job(row, c)
    }

    /// Messages `m` with their activity's id and start, as `job` reads them. The activity is looked up for each
    /// message, not joined: PostgreSQL takes a claim's id list for 100 rows whatever it holds, and hashed all of
    /// `activities` to join a dozen messages (0.8 ms a claim at 2,000 activities, a seventh of its CPU per update).
    static let selectJobs = """
        SELECT m.id, m.code, m.application, m.event, m.activity, m.target, m.attributes_type, m.payload, m.fallback_payload, m.android_payload,
               m.priority, m.priority_standard, m.priority_frequent, m.cursor, m.expires_at, m.due_at, m.channel_ids,
               (SELECT a.activity_id FROM activities a WHERE a.id = m.activity) AS activity_id,
               (SELECT a.started_at FROM activities a WHERE a.id = m.activity) AS started_at
        FROM messages m
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
        job.androidPayload = row["android_payload"].blob
        let channel = row["channel_ids"].text.map(Self.decode(sessionChannel:))
        job.channelIDs = channel?.ids
        job.channel = channel?.name
        return job
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

    /// Jobs `q` a worker may take now (`?` is now): due and waiting, or left by a crashed run — and only when
    /// no earlier message of the same activity is unfinished, so one activity's messages go out in order.
    /// Its first term is a range of the `message_queue_due` index, so a claim reads the due part of the queue
    /// only, not the updates held for later (paced ones are most of the waiting messages under a stream of
    /// updates). A job left by a crashed run (or released between batches) was due when it was claimed, and
    /// `due_at` never changes, so the range keeps it; only a node whose clock is behind the claimer's waits out
    /// the difference, as it does for any waiting job.
    static let claimable = "q.due_at <= ? AND \(takeable)"

    /// Jobs `q` a worker could take once due: not claimed, first of their activity's, not split into shards. Shared by
    /// the claims and the read of when the next falls due, so the two cannot drift.
    static let takeable = """
        q.lease IS NULL
        AND NOT EXISTS (SELECT 1 FROM message_queue e WHERE e.activity = q.activity AND e.message < q.message)
        AND NOT EXISTS (SELECT 1 FROM message_shards s WHERE s.message = q.message)
        """

    public func nextDueDate(excluding: Set<ApplicationCode>, shardsExcluding: Set<ApplicationCode>) throws(StoreError) -> Date? {
        // Only jobs a worker could take when due: not those claimed, nor those waiting behind their activity.
        try database.withConnection { (c) throws(StoreError) in
            let job = try c.query("""
                SELECT MIN(q.due_at) AS due FROM \(Self.queueWithMessages)
                WHERE \(Self.takeable) \(Self.notIn(excluding, column: "m.application")) \(Self.fanOutsNotIn(shardsExcluding))
                """, [], planning: .fresh)[0]["due"].int
            let shard = try c.query("""
                SELECT MIN(m.due_at) AS due FROM message_shards s JOIN messages m ON m.id = s.message
                WHERE s.state != \(MessageState.done.sql) AND s.claimed = 0 \(Self.notIn(excluding.union(shardsExcluding), column: "m.application"))
                """, [], planning: .fresh)[0]["due"].int
            // A11 and A8: held updates join the queue, and renewals are taken, when due; waiting updates are queued at their turn.
            let held = try c.query("""
                SELECT MIN(due) AS due FROM (SELECT MIN(due_at) AS due FROM scheduled_updates UNION ALL SELECT MIN(due_at) FROM activity_renewals
                                             UNION ALL SELECT MIN(waiting_due_at) FROM activities WHERE waiting_update IS NOT NULL) x
                """, [], planning: .fresh)[0]["due"].int
            // Applications at their share of workers are left out: their due work must not wake idle workers.
            let delivery = try c.query(excluding.isEmpty ? "SELECT MIN(next_at) AS due FROM deliveries WHERE state IN \([DeliveryState.retrying, .unconfirmed].sqlList)" : """
                SELECT MIN(d.next_at) AS due FROM deliveries d JOIN messages m ON m.id = d.message
                WHERE d.state IN \([DeliveryState.retrying, .unconfirmed].sqlList) \(Self.notIn(excluding, column: "m.application"))
                """, [], planning: .fresh)[0]["due"].int
            return [job, shard, delivery, held].compactMap { $0 }.min().map { Self.date(milliseconds: $0) }
        }
    }

    public func pruneFinished(before cutoff: Date, limit: Int) throws(StoreError) -> (deliveries: Int, messages: Int) {
        try database.write { (c) throws(StoreError) -> (deliveries: Int, messages: Int) in
            let broadcasts = try c.run(Self.pruneBroadcasts, [SQLValue.seconds(cutoff), .int(Int64(limit))])
            // Oldest first by id, as messages finish about in the order they came.
            guard let message = try c.query("""
                SELECT m.id FROM messages m JOIN activities a ON a.id = m.activity
                WHERE m.state IN \([MessageState.done, .cancelled].sqlList) AND m.finished_at < ?1
                  AND (a.state = \(ActivityState.ended.sql) OR a.updated_at < ?1
                       -- a live activity keeps its current start (D5) and its latest update or end (catch-up)
                       OR (m.id != COALESCE(\(Self.currentStart(of: "m.activity")), 0)
                           AND m.id != COALESCE((SELECT MAX(id) FROM messages WHERE activity = m.activity AND event IN \([LiveActivityEvent.update, .end].sqlList)
                                                 AND state != \(MessageState.cancelled.sql)), 0)))
                ORDER BY m.id LIMIT 1
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
                               AND o.state NOT IN \([DeliveryState.sent, .failed, .expired, .superseded].sqlList))
            ORDER BY b.id LIMIT ?2)
        """

    public func queueStatistics(at date: Date) throws(StoreError) -> DeliveryQueueStatistics {
        // Both read the backlog (the queue with the activities' waiting updates, the partial index deliveries_due), not
        // the history.
        try database.withConnection { (c) throws(StoreError) -> DeliveryQueueStatistics in
            var statistics = DeliveryQueueStatistics()
            let now = Self.milliseconds(date)
            let jobs = try c.query("""
                SELECT COUNT(*) FILTER (WHERE due_at <= ?1) AS due, MIN(due_at) FILTER (WHERE due_at <= ?1) AS oldest,
                       COUNT(*) FILTER (WHERE due_at > ?1) AS scheduled
                FROM (SELECT due_at FROM message_queue UNION ALL SELECT waiting_due_at FROM activities WHERE waiting_update IS NOT NULL) j
                """, [now])[0]
            statistics.jobsDue = Int(jobs["due"].int ?? 0)
            statistics.oldestDueAt = jobs["oldest"].int.map(Self.date(milliseconds:))
            statistics.jobsScheduled = Int(jobs["scheduled"].int ?? 0)
            for row in try c.query("""
                SELECT state, COUNT(*) AS owed, MIN(next_at) FILTER (WHERE next_at <= ?) AS oldest
                FROM deliveries \(database.dialect.indexedBy("deliveries_due")) WHERE state IN \([DeliveryState.retrying, .unconfirmed].sqlList) GROUP BY state
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
                SELECT \(Self.updateTargetColumns)
                FROM activity_devices ad
                JOIN devices d ON d.id = ad.device
                JOIN activities a ON a.id = ad.activity
                LEFT JOIN activity_tokens t ON t.device = ad.device AND t.activity_id = a.activity_id
                WHERE ad.activity = ? AND ad.device > ?
                ORDER BY ad.device LIMIT ?
                """, [.int(activity), .int(afterID), .int(Int64(limit))]).map(Self.updateTarget)
        }
    }

    public func updateTargets(activities: [Int64], limit: Int) throws(StoreError) -> [Int64: [UpdateTarget]] {
        guard !activities.isEmpty else { return [:] }
        // SQLite: a statement is a call into the process, each one's page cheaper than sorting them all.
        guard database.dialect.writesRowsTogether else {
            var pages: [Int64: [UpdateTarget]] = [:]
            for activity in activities { pages[activity] = try updateTargets(activity: activity, afterID: 0, limit: limit) }
            return pages
        }
        let rows = try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.updateTargetPages, [.text(JSONValue.array(activities.map { .int($0) }).jsonText), .int(Int64(limit))])
        }
        var pages: [Int64: [UpdateTarget]] = [:]
        for activity in activities { pages[activity] = [] }
        for row in rows {
            let reported = row["reported"].text
            pages[row["activity"].int ?? 0, default: []].append(
                Self.updateTarget(row, token: reported.flatMap { $0.isEmpty ? nil : $0 }, reported: reported != nil))
        }
        return pages
    }

    /// The first pages of the activities of a JSON array (`?1`), `?2` devices each (PostgreSQL): each activity's page read
    /// as alone, its devices by their key (LATERAL). A join over the whole list was planned for 100 activities whatever it
    /// held, and its kept plan hashed every device and every activity's devices to join a few; so is each device's update
    /// token looked up, not joined. The token is '' when the phone reported the activity ended (a row without a token).
    static let updateTargetPages = """
        SELECT j.activity, p.* FROM unnest(ARRAY(SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(?1 AS json)))) AS j(activity)
        CROSS JOIN LATERAL (
            SELECT \(SQLDeviceStore.deviceColumns), NULL AS push_to_start, d.application, ad.state,
                   (SELECT COALESCE(t.token, '') FROM activity_tokens t
                    WHERE t.device = ad.device AND t.activity_id = (SELECT a.activity_id FROM activities a WHERE a.id = ad.activity)) AS reported
            FROM activity_devices ad JOIN devices d ON d.id = ad.device
            WHERE ad.activity = j.activity ORDER BY ad.device LIMIT ?2) p
        ORDER BY j.activity, p.id
        """

    /// What `updateTarget` reads: the device, its application, its update token for the activity (`t`), and whether
    /// its token was found dead for it (`ad`).
    static let updateTargetColumns = """
        \(SQLDeviceStore.deviceColumns), NULL AS push_to_start, d.application, t.token, t.device IS NOT NULL AS reported, ad.state
        """

    static func updateTarget(_ row: SQLRow) -> UpdateTarget { updateTarget(row, token: row["token"].text, reported: row["reported"].bool) }

    /// `reported`: the phone reported a token for the activity, or its end (`token` nil).
    static func updateTarget(_ row: SQLRow, token: String?, reported: Bool) -> UpdateTarget {
        let device = SQLDeviceStore.device(row, ApplicationCode(row["application"].text ?? "") ?? ApplicationCode("XXXXX-XXXXX")!)
        return UpdateTarget(device: device, updateToken: token, endedOnDevice: reported && token == nil,
                            tokenDead: row["state"].text == ActivityDeviceState.tokenDead.rawValue)
    }

    public func supersededBy(_ job: MessageJob) throws(StoreError) -> Int64? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT \(Self.superseding("m")) AS superseded_by FROM messages m WHERE m.id = ?", [.int(job.id)]).first?["superseded_by"].int
        }
    }

    public func finish(_ job: MessageJob, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try hold(job.lease, c)
            if let shard = job.shard {
                try c.run("UPDATE message_shards SET state = \(MessageState.done.sql), claimed = 0, lease = NULL WHERE message = ? AND shard = ?",
                          [.int(job.id), .int(Int64(shard.number))])
            }
            // A sharded message is done with its last shard: its job leaves the queue, then its history says so (the
            // queue first, in the order claims and cancels lock them). Its shards held its claims, not its job.
            let lastShard = "NOT EXISTS (SELECT 1 FROM message_shards WHERE message = ?2 AND state != \(MessageState.done.sql))"
            try c.run("DELETE FROM message_queue WHERE message = ?1 AND \(lastShard)", [.int(job.id), .int(job.id)])
            try c.run("""
                UPDATE messages SET state = \(MessageState.done.sql), finished_at = ?1,
                    superseded_by = \(Self.superseding("messages", claimedBySender: job.shard == nil))
                WHERE id = ?2 AND \(lastShard)
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
                try c.run("UPDATE message_queue SET lease = NULL WHERE message = ?", [.int(job.id)])
            }
            try Self.endLease(job.lease, c)
        }
    }
}
