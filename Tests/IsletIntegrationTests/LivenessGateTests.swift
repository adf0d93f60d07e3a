import Foundation
import Testing
import IsletCore
import IsletPostgres
import IsletSQL
import IsletStore

/// Issue 14: while a node's liveness session is down, the other nodes count it gone and rescue its leases, so it
/// claims nothing: a claim then could be sent by two nodes. Its session back, it delivers what waited.
@Suite("A node without its liveness session")
struct LivenessGateTests {
    @Test(.enabled(if: IntegrationEngine.isPostgreSQL, "the liveness session is PostgreSQL's"))
    func aNodeWhoseLivenessSessionIsDownClaimsNothingUntilItIsBack() throws {
        let world = try LiveActivityWorld()
        let delivery = try #require(world.running.server.delivery)
        let database = try PostgresDatabase(url: world.running.database, migrate: false)
        // The node's session is ended (as a cut connection would), and a simulator node's session takes the delivery
        // lock before the node's takes it again: the node cannot reopen its session. It reopens at most once a second,
        // so a second try finds the lock free if the first lost the race.
        var blocker: PostgresNodeSession?
        for _ in 0..<20 where blocker == nil {
            try database.withConnection { (c) throws(StoreError) in
                _ = try c.query("""
                    SELECT pg_terminate_backend(pid) AS ended FROM pg_locks
                    WHERE locktype = 'advisory' AND objsubid = 2 AND objid = 0 AND classid = CAST(\(SQLDialect.nodeLockClass) AS oid)
                      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    """)
            }
            blocker = try? PostgresNodeSession(url: world.running.database, number: 1_000_000, sole: true)
        }
        let held = try #require(blocker, "a simulator node's session took the delivery lock")
        defer { held.close() }
        #expect(eventually { !delivery.nodeIsAlive }, "the node's liveness session is down")

        // Accepted meanwhile: the workers look, but make no claim (counted as withheld), and nothing is sent.
        let code = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]]))
        let withheld = delivery.metrics.clusterSnapshot().withheldLooks
        delivery.kick()
        #expect(eventually { delivery.metrics.clusterSnapshot().withheldLooks >= withheld + 3 }, "the workers looked, and held back")
        let application = try #require(ApplicationCode(world.code))
        #expect(try world.running.server.messages.messageDetails(code: code[0], in: application)?.state == .pending)
        #expect(world.pushes(to: LiveActivityWorld.hex("51", 80)).isEmpty)

        // The other node gone, the session reopens (within a second) and the start goes out.
        held.close()
        #expect(eventually { delivery.nodeIsAlive }, "the liveness session is back")
        #expect(try world.waitUntilSent(code).first?.sent == 1)
        #expect(world.pushes(to: LiveActivityWorld.hex("51", 80)).count == 1)
    }
}
