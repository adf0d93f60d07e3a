import Foundation
import Synchronization
import Testing
import IsletCore
import IsletStore
@testable import IsletDelivery

/// Issue 47: after a failover every node's session ended at once; a node rescues other nodes' work only once it has
/// reached the database for a whole lease, so that the others are back first and record what they sent.
@Suite("Rescues wait a lease after the database was away")
struct RescueGraceTests {
    /// A cluster store that is up or away (every call throws `.io`), and notes when renewals and rescues ran.
    final class Cluster: ClusterStore, @unchecked Sendable {
        struct Calls {
            var away = false
            var renewals: [ContinuousClock.Instant] = []
            var rescues: [ContinuousClock.Instant] = []
        }
        let calls = Mutex(Calls())

        private func reach() throws(StoreError) {
            if calls.withLock({ $0.away }) { throw StoreError(.io, "the database is away") }
        }

        func register(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int { 1 }
        func join(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int { 1 }
        func renew(_ leases: Set<Int64>, of owner: NodeID, for duration: TimeInterval) throws(StoreError) -> LeaseRenewal {
            try reach()
            calls.withLock { $0.renewals.append(.now) }
            return LeaseRenewal(renewed: leases, gone: [])
        }
        func heartbeat(_ node: NodeID, at date: Date) throws(StoreError) { try reach() }
        func rescue(at date: Date) throws(StoreError) -> RescueReport {
            try reach()
            calls.withLock { $0.rescues.append(.now) }
            return RescueReport()
        }
        func leave(_ node: NodeID, at date: Date) throws(StoreError) {}
        func nodes(since: Date) throws(StoreError) -> [NodeStatus] { [] }
        func providerToken(named name: String, issuedAfter: Date, at date: Date, sign: (Date) -> String?) throws(StoreError)
            -> (token: String, issuedAt: Date)? { nil }
        func expireProviderToken(named name: String, token: String, renewableBefore: Date) throws(StoreError) -> Bool { false }
    }

    static func waitFor(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    @Test func aNodeRescuesOnlyOnceItHasReachedTheDatabaseForALease() throws {
        let cluster = Cluster()
        let membership = NodeMembership(cluster: cluster, node: NodeInfo(id: NodeID("grace")!, host: "h", pid: 1, version: "test"),
                                        leaseDuration: .milliseconds(800), session: nil, metrics: DeliveryMetrics(),
                                        logger: Logger(label: "test", minimumLevel: .error), now: { Date() })
        #expect(membership.rescueGrace == .milliseconds(800))
        try membership.join()
        membership.leases.add(1, claimedAt: .now)   // a lease held: every tick renews it, reaching the database
        let started = ContinuousClock.now
        membership.start(wake: {})
        defer { membership.stop(deadline: .now + .seconds(5)) }

        #expect(Self.waitFor(10) { !cluster.calls.withLock { $0.rescues }.isEmpty }, "a node that reaches its database rescues")
        let first = try #require(cluster.calls.withLock { $0.rescues.first })
        #expect(first - started >= membership.rescueGrace, "not within a lease of its start: \(first - started)")

        // The database goes away for a while, then comes back.
        cluster.calls.withLock { $0.away = true }
        Thread.sleep(forTimeInterval: 0.5)
        let back = ContinuousClock.now
        cluster.calls.withLock { $0.away = false }
        #expect(Self.waitFor(10) { cluster.calls.withLock { $0.rescues.contains { $0 > back } } }, "it rescues again once back")
        let calls = cluster.calls.withLock { $0 }
        let reached = try #require(calls.renewals.first { $0 > back }, "its first renewal once back")
        let again = try #require(calls.rescues.first { $0 > back })
        #expect(again - reached >= membership.rescueGrace, "a lease of reaching the database before its first rescue: \(again - reached)")
    }
}
