import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import IsletTestPeers
import Synchronization

/// The APNs client against `Tests/Peers/h2_apns.py`, an HTTP/2 server built on Python's `h2` package:
/// a peer that shares no code with Islet, driven from the test to go idle, close, stall and fail.
@Suite("APNs client against an independent HTTP/2 server")
struct IndependentPeerTests {
    let files: TestFiles

    init() throws { files = try TestFiles() }

    func client(_ peer: PythonH2Peer, _ configure: (inout APNsClientConfiguration) -> Void = { _ in }) throws -> APNsClient {
        try files.client(url: peer.url, configure)
    }

    /// The reported stall: a push after 16 s idle (past the 15 s check) with default settings.
    @Test func aPushAfterALongIdleLeavesAtOnce() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        let client = try client(peer)
        defer { client.shutdown() }
        #expect(client.send([push(1)]).first?.status == 200)
        idle(16)
        let diagnostics = try #require(client.diagnostics())
        #expect(diagnostics.timers <= 2, "one sweep timer per pool, however long the idle: \(diagnostics)")
        #expect(client.send([push(2)], deadline: .now + .seconds(3)).first?.status == 200)
        #expect(try peer.requests(atLeast: 2).count == 2)
    }

    /// Idle gaps shorter and longer than the peer's idle close (as nginx closes idle connections),
    /// with shortened timers: every push answered, on a fresh connection where the old one closed.
    @Test func idleGapsOfEveryLengthNeverHoldAPush() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        try peer.command("idle-close 2.5")
        let client = try client(peer) { $0.checkAfterIdle = .seconds(1); $0.pingAfter = .seconds(2); $0.pingTimeout = .seconds(1) }
        defer { client.shutdown() }
        var n = 0
        for gap in [0.2, 1.5, 4.0, 0.5, 6.0] {
            n += 1
            #expect(client.send([push(n)], deadline: .now + .seconds(3)).first?.status == 200, "after \(gap) s idle")
            idle(gap)
        }
        #expect(client.send([push(99)], deadline: .now + .seconds(3)).first?.status == 200)
        #expect(try peer.requests(atLeast: n + 1).count == n + 1)
        let timers = try #require(client.diagnostics()).timers
        #expect(timers <= 2, "\(timers) timers")
    }

    /// A connection that went silent (a dead NAT entry, a frozen peer) is found by its PING going
    /// unanswered and replaced; the push goes out on a new connection instead of waiting out its deadline.
    @Test func aSilentConnectionIsReplacedBeforeItHoldsAPush() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        let client = try client(peer) { $0.checkAfterIdle = .milliseconds(500); $0.pingTimeout = .seconds(1) }
        defer { client.shutdown() }
        #expect(client.send([push(1)]).first?.status == 200)
        try peer.command("blackhole")
        idle(1)
        let outcome = client.send([push(2)], deadline: .now + .seconds(10)).first
        #expect(outcome?.status == 200, "\(String(describing: outcome))")
        let requests = try peer.requests(atLeast: 2)
        #expect(requests.count == 2 && Set(requests.map(\.connection)).count == 2, "\(requests)")
    }

    /// A request APNs read but never answered before its connection closed may have been processed:
    /// the client reports it unknown and does not resend it.
    @Test func aLostAnswerIsReportedUnknownAndNotResent() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        let client = try client(peer)
        defer { client.shutdown() }
        #expect(client.send([push(1)]).first?.status == 200)
        try peer.command("drop-next")
        let outcome = try #require(client.send([push(2)], deadline: .now + .seconds(10)).first)
        #expect(outcome.status == 0 && outcome.fate == .unknown, "\(outcome)")
        #expect(client.send([push(3)]).first?.status == 200)
        #expect(try peer.requests(atLeast: 3).count == 3, "push 2 reached the peer once")
    }

    /// A throttled answer's `retry-after` header (seconds) reaches the delivery's decision; one APNs sends without it
    /// leaves the backoff to Islet.
    @Test func aRetryAfterHeaderIsReadOffTheWire() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        let client = try client(peer)
        defer { client.shutdown() }
        try peer.command("status 429 TooManyRequests")
        let plain = try #require(client.send([push(1)]).first)
        #expect(plain.status == 429 && plain.reason == "TooManyRequests" && plain.retryAfter == nil, "\(plain)")
        try peer.command("retry-after 120")
        let throttled = try #require(client.send([push(2)]).first)
        #expect(throttled.status == 429 && throttled.retryAfter == .seconds(120), "\(throttled)")
        #expect(try peer.requests(atLeast: 2).count == 2, "each push reached the peer once: a 429 is left to the delivery's retry")
    }

    /// Shutdown answers what is in flight and stops within its deadline, even with APNs stalled.
    @Test func shutdownIsBoundedWithPushesInFlight() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        let client = try client(peer)
        #expect(client.send([push(1)]).first?.status == 200)
        try peer.command("latency 30")
        let result = Mutex<[PushOutcome]?>(nil)
        let sender = Thread { result.withLock { $0 = client.send([push(2), push(3)]) } }
        sender.start()
        #expect(try peer.wait(deadline: .now + .seconds(5)) { $0.event == "request" && $0.apnsID != "" && $0.count >= 2 } != nil)
        let started = ContinuousClock.now
        #expect(client.shutdown(deadline: .now + .seconds(3)), "the loop stopped by the deadline")
        #expect(ContinuousClock.now - started < .seconds(3))
        let deadline = ContinuousClock.now + .seconds(3)
        while result.withLock({ $0 }) == nil && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        let outcomes = try #require(result.withLock { $0 })
        #expect(outcomes.allSatisfy { $0.status == 0 && $0.fate == .unknown }, "\(outcomes)")
    }

    /// X5: channel management requests as Apple documents them, read by a server that is not Islet's: the
    /// method, `/1/apps/<bundle id>/…`, the channel in `apns-channel-id`, the JSON body, and the answer's
    /// `apns-channel-id` handed back; device pushes on the same client are untouched.
    @Test func channelManagementRequestsHaveApplesShape() throws {
        let peer = try PythonH2Peer(certificate: files.certificate, key: files.key)
        let client = try client(peer)
        defer { client.shutdown() }
        try peer.command("status 201")
        try peer.command("channel-id dGVzdC1jaGFubmVsLTAx")
        let create = Push.manageChannels(application: application, gateway: .production, bundleID: "com.example.app", method: "POST",
                                         path: "channels", body: BroadcastChannels.createBody(.mostRecent).jsonBytes)
        let created = try #require(client.send([create]).first)
        #expect(created.status == 201 && created.management?.channelID == "dGVzdC1jaGFubmVsLTAx")
        try peer.command("status 204")
        let delete = Push.manageChannels(application: application, gateway: .production, bundleID: "com.example.app", method: "DELETE",
                                         path: "channels", channelID: "dGVzdC1jaGFubmVsLTAx")
        #expect(client.send([delete]).first?.status == 204)
        try peer.command("status 200")
        #expect(client.send([push(1)]).first?.status == 200)
        let requests = try peer.requests(atLeast: 3)
        #expect(requests.map { $0.method ?? "" } == ["POST", "DELETE", "POST"])
        #expect(requests.map { $0.path ?? "" } == ["/1/apps/com.example.app/channels", "/1/apps/com.example.app/channels", "/3/device/\(String(format: "%064x", 1))"])
        #expect(requests[0].body == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"# && requests[0].contentType == "application/json")
        #expect(requests[0].channelID == nil && requests[1].channelID == "dGVzdC1jaGFubmVsLTAx" && requests[1].body == "")
        #expect(requests[2].channelID == nil && requests[2].body?.contains("\"event\":\"update\"") == true)
    }

    /// The length of quiet under test; nothing is asserted about what happens during it.
    func idle(_ seconds: Double) { Thread.sleep(forTimeInterval: seconds) }
}

