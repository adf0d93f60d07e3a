import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore
import IsletSQLite

/// Issue 18: updates of small activities (the per-order pattern) are claimed, sent and recorded many at a
/// time, without breaking what one at a time guaranteed: each activity's updates in order, the latest
/// state delivered, and one push's failure confined to its own message.
@Suite("Small messages sent together")
struct SmallMessageBatchTests {
    static let orders = ["ORDER_1", "ORDER_2", "ORDER_3", "ORDER_4"]
    static func token(_ n: Int) -> String { String(repeating: String(format: "%02x", 0xc0 + n), count: 32) }

    /// One worker, four activities started on `first_third`, each with its own update token.
    func world(transport: RecordingTransport) throws -> LiveActivityWorld {
        let world = try LiveActivityWorld(transport: transport, delivery: DeliveryConfiguration(
            workers: 1, batchSize: 3, retry: RetryPolicy(firstDelay: .seconds(1), maximumDelay: .seconds(8)), idlePoll: .milliseconds(50)))
        for (n, order) in Self.orders.enumerated() {
            let code = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]], id: order))]]))
            _ = try world.waitUntilSent(code)
            try world.reportUpdateToken("first_third", activity: order, token: Self.token(n))
        }
        return world
    }

    @Test func updatesOfManyActivitiesGoOutInOneSendAndAFailureStaysWithItsMessage() throws {
        let transport = RecordingTransport { push, _ in
            push.deviceToken == SmallMessageBatchTests.token(2) ? PushOutcome(status: 400, reason: "BadDeviceToken") : .delivered
        }
        let world = try world(transport: transport)
        transport.batchSizes.withLock { $0 = [] }
        // One request, one transaction: the worker finds all four due at once.
        let codes = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": .array(Self.orders.map { .object(updateNotification(id: $0)) })]))
        let details = try world.waitUntilSent(codes)
        #expect(transport.batchSizes.withLock { $0 } == [4], "the four updates went out in one send: \(transport.batchSizes.withLock { $0 })")
        #expect(details.map(\.sent) == [1, 1, 0, 1], "\(details.map(\.sent))")
        #expect(details.map(\.failed) == [0, 0, 1, 0], "BadDeviceToken fails ORDER_3's update only")
    }

    /// A record that cannot be written (here a trigger refuses ORDER_3's update's rows) fails that message
    /// alone: the others of its batch are recorded, done, and never sent twice.
    @Test(.enabled(if: !IntegrationEngine.isPostgreSQL, "an SQLite trigger injects the fault"))
    func aMessageWhoseRecordFailsDoesNotResendTheOthers() throws {
        let transport = RecordingTransport()
        let world = try world(transport: transport)
        let database = try SQLiteDatabase(path: world.running.database)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("""
                CREATE TRIGGER refuse_order_3 BEFORE INSERT ON deliveries
                WHEN NEW.message IN (SELECT m.id FROM messages m JOIN activities a ON a.id = m.activity
                                     WHERE a.activity_id = 'ORDER_3' AND m.event = 'update')
                BEGIN SELECT RAISE(ABORT, 'injected fault'); END
                """)
        }
        let codes = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": .array(Self.orders.map { .object(updateNotification(id: $0)) })]))
        let others = [codes[0], codes[1], codes[3]]
        let details = try world.waitUntilSent(others)
        #expect(details.map(\.sent) == [1, 1, 1])
        for index in [0, 1, 3] {
            #expect(world.pushes(to: Self.token(index)).filter { $0.pushType == .liveActivity }.count == 1, "ORDER_\(index + 1)'s update went once")
        }
        let stuck = try world.running.server.messages.messageDetails(code: codes[2], in: ApplicationCode(world.code)!)
        #expect(stuck?.state != .done, "its record never committed, so it is still owed")
        try database.withConnection { (c) throws(StoreError) in try c.execute("DROP TRIGGER refuse_order_3") }
        _ = try world.waitUntilSent([codes[2]])
    }

    @Test func eachActivitysUpdatesArriveInOrderAndTheLastOneArrives() throws {
        let transport = RecordingTransport()
        let world = try world(transport: transport)
        for n in 1...30 {
            for order in Self.orders {
                _ = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(["content": .string("step \(n)")],
                                                                                                                              activity: ["content-state": ["step": .int(Int64(n))]], id: order))]]))
            }
        }
        for (index, _) in Self.orders.enumerated() {
            let steps = { () -> [Int64] in
                world.pushes(to: Self.token(index)).compactMap {
                    (try? JSONParser.parse($0.payload))?.objectValue?["aps"]?.objectValue?["content-state"]?.objectValue?["step"]?.intValue
                }
            }
            // A9: a burst goes as its latest state once the activity's next turn comes.
            #expect(eventually { world.nextUpdateTurn(); return steps().last == 30 }, "the latest state reaches the phone: \(steps())")
            #expect(steps() == steps().sorted() && Set(steps()).count == steps().count, "in order, none twice: \(steps())")
        }
    }
}
