import Foundation
import IsletAPNs
import IsletCore
import IsletHTTP2
import IsletStore
import Synchronization

/// Who a provider token belongs to: the key that must have signed it and the application's bundle id.
public struct SimulatorCredential: Sendable {
    public let key: SigningKey
    public let application: ApplicationCode
    public let bundleID: String

    public init(key: SigningKey, application: ApplicationCode, bundleID: String) {
        self.key = key
        self.application = application
        self.bundleID = bundleID
    }
}

/// Trouble the simulator makes on purpose, for tests and benchmarks.
public struct SimulatorFaults: Sendable {
    /// Share (0…1) of valid pushes answered 429 TooManyRequests, and 503 ServiceUnavailable.
    public var tooManyRequests: Double = 0
    public var unavailable: Double = 0
    public var latency: Duration = .zero
    /// GOAWAY after every N requests of a connection.
    public var goAwayEvery: Int?
    /// Drop the connection, unanswered, at every Nth request of a connection.
    public var dropEvery: Int?

    public init() {}
}

/// A local APNs that behaves like Apple's: HTTP/2 over TLS, provider-token checks, Apple's reasons and
/// stream rules, and simulated iPhones that apply ActivityKit's rules to what they receive (issue 6).
public final class APNsSimulator: Sendable {
    public typealias Credentials = @Sendable (_ keyID: String) -> SimulatorCredential?
    /// Called when a simulated device's activity gets its update token, as the SDK reports it (D4).
    public typealias Reporter = @Sendable (_ application: ApplicationCode, _ hwid: String, _ activityID: String, _ token: String) -> Void
    /// Why the application could not decode this content-state (and attributes) of a type: the app's schema (X2).
    public typealias Decoder = @Sendable (_ application: ApplicationCode, _ attributesType: String, _ contentState: JSONObject,
                                          _ attributes: JSONObject?) -> String?

    /// Apple keeps production and sandbox apart: requests to `port` are production, to `sandboxPort` sandbox
    /// (channels live in one environment; a client with one URL for both reaches production).
    public let port: Int
    public let sandboxPort: Int
    private let server: H2Server
    private let sandboxServer: H2Server

    /// `sink`: answer 200 to everything at once, checking nothing (benchmarks).
    /// The simulated FCM service account whose key has this id (issue 46).
    public typealias FCMAccounts = @Sendable (_ keyID: String) -> SimulatorFCMAccount?

    public init(store: any SimulatorStore, credentials: @escaping Credentials, report: @escaping Reporter,
                decoder: @escaping Decoder = { _, _, _, _ in nil }, fcmAccounts: @escaping FCMAccounts = { _ in nil }, tls: TLSContext,
                host: String = "127.0.0.1", port: Int = 0, sandboxPort: Int = 0, faults: SimulatorFaults = SimulatorFaults(), sink: Bool = false,
                now: @escaping @Sendable () -> Date = { Date() }) throws {
        if !sink { try Self.indexTokens(store) }
        let engine = SimulatorEngine(store: store, credentials: credentials, report: report, decoder: decoder, faults: faults, now: now,
                                     fcm: SimulatedFCM(store: store, accounts: fcmAccounts, now: now))
        func listen(_ port: Int, _ gateway: Gateway) throws -> H2Server {
            try H2Server(host: host, port: port, tls: tls, threads: sink ? 2 : 1, initialMaxStreams: sink ? 1000 : 1) { exchange in
                if sink { return exchange.respond(status: 200, headers: [("apns-id", exchange.request.header("apns-id") ?? UUID().uuidString)]) }
                engine.handle(exchange, gateway: gateway)
            }
        }
        server = try listen(port, .production)
        sandboxServer = try listen(sandboxPort, .sandbox)
        self.port = server.port
        self.sandboxPort = sandboxServer.port
    }

    public func stop() {
        server.stop()
        sandboxServer.stop()
    }

    /// Reads and writes one simulated device, under the simulator's lock.
    public static func withDevice<T>(_ store: any SimulatorStore, _ application: ApplicationCode, _ hwid: String,
                                     _ body: (inout SimulatedDevice) throws -> T) throws -> T? {
        try SimulatorEngine.lock.withLock { _ in
            guard let text = try store.simulatedDevice(application: application, hwid: hwid),
                  var device = try? JSONDecoder().decode(SimulatedDevice.self, from: Data(text.utf8)) else { return nil }
            let result = try body(&device)
            try store.save(device, application: application)
            return result
        }
    }

    /// Indexes by token the phones saved before the index existed (or copied without it), once, at start.
    static func indexTokens(_ store: any SimulatorStore) throws {
        for entry in try store.unindexedSimulatedDevices() {
            guard let device = try? JSONDecoder().decode(SimulatedDevice.self, from: Data(entry.state.utf8)) else { continue }
            try store.save(device, application: entry.application)
        }
    }

    /// A random hex token of `bytes` bytes, like APNs issues.
    public static func token(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}

/// The request handling; runs on the simulator's loop thread, shares devices through the store.
final class SimulatorEngine: Sendable {
    /// One lock for every read-modify-write of simulated devices in this process.
    static let lock = Mutex(())

    let store: any SimulatorStore
    let credentials: APNsSimulator.Credentials
    let report: APNsSimulator.Reporter
    let decoder: APNsSimulator.Decoder
    let faults: SimulatorFaults
    let now: @Sendable () -> Date
    /// FCM beside APNs, on the same listener (issue 46).
    let fcm: SimulatedFCM
    /// Per connection: requests seen, and whether a request with a valid token came (Apple's stream rule).
    private let connections = Mutex<[Int: (requests: Int, trusted: Bool)]>([:])

    init(store: any SimulatorStore, credentials: @escaping APNsSimulator.Credentials, report: @escaping APNsSimulator.Reporter,
         decoder: @escaping APNsSimulator.Decoder, faults: SimulatorFaults, now: @escaping @Sendable () -> Date, fcm: SimulatedFCM) {
        self.fcm = fcm
        self.decoder = decoder
        self.store = store
        self.credentials = credentials
        self.report = report
        self.faults = faults
        self.now = now
    }

    func handle(_ exchange: H2Exchange, gateway: Gateway) {
        let count = connections.withLock { all -> Int in
            all[exchange.connectionID, default: (0, false)].requests += 1
            return all[exchange.connectionID]!.requests
        }
        if let every = faults.dropEvery, count % every == 0 { return exchange.dropConnection() }
        if SimulatedFCM.handles(exchange.request.header(":path") ?? "") { return fcm.handle(exchange) }
        if exchange.request.header(":path")?.hasPrefix("/1/apps/") == true { return manageChannels(exchange, gateway: gateway) }
        if exchange.request.header(":path")?.hasPrefix("/4/broadcasts/apps/") == true { return broadcast(exchange, gateway: gateway) }
        let (status, body) = answer(exchange)
        let respond = {
            var headers: [(name: String, value: String)] = [("apns-id", exchange.request.header("apns-id") ?? UUID().uuidString)]
            if body != nil { headers.append(("content-type", "application/json")) }
            exchange.respond(status: status, headers: headers, body: body?.jsonBytes ?? [])
            if let every = self.faults.goAwayEvery, count % every == 0 { exchange.goAway() }
        }
        if faults.latency > .zero { exchange.loop.schedule(after: faults.latency, respond) } else { respond() }
    }

    static func reason(_ reason: String) -> JSONValue { ["reason": .string(reason)] }

    /// A broadcast (X5): the provider token, then Apple's checks of the channel and headers, then every simulated
    /// phone of the application with an activity on the channel gets it. 200 with `apns-request-id` and `apns-unique-id`.
    private func broadcast(_ exchange: H2Exchange, gateway: Gateway) {
        let request = exchange.request
        let uniqueID = UUID().uuidString.lowercased()
        let (status, reason) = broadcastAnswer(request, exchange: exchange, gateway: gateway, uniqueID: uniqueID)
        var headers: [(name: String, value: String)] = [("apns-request-id", request.header("apns-request-id") ?? UUID().uuidString)]
        if status == 200 { headers.append(("apns-unique-id", uniqueID)) }
        let body = reason.map { Self.reason($0).jsonBytes } ?? []
        if !body.isEmpty { headers.append(("content-type", "application/json")) }
        exchange.respond(status: status, headers: headers, body: body)
    }

    private func broadcastAnswer(_ request: H2Message, exchange: H2Exchange, gateway: Gateway, uniqueID: String) -> (Int, String?) {
        guard request.header(":method") == "POST" else { return (405, "MethodNotAllowed") }
        guard let authorization = request.header("authorization"), authorization.hasPrefix("bearer ") else { return (403, "MissingProviderToken") }
        guard let (credential, issuedAt) = verify(String(authorization.dropFirst(7))) else { return (403, "InvalidProviderToken") }
        guard now().timeIntervalSince1970 - Double(issuedAt) <= 3600 else { return (403, "ExpiredProviderToken") }
        exchange.allowStreams(1000)
        let bundleID = request.header(":path").flatMap { $0.hasPrefix("/4/broadcasts/apps/") ? String($0.dropFirst(19)) : nil }
        guard let bundleID else { return (404, "BadPath") }
        if let refusal = SimulatedChannels.topicRefusal(bundleID, credential: credential) { return (refusal.status, refusal.reason) }
        guard let channelID = request.header("apns-channel-id"), !channelID.isEmpty else { return (400, "MissingChannelId") }
        guard let raw = Data(base64Encoded: channelID), !raw.isEmpty else { return (400, "BadChannelId") }
        guard let pushType = request.header("apns-push-type") else { return (400, "MissingPushType") }
        guard PushType(rawValue: pushType) == .liveActivity else { return (400, "InvalidPushType") }
        // Required, and one of Apple's three.
        guard let priority = request.header("apns-priority").flatMap(Int.init), [1, 5, 10].contains(priority) else { return (400, "BadPriority") }
        guard let expiration = request.header("apns-expiration").flatMap(Int64.init) else { return (400, "BadExpirationDate") }
        guard !request.body.isEmpty else { return (400, "PayloadEmpty") }
        guard request.body.count <= BroadcastChannels.maximumPayloadBytes else { return (413, "PayloadTooLarge") }
        let application = credential.application
        return Self.lock.withLock { _ -> (Int, String?) in
            guard let policy = try? store.simulatedChannelPolicy(application: application, id: channelID, gateway: gateway) else {
                return (400, "ChannelNotRegistered")
            }
            // Apple refuses an expiration on a channel that stores nothing; one that stores keeps the latest message.
            guard policy == 1 || expiration == 0 else { return (400, "BadExpirationDate") }
            if policy == 1 {
                // Kept up to 8 hours, or until an earlier apns-expiration; an expiration of 0 keeps nothing.
                let until = min(now().addingTimeInterval(BroadcastChannels.storedMessageLifetime), Date(timeIntervalSince1970: Double(expiration)))
                try? store.saveSimulatedChannelMessage(application: application, id: channelID, payload: expiration == 0 ? nil : request.body,
                                                       keptUntil: until)
            }
            // The application's phones only, a page at a time.
            var after: String?
            while let page = try? store.simulatedDevices(of: application, after: after, limit: 1000), let last = page.last {
                for entry in page {
                    guard var device = try? JSONDecoder().decode(SimulatedDevice.self, from: Data(entry.state.utf8)), device.subscribes(to: channelID),
                          device.uninstalledAt == nil else { continue }
                    device.receiveBroadcast(payload: request.body, channelID: channelID, priority: priority, apnsID: uniqueID, now: now(),
                                            decodingError: { decoder(application, $0, $1, $2) })
                    try? store.save(device, application: application)
                }
                after = last.hwid
            }
            return (200, nil)
        }
    }

    /// Apple's channel management API (X5): the provider token checked as for pushes, then the channel request.
    private func manageChannels(_ exchange: H2Exchange, gateway: Gateway) {
        let request = exchange.request
        var answer: SimulatedChannels.Answer
        if let authorization = request.header("authorization"), authorization.hasPrefix("bearer ") {
            if let (credential, issuedAt) = verify(String(authorization.dropFirst(7))) {
                if now().timeIntervalSince1970 - Double(issuedAt) > 3600 {
                    answer = SimulatedChannels.refusal(403, "ExpiredProviderToken")
                } else {
                    exchange.allowStreams(1000)
                    answer = Self.lock.withLock { _ in
                        SimulatedChannels(store: store, gateway: gateway, now: now).answer(method: request.header(":method") ?? "", path: request.header(":path") ?? "",
                                                                         channelID: request.header("apns-channel-id"), body: request.body,
                                                                         credential: credential)
                    }
                }
            } else {
                answer = SimulatedChannels.refusal(403, "InvalidProviderToken")
            }
        } else {
            answer = SimulatedChannels.refusal(403, "MissingProviderToken")
        }
        var headers: [(name: String, value: String)] = [("apns-request-id", request.header("apns-request-id") ?? UUID().uuidString)]
        if let id = answer.channelID { headers.append(("apns-channel-id", id)) }
        if answer.body != nil { headers.append(("content-type", "application/json")) }
        exchange.respond(status: answer.status, headers: headers, body: answer.body?.jsonBytes ?? [])
    }

    /// Apple's checks in Apple's order, then the device (A5 reasons; issue 6).
    private func answer(_ exchange: H2Exchange) -> (Int, JSONValue?) {
        let request = exchange.request
        guard request.header(":method") == "POST" else { return (405, Self.reason("MethodNotAllowed")) }
        guard let path = request.header(":path"), path.hasPrefix("/3/device/") else { return (404, Self.reason("BadPath")) }
        let token = String(path.dropFirst("/3/device/".count))
        guard HexToken.normalize(token, lengths: 16...400) == token.lowercased() else { return (400, Self.reason("BadDeviceToken")) }

        guard let authorization = request.header("authorization"), authorization.hasPrefix("bearer ") else {
            return (403, Self.reason("MissingProviderToken"))
        }
        guard let (credential, issuedAt) = verify(String(authorization.dropFirst(7))) else { return (403, Self.reason("InvalidProviderToken")) }
        guard now().timeIntervalSince1970 - Double(issuedAt) <= 3600 else { return (403, Self.reason("ExpiredProviderToken")) }
        let trustNow = connections.withLock { all -> Bool in
            defer { all[exchange.connectionID]?.trusted = true }
            return !(all[exchange.connectionID]?.trusted ?? false)
        }
        if trustNow { exchange.allowStreams(1000) }   // the first authenticated request lifts the 1-stream limit (A6)

        guard let pushType = request.header("apns-push-type").flatMap(PushType.init(rawValue:)), PushType.apple.contains(pushType) else { return (400, Self.reason("InvalidPushType")) }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return (400, Self.reason("MissingTopic")) }
        guard topic == pushType.topic(bundleID: credential.bundleID) else { return (400, Self.reason("BadTopic")) }
        let priority = request.header("apns-priority").flatMap(Int.init) ?? 10
        guard [1, 5, 10].contains(priority), request.header("apns-priority").map({ Int($0) != nil }) ?? true else {
            return (400, Self.reason("BadPriority"))
        }
        guard !request.body.isEmpty else { return (400, Self.reason("PayloadEmpty")) }
        guard request.body.count <= 4096 else { return (413, Self.reason("PayloadTooLarge")) }

        let roll = Double.random(in: 0..<1)
        if roll < faults.tooManyRequests { return (429, Self.reason("TooManyRequests")) }
        if roll < faults.tooManyRequests + faults.unavailable { return (503, Self.reason("ServiceUnavailable")) }
        return deliver(to: token.lowercased(), credential: credential, pushType: pushType, priority: priority,
                       apnsID: request.header("apns-id") ?? "", payload: request.body)
    }

    private func deliver(to token: String, credential: SimulatorCredential, pushType: PushType, priority: Int, apnsID: String,
                         payload: [UInt8]) -> (Int, JSONValue?) {
        var started: (ApplicationCode, String, String, String)?
        let outcome: (Int, JSONValue?) = Self.lock.withLock { _ in
            if let entry = try? store.simulatedDevice(token: token),
               var device = try? JSONDecoder().decode(SimulatedDevice.self, from: Data(entry.state.utf8)), device.kind(of: token) != nil {
                guard entry.application == credential.application else { return (400, Self.reason("DeviceTokenNotForTopic")) }
                if let uninstalled = device.uninstalledAt { return (410, ["reason": "Unregistered", "timestamp": .int(uninstalled)]) }
                if let activity = device.receive(payload: payload, token: token, pushType: pushType, priority: priority, apnsID: apnsID,
                                                 now: now(), newToken: { APNsSimulator.token(bytes: 40) },
                                                 decodingError: { decoder(entry.application, $0, $1, $2) },
                                                 channelExists: { id in (try? store.simulatedChannelPolicy(application: entry.application, id: id, gateway: nil)) != nil }) {
                    started = (entry.application, device.hwid, activity.activityID, activity.updateToken)
                }
                try? store.save(device, application: entry.application)
                return (200, nil)
            }
            return (400, Self.reason("BadDeviceToken"))
        }
        if let (application, hwid, activityID, token) = started { report(application, hwid, activityID, token) }
        return outcome
    }

    /// The credential and `iat` of a valid provider token (ES256 by the key its `kid` names, `iss` its team).
    private func verify(_ jwt: String) -> (SimulatorCredential, Int64)? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = try? JSONParser.parse(headerBytes).objectValue, let claims = try? JSONParser.parse(claimBytes).objectValue,
              header["alg"] == "ES256", let keyID = header["kid"]?.stringValue, let credential = credentials(keyID),
              claims["iss"] == .string(credential.key.info.teamID), let issuedAt = claims["iat"]?.intValue,
              credential.key.verify(Array("\(parts[0]).\(parts[1])".utf8), signature: signature) else { return nil }
        return (credential, issuedAt)
    }
}
