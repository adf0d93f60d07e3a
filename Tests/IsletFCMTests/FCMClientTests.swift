import Foundation
import Testing
import IsletCore
import IsletCrypto
import IsletFCM
import IsletHTTP2
import IsletTestPeers

/// Issue 46: the FCM client against `Tests/Peers/fcm_peer.py`, an FCM stand-in on h2 and PyJWT that checks the
/// assertion at its token endpoint and each message against the Pushwoosh Android SDK's rules.
@Suite("The FCM client against an FCM stand-in")
struct FCMClientTests {
    final class World {
        let directory: URL
        let peer: PythonFCMPeer
        let client: FCMClient

        /// `signingKey`: the key the client signs with, when it is not the one the peer checks with.
        init(signingKey: String? = nil) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-fcm-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let certificate = directory.appendingPathComponent("peer.pem").path, key = directory.appendingPathComponent("peer.key").path
            try TLSContext.writeSelfSigned(certificate: certificate, key: key)
            let accountKey = RSASigningKey.generatePEM()
            let accountKeyFile = directory.appendingPathComponent("account.pem").path
            try accountKey.write(toFile: accountKeyFile, atomically: true, encoding: .utf8)
            peer = try PythonFCMPeer(certificate: certificate, key: key, accountKey: accountKeyFile, project: "islet-demo")
            let keyFile: JSONValue = [
                "type": "service_account", "project_id": "islet-demo", "private_key_id": "kid-1", "private_key": .string(signingKey ?? accountKey),
                "client_email": "islet@islet-demo.iam.gserviceaccount.com", "token_uri": .string("https://127.0.0.1:\(peer.port)/token"),
            ]
            let signer = try ServiceAccountSigner(ServiceAccount(json: keyFile.jsonBytes))
            client = try FCMClient(signer: signer, baseURL: "https://127.0.0.1:\(peer.port)", caFile: certificate)
        }

        deinit {
            client.shutdown()
            try? FileManager.default.removeItem(at: directory)
        }

        func send(_ messages: [FCMMessage]) -> [FCMOutcome] { client.send(messages, deadline: .now + .seconds(10)) }
    }

    static func message(_ token: String, _ operation: AndroidLiveUpdate.Operation = .update, progress: Int? = nil) -> FCMMessage {
        var update = AndroidLiveUpdate(operation: operation, id: "ORDER_1", title: "Order #1", text: "On its way", hash: "ABCDE-12345678-ABCDEFGH")
        update.progress = progress
        return FCMMessage(token: token, update: update, timeToLive: .seconds(600), collapseKey: "ORDER_1")
    }

    @Test func aStartAndAnUpdateReachTheStandInWithOneAccessToken() throws {
        let world = try World()
        let outcomes = world.send([Self.message("token-a", .start, progress: 1), Self.message("token-b", .start, progress: 1)])
        #expect(outcomes.map(\.verdict) == [.delivered, .delivered], "\(outcomes)")
        #expect(world.send([Self.message("token-a", .update, progress: 2)]).map(\.verdict) == [.delivered])
        let tokens = world.peer.events("token", atLeast: 1)
        #expect(tokens.count == 1 && tokens.first?["status"] == 200, "one access token, kept for every send: \(tokens)")
        let sends = world.peer.events("send", atLeast: 3)
        #expect(sends.count == 3 && sends.allSatisfy { $0["status"] == 200 }, "\(sends)")
        let last = try #require(sends.last)
        #expect(last["token"] == "token-a" && last["op"] == "OPERATION_UPDATE" && last["id"] == "ORDER_1")
        #expect(last["live"] == ["op": "OPERATION_UPDATE", "id": "ORDER_1", "progress": 2])
        #expect(last["data"]?.objectValue?["header"] == "Order #1" && last["data"]?.objectValue?["title"] == "On its way")
        #expect(last["android"] == ["priority": "HIGH", "ttl": "600s", "collapse_key": "ORDER_1"])
    }

    @Test func eachErrorOfTheStandInHasItsVerdict() throws {
        let world = try World()
        try world.peer.command("fail gone UNREGISTERED")
        try world.peer.command("fail busy QUOTA_EXCEEDED 30")
        try world.peer.command("fail down UNAVAILABLE")
        try world.peer.command("fail other SENDER_ID_MISMATCH")
        let outcomes = world.send(["gone", "busy", "down", "other", "fine"].map { Self.message($0) })
        #expect(outcomes.map(\.verdict) == [.deadToken(invalidSince: nil), .retry(after: .seconds(30)), .retry(after: nil),
                                            .invalidProviderToken, .delivered], "\(outcomes)")
        #expect(outcomes[0].status == 404 && outcomes[0].error == .unregistered)
        #expect(outcomes[1].status == 429 && outcomes[1].error == .quotaExceeded && outcomes[1].retryAfter == .seconds(30))
    }

    @Test func anAccessTokenRefusedIsReplacedAndTheMessageSentAgain() throws {
        let world = try World()
        #expect(world.send([Self.message("token-a")]).map(\.verdict) == [.delivered])
        try world.peer.command("expire-tokens")
        #expect(world.send([Self.message("token-a"), Self.message("token-b")]).map(\.verdict) == [.delivered, .delivered])
        #expect(world.peer.events("token", atLeast: 2).count == 2, "a second token, asked for once for both messages")
        #expect(world.peer.events("send", atLeast: 5).map { $0["status"] } == [200, 401, 401, 200, 200])
    }

    @Test func anAssertionTheTokenEndpointRefusesSendsNothing() throws {
        let world = try World(signingKey: RSASigningKey.generatePEM())
        let outcomes = world.send([Self.message("token-a")])
        #expect(outcomes.map(\.fate) == [.notSent] && outcomes[0].verdict == .retry(after: nil))
        #expect(outcomes[0].detail?.contains("answered 400") == true && outcomes[0].detail?.contains("invalid_grant") == true, "\(outcomes)")
        #expect(world.peer.events("send").isEmpty, "no message without a token")
    }

    @Test func noServerMeansNotSent() throws {
        let keyFile: JSONValue = [
            "type": "service_account", "project_id": "p", "private_key_id": "k", "private_key": .string(RSASigningKey.generatePEM()),
            "client_email": "e@p.iam.gserviceaccount.com", "token_uri": "https://127.0.0.1:9/token",
        ]
        let client = try FCMClient(signer: ServiceAccountSigner(ServiceAccount(json: keyFile.jsonBytes)), baseURL: "https://127.0.0.1:9")
        defer { client.shutdown() }
        let outcomes = client.send([Self.message("token-a")], deadline: .now + .seconds(10))
        #expect(outcomes.map(\.fate) == [.notSent] && outcomes[0].detail?.contains("cannot connect") == true, "\(outcomes)")
    }
}
