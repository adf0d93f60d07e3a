import Foundation
import Testing
import IsletAPI
import IsletCore
import IsletCrypto
import IsletHTTP2
import IsletStore
import IsletTestPeers

/// The whole server — API, store, delivery service, APNs client — against an APNs stand-in that shares
/// no code with Islet (`Tests/Peers/h2_apns.py`): what reaches the wire during and after an outage.
@Suite("Delivery over the wire to an independent HTTP/2 server (issue 10)")
struct WireDeliveryTests {
    @Test func anOutageThenRecoveryLosesNothingAndRepeatsTheSameRequest() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-wire-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = directory.appendingPathComponent("peer.crt").path, key = directory.appendingPathComponent("peer.key").path
        try TLSContext.writeSelfSigned(certificate: certificate, key: key)
        let peer = try PythonH2Peer(certificate: certificate, key: key)
        let clock = TestClock()
        let running = try RunningServer(demo: false, clock: clock, directory: directory.appendingPathComponent("server"),
                                        apns: (peer.url.absoluteString, certificate))
        let created = try running.admin().create(
            name: "Wire", bundleID: "com.example.wire",
            apnsKey: APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both), pem: Crypto.generateAPNsSigningKey()))
        let app = JSONValue.string(created.application.code.rawValue), auth = created.apiToken.secret
        let pushToStart = String(repeating: "5a", count: 40)
        #expect(try call(running.port, "registerDevice", ["application": app, "hwid": "phone", "push_token": .string(String(repeating: "ab", count: 32))], token: auth).status == 200)
        #expect(try call(running.port, "setActivityPushToStartToken", ["application": app, "hwid": "phone", "activity_push_to_start_token": .string(pushToStart)], token: auth).status == 200)

        try peer.command("status 503 ServiceUnavailable")
        let started = try call(running.port, "startLiveActivity", ["application": app, "auth": .string(auth),
                                                                   "notifications": [.object(startNotification(["devices": ["phone"]]))]])
        let code = try #require(started.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue)
        let details = { try running.server.messages.messageDetails(code: code, in: created.application.code) }
        // The outage: every attempt is answered 503; the server's clock moves 10 s at a time so retries fall due.
        let retried = try eventually(20) {
            clock.advance(10)
            running.server.delivery?.kick()
            return try peer.requests().count >= 4
        }
        #expect(retried, "retried during the outage")
        #expect(try details()?.sent == 0 && details()?.failed == 0, "nothing given up")

        try peer.command("status 200")
        let delivered = try eventually(20) {
            clock.advance(10)
            running.server.delivery?.kick()
            return try details()?.sent == 1
        }
        #expect(delivered, "delivered once APNs is back")
        let requests = try peer.requests()
        #expect(Set(requests.map(\.apnsID)).count == 1, "every attempt is the same request (one apns-id)")
        #expect(requests.allSatisfy { $0.expiration != nil }, "with apns-expiration")
    }
}
