import Foundation
import Testing
import IsletCore
@testable import IsletSQL
import IsletStore

private let shop = ApplicationCode("SHOPW-00001")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)
private let lease = ClaimLease(owner: NodeID("test-node")!, duration: 60)

/// Issue 43: on SQLite a plain update is accepted as its activity's waiting update (its message and the activity's change,
/// nothing queued), and the next claim queues it. Every expectation here holds on both engines alike: PostgreSQL queues
/// each update at once, and is the reference the waiting updates must agree with.
@Suite("Waiting updates: queued by the claims, with the outcomes of updates queued at once")
struct WaitingUpdatesTests {
    struct Fixture {
        let db: EngineDatabase
        let engine: Engine
        init(_ engine: Engine) throws {
            self.engine = engine
            db = try engine.open()
            try db.applications().createApplication(Application(code: shop, name: "x", bundleID: "com.example.x", createdAt: now),
                                                    tokens: [], apnsKey: nil)
            _ = try db.devices.registerDevice(DeviceRegistration(hwid: "h1", pushToken: String(repeating: "a", count: 64)), tags: [], in: shop, at: now)
            try db.messages.acceptStarts([message("ST", .start)], in: shop, at: now, validateOnly: false)
            let start = try #require(try claim(at: now))
            try db.messages.finish(start, at: now)
        }

        func message(_ code: String, _ event: LiveActivityEvent, step: Int64 = 1, at date: Date = now) -> NewMessage {
            NewMessage(code: code, event: event, activityID: "ORDER_W", target: event == .start ? .devices(["h1"]) : nil,
                       attributesType: event == .start ? "OrderAttributes" : nil, name: nil, contentState: ["step": .int(step)],
                       payload: Array(#"{"aps":{}}"#.utf8), fallbackPayload: nil, priority: 10, dueAt: date)
        }

        @discardableResult
        func update(_ code: String, _ event: LiveActivityEvent = .update, at date: Date, pacing: UpdatePacing = .off) throws -> AcceptedUpdate {
            try #require(try db.messages.acceptUpdates([message(code, event, at: date)], in: shop, pacing: pacing, at: date, validateOnly: false).first)
        }

        func claim(at date: Date) throws -> MessageJob? {
            try db.messages.claimNextJob(at: date, excluding: [], shardsExcluding: [], sharding: ShardPolicy(), leavingSmall: nil, lease: lease)
        }

        func details(_ code: String) throws -> MessageDetails { try #require(try db.messages.messageDetails(code: code, in: shop)) }

        /// The activity's jobs in the queue (SQLite leaves a waiting update out until a claim queues it).
        func jobs() throws -> Int64 {
            try db.database.withConnection { (c) throws(StoreError) in try c.query("SELECT COUNT(*) AS n FROM message_queue")[0]["n"].int ?? -1 }
        }
    }

    @Test(arguments: Engine.allCases) func updatesInARowLeaveTheLatestEachOlderSupersededByTheNextWhenItCame(_ engine: Engine) throws {
        let f = try Fixture(engine)
        for (offset, code) in ["U1", "U2", "U3"].enumerated() { try f.update(code, at: now.addingTimeInterval(Double(offset + 1))) }
        #expect(try f.jobs() == (engine == .sqlite ? 0 : 1), "SQLite: U3 is the activity's waiting update")
        #expect(try f.db.messages.activity("ORDER_W", in: shop)?.updatedAt == now.addingTimeInterval(3), "the activity changed at once")
        let job = try #require(try f.claim(at: now.addingTimeInterval(3)))
        #expect(job.code == "U3")
        #expect(try f.claim(at: now.addingTimeInterval(3)) == nil, "the superseded ones are never claimed")
        for (code, next, at) in [("U1", "U2", 2.0), ("U2", "U3", 3.0)] {
            let details = try f.details(code)
            #expect(details.state == .done && details.supersededBy == next && details.finishedAt == now.addingTimeInterval(at), "\(code): \(details)")
        }
        #expect(try f.details("U3").state == .sending)
    }

    @Test(arguments: Engine.allCases) func aPacedUpdateWaitsForItsTurnAndANewerOneTakesIt(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let pacing = UpdatePacing(interval: 1)
        #expect(try f.update("U1", at: now, pacing: pacing).dueAt == now)
        try f.db.messages.finish(try #require(try f.claim(at: now)), at: now)
        #expect(try f.update("U2", at: now.addingTimeInterval(0.2), pacing: pacing).dueAt == now.addingTimeInterval(1), "its turn (A9)")
        #expect(try f.db.messages.nextDueDate(excluding: [], shardsExcluding: []) == now.addingTimeInterval(1), "delivery wakes at its turn")
        let statistics = try f.db.messages.queueStatistics(at: now.addingTimeInterval(0.5))
        #expect(statistics.jobsDue == 0 && statistics.jobsScheduled == 1, "counted in the backlog, queued or not: \(statistics)")
        #expect(try f.db.messages.queueStatistics(at: now.addingTimeInterval(1)).oldestDueAt == now.addingTimeInterval(1))
        #expect(try f.claim(at: now.addingTimeInterval(0.5)) == nil, "not before its turn")
        #expect(try f.update("U3", at: now.addingTimeInterval(0.6), pacing: pacing).dueAt == now.addingTimeInterval(1), "U2's turn, taken")
        #expect(try f.claim(at: now.addingTimeInterval(0.9)) == nil)
        #expect(try f.claim(at: now.addingTimeInterval(1))?.code == "U3")
        #expect(try f.details("U2").supersededBy == "U3")
        #expect(try f.db.messages.nextDueDate(excluding: [], shardsExcluding: []) == nil, "nothing else waits")
    }

    @Test(arguments: Engine.allCases) func anEndAfterAWaitingUpdateSupersedesIt(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.update("U1", at: now.addingTimeInterval(1))
        try f.update("END", .end, at: now.addingTimeInterval(2))
        #expect(try f.jobs() == 1, "the end is queued at once, the update it superseded is not")
        #expect(try f.claim(at: now.addingTimeInterval(2))?.code == "END")
        #expect(try f.details("U1").supersededBy == "END")
        #expect(try f.db.messages.activity("ORDER_W", in: shop)?.state == .ended)
    }

    @Test(arguments: Engine.allCases) func aHeldUpdateReleasedAfterAWaitingOneSupersedesIt(_ engine: Engine) throws {
        let f = try Fixture(engine)
        // A11: held until now + 5, then it joins the queue as if accepted then.
        try f.db.messages.acceptUpdates([f.message("H1", .update, at: now.addingTimeInterval(5))], in: shop, at: now, validateOnly: false)
        try f.update("U1", at: now.addingTimeInterval(1))
        #expect(try f.db.messages.releaseScheduledUpdates(at: now.addingTimeInterval(5), limit: 10, pacing: .off) == 1)
        #expect(try f.claim(at: now.addingTimeInterval(5))?.code == "H1")
        #expect(try f.details("U1").supersededBy == "H1")
        #expect(try f.claim(at: now.addingTimeInterval(5)) == nil)
    }

    /// PostgreSQL queues each update at once, so its waiting update is made here by hand, to run the queueing's
    /// statements on it too: two updates left as SQLite leaves them, then a claim.
    @Test func theQueueingsStatementsRunOnPostgreSQL() throws {
        let f = try Fixture(.postgresql)
        try f.update("U1", at: now.addingTimeInterval(1))
        try f.update("U2", at: now.addingTimeInterval(2))
        try f.db.database.write { (c) throws(StoreError) in
            try c.run("DELETE FROM message_queue")
            try c.run("""
                UPDATE activities SET waiting_update = (SELECT id FROM messages WHERE code = 'U2'), waiting_due_at = (SELECT due_at FROM messages WHERE code = 'U2')
                """)
        }
        #expect(try f.claim(at: now.addingTimeInterval(2))?.code == "U2")
        let details = try f.details("U1")
        #expect(details.state == .done && details.supersededBy == "U2" && details.finishedAt == now.addingTimeInterval(2), "\(details)")
        #expect(try f.claim(at: now.addingTimeInterval(2)) == nil)
    }

    /// The console's live view tells a finished message by its job leaving the queue: a waiting update is unfinished too.
    @Test(arguments: Engine.allCases) func theConsoleWatchesAWaitingUpdateUntilItIsSent(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let before = try f.db.console.lastMessageID()
        try f.update("U1", at: now.addingTimeInterval(1))
        let accepted = try f.db.console.consoleChanges(afterMessage: before, open: nil)
        #expect(accepted.created.count == 1 && accepted.finished.isEmpty && accepted.open.count == 1, "\(accepted)")
        let u1 = try #require(accepted.created.first?.id)
        #expect(try f.db.console.consoleChanges(afterMessage: u1, open: accepted.open).open == [u1], "still open")
        let job = try #require(try f.claim(at: now.addingTimeInterval(1)))
        try f.db.messages.finish(job, at: now.addingTimeInterval(1))
        let sent = try f.db.console.consoleChanges(afterMessage: u1, open: [u1])
        #expect(sent.finished.map(\.id) == [u1] && sent.open.isEmpty, "\(sent)")
    }

    @Test(arguments: Engine.allCases) func aWaitingUpdateOutlivesTheProcess(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.update("U1", at: now.addingTimeInterval(1))
        let reopened = SQLMessageStore(database: try f.db.reopen())
        let job = try reopened.claimSmallJobs(at: now.addingTimeInterval(1), limit: 10, devicesAtMost: 64, excluding: [], lease: lease)
        #expect(job.map(\.code) == ["U1"], "accepted means on disk, and queued by the next claim")
    }
}
