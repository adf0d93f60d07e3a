import Foundation
import Synchronization
import Testing
import IsletCore
import IsletPostgres
import IsletSQL
import IsletCrypto
import IsletStore

private let shop = ApplicationCode("CLUST-00001")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)

/// Issue 14: claims are leases; a write of a claim's outcome holds its lease or writes nothing; a rescue frees
/// what expired leases and gone nodes held; nodes asking at once for a provider token make one.
@Suite("Leases, fencing, rescue and shared provider tokens, on both engines")
struct ClusterStoreTests {
    struct Fixture {
        let db: EngineDatabase
        var cluster: SQLClusterStore { SQLClusterStore(database: db.database) }

        init(_ engine: Engine, devices: Int = 3) throws {
            db = try engine.open()
            try db.applications().createApplication(Application(code: shop, name: "x", bundleID: "com.example.x", createdAt: now),
                                                    tokens: [], apnsKey: nil)
            for n in 1...devices {
                _ = try db.devices.registerDevice(DeviceRegistration(hwid: "h\(n)", pushToken: String(format: "%064x", n)), tags: [], in: shop, at: now)
            }
        }

        func start(_ code: String, _ activity: String) throws {
            try db.messages.acceptStarts([NewMessage(code: code, event: .start, activityID: activity, target: .devices(["h1", "h2", "h3"]),
                                                     attributesType: "OrderAttributes", name: nil, contentState: ["step": .int(1)],
                                                     payload: Array(#"{"aps":{}}"#.utf8), fallbackPayload: nil, priority: 10, dueAt: now)],
                                         in: shop, at: now, validateOnly: false)
        }

        func claim(_ lease: ClaimLease) throws -> MessageJob? {
            try db.messages.claimNextJob(at: now, excluding: [], shardsExcluding: [], sharding: ShardPolicy(), leavingSmall: nil, lease: lease)
        }

        func batch(_ devices: ClosedRange<Int64>, apnsID: String) -> BatchResult {
            var batch = BatchResult(cursor: devices.upperBound)
            batch.records = devices.map { DeliveryRecord(device: $0, pushType: .liveActivity, status: 200, reason: nil, apnsID: "\(apnsID)-\($0)", attempts: 1) }
            return batch
        }

        /// Joins `id` and, on PostgreSQL, opens its liveness session: its leases are then freed only when they
        /// expire or the session ends (a node without one counts as gone).
        func live(_ id: String) throws -> (any NodeSession)? {
            let number = try cluster.join(ClusterStoreTests.node(id), at: now)
            return db.engine == .postgresql ? try PostgresNodeSession(url: db.location, number: number) : nil
        }

        /// Rescues until something is freed, or gives up after `seconds` (a lease expires on the database's clock).
        func rescueWhenExpired(seconds: Double = 10) throws -> RescueReport {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                let report = try cluster.rescue(at: now)
                if !report.isEmpty { return report }
                Thread.sleep(forTimeInterval: 0.02)
            }
            return RescueReport()
        }
    }

    static func lease(_ owner: String, _ seconds: Double = 60) -> ClaimLease { ClaimLease(owner: NodeID(owner)!, duration: seconds) }
    static func node(_ id: String) -> NodeInfo { NodeInfo(id: NodeID(id)!, host: "host", pid: 1, version: "test") }

    /// The paused node: its lease expires and is rescued; the batch it then tries to record is refused whole, and
    /// another node resumes the job from the last batch that was recorded, under a newer fencing token.
    @Test(arguments: Engine.allCases) func aBatchOfAnExpiredLeaseIsRefusedAndTheJobResumesElsewhere(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let sessions = [try f.live("paused"), try f.live("other")]
        defer { sessions.forEach { $0?.close() } }
        try f.start("M1", "ORDER_1")
        let paused = try #require(try f.claim(Self.lease("paused", 0.2)))
        try f.db.messages.recordBatch(f.batch(1...1, apnsID: "paused"), of: paused, at: now)
        #expect(try f.claim(Self.lease("other")) == nil, "a leased job is not claimed twice")

        let rescued = try f.rescueWhenExpired()
        #expect(rescued.leases == 1 && rescued.jobs == 1)
        #expect(throws: StoreError.self) { try f.db.messages.recordBatch(f.batch(2...3, apnsID: "paused"), of: paused, at: now) }
        do {
            try f.db.messages.finish(paused, at: now)
            Issue.record("finishing under a lost lease must fail")
        } catch { #expect(error.code == .leaseLost) }
        try f.db.messages.release(paused)   // a no-op: the job is no longer this claim's

        let resumed = try #require(try f.claim(Self.lease("other")))
        #expect(resumed.id == paused.id && resumed.cursor == 1, "resumed after the last recorded batch, not the refused one")
        #expect(resumed.lease > paused.lease, "a newer fencing token")
        try f.db.messages.recordBatch(f.batch(2...3, apnsID: "other"), of: resumed, at: now)
        try f.db.messages.finish(resumed, at: now)
        let details = try #require(try f.db.messages.messageDetails(code: "M1", in: shop))
        #expect(details.state == .done && details.sent == 3)
        #expect(try f.cluster.nodes(since: now.addingTimeInterval(-1)).allSatisfy { $0.leases == 0 }, "finished leases are gone")
    }

    /// Small messages share one lease: a lost lease refuses their records together.
    @Test(arguments: Engine.allCases) func smallJobsOfALostLeaseRecordNothing(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.start("S1", "ORDER_S")
        let jobs = try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: 64, excluding: [], lease: Self.lease("a", 0.2))
        #expect(jobs.map(\.code) == ["S1"])
        #expect(try f.rescueWhenExpired().jobs == 1)
        #expect(throws: StoreError.self) {
            try f.db.messages.recordJobs([JobOutcome(job: jobs[0], result: f.batch(1...3, apnsID: "a"), finished: true)], at: now)
        }
        #expect(try f.db.messages.messageDetails(code: "S1", in: shop)?.targeted == 0, "nothing of the refused write was kept")
        let again = try f.db.messages.claimSmallJobs(at: now, limit: 10, devicesAtMost: 64, excluding: [], lease: Self.lease("b"))
        #expect(again.map(\.code) == ["S1"] && again[0].lease > jobs[0].lease)
    }

    /// Renewal keeps a lease past its first expiry; a lease that was rescued is not renewed.
    @Test(arguments: Engine.allCases) func renewalKeepsOnlyLeasesStillHeld(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.start("R1", "ORDER_R1")
        try f.start("R2", "ORDER_R2")
        let session = try f.live("n")
        defer { session?.close() }
        let kept = try #require(try f.claim(Self.lease("n", 0.3)))
        let lost = try #require(try f.claim(Self.lease("n", 0.3)))
        var renewals = 0
        let deadline = Date().addingTimeInterval(10)
        // Renew `kept` only, until `lost` has expired and been rescued.
        var report = RescueReport()
        while report.isEmpty && Date() < deadline {
            #expect(try f.cluster.renew([kept.lease], of: NodeID("n")!, for: 5) == LeaseRenewal(renewed: [kept.lease], gone: []))
            renewals += 1
            report = try f.cluster.rescue(at: now)
            Thread.sleep(forTimeInterval: 0.02)
        }
        #expect(report.leases == 1 && report.jobs == 1, "only the lease that was not renewed")
        #expect(try f.cluster.renew([kept.lease, lost.lease], of: NodeID("n")!, for: 5) == LeaseRenewal(renewed: [kept.lease], gone: [lost.lease]))
        #expect(try f.cluster.renew([kept.lease], of: NodeID("someone-else")!, for: 5).renewed.isEmpty, "a lease is renewed by its owner only")
        try f.db.messages.recordBatch(f.batch(1...3, apnsID: "kept"), of: kept, at: now)
    }

    /// Issue 47: a node back from a failover finds its lease expired on the database's clock but not rescued (the others
    /// wait a lease before rescuing); its renewal extends it, and the answers it kept are recorded under it.
    @Test(arguments: Engine.allCases) func anExpiredLeaseNoOneRescuedIsRenewedAndItsBatchRecorded(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.start("E1", "ORDER_E1")
        let session = try f.live("n")
        defer { session?.close() }
        let job = try #require(try f.claim(Self.lease("n", 0.2)))
        let expired = "SELECT COUNT(*) AS n FROM leases WHERE id = ? AND until_ms < \(f.db.database.dialect.nowMilliseconds)"
        let deadline = Date().addingTimeInterval(10)
        var ranOut = false
        while !ranOut && Date() < deadline {
            ranOut = try f.db.database.withConnection { (c) throws(StoreError) in try c.query(expired, [.int(job.lease)])[0]["n"].int } == 1
            if !ranOut { Thread.sleep(forTimeInterval: 0.02) }
        }
        #expect(ranOut, "the lease ran out on the database's clock")
        #expect(try f.cluster.renew([job.lease], of: NodeID("n")!, for: 60) == LeaseRenewal(renewed: [job.lease], gone: []))
        #expect(try f.cluster.rescue(at: now).isEmpty, "renewed, it is no longer for rescue")
        try f.db.messages.recordBatch(f.batch(1...3, apnsID: "kept"), of: job, at: now)
        try f.db.messages.finish(job, at: now)
        #expect(try f.claim(Self.lease("other")) == nil, "the job is done: nothing is sent again")
    }

    /// PostgreSQL: a renewal never waits for a write recording a lease's work (it holds the lease FOR KEY SHARE),
    /// nor for one ending a lease (skipped, neither renewed nor gone): it once deadlocked with them.
    @Test func renewalsDoNotWaitForWritesOfTheirLeases() throws {
        let f = try Fixture(.postgresql)
        try f.start("W1", "ORDER_W1")
        try f.start("W2", "ORDER_W2")
        let session = try f.live("n")
        defer { session?.close() }
        let recording = try #require(try f.claim(Self.lease("n")))
        let ending = try #require(try f.claim(Self.lease("n")))
        let done = Mutex<LeaseRenewal?>(nil)
        struct RollBack: Error {}
        do {
            try f.db.database.write(rethrowing: { c in
            _ = try c.query("SELECT id FROM leases WHERE id = ? FOR KEY SHARE", [.int(recording.lease)])
            try c.run("DELETE FROM leases WHERE id = ?", [.int(ending.lease)])
            let renewal = Thread {
                let result = try? f.cluster.renew([recording.lease, ending.lease], of: NodeID("n")!, for: 30)
                done.withLock { $0 = result }
            }
            renewal.start()
            waitUntil(seconds: 5) { done.withLock { $0 } != nil }
            throw RollBack()   // the lease being ended stays
            })
        } catch is RollBack {}
        #expect(done.withLock { $0 } == LeaseRenewal(renewed: [recording.lease], gone: []), "answered while both writes were open")
    }

    /// Retries claimed under a lease go back to waiting when it is rescued, and a late record of them is refused.
    @Test(arguments: Engine.allCases) func dueRetriesOfALostLeaseAreDueAgain(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let session = try f.live("n")
        defer { session?.close() }
        try f.start("D1", "ORDER_D")
        let job = try #require(try f.claim(Self.lease("n")))
        var batch = BatchResult(cursor: 3)
        batch.records = (1...3).map {
            DeliveryRecord(device: $0, pushType: .liveActivity, status: 503, reason: "ServiceUnavailable", apnsID: "d-\($0)", attempts: 1,
                           state: .retrying, nextAttemptAt: now, token: String(format: "%064x", Int($0)))
        }
        try f.db.messages.recordBatch(batch, of: job, at: now)
        try f.db.messages.finish(job, at: now)
        let due = try f.db.messages.claimDueDeliveries(at: now, limit: 10, excluding: [], lease: Self.lease("n", 0.2)) { _, _ in .send }
        #expect(due.count == 3 && Set(due.map(\.lease)).count == 1)
        #expect(try f.db.messages.claimDueDeliveries(at: now, limit: 10, excluding: [], lease: Self.lease("m")) { _, _ in .send }.isEmpty)
        #expect(try f.rescueWhenExpired().deliveries == 3)
        var result = RetryResult()
        result.records = due.map { ($0.message, DeliveryRecord(device: $0.device, pushType: .liveActivity, status: 200, reason: nil, apnsID: "x", attempts: 1)) }
        #expect(throws: StoreError.self) { try f.db.messages.recordRetries(result, lease: due[0].lease, at: now) }
        let again = try f.db.messages.claimDueDeliveries(at: now, limit: 10, excluding: [], lease: Self.lease("m")) { _, _ in .send }
        #expect(again.count == 3)
        try f.db.messages.recordRetries(result, lease: again[0].lease, at: now)
        #expect(try f.db.messages.messageDetails(code: "D1", in: shop)?.sent == 3)
    }

    /// A node's run frees what its previous run held (SQLite: everything, its only server); on PostgreSQL it
    /// leaves the leases of other live nodes alone.
    @Test(arguments: Engine.allCases) func joiningFreesWhatThePreviousRunHeld(_ engine: Engine) throws {
        let f = try Fixture(engine)
        try f.start("J1", "ORDER_J1")
        try f.start("J2", "ORDER_J2")
        let first = try f.cluster.join(Self.node("a"), at: now)
        let second = try f.cluster.join(Self.node("b"), at: now)
        let rejoined = try f.cluster.join(Self.node("a"), at: now)
        #expect(first != second && rejoined == first, "a node keeps its number")
        // Liveness sessions for both on PostgreSQL, so only expiry or a gone session frees their leases.
        let sessions = try engine == .postgresql ? [PostgresNodeSession(url: f.db.location, number: first),
                                                    PostgresNodeSession(url: f.db.location, number: second)] : []
        defer { sessions.forEach { $0.close() } }
        _ = try #require(try f.claim(Self.lease("a")))
        _ = try #require(try f.claim(Self.lease("b")))
        _ = try f.cluster.join(Self.node("a"), at: now)
        let statuses = Dictionary(uniqueKeysWithValues: try f.cluster.nodes(since: now.addingTimeInterval(-1)).map { ($0.info.id.rawValue, $0) })
        #expect(statuses["a"]?.leases == 0)
        #expect(statuses["b"]?.leases == (engine == .postgresql ? 1 : 0), "SQLite's one server frees all; PostgreSQL only its own")
        if engine == .postgresql {
            #expect(statuses["b"]?.alive == true && statuses["b"]?.claimed == 1)
            // A second process started with b's id learns b's number and changes nothing of b's; its lock is refused.
            let intruder = NodeInfo(id: NodeID("b")!, host: "elsewhere", pid: 99, version: "test")
            #expect(try f.cluster.register(intruder, at: now) == second)
            let after = try f.cluster.nodes(since: now.addingTimeInterval(-1)).first { $0.info.id.rawValue == "b" }
            #expect(after?.leases == 1 && after?.info.pid == 1 && after?.info.host == "host", "b's leases and row untouched")
            #expect(throws: StoreError.self, "a second process with node b's number is refused") {
                _ = try PostgresNodeSession(url: f.db.location, number: second)
            }
        }
    }

    /// PostgreSQL: a node whose session ended (kill -9 closes its connection) loses its leases at the next rescue,
    /// long before they expire; a live node's are left alone.
    @Test func aNodeWhoseSessionEndedIsRescuedAtOnce() throws {
        let f = try Fixture(.postgresql)
        try f.start("K1", "ORDER_K1")
        let number = try f.cluster.join(Self.node("killed"), at: now)
        let session = try PostgresNodeSession(url: f.db.location, number: number)
        _ = try #require(try f.claim(Self.lease("killed", 3600)))
        #expect(try f.cluster.rescue(at: now).isEmpty, "alive: nothing to rescue")
        #expect(try f.cluster.nodes(since: now.addingTimeInterval(-1)).first?.alive == true)
        session.close()
        let report = try f.rescueWhenExpired(seconds: 5)
        #expect(report.leases == 1 && report.jobs == 1, "freed within one rescue of the session ending")
        #expect(try f.claim(Self.lease("survivor"))?.code == "K1")
    }

    /// PostgreSQL: work accepted on any node wakes a listening node at once (LISTEN/NOTIFY), so an idle node need not
    /// poll often; a dry run, which accepts nothing, wakes none.
    @Test func acceptedWorkWakesAListeningNode() throws {
        let f = try Fixture(.postgresql)
        let session = try #require(try f.live("listener"))
        while session.waitForWork(timeout: .milliseconds(200)) {}   // nothing owed from the set-up
        try f.db.messages.acceptStarts([NewMessage(code: "N0", event: .start, activityID: "ORDER_N0", target: .devices(["h1"]),
                                                   attributesType: "OrderAttributes", name: nil, contentState: [:],
                                                   payload: Array(#"{"aps":{}}"#.utf8), fallbackPayload: nil, priority: 10, dueAt: now)],
                                       in: shop, at: now, validateOnly: true)
        #expect(!session.waitForWork(timeout: .milliseconds(500)), "a dry run notifies no node")
        try f.start("N1", "ORDER_N1")
        #expect(session.waitForWork(timeout: .seconds(10)), "the start's commit notifies the listening node")
    }

    /// PostgreSQL: nodes claiming at once each skip what the others are claiming: every job is claimed once.
    @Test func concurrentClaimsOfSeveralNodesNeverShareAJob() throws {
        let f = try Fixture(.postgresql)
        let count = 60
        for n in 0..<count { try f.start("C\(n)", "ORDER_C\(n)") }
        let claimed = Mutex<[String]>([])
        let threads = (0..<3).map { node in
            Thread {
                let store = SQLMessageStore(database: f.db.database)
                while true {
                    guard let jobs = try? store.claimSmallJobs(at: now, limit: 4, devicesAtMost: 64, excluding: [], lease: Self.lease("n\(node)")),
                          !jobs.isEmpty else { return }
                    claimed.withLock { $0 += jobs.map(\.code) }
                }
            }
        }
        threads.forEach { $0.start() }
        waitUntil(seconds: 30) { threads.allSatisfy(\.isFinished) }
        let codes = claimed.withLock { $0 }
        #expect(codes.count == count && Set(codes).count == count, "each of \(count) claimed exactly once, got \(codes.count)")
    }

    /// Three nodes starting at once with an expired token make exactly one new one; an expiry of a token younger
    /// than 20 minutes is refused (Apple's TooManyProviderTokenUpdates), an older one gives the next caller a new one.
    @Test(arguments: Engine.allCases) func nodesAskingAtOnceShareOneProviderToken(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let signed = Mutex(0)
        let sign: @Sendable (Date) -> String? = { date in
            let n = signed.withLock { $0 += 1; return $0 }
            return "jwt-\(n)-\(Int(date.timeIntervalSince1970))"
        }
        let old = now.addingTimeInterval(-3600)
        _ = try f.cluster.providerToken(named: "TEAM.KEY", issuedAfter: old.addingTimeInterval(-1), at: old, sign: sign)
        let tokens = Mutex<[String]>([])
        // A handle each, as three processes have: their writes do not share one group commit.
        let handles = try (0..<3).map { _ in try f.db.reopen() }
        let threads = handles.map { handle in
            Thread {
                let store = SQLClusterStore(database: handle)
                if let token = try? store.providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60), at: now, sign: sign) {
                    tokens.withLock { $0.append(token.token) }
                }
            }
        }
        threads.forEach { $0.start() }
        waitUntil(seconds: 30) { threads.allSatisfy(\.isFinished) }
        let got = tokens.withLock { $0 }
        #expect(got.count == 3 && Set(got).count == 1, "one token for all three: \(got)")
        #expect(signed.withLock { $0 } == 2, "the old one, then exactly one new one")

        let current = got[0]
        #expect(try f.cluster.expireProviderToken(named: "TEAM.KEY", token: current, renewableBefore: now.addingTimeInterval(-20 * 60)) == false,
                "younger than 20 minutes: kept")
        #expect(try f.cluster.expireProviderToken(named: "TEAM.KEY", token: current, renewableBefore: now.addingTimeInterval(1)) == true)
        let renewed = try #require(try f.cluster.providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60),
                                                               at: now.addingTimeInterval(1), sign: sign))
        #expect(renewed.token != current && signed.withLock { $0 } == 3)
        #expect(try f.cluster.expireProviderToken(named: "TEAM.KEY", token: current, renewableBefore: now.addingTimeInterval(3600)) == true,
                "an already replaced token: the next call gives the new one")
    }

    /// Issue 44: with a master key, the shared provider token is stored sealed, so a copy of the database holds no token
    /// that can push; nodes with the key share it as before (and expire it by its plain text). A token sealed with
    /// another key is no token: a new one is signed. One stored plain before the key was set is used until replaced.
    @Test(arguments: Engine.allCases) func aProviderTokenIsStoredSealedWithTheMasterKey(_ engine: Engine) throws {
        let f = try Fixture(engine)
        let key = MasterKey.generate()
        let sealed = SQLClusterStore(database: f.db.database, masterKey: key)
        let signed = Mutex(0)
        let sign: @Sendable (Date) -> String? = { date in "jwt-\(signed.withLock { $0 += 1; return $0 })-\(Int(date.timeIntervalSince1970))" }
        let stored = { () throws -> String in
            try f.db.database.withConnection { (c) throws(StoreError) in try c.query("SELECT token FROM provider_tokens WHERE name = 'TEAM.KEY'")[0]["token"].text ?? "" }
        }
        let first = try #require(try sealed.providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60), at: now, sign: sign))
        #expect(first.token == "jwt-1-\(Int(now.timeIntervalSince1970))")
        let kept = try stored()
        #expect(MasterKey.isSealed(kept) && !kept.contains(first.token), "stored sealed: \(kept)")
        let again = try #require(try SQLClusterStore(database: f.db.database, masterKey: key)
            .providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60), at: now.addingTimeInterval(5), sign: sign))
        #expect(again.token == first.token && signed.withLock { $0 } == 1, "another node with the key reads the same token")
        #expect(try sealed.expireProviderToken(named: "TEAM.KEY", token: first.token, renewableBefore: now.addingTimeInterval(3600)) == true)

        // Another key (or a copy without one) finds no usable token and signs its own.
        let other = SQLClusterStore(database: f.db.database, masterKey: MasterKey.generate())
        _ = try f.db.database.withConnection { (c) throws(StoreError) in
            try c.run("UPDATE provider_tokens SET token = ?, expired = 0 WHERE name = 'TEAM.KEY'", [.text(key.seal("jwt-kept", boundTo: "provider-token/TEAM.KEY"))])
        }
        let foreign = try #require(try other.providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60), at: now, sign: sign))
        #expect(foreign.token != "jwt-kept" && signed.withLock { $0 } == 2)

        // A plain token from before the key was set is used, and its successor is sealed.
        _ = try f.db.database.withConnection { (c) throws(StoreError) in
            try c.run("UPDATE provider_tokens SET token = 'jwt-plain', expired = 0 WHERE name = 'TEAM.KEY'")
        }
        #expect(try sealed.providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60), at: now, sign: sign)?.token == "jwt-plain")
        #expect(try sealed.expireProviderToken(named: "TEAM.KEY", token: "jwt-plain", renewableBefore: now.addingTimeInterval(3600)) == true)
        let successor = try #require(try sealed.providerToken(named: "TEAM.KEY", issuedAfter: now.addingTimeInterval(-50 * 60), at: now, sign: sign))
        let last = try stored()
        #expect(successor.token == "jwt-3-\(Int(now.timeIntervalSince1970))" && MasterKey.isSealed(last))
    }
}
