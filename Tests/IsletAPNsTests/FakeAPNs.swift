import Foundation
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// Files for one test: a self-signed certificate for 127.0.0.1 and a P-256 key that also serves as
/// the application's APNs key.
final class TestFiles {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-apns-\(UUID().uuidString)")
    var certificate: String { directory.appendingPathComponent("cert.pem").path }
    var key: String { directory.appendingPathComponent("key.pem").path }

    init() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try TLSContext.writeSelfSigned(certificate: certificate, key: key)
    }

    var signingKey: APNsSigningKey {
        APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both),
                       pem: (try? String(contentsOfFile: key, encoding: .utf8)) ?? "")
    }

    /// An APNs client for `application` that trusts this certificate and signs with this key; reconnects
    /// quickly, so tests of lost connections stay short.
    func client(url: URL, now: (@Sendable () -> Date)? = nil, _ configure: (inout APNsClientConfiguration) -> Void = { _ in }) throws -> APNsClient {
        let signingKey = self.signingKey
        var configuration = APNsClientConfiguration(overrideURL: url, extraCA: certificate, reconnectDelays: (.milliseconds(20), .milliseconds(200)))
        configure(&configuration)
        return try APNsClient(configuration: configuration, keys: { $0 == application ? signingKey : nil }, logger: .discard,
                              now: now ?? { Date() })
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// What the fake APNs saw of one request.
struct SeenRequest: Sendable {
    let connection: Int
    let headers: [String: String]
    let body: [UInt8]
    var apnsID: String { headers["apns-id"] ?? "" }
    var token: String { String((headers[":path"] ?? "").dropFirst("/3/device/".count)) }
}

/// A fake APNs on 127.0.0.1 built on the same HTTP/2 code: verifies the JWT, applies Apple's stream
/// rule (1 stream until the first authenticated request, then 1000), and answers as `behaviour` says.
final class FakeAPNs: Sendable {
    enum Answer: Sendable {
        case status(Int, reason: String? = nil, timestamp: Int64? = nil)
        case refuse
        case goAway
        case drop
        case silence
    }

    struct State {
        var processed: [SeenRequest] = []
        var open: [Int: Int] = [:]
        var trusted: Set<Int> = []
        var streamRuleBroken = false
        var connections: Set<Int> = []
        var seen: [String: Int] = [:]
        /// After a GOAWAY, the connection processes no stream above its last one, as HTTP/2 requires.
        var goneAway: [Int: Int32] = [:]
    }

    final class Shared: Sendable {
        let state = Mutex(State())
    }

    let server: H2Server
    let shared = Shared()
    let url: URL

    /// `behaviour` gets the request and how many times its apns-id came before; it runs on the server's loop.
    init(files: TestFiles, key: SigningKey, behaviour: @escaping @Sendable (SeenRequest, Int) -> Answer = { _, _ in .status(200) }) throws {
        let shared = self.shared
        let tls = try TLSContext(serverCertificate: files.certificate, key: files.key)
        server = try H2Server(tls: tls, initialMaxStreams: 1) { exchange in
            var headers: [String: String] = [:]
            for (name, value) in exchange.request.headers { headers[name] = value }
            let seen = SeenRequest(connection: exchange.connectionID, headers: headers, body: exchange.request.body)
            if let last = shared.state.withLock({ $0.goneAway[exchange.connectionID] }), exchange.stream > last { return }
            let earlier = shared.state.withLock { s -> Int in
                s.connections.insert(exchange.connectionID)
                s.open[exchange.connectionID, default: 0] += 1
                if !s.trusted.contains(exchange.connectionID) && s.open[exchange.connectionID]! > 1 { s.streamRuleBroken = true }
                defer { s.seen[seen.apnsID, default: 0] += 1 }
                return s.seen[seen.apnsID] ?? 0
            }
            func finish(_ status: Int, _ body: JSONValue?) {
                shared.state.withLock { s in
                    s.open[exchange.connectionID, default: 1] -= 1
                    if status == 200 { s.processed.append(seen) }
                    if status == 200 && !s.trusted.contains(exchange.connectionID) {
                        s.trusted.insert(exchange.connectionID)
                        exchange.allowStreams(1000)
                    }
                }
                exchange.respond(status: status, headers: [("apns-id", seen.apnsID)], body: body?.jsonBytes ?? [])
            }
            guard FakeAPNs.verify(headers["authorization"], key: key) else {
                return finish(403, ["reason": "InvalidProviderToken"])
            }
            switch behaviour(seen, earlier) {
            case .status(let status, let reason, let timestamp):
                var body = JSONObject()
                if let reason { body["reason"] = .string(reason) }
                if let timestamp { body["timestamp"] = .int(timestamp) }
                finish(status, body.isEmpty ? nil : .object(body))
            case .refuse:
                shared.state.withLock { $0.open[exchange.connectionID, default: 1] -= 1 }
                exchange.refuse()
            case .goAway:
                // This request is answered; streams above the GOAWAY's last one are not processed.
                let last = exchange.goAway()
                shared.state.withLock { $0.goneAway[exchange.connectionID] = last }
                finish(200, nil)
            case .drop:
                shared.state.withLock { $0.open[exchange.connectionID] = 0 }
                exchange.dropConnection()
            case .silence:
                break
            }
        }
        url = URL(string: "https://127.0.0.1:\(server.port)")!
    }

    /// Checks `bearer <JWT>`: ES256 by the application's key, kid and iss as configured (A3).
    static func verify(_ authorization: String?, key: SigningKey) -> Bool {
        guard let authorization, authorization.hasPrefix("bearer ") else { return false }
        let parts = authorization.dropFirst(7).split(separator: ".").map(String.init)
        guard parts.count == 3, let signature = decode(parts[2]), let header = decode(parts[0]), let claims = decode(parts[1]),
              let headerJSON = try? JSONParser.parse(header).objectValue, let claimsJSON = try? JSONParser.parse(claims).objectValue
        else { return false }
        return headerJSON["alg"] == "ES256" && headerJSON["kid"] == .string(key.info.keyID) && claimsJSON["iss"] == .string(key.info.teamID)
            && claimsJSON["iat"]?.intValue != nil && key.verify(Array("\(parts[0]).\(parts[1])".utf8), signature: signature)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map { Array($0) }
    }

    var processed: [SeenRequest] { shared.state.withLock { $0.processed } }

    deinit { server.stop() }
}

let application = ApplicationCode("APPAA-00001")!

func push(_ n: Int, gateway: Gateway = .production) -> Push {
    Push(application: application, deviceToken: String(format: "%064x", n), gateway: gateway, pushType: .liveActivity,
         topic: "com.example.app.push-type.liveactivity", priority: 10, apnsID: UUID().uuidString,
         payload: Array(#"{"aps":{"timestamp":1,"event":"update","content-state":{"n":\#(n)}}}"#.utf8))
}
