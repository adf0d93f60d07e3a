import Foundation
import Synchronization
import Testing
import IsletCore
@testable import IsletSQL
import IsletPostgres
import IsletStore

private let shop = ApplicationCode("SHOPM-00001")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)
private func token(_ n: Int) -> String { String(format: "%064x", n) }
private let lease = ClaimLease(owner: NodeID("test-node")!, duration: 60)

/// Messages, their jobs, batches, schedules, schemas and simulated devices: the store protocols the
/// delivery service and the API rely on, with the same expectations on both engines.
@Suite("Messages, jobs, schedules, schemas and simulated devices, on both engines")
struct MessageStoreTests {
    struct Fixture {
        let db: EngineDatabase
        init(_ engine: Engine) throws {
            db = try engine.open()
            try db.applications().createApplication(Application(code: shop, name: "x", bundleID: "com.example.x", createdAt: now),
                                                    tokens: [], apnsKey: nil)
            for n in 1...3 {
                _ = try db.devices.registerDevice(DeviceRegistration(hwid: "h\(n)", pushToken: token(n)), tags: [], in: shop, at: now)
            }
        }

        func message(_ code: String, _ event: LiveActivityEvent, _ activity: String, due: Date = now, target: TargetSelection? = nil,
                     step: Int64 = 1) -> NewMessage {
            NewMessage(code: code, event: event, activityID: activity, target: event == .start ? target ?? .devices(["h1", "h2", "h3"]) : nil,
                       attributesType: event == .start ? "OrderAttributes" : nil, name: nil, contentState: ["step": .int(step)],
                       payload: Array(#"{"aps":{}}"#.utf8), fallbackPayload: nil, priority: 10, dueAt: due)
        }

        func claim(at date: Date = now) throws -> MessageJob? {
            try db.messages.claimNextJob(at: date, excluding: [], shardsExcluding: [], sharding: ShardPolicy(), leavingSmall: nil, lease: lease)
        }

        /// A page of a start whose push to `device` went out and got no answer: it waits a minute for the device's token.
        static func unansweredStart(device: Int64) -> BatchResult {
            var page = BatchResult(cursor: device)
            page.records = [DeliveryRecord(device: device, pushType: .liveActivity, status: 0, reason: "connection lost before APNs answered",
                                           apnsID: "start-\(device)", attempts: 1, state: .unconfirmed, nextAttemptAt: now.addingTimeInterval(60),
                                           token: "start-token", uncertainCopies: 1)]
            return page
        }

        /// Sends a claimed start to its targets in one batch, each answered 200.
        func deliver(_ job: MessageJob) throws {
            let targets = try db.devices.targets(job.target!, in: shop, attributesType: job.attributesType, afterID: job.cursor, limit: 100)
            var batch = BatchResult(cursor: targets.last?.id ?? job.cursor)
            for device in targets {
                batch.records.append(DeliveryRecord(device: device.id, pushType: .liveActivity, status: 200, reason: nil, apnsID: "id-\(device.id)",
                                                    attempts: 1, token: device.pushToken))
                batch.effects.startedOn.append((job.activity, device.id))
            }
            try db.messages.recordBatch(batch, of: job, at: now)
            try db.messages.finish(job, at: now)
        }
    }

    @Test(arguments: Engine.allCases) func aStartIsClaimedOnceSentInABatchAndCounted(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("M1", .start, "ORDER_1")], in: shop, at: now, validateOnly: false)
        let job = try #require(try f.claim())
        #expect(job.code == "M1" && job.event == .start && job.activityID == "ORDER_1" && job.payload == Array(#"{"aps":{}}"#.utf8))
        #expect(try f.claim() == nil, "a claimed job is not claimed twice")
        try f.deliver(job)
        let details = try #require(try f.db.messages.messageDetails(code: "M1", in: shop))
        #expect(details.state == .done && details.targeted == 3 && details.sent == 3 && details.failed == 0)
        #expect(try f.db.messages.activity("ORDER_1", in: shop)?.state == .active)
        #expect(try f.db.messages.activityDeviceCount(activity: job.activity) == 3)
        #expect(try f.db.messages.activityDevices(activity: job.activity, after: 0, limit: 2).map(\.hwid) == ["h1", "h2"], "paged")
    }

    /// A device deleted (Islet never does; an operator might) takes its delivery records and its place in activities
    /// with it on both engines: SQLite through its foreign keys, PostgreSQL through a trigger (its insert-time key checks
    /// locked a device row per record, so migration 22 dropped them).
    @Test(arguments: Engine.allCases) func aDeletedDeviceTakesItsPushRecordsWithIt(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("M1", .start, "ORDER_1")], in: shop, at: now, validateOnly: false)
        try f.deliver(try #require(try f.claim()))
        let count = { (sql: String) throws -> Int64 in
            try f.db.database.withConnection { (c) throws(StoreError) in try c.query(sql)[0]["n"].int ?? -1 }
        }
        let h1 = try #require(try f.db.devices.device(hwid: "h1", in: shop)).id
        #expect(try count("SELECT COUNT(*) AS n FROM deliveries WHERE device = \(h1)") == 1)
        #expect(try count("SELECT COUNT(*) AS n FROM activity_devices WHERE device = \(h1)") == 1)
        // As an operator's psql would: the schema named, and a search path that holds none of Islet's tables.
        try f.db.database.write { (c) throws(StoreError) in
            guard engine == .postgresql else { return _ = try c.run("DELETE FROM devices WHERE id = ?", [.int(h1)]) }
            let schema = try c.query("SELECT current_schema() AS s")[0]["s"].text ?? ""
            try c.execute("SET LOCAL search_path TO pg_catalog")
            _ = try c.run("DELETE FROM \"\(schema)\".devices WHERE id = ?", [.int(h1)])
        }
        #expect(try count("SELECT COUNT(*) AS n FROM deliveries WHERE device = \(h1)") == 0)
        #expect(try count("SELECT COUNT(*) AS n FROM activity_devices WHERE device = \(h1)") == 0)
        #expect(try count("SELECT COUNT(*) AS n FROM deliveries") == 2, "the other devices' records stay")
        #expect(try count("SELECT COUNT(*) AS n FROM activity_devices") == 2)
    }

    /// An activity deleted by hand (Islet never does) takes its messages, their jobs and their push records with it on
    /// both engines: SQLite through its foreign keys, PostgreSQL through triggers (its insert-time key checks locked the
    /// application's, the activity's and the message's rows on every write, so migration 32 dropped them).
    @Test(arguments: Engine.allCases) func aDeletedActivityTakesItsMessagesJobsAndPushRecordsWithIt(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("M1", .start, "ORDER_1"), f.message("M2", .start, "ORDER_2")], in: shop, at: now, validateOnly: false)
        let first = try #require(try f.claim())
        #expect(first.code == "M1")
        try f.deliver(first)
        try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_1")], in: shop, at: now, validateOnly: false)
        let count = { (sql: String) throws -> Int64 in
            try f.db.database.withConnection { (c) throws(StoreError) in try c.query(sql)[0]["n"].int ?? -1 }
        }
        let counts = { () throws -> [Int64] in
            [try count("SELECT COUNT(*) AS n FROM messages"), try count("SELECT COUNT(*) AS n FROM message_queue"),
             try count("SELECT COUNT(*) AS n FROM deliveries")]
        }
        // On SQLite U1 is its activity's waiting update, queued by the next claim (`queueWaitingUpdates`).
        #expect(try counts() == [3, engine == .sqlite ? 1 : 2, 3], "M1 sent to three phones, M2 and U1 waiting")
        if engine == .postgresql {
            #expect(try count("""
                SELECT COUNT(*) AS n FROM pg_constraint WHERE contype = 'f'
                AND conrelid IN (to_regclass('messages'), to_regclass('message_queue'), to_regclass('deliveries'))
                """) == 0, "no row of the hot path is locked by a key check")
        }
        // As an operator's psql would: the schema named, and a search path that holds none of Islet's tables.
        try f.db.database.write { (c) throws(StoreError) in
            guard engine == .postgresql else { return _ = try c.run("DELETE FROM activities WHERE id = ?", [.int(first.activity)]) }
            let schema = try c.query("SELECT current_schema() AS s")[0]["s"].text ?? ""
            try c.execute("SET LOCAL search_path TO pg_catalog")
            _ = try c.run("DELETE FROM \"\(schema)\".activities WHERE id = ?", [.int(first.activity)])
        }
        #expect(try counts() == [1, 1, 0], "ORDER_2's start and its job stay")
        #expect(try f.claim()?.code == "M2")
    }

    @Test(arguments: Engine.allCases) func aScheduledStartWaitsForItsTimeAndCanBeCancelled(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let later = now.addingTimeInterval(600)
        try f.db.messages.acceptStarts([f.message("S2", .start, "LATER_2", due: later)], in: shop, at: now, validateOnly: false)
        #expect(try f.db.messages.activity("LATER_2", in: shop)?.state == .scheduled)
        #expect(try f.claim() == nil, "not due yet")
        #expect(try f.db.messages.nextDueDate(excluding: [], shardsExcluding: []) == later)
        #expect(try f.claim(at: later)?.code == "S2")
        try f.db.messages.acceptStarts([f.message("S3", .start, "LATER_3", due: later)], in: shop, at: now, validateOnly: false)
        #expect(try f.db.messages.cancelMessage(code: "S3", in: shop, at: now) == .cancelled)
        #expect(try f.db.messages.cancelMessage(code: "S3", in: shop, at: now) == .notCancellable(state: .cancelled, event: .start))
        #expect(try f.db.messages.cancelMessage(code: "NOPE", in: shop, at: now) == .notFound)
    }

    @Test(arguments: Engine.allCases) func startsAndUpdatesAreRefusedByTheRulesAllOrNothing(_ engine: Engine) throws {
        let f = try Fixture(engine)
        // U1: an update of an unknown activity; the whole request is refused, its good notification included.
        #expect(throws: AcceptRefusal(index: 1, field: "live_activity_id",
                                      message: "no activity 'GHOST' in this application; start it with startLiveActivity first (U1)")) {
            try f.db.messages.acceptStarts([f.message("A1", .start, "ORDER_A")], in: shop, at: now, validateOnly: false)
            try f.db.messages.acceptUpdates([f.message("U0", .update, "ORDER_A"), f.message("U1", .update, "GHOST")], in: shop, at: now, validateOnly: false)
        }
        #expect(try f.db.messages.messageDetails(code: "U0", in: shop) == nil, "nothing half-applied")
        // S3: an active id cannot start again; a dry run stores nothing.
        #expect(throws: AcceptRefusal.self) {
            try f.db.messages.acceptStarts([f.message("A2", .start, "ORDER_A")], in: shop, at: now, validateOnly: false)
        }
        try f.db.messages.acceptUpdates([f.message("U2", .update, "ORDER_A")], in: shop, at: now, validateOnly: true)
        #expect(try f.db.messages.messageDetails(code: "U2", in: shop) == nil, "a dry run stores nothing")
    }

    /// A dry run checks what the real call would: a write that would fail fails it too, also one PostgreSQL sends on
    /// without waiting for its answer (here the message's insert, its code taken), before the dry run rolls back.
    @Test(arguments: Engine.allCases) func aDryRunFailsWhereTheCallWouldFail(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("ST", .start, "ORDER_D")], in: shop, at: now, validateOnly: false)
        try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_D")], in: shop, at: now, validateOnly: false)
        for validateOnly in [true, false] {
            #expect(performing: {
                try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_D")], in: shop, at: now, validateOnly: validateOnly)
            }, throws: { ($0 as? StoreError)?.code == .conflict })
        }
        #expect(try f.db.messages.messageDetails(code: "U1", in: shop)?.supersededBy == nil, "nothing of either call was kept")
    }

    @Test(arguments: Engine.allCases) func theLatestUpdateSupersedesOnesNotYetSent(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("ST", .start, "ORDER_L")], in: shop, at: now, validateOnly: false)
        try f.deliver(try #require(try f.claim()))
        try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_L")], in: shop, at: now, validateOnly: false)
        try f.db.messages.acceptUpdates([f.message("U2", .update, "ORDER_L")], in: shop, at: now, validateOnly: false)
        // SQLite: U2 is its activity's waiting update, and U1 is marked when the claim queues U2.
        let job = try #require(try f.claim())
        #expect(job.code == "U2", "the superseded update is never claimed")
        #expect(try f.db.messages.messageDetails(code: "U1", in: shop)?.supersededBy == "U2")
        let targets = try f.db.messages.updateTargets(activity: job.activity, afterID: 0, limit: 10)
        #expect(targets.count == 3 && targets.allSatisfy { $0.updateToken == nil && !$0.endedOnDevice })
    }

    /// Issue 43: a claim's updates read their devices in one statement, and find what each message's own read finds:
    /// update tokens, an activity ended on the phone, a dead token, the page's limit, an activity without devices.
    @Test(arguments: Engine.allCases) func aClaimsPagesReadTogetherAreEachActivitysOwn(_ engine: Engine) throws {
        let f = try Fixture(engine)
        var activities: [Int64] = []
        for order in ["ORDER_A", "ORDER_B"] {
            try f.db.messages.acceptStarts([f.message("S-\(order)", .start, order)], in: shop, at: now, validateOnly: false)
            let job = try #require(try f.claim())
            try f.deliver(job)
            activities.append(job.activity)
        }
        try f.db.devices.setActivityToken("a1", activityID: "ORDER_A", hwid: "h1", in: shop, at: now)
        try f.db.devices.setActivityToken(nil, activityID: "ORDER_A", hwid: "h2", in: shop, at: now)
        try f.db.devices.setActivityToken("b3", activityID: "ORDER_B", hwid: "h3", in: shop, at: now)
        try f.db.database.write { (c) throws(StoreError) in
            try c.run("UPDATE activity_devices SET state = \(ActivityDeviceState.tokenDead.sql) WHERE activity = ? AND device = (SELECT id FROM devices WHERE hwid = 'h3')",
                      [.int(activities[0])])
        }
        for limit in [2, 10] {
            let together = try f.db.messages.updateTargets(activities: activities + [999_999], limit: limit)
            for activity in activities {
                let alone = try f.db.messages.updateTargets(activity: activity, afterID: 0, limit: limit)
                #expect(together[activity] == alone)
                #expect(alone.count == min(limit, 3))
            }
            #expect(together[999_999] == [])
        }
        let a = try f.db.messages.updateTargets(activities: activities, limit: 10)[activities[0]] ?? []
        #expect(a.map(\.updateToken) == ["a1", nil, nil] && a.map(\.endedOnDevice) == [false, true, false] && a.map(\.tokenDead) == [false, false, true])
    }

    /// A claim's pages of devices (PostgreSQL, one statement for its activities) are read through the keys at any size,
    /// also in the plan PostgreSQL keeps for the prepared statement, which knows nothing of the list: that plan once
    /// hashed every device and every activity's devices to join the dozen a claim needed.
    @Test func aClaimsPagesAreReadByKeyInThePlanPostgreSQLKeeps() throws {
        let db = try Engine.postgresql.open()
        try db.applications().createApplication(Application(code: shop, name: "x", bundleID: "com.example.x", createdAt: now), tokens: [], apnsKey: nil)
        let plan = try db.database.write { (c) throws(StoreError) -> [String] in
            try c.run("""
                INSERT INTO devices (application, hwid, push_token, updated_at) SELECT ?, 'h' || n, 'token' || n, 0 FROM generate_series(1, 20000) n
                """, [.text(shop.rawValue)])
            try c.run("""
                INSERT INTO activities (application, activity_id, state, updated_at)
                SELECT ?, 'order-' || n, \(ActivityState.active.sql), 0 FROM generate_series(1, 20000) n
                """, [.text(shop.rawValue)])
            try c.run("""
                INSERT INTO activity_devices (activity, device, state) SELECT a.id, d.id, \(ActivityDeviceState.active.sql)
                FROM activities a JOIN devices d ON d.hwid = 'h' || substr(a.activity_id, 7)
                """, [])
            try c.execute("ANALYZE devices; ANALYZE activities; ANALYZE activity_devices; SET LOCAL plan_cache_mode = force_generic_plan")
            return try c.query("EXPLAIN " + SQLMessageStore.updateTargetPages, [.text("[1, 2, 3]"), .int(64)]).compactMap { $0["QUERY PLAN"].text }
        }
        let text = plan.joined(separator: "\n")
        #expect(text.contains("Index Scan using activity_devices_pkey") && text.contains("Index Scan using devices_pkey"), "\(text)")
        #expect(!text.contains("Seq Scan") && !text.contains("Hash"), "\(text)")
    }

    /// Issue 43: a message's job is a row of the queue exactly while the message is unfinished (accepted, claimed,
    /// released between batches), and leaves it when it is sent, superseded or cancelled.
    @Test(arguments: Engine.allCases) func theQueueHoldsExactlyTheUnfinishedMessages(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let queue = { () throws -> [String: Bool] in
            try f.db.database.withConnection { (c) throws(StoreError) in
                var jobs: [String: Bool] = [:]
                for row in try c.query("SELECT m.code, q.lease IS NOT NULL AS claimed FROM message_queue q JOIN messages m ON m.id = q.message") {
                    jobs[row["code"].text ?? ""] = row["claimed"].bool
                }
                // But for an activity's waiting update, not queued yet (`queueWaitingUpdates`).
                let unfinished = try c.query("""
                    SELECT COUNT(*) AS n FROM messages m WHERE state IN ('pending', 'sending')
                    AND NOT EXISTS (SELECT 1 FROM activities a WHERE a.waiting_update = m.id)
                    """)[0]["n"].int
                #expect(Int(unfinished ?? -1) == jobs.count, "one job per unfinished message: \(jobs)")
                return jobs
            }
        }
        try f.db.messages.acceptStarts([f.message("ST", .start, "ORDER_Q"), f.message("LATER", .start, "ORDER_R", due: now.addingTimeInterval(60))],
                                       in: shop, at: now, validateOnly: false)
        #expect(try queue() == ["ST": false, "LATER": false])
        let start = try #require(try f.claim())
        #expect(try queue() == ["ST": true, "LATER": false], "the claim is the job's")
        try f.db.messages.release(start)
        #expect(try queue() == ["ST": false, "LATER": false], "released, it waits again")
        try f.deliver(try #require(try f.claim()))
        #expect(try queue() == ["LATER": false], "sent, it left")
        try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_Q")], in: shop, at: now, validateOnly: false)
        try f.db.messages.acceptUpdates([f.message("U2", .update, "ORDER_Q")], in: shop, at: now, validateOnly: false)
        // SQLite: U2 waits as its activity's waiting update until a claim queues it.
        let u2: [String: Bool] = engine == .sqlite ? [:] : ["U2": false]
        #expect(try queue() == u2.merging(["LATER": false]) { $1 }, "superseded before it was sent, it left")
        #expect(try f.db.messages.cancelMessage(code: "LATER", in: shop, at: now) == .cancelled)
        #expect(try queue() == u2, "cancelled, it left")
        let small = try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: 64, excluding: [], lease: lease)
        #expect(small.map(\.code) == ["U2"])
        var sent = BatchResult(cursor: 3)
        sent.records = (1...3).map { DeliveryRecord(device: $0, pushType: .liveActivity, status: 200, reason: nil, apnsID: "u2-\($0)", attempts: 1) }
        try f.db.messages.recordJobs([JobOutcome(job: small[0], result: sent, finished: true)], at: now)
        #expect(try queue().isEmpty, "recorded as sent, it left")
        #expect(try f.db.messages.messageDetails(code: "U2", in: shop)?.sent == 3)
    }

    /// The console's change events watch the messages open when last seen, and hear of their finish however old they are.
    @Test(arguments: Engine.allCases) func theConsoleIsToldWhenAWatchedMessageFinishes(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let console = SQLConsoleStore(database: f.db.database)
        try f.db.messages.acceptStarts([f.message("OPEN", .start, "ORDER_O")], in: shop, at: now, validateOnly: false)
        let id = try console.lastMessageID()
        let first = try console.consoleChanges(afterMessage: id, open: nil)
        #expect(first.created.isEmpty && first.finished.isEmpty && first.open == [id], "where things stand: open now")
        #expect(try console.consoleChanges(afterMessage: id, open: [id]).finished.isEmpty)
        try f.deliver(try #require(try f.claim()))
        let after = try console.consoleChanges(afterMessage: id, open: [id])
        #expect(after.finished.map(\.id) == [id] && after.open.isEmpty)
    }

    /// Issue 43: every index of `messages` is keyed on columns a message never changes, so its claim and its finish are
    /// written in place (PostgreSQL's HOT updates: no index gains an entry); the queue's indexes carry what changes.
    @Test(arguments: Engine.allCases) func messagesAreIndexedOnlyOnWhatNeverChanges(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let indexes = try f.db.database.withConnection { (c) throws(StoreError) in
            try c.query(engine == .sqlite ? "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL"
                            : "SELECT indexdef AS sql FROM pg_indexes WHERE tablename = 'messages' AND schemaname = current_schema()")
                .compactMap { $0["sql"].text }
        }
        #expect(indexes.count >= 3, "\(indexes)")
        for index in indexes {
            for changing in ["state", "claimed", "lease", "finished_at", "cursor", "superseded_by", "due_at"] {
                #expect(!index.contains(changing), "\(index) is keyed on \(changing), which a claim or a finish changes")
            }
        }
    }

    /// A newer update tells an update being sent that it was taken over (its fan-out stops at its next batch);
    /// an update already sent is left as it is.
    @Test(arguments: Engine.allCases) func anUpdateBeingSentLearnsThatANewerOneTookOver(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("ST", .start, "ORDER_S")], in: shop, at: now, validateOnly: false)
        try f.deliver(try #require(try f.claim()))
        try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_S")], in: shop, at: now, validateOnly: false)
        let sending = try #require(try f.claim())
        #expect(sending.code == "U1")
        try f.db.messages.acceptUpdates([f.message("U2", .update, "ORDER_S")], in: shop, at: now, validateOnly: false)
        #expect(try f.db.messages.supersededBy(sending) != nil)
        #expect(try f.db.messages.messageDetails(code: "U1", in: shop)?.supersededBy == "U2")
        try f.db.messages.finish(sending, at: now)
        let next = try #require(try f.claim())
        #expect(next.code == "U2")
        try f.db.messages.finish(next, at: now)
        try f.db.messages.acceptUpdates([f.message("U3", .update, "ORDER_S")], in: shop, at: now, validateOnly: false)
        #expect(try f.db.messages.messageDetails(code: "U2", in: shop)?.supersededBy == nil, "a sent update is not superseded")
        #expect(try f.claim()?.code == "U3")
    }

    /// A11, without a delivery service (so no worker can release it first): an update held until a time that
    /// has come is queued before a newer update of its activity, which then supersedes it, so the activity's
    /// state is never overtaken by an older one.
    @Test(arguments: Engine.allCases) func aHeldUpdateThatFellDueIsQueuedBeforeANewerOne(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("ST", .start, "ORDER_H")], in: shop, at: now, validateOnly: false)
        try f.deliver(try #require(try f.claim()))
        try f.db.messages.acceptUpdates([f.message("HELD", .update, "ORDER_H", due: now.addingTimeInterval(300), step: 2)], in: shop, at: now,
                                        validateOnly: false)
        #expect(try f.db.messages.messageDetails(code: "HELD", in: shop)?.state == .pending, "held, not queued")
        #expect(try f.db.messages.activity("ORDER_H", in: shop)?.contentState?["step"] == .int(1), "a held update changes nothing yet")

        let later = now.addingTimeInterval(301)
        try f.db.messages.acceptUpdates([f.message("NEWER", .update, "ORDER_H", due: later, step: 3)], in: shop, pacing: .standard, at: later,
                                        validateOnly: false)
        #expect(try f.db.messages.messageDetails(code: "HELD", in: shop)?.supersededBy == "NEWER", "queued first, then superseded")
        #expect(try f.db.messages.activity("ORDER_H", in: shop)?.contentState?["step"] == .int(3))
        #expect(try f.db.messages.releaseScheduledUpdates(at: .distantFuture, limit: 10, pacing: .off) == 0, "nothing left held")
        let job = try #require(try f.claim(at: later))
        #expect(job.code == "NEWER", "the newer one takes the held one's turn, now")
    }

    /// Issue 18: small messages are claimed many at a time, yet one activity's messages still go one after another.
    @Test(arguments: Engine.allCases) func smallJobsAreClaimedTogetherOnePerActivityInOrder(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("SA", .start, "ORDER_A"), f.message("SB", .start, "ORDER_B")], in: shop, at: now, validateOnly: false)
        try f.deliver(try #require(try f.claim()))
        try f.deliver(try #require(try f.claim()))
        func claimSmall(devicesAtMost: Int = 3) throws -> [String] {
            try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: devicesAtMost, excluding: [], lease: lease).map(\.code)
        }
        try f.db.messages.acceptUpdates([f.message("A1", .update, "ORDER_A"), f.message("B1", .update, "ORDER_B")], in: shop, at: now, validateOnly: false)
        #expect(try claimSmall(devicesAtMost: 2) == [], "three devices are not a small job when small is two")
        let first = try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: 3, excluding: [], lease: lease)
        #expect(first.map(\.code) == ["A1", "B1"] && first.map(\.activityID) == ["ORDER_A", "ORDER_B"])
        #expect(try claimSmall() == [], "claimed jobs are not claimed twice")

        // A newer update of A while A1 is on the wire waits for it: never sent before it, never beside it.
        try f.db.messages.acceptUpdates([f.message("A2", .update, "ORDER_A")], in: shop, at: now, validateOnly: false)
        #expect(try claimSmall() == [])
        var sent = BatchResult(cursor: 3)
        sent.records = (1...3).map { DeliveryRecord(device: Int64($0), pushType: .liveActivity, status: 200, reason: nil, apnsID: "a1-\($0)", attempts: 1) }
        let a1 = try #require(first.first { $0.code == "A1" }), b1 = try #require(first.first { $0.code == "B1" })
        // B1 is given back unfinished (as when its devices outgrew a page): it resumes after its cursor.
        try f.db.messages.recordJobs([JobOutcome(job: a1, result: sent, finished: true),
                                      JobOutcome(job: b1, result: BatchResult(cursor: 2), finished: false)], at: now)
        #expect(try f.db.messages.messageDetails(code: "A1", in: shop)?.state == .done)
        #expect(try f.db.messages.messageDetails(code: "A1", in: shop)?.sent == 3)
        let second = try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: 3, excluding: [], lease: lease)
        #expect(second.map(\.code) == ["A2", "B1"] || second.map(\.code) == ["B1", "A2"], "\(second.map(\.code))")
        #expect(second.first { $0.code == "B1" }?.cursor == 2)
        #expect(try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: 3, excluding: [shop], lease: lease).isEmpty)
    }

    /// Issue 18, point 4: a start to a few named devices (the per-order pattern) is a small message too; a
    /// start to a filter is not (it may be a fan-out).
    @Test(arguments: Engine.allCases) func aStartToNamedDevicesIsASmallJobAndActivatesItsActivity(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let later = now.addingTimeInterval(60)
        let filter = try FilterDefinition.parse(name: "all", join: .and, conditions: [["Language", "EQ", "en"]], tagTypes: [:])
        try f.db.messages.acceptStarts([f.message("NAMED", .start, "ORDER_N", due: later, target: .devices(["h1", "h2"])),
                                        f.message("WIDE", .start, "ORDER_W", due: later, target: .filter(filter))],
                                       in: shop, at: now, validateOnly: false)
        #expect(try f.db.messages.activity("ORDER_N", in: shop)?.state == .scheduled)
        let jobs = try f.db.messages.claimSmallJobs(at: later, limit: 10, devicesAtMost: 64, excluding: [], lease: lease)
        #expect(jobs.map(\.code) == ["NAMED"])
        #expect(jobs.first?.target == .devices(["h1", "h2"]) && jobs.first?.event == .start)
        #expect(try f.db.messages.activity("ORDER_N", in: shop)?.state == .active, "active from its claim, as on the job path")
        #expect(try f.db.messages.claimNextJob(at: later, excluding: [], shardsExcluding: [], sharding: ShardPolicy(), leavingSmall: 64, lease: lease)?.code == "WIDE")
    }

    @Test(arguments: Engine.allCases) func aCrashedRunsClaimsAreReleased(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("C1", .start, "ORDER_C")], in: shop, at: now, validateOnly: false)
        let job = try #require(try f.claim())
        var batch = BatchResult(cursor: 1)
        batch.records = [DeliveryRecord(device: 1, pushType: .liveActivity, status: 200, reason: nil, apnsID: "a", attempts: 1)]
        try f.db.messages.recordBatch(batch, of: job, at: now)
        #expect(try f.claim() == nil)
        // A new run of the only server on an SQLite file, or of this node id on PostgreSQL, frees what the last one held.
        _ = try SQLClusterStore(database: f.db.database).join(NodeInfo(id: lease.owner, host: "h", pid: 2, version: "t"), at: now)
        let resumed = try #require(try f.claim())
        #expect(resumed.id == job.id && resumed.cursor == 1, "resumed after its last recorded batch")
        let queue = try f.db.messages.queueStatistics(at: now)
        #expect(queue.jobsDue == 1 && queue.jobsScheduled == 0)
    }

    /// Issue 10: a page is read, sent and then recorded; a phone's token report may land before or after that
    /// record. Either order ends the same: an update the page skipped ("no update token yet") is caught up on the
    /// reported token (a catch-up wins its delivery row over the page's older news), and a start whose answer
    /// was lost is confirmed by the report, at once or when its wait is due (the claim reads that its device
    /// runs the activity; `DeliveryDecisions.verdict` settles it, mirrored here).
    @Test(arguments: Engine.allCases, [true, false])
    func aPagesRecordAndATokenReportEndTheSameInEitherOrder(_ engine: Engine, recordFirst: Bool) throws {
        let f = try Fixture(engine)
        try f.db.messages.acceptStarts([f.message("S1", .start, "ORDER_U", target: .devices(["h1"]))], in: shop, at: now, validateOnly: false)
        try f.deliver(try #require(try f.claim()))
        _ = try f.db.messages.acceptUpdates([f.message("U1", .update, "ORDER_U", step: 2)], in: shop, budget: .standard, pacing: .off,
                                            at: now, validateOnly: false)
        let update = try #require(try f.claim())
        var skipped = BatchResult(cursor: 1)
        skipped.records = [DeliveryRecord(device: 1, pushType: nil, status: 0, reason: "no update token yet", apnsID: nil, attempts: 0)]

        try f.db.messages.acceptStarts([f.message("S2", .start, "ORDER_S", target: .devices(["h2"]))], in: shop, at: now, validateOnly: false)
        let start = try #require(try f.claim())
        let unanswered = Fixture.unansweredStart(device: 2)

        func record() throws {
            try f.db.messages.recordBatch(skipped, of: update, at: now)
            try f.db.messages.finish(update, at: now)
            try f.db.messages.recordBatch(unanswered, of: start, at: now)
            try f.db.messages.finish(start, at: now)
        }
        func report() throws {
            try f.db.devices.setActivityToken(token(101), activityID: "ORDER_U", hwid: "h1", in: shop, at: now)
            try f.db.devices.setActivityToken(token(102), activityID: "ORDER_S", hwid: "h2", in: shop, at: now)
        }
        if recordFirst { try record(); try report() } else { try report(); try record() }

        let caughtUp = try #require(try f.db.messages.messageDetails(code: "U1", in: shop))
        #expect(caughtUp.caughtUp == 1 && caughtUp.pending[.retrying] == 1, "the update goes to h1's reported token: \(caughtUp)")
        let due = try f.db.messages.claimDueDeliveries(at: now.addingTimeInterval(61), limit: 10, excluding: [], lease: lease) { due, _ in
            if due.event == .start {
                #expect(due.tokenReportedSince, "the start's wait ends with the token it waited for")
                return .settle(.sent, reason: "confirmed: the device reported its update token")
            }
            return .send
        }
        #expect(due.map(\.code) == ["U1"] && due.first?.token == token(101) && due.first?.catchUp == true)
        let confirmed = try #require(try f.db.messages.messageDetails(code: "S2", in: shop))
        #expect(confirmed.sent == 1 && confirmed.pending[.unconfirmed] == nil, "\(confirmed)")
    }

    /// A start whose answer was lost is settled when its wait is due, its device having reported its token. The phone
    /// may report again at that moment: the report holds the device's row of the activity, then confirms the start's
    /// delivery row, which the claim has locked. The claim must not wait for that row (it has it already), or each
    /// waits for the other. PostgreSQL only: there claims do not take the writers' lock; SQLite's never overlap.
    @Test func aDueStartConfirmedByItsDeviceDoesNotWaitForTheDevicesNextReport() throws {
        let f = try Fixture(.postgresql)
        try f.db.messages.acceptStarts([f.message("S2", .start, "ORDER_S", target: .devices(["h2"]))], in: shop, at: now, validateOnly: false)
        let start = try #require(try f.claim())
        try f.db.devices.setActivityToken(token(102), activityID: "ORDER_S", hwid: "h2", in: shop, at: now)
        let unanswered = Fixture.unansweredStart(device: 2)
        try f.db.messages.recordBatch(unanswered, of: start, at: now)
        try f.db.messages.finish(start, at: now)

        let settled = Mutex<Bool?>(nil)
        let claim = Thread {
            let due = try? f.db.messages.claimDueDeliveries(at: now.addingTimeInterval(61), limit: 10, excluding: [], lease: lease) { due, _ in
                due.tokenReportedSince ? .settle(.sent, reason: "confirmed: the device reported its update token") : .send
            }
            settled.withLock { $0 = due?.isEmpty }
        }
        // The report, as `setActivityToken` writes it: the device's row of the activity, then the start's delivery.
        try f.db.database.write(rethrowing: { c in
            try c.run("UPDATE activity_devices SET state = 'active' WHERE device = 2")
            claim.start()
            // Under the 5 s after which the server ends a session idle in its transaction.
            waitUntil(seconds: 4) { settled.withLock { $0 } != nil }
            #expect(settled.withLock { $0 } == true, "the claim settled the start while the report held the device's row")
            try c.run("UPDATE deliveries SET state = 'sent', reason = 'confirmed' WHERE device = 2 AND state IN ('unconfirmed', 'retrying')")
        })
        waitUntil(seconds: 10) { claim.isFinished }
        let details = try #require(try f.db.messages.messageDetails(code: "S2", in: shop))
        #expect(details.sent == 1 && details.pending.isEmpty, "\(details)")
    }

    /// A claim of a scheduled start makes its activity active, so it waits for that row if a write holds it; the
    /// write may be waiting for a message the claim has locked (a held update released into that activity, an
    /// update of another activity in the same group). PostgreSQL only: its claims give way after a short wait
    /// (`.busy`) rather than deadlock with the writers' lock held; SQLite's transactions never overlap.
    @Test func aClaimGivesWayToAWriteHoldingItsActivity() throws {
        let f = try Fixture(.postgresql)
        let later = now.addingTimeInterval(60)
        try f.db.messages.acceptStarts([f.message("L1", .start, "ORDER_L", due: later, target: .devices(["h1"]))], in: shop, at: now, validateOnly: false)
        let outcome = Mutex<Result<[String], StoreError>?>(nil)
        let claim = Thread {
            do throws(StoreError) {
                let jobs = try f.db.messages.claimSmallJobs(at: later, limit: 10, devicesAtMost: 64, excluding: [], lease: lease)
                outcome.withLock { $0 = .success(jobs.map(\.code)) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        try f.db.database.write(rethrowing: { c in
            _ = try c.query("SELECT id FROM activities WHERE activity_id = 'ORDER_L' FOR UPDATE", [])
            claim.start()
            // Under the 5 s after which the server ends a session idle in its transaction.
            waitUntil(seconds: 4) { outcome.withLock { $0 } != nil }
            guard case .failure(let error)? = outcome.withLock({ $0 }) else {
                Issue.record("the claim did not give way to the write holding its activity: \(String(describing: outcome.withLock { $0 }))")
                return
            }
            #expect(error.code == .busy)
        })
        waitUntil(seconds: 10) { claim.isFinished }
        let jobs = try f.db.messages.claimSmallJobs(at: later, limit: 10, devicesAtMost: 64, excluding: [], lease: lease)
        #expect(jobs.map(\.code) == ["L1"], "claimed once the write is done, nothing of the first attempt kept")
        #expect(try f.db.messages.activity("ORDER_L", in: shop)?.state == .active)
    }

    /// A claim's lock on a message keeps other claims off it (they skip it) but not a write that names it: a delivery
    /// row's foreign-key check (a catch-up, a page's record) takes a key-share lock, which FOR UPDATE refused, so that
    /// write waited for the claim's commit while holding the writers' lock. PostgreSQL only: SQLite claims no rows.
    @Test func aClaimedMessageKeepsOtherClaimsOffButNotAWriteThatNamesIt() throws {
        let f = try Fixture(.postgresql)
        try f.db.messages.acceptStarts([f.message("K1", .start, "ORDER_K")], in: shop, at: now, validateOnly: false)
        let (message, device) = try f.db.database.withConnection { (c) throws(StoreError) in
            (try c.query("SELECT id FROM messages WHERE code = 'K1'")[0]["id"].int ?? 0, try c.query("SELECT MIN(id) AS id FROM devices")[0]["id"].int ?? 0)
        }
        let lock = "SELECT q.message FROM message_queue q WHERE q.message = \(message) \(f.db.messages.claimLock)"
        let claim = RowHolder(try #require(f.db.database as? PostgresDatabase), lock: lock, seconds: 3)
        let other = try f.db.database.inClaimTransaction { (c) throws(StoreError) in try c.query(lock, []) }
        #expect(other.isEmpty, "another claim skips the message")
        try f.db.database.write { (c) throws(StoreError) in
            try c.run("INSERT INTO deliveries (message, device, status, attempts, at, state) VALUES (?, ?, 0, 0, 0, 'retrying')",
                      [.int(message), .int(device)])
        }
        claim.signal()
        #expect(claim.signalledWhileHeld, "the write naming the message went through while the claim held it")
    }

    @Test(arguments: Engine.allCases) func schemasAreVersionedAndSimulatedDevicesKept(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let schemas = f.db.schemas
        #expect(try schemas.saveSchema(["eta": "integer"], attributes: [:], description: "v1", attributesType: "OrderAttributes", in: shop, at: now) == 1)
        #expect(try schemas.saveSchema(["eta": "string"], attributes: [:], description: nil, attributesType: "OrderAttributes", in: shop, at: now) == 2)
        #expect(try schemas.currentSchema("OrderAttributes", in: shop)?.version == 2)
        #expect(try schemas.schema("OrderAttributes", version: 1, in: shop)?.description == "v1")
        #expect(try schemas.schemas("OrderAttributes", in: shop).map(\.version) == [1, 2])
        #expect(try schemas.deleteSchema("OrderAttributes", in: shop, at: now))
        #expect(try schemas.currentSchema("OrderAttributes", in: shop) == nil && schemas.schemas(nil, in: shop).isEmpty)

        let simulated = f.db.simulated
        try simulated.saveSimulatedDevice(application: shop, hwid: "phone-b", state: #"{"v":1}"#, tokens: ["b1"])
        try simulated.saveSimulatedDevice(application: shop, hwid: "phone-a", state: #"{"v":2}"#, tokens: ["a2"])
        try simulated.saveSimulatedDevice(application: shop, hwid: "phone-b", state: #"{"v":3}"#, tokens: ["b3"])
        #expect(try simulated.simulatedDevices().map(\.hwid) == ["phone-a", "phone-b"])
        #expect(try simulated.simulatedDevice(application: shop, hwid: "phone-b") == #"{"v":3}"#)
    }
}

/// `islet db migrate-to` copies every table of the schema but a node's own state: a table added later
/// without being listed would be lost silently in a move to PostgreSQL.
@Suite("Database copy covers the schema")
struct DatabaseCopyCoverageTests {
    @Test func everyTableIsCopiedOrDeliberatelyLeftBehind() throws {
        let db = try Engine.sqlite.open()
        let tables = try db.database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").compactMap { $0["name"].text }
        }
        #expect(tables.count > 15, "the schema was read")
        #expect(Set(tables) == Set(DatabaseCopy.tables.map(\.name)).union(DatabaseCopy.notCopied))
    }

    /// Issue 18: the claims' "oldest unfinished message of its activity" and a session's start are found through
    /// partial indexes, not by reading every message the activity ever had (SQLite's plans; PostgreSQL's depend
    /// on its statistics).
    @Test func claimsAndSessionStartsDoNotReadAnActivitysHistory() throws {
        let db = try Engine.sqlite.open()
        let plan = { (sql: String, parameters: [SQLValue]) throws -> [String] in
            try db.database.withConnection { (c) throws(StoreError) in
                try c.query("EXPLAIN QUERY PLAN " + sql, parameters).compactMap { $0["detail"].text }
            }
        }
        let claim = try plan("""
            SELECT m.id FROM \(SQLMessageStore.queueWithMessages) WHERE \(SQLMessageStore.claimable) ORDER BY q.due_at, q.message LIMIT 10
            """, [.int(0)])
        #expect(claim.contains { $0.contains("USING COVERING INDEX message_queue_by_activity (activity=? AND message<?)") }, "\(claim)")
        #expect(claim.contains { $0.hasPrefix("SEARCH q USING INDEX message_queue_due (due_at<?)") }, "due jobs in due order: \(claim)")
        let start = try plan("SELECT \(SQLMessageStore.currentStart(of: "?")) AS start", [.int(1)])
        #expect(start.contains { $0.contains("USING INDEX messages_starts (activity=?)") }, "\(start)")
        // An update reads its session's latest update by the activity's key (sent with the activity's own read).
        let read = db.messages.latestUpdate(of: "(SELECT k.id FROM activities k WHERE k.application = ?1 AND k.activity_id = ?2)",
                                            [.text("APPLI-00001"), .text("order-1")])
        let latest = try plan(read.sql, read.parameters)
        #expect(latest.contains { $0.contains("USING INDEX messages_starts (activity=?)") }, "\(latest)")
        #expect(latest.contains { $0.hasPrefix("SEARCH messages USING INDEX messages_by_activity (activity=? AND id>?)") }, "\(latest)")
        #expect(!latest.contains { $0.hasPrefix("SCAN") }, "\(latest)")
    }

    /// A claim's end (after every record) and the rescue's check each second look for rows claimed under a lease:
    /// through partial indexes of claimed rows, not by reading every shard of every fan-out kept.
    @Test func leasesEndAndRescuesReadOnlyClaimedRows() throws {
        let db = try Engine.sqlite.open()
        let plan = { (sql: String) throws -> [String] in
            try db.database.withConnection { (c) throws(StoreError) in
                try c.query("EXPLAIN QUERY PLAN " + sql, [.int(1)]).compactMap { $0["detail"].text }
            }
        }
        let end = try plan(SQLMessageStore.endLeaseStatement)
        #expect(end.contains { $0.contains("USING COVERING INDEX message_queue_leased (lease=?)") }, "\(end)")
        #expect(end.contains { $0.contains("USING INDEX message_shards_leased (lease=?)") }, "\(end)")
        #expect(end.contains { $0.contains("USING INDEX deliveries_sending (lease=?)") }, "\(end)")
        #expect(!end.contains { $0.hasPrefix("SCAN") }, "\(end)")
        let rescue = try plan("SELECT " + SQLClusterStore.unleased("message_shards", claimed: "claimed = 1") + " AS needed WHERE ?1 = 1")
        #expect(rescue.contains { $0.hasSuffix("SCAN message_shards USING INDEX message_shards_leased") }, "\(rescue)")
    }

    /// The pruner's look for old broadcasts reads them by id from the oldest and stops at the first one young enough
    /// to keep, rather than reading every broadcast kept at each batch.
    @Test func pruningBroadcastsReadsOnlyTheOldOnes() throws {
        let db = try Engine.sqlite.open()
        let plan = try db.database.withConnection { (c) throws(StoreError) in
            try c.query("EXPLAIN QUERY PLAN " + SQLMessageStore.pruneBroadcasts, [.int(1), .int(500)]).compactMap { $0["detail"].text }
        }
        #expect(plan.contains { $0.hasSuffix("SEARCH b USING INTEGER PRIMARY KEY (rowid<?)") }, "\(plan)")
    }
}
