import Foundation
import Synchronization
import Testing
import IsletAPNs
import IsletCore
import IsletStore

/// Issue 14: APNs clients of several nodes share one provider token per key through the database, so Apple
/// sees one token, not one per node. The database is stood in for by the store's contract, in memory.
@Suite("Provider tokens shared between nodes")
struct SharedProviderTokenTests {
    /// `ClusterStore`'s provider-token half, as the SQL store keeps it: under one lock, the first asker signs.
    final class TokenTable: ClusterStore {
        let rows = Mutex<[String: (token: String, issuedAt: Date, expired: Bool)]>([:])
        let signed = Mutex(0)

        func providerToken(named name: String, issuedAfter: Date, at date: Date, sign: (Date) -> String?) throws(StoreError) -> (token: String, issuedAt: Date)? {
            rows.withLock { rows in
                if let row = rows[name], !row.expired, row.issuedAt > issuedAfter { return (row.token, row.issuedAt) }
                guard let token = sign(date) else { return nil }
                signed.withLock { $0 += 1 }
                rows[name] = (token, date, false)
                return (token, date)
            }
        }

        func expireProviderToken(named name: String, token: String, renewableBefore: Date) throws(StoreError) -> Bool {
            rows.withLock { rows in
                guard let row = rows[name], row.token == token else { return true }
                guard row.issuedAt < renewableBefore else { return false }
                rows[name]?.expired = true
                return true
            }
        }

        // Not used by the APNs client.
        func register(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int { 1 }
        func join(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int { 1 }
        func renew(_ leases: Set<Int64>, of owner: NodeID, for duration: TimeInterval) throws(StoreError) -> LeaseRenewal { LeaseRenewal(renewed: [], gone: []) }
        func heartbeat(_ node: NodeID, at date: Date) throws(StoreError) {}
        func rescue(at date: Date) throws(StoreError) -> RescueReport { RescueReport() }
        func leave(_ node: NodeID, at date: Date) throws(StoreError) {}
        func nodes(since: Date) throws(StoreError) -> [NodeStatus] { [] }
    }

    @Test func threeNodesSendWithOneTokenAndSignItOnce() throws {
        let files = try TestFiles()
        let fake = try FakeAPNs(files: files, key: try SigningKey(files.signingKey))
        let table = TokenTable()
        var clients: [APNsClient] = []
        for _ in 0..<3 {
            clients.append(try files.client(url: fake.url, now: nil) { (configuration: inout APNsClientConfiguration) in configuration.sharedTokens = table })
        }
        defer { clients.forEach { $0.shutdown() } }
        for (n, client) in clients.enumerated() {
            let statuses = client.send([push(n)]).map { $0.status }
            #expect(statuses == [200])
        }
        let tokens = Set(fake.processed.map { $0.headers["authorization"] ?? "" })
        #expect(fake.processed.count == 3 && tokens.count == 1, "one token for the three nodes: \(tokens.count)")
        #expect(table.signed.withLock { $0 } == 1, "signed once, by the first node that needed it")
        let issued = clients.map { client -> Int in client.diagnostics()?.providerTokensIssued ?? -1 }
        #expect(issued.reduce(0, +) == 1, "counted by the node that signed it: \(issued)")
    }
}
