import Foundation
import Testing
import IsletApp
import IsletCore
@testable import IsletDelivery
import IsletSQLite
import IsletStore
import Synchronization

/// How delivery workers share the looks for work a kick owes (each look is a claim transaction per kind of work).
@Suite("Looks for work", .serialized)
struct WorkerLookTests {
    /// Holds delivery workers inside their look: the clock they read while claiming blocks while the gate is closed.
    /// Other threads (the liveness session, retention) read the time as usual.
    final class LookGate: Sendable {
        private let state = Mutex((closed: false, held: 0))

        var held: Int { state.withLock { $0.held } }
        func close() { state.withLock { $0.closed = true } }
        func open() { state.withLock { $0.closed = false } }

        func now() -> Date {
            guard Thread.current.name?.hasPrefix("islet-deliv-") == true else { return Date() }
            guard state.withLock({ s in
                guard s.closed else { return false }
                s.held += 1
                return true
            }) else { return Date() }
            while state.withLock({ $0.closed }) { Thread.sleep(forTimeInterval: 0.002) }
            state.withLock { $0.held -= 1 }
            return Date()
        }
    }

    /// Three workers asleep; a kick sends one to look, and it is held in its look; two more kicks land meanwhile and
    /// wake the other two. What the two kicks owe is one look after the held one, not one by each woken worker:
    /// 3 looks at start, the held one, one more; none finds work.
    @Test func kicksDuringALookOweOneMoreLookNotOneByEachWorker() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-it-\(UUID().uuidString)")
        defer { IntegrationEngine.remove(directory) }
        let gate = LookGate()
        let configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0),
                                                database: try IntegrationEngine.database(in: directory), apns: .simulator)
        // An hour's idle poll: a worker looks only when kicked.
        let server = try IsletServer(configuration: configuration, logger: .discard, transport: RecordingTransport(),
                                     delivery: DeliveryConfiguration(workers: 3, idlePoll: .seconds(3600)), clock: { gate.now() })
        try server.start()
        defer { server.shutdown() }
        let delivery = try #require(server.delivery)
        func emptyLooks() -> Int { delivery.metrics.clusterSnapshot().emptyLooks }

        // Each worker looks once as it starts, finds nothing, and sleeps.
        #expect(eventually { emptyLooks() == 3 && delivery.workersAsleep == 3 }, "\(emptyLooks()) looks, \(delivery.workersAsleep) asleep")
        gate.close()
        delivery.kick()
        #expect(eventually { gate.held == 1 }, "a kicked worker looks")
        delivery.kick()
        delivery.kick()
        #expect(eventually { delivery.workersAsleep == 0 }, "the other two are woken")
        gate.open()
        #expect(eventually { delivery.workersAsleep == 3 }, "all asleep again")
        // All asleep, nothing owed, an hour to the next poll: no look can follow.
        #expect(emptyLooks() == 5, "the kicks that landed during the held look owe one look, not one by each woken worker")
        #expect(delivery.metrics.clusterSnapshot().claims == 0)
    }

    /// A look that failed may have taken the look a kick owed: the worker makes it again after its pause, owed or not,
    /// so the start accepted before the failure goes out without another kick (here the next poll is an hour away).
    @Test(.enabled(if: !IntegrationEngine.isPostgreSQL, "an SQLite trigger injects the fault"))
    func aLookThatFailedIsMadeAgainWithoutAKick() throws {
        let lines = Mutex<[String]>([])
        let logger = Logger(label: "test", minimumLevel: .error) { line in lines.withLock { $0.append(line) } }
        let world = try LiveActivityWorld(delivery: DeliveryConfiguration(workers: 1, idlePoll: .seconds(3600)), logger: logger)
        let delivery = try #require(world.running.server.delivery)
        #expect(eventually { delivery.workersAsleep == 1 })
        let database = try SQLiteDatabase(path: world.running.database)
        try database.withConnection { (c) throws(StoreError) in
            try c.execute("""
                CREATE TRIGGER refuse_claims BEFORE UPDATE OF state ON messages WHEN NEW.state = 'sending'
                BEGIN SELECT RAISE(ABORT, 'injected fault'); END
                """)
        }
        let code = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]]))
        #expect(eventually { lines.withLock { $0.contains { $0.contains("delivery store failure") } } }, "the claim failed")
        try database.withConnection { (c) throws(StoreError) in try c.execute("DROP TRIGGER refuse_claims") }
        _ = try world.waitUntilSent(code)
    }
}
