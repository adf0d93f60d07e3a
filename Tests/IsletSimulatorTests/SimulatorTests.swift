import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletSimulator
import IsletSQL
import IsletSQLite
import IsletStore
import Synchronization

/// A blocking HTTP/2 client for hand-made requests, to drive every check of the simulator.
final class RawH2Client: H2ConnectionDelegate, @unchecked Sendable {
    let loop = EventLoop(name: "test-h2-client")
    private var connection: H2Connection?
    private var ready = false
    private var waiting: [(H2Message, (H2Message?) -> Void)] = []
    private var callbacks: [Int32: (H2Message?) -> Void] = [:]
    private let opened = DispatchSemaphore(value: 0)

    init(port: Int, ca: String) throws {
        let tls = try TLSContext(clientTrusting: ca)
        loop.execute { [self] in connection = try? H2Connection.connect(loop: loop, host: "127.0.0.1", port: port, tls: tls, delegate: self) }
    }

    func h2Ready(_ connection: H2Connection) {
        ready = true
        for (request, done) in waiting { submit(request, done) }
        waiting = []
    }

    private func submit(_ request: H2Message, _ done: @escaping (H2Message?) -> Void) {
        guard let stream = connection?.submitRequest(request) else { return done(nil) }
        callbacks[stream] = done
    }

    func h2StreamClosed(_ connection: H2Connection, stream: Int32, response: H2Message?, errorCode: UInt32) {
        callbacks.removeValue(forKey: stream)?(response)
    }

    func h2Closed(_ connection: H2Connection, reason: String) {
        for (_, done) in callbacks { done(nil) }
        callbacks = [:]
    }

    /// Sends and waits: (status, reason, timestamp).
    func send(_ headers: [(name: String, value: String)], body: [UInt8]) -> (status: Int, reason: String?, timestamp: Int64?) {
        let result = Mutex<(Int, String?, Int64?)>((0, nil, nil))
        let done = DispatchSemaphore(value: 0)
        let request = H2Message(headers: headers, body: body)
        loop.execute { [self] in
            let finish: (H2Message?) -> Void = { response in
                let json = response.flatMap { try? JSONParser.parse($0.body).objectValue }
                result.withLock { $0 = (Int(response?.header(":status") ?? "0") ?? 0, json?["reason"]?.stringValue, json?["timestamp"]?.intValue) }
                done.signal()
            }
            if ready { submit(request, finish) } else { waiting.append((request, finish)) }
        }
        _ = done.wait(timeout: .now() + 10)
        return result.withLock { $0 }
    }

    func peerMaxStreams() -> UInt32 {
        let value = Mutex<UInt32>(0)
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in value.withLock { $0 = connection?.peerMaxStreams ?? 0 }; done.signal() }
        done.wait()
        return value.withLock { $0 }
    }

    deinit { loop.stop() }
}

/// A simulator with one application (its key, bundle id) and its simulated devices in a temporary database.
final class SimulatorWorld: @unchecked Sendable {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-sim-\(UUID().uuidString)")
    let app = ApplicationCode("SIMAP-00001")!
    let other = ApplicationCode("OTHER-00002")!
    let store: SQLSimulatorStore
    let simulator: APNsSimulator
    let key: SigningKey
    let otherKey: SigningKey
    let certificate: String
    let client: APNsClient

    init(faults: SimulatorFaults = SimulatorFaults()) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificate = directory.appendingPathComponent("cert.pem").path
        let keyFile = directory.appendingPathComponent("key.pem").path
        try TLSContext.writeSelfSigned(certificate: certificate, key: keyFile)
        let database = try SQLiteDatabase(path: directory.appendingPathComponent("islet.sqlite").path)
        let applications = SQLApplicationStore(database: database)
        for code in [app, other] {
            try applications.createApplication(Application(code: code, name: "x", bundleID: "com.example.\(code == app ? "food" : "other")",
                                                           createdAt: Date()), tokens: [], apnsKey: nil)
        }
        store = SQLSimulatorStore(database: database)
        let signing = APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both),
                                     pem: try String(contentsOfFile: keyFile, encoding: .utf8))
        let otherSigning = APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM654321", keyID: "KEY7654321", environment: .both),
                                          pem: signing.pem)
        key = try SigningKey(signing)
        otherKey = try SigningKey(otherSigning)
        let (app, other, key, otherKey) = (self.app, self.other, self.key, self.otherKey)
        let box = ReportBox()
        self.reportBox = box
        simulator = try APNsSimulator(
            store: store,
            credentials: { keyID in
                keyID == "KEY1234567" ? SimulatorCredential(key: key, application: app, bundleID: "com.example.food")
                    : keyID == "KEY7654321" ? SimulatorCredential(key: otherKey, application: other, bundleID: "com.example.other") : nil
            },
            report: { _, hwid, activity, token in box.append((hwid, activity, token)) },
            tls: try TLSContext(serverCertificate: certificate, key: keyFile), faults: faults)
        var configuration = APNsClientConfiguration(overrideURL: URL(string: "https://127.0.0.1:\(simulator.port)")!, extraCA: certificate)
        configuration.sandboxOverrideURL = URL(string: "https://127.0.0.1:\(simulator.sandboxPort)")
        client = try APNsClient(configuration: configuration,
                                keys: { $0 == app ? signing : $0 == other ? otherSigning : nil }, logger: .discard)
    }

    let reportBox: ReportBox

    final class ReportBox: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [(hwid: String, activity: String, token: String)] = []
        func append(_ item: (String, String, String)) { lock.lock(); items.append(item); lock.unlock() }
        var all: [(hwid: String, activity: String, token: String)] { lock.lock(); defer { lock.unlock() }; return items }
    }

    @discardableResult
    func addDevice(_ hwid: String, ios: String = "17.4", locked: Bool = false, application: ApplicationCode? = nil) throws -> SimulatedDevice {
        let device = SimulatedDevice(application: (application ?? app).rawValue, hwid: hwid, iosVersion: ios, locked: locked,
                                     pushToken: APNsSimulator.token(bytes: 32), pushToStartTokens: ["": APNsSimulator.token(bytes: 40)])
        try store.save(device, application: application ?? app)
        return device
    }

    func device(_ hwid: String, application: ApplicationCode? = nil) throws -> SimulatedDevice {
        let text = try #require(try store.simulatedDevice(application: application ?? app, hwid: hwid))
        return try JSONDecoder().decode(SimulatedDevice.self, from: Data(text.utf8))
    }

    func push(to token: String, _ aps: JSONValue, priority: Int = 10, type: PushType = .liveActivity) -> PushOutcome {
        let topic = type.topic(bundleID: "com.example.food")
        return client.send([Push(application: app, deviceToken: token, gateway: .production, pushType: type, topic: topic, priority: priority,
                                 apnsID: UUID().uuidString, payload: JSONValue.object(["aps": aps]).jsonBytes)])[0]
    }

    static func start(_ id: String, timestamp: Int64 = 100, state: JSONValue = ["step": 1], relevance: Int64? = nil) -> JSONValue {
        var aps: JSONObject = ["timestamp": .int(timestamp), "event": "start", "content-state": state, "attributes-type": "FoodDeliveryAttributes",
                               "attributes": ["pushwoosh": ["activityId": .string(id)]], "alert": ["title": "Order"]]
        if let relevance { aps["relevance-score"] = .int(relevance) }
        return .object(aps)
    }

    deinit {
        client.shutdown()
        simulator.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
