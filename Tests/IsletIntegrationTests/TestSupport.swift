import Foundation
import IsletAPI
import IsletApp
import IsletCore
import IsletDelivery
import IsletSQL
import IsletSQLite
import IsletTestPeers
import Synchronization
import IsletStore
#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 client over a raw socket to 127.0.0.1, so tests control every byte sent.
struct RawHTTPResponse {
    let status: Int
    let headers: [String: String]
    let body: [UInt8]

    var json: JSONValue? { try? JSONParser.parse(body) }
    var statusCode: Int64? { json?.objectValue?["status_code"]?.intValue }
    var message: String? { json?.objectValue?["status_message"]?.stringValue }
}

struct TestClientError: Error, CustomStringConvertible {
    let description: String
}

final class RawHTTPConnection {
    let fd: Int32

    init(port: Int) throws {
        do {
            fd = try LoopbackSocket.connect(port: port, timeout: 20)
        } catch {
            throw TestClientError(description: error.description)
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { throw TestClientError(description: "write failed: errno \(errno)") }
            offset += written
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads until the server closes the connection, then parses one response.
    func readResponse() throws -> RawHTTPResponse {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        guard let split = data.firstRange(of: Array("\r\n\r\n".utf8)) else {
            throw TestClientError(description: "no complete response: \(String(decoding: data, as: UTF8.self))")
        }
        let head = String(decoding: data[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return RawHTTPResponse(status: status, headers: headers, body: Array(data[split.upperBound...]))
    }
}

/// Sends one request with `Connection: close` and returns the response.
func request(_ port: Int, method: String = "POST", _ path: String, body: String? = nil,
             headers: [String: String] = [:]) throws -> RawHTTPResponse {
    let connection = try RawHTTPConnection(port: port)
    var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    let bodyBytes = Array((body ?? "").utf8)
    if body != nil { head += "Content-Type: application/json\r\nContent-Length: \(bodyBytes.count)\r\n" }
    try connection.send(Array((head + "\r\n").utf8) + bodyBytes)
    return try connection.readResponse()
}

/// The engine the integration suite runs on: SQLite, or PostgreSQL with `ISLET_TEST_ENGINE=postgresql`
/// (`make test` runs the suite once on each).
enum IntegrationEngine {
    static let isPostgreSQL = ProcessInfo.processInfo.environment["ISLET_TEST_ENGINE"] == "postgresql"

    /// The database of a test's directory: an SQLite file in it, or a PostgreSQL database made for it and
    /// recorded in it, so that a server started again on the directory finds the same data.
    static func database(in directory: URL) throws -> String {
        guard isPostgreSQL else { return directory.appendingPathComponent("islet.sqlite").path }
        let record = directory.appendingPathComponent("postgresql-url")
        if let known = try? String(contentsOf: record, encoding: .utf8) { return known }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let created = try TestPostgres.createDatabase()
        try created.url.write(to: record, atomically: true, encoding: .utf8)
        return created.url
    }

    /// Removes the directory and, on PostgreSQL, the database recorded in it.
    static func remove(_ directory: URL) {
        if let url = try? String(contentsOf: directory.appendingPathComponent("postgresql-url"), encoding: .utf8),
           let name = url.components(separatedBy: "search_path%3D").last, name != url {
            TestPostgres.Database(name: name, url: url).drop()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// The real server on 127.0.0.1, port 0, with a fresh database; stopped when released.
final class RunningServer {
    let directory: URL
    let server: IsletServer
    var port: Int { server.port }
    let database: String

    /// `transport` receives every push; `clock` is the server's time.
    /// `apns`: send through the real APNs client to this URL, trusting this CA file (no `transport`).
    init(demo: Bool = true, transport: (any PushTransport)? = nil, clock: TestClock? = nil, directory: URL? = nil,
         delivery: DeliveryConfiguration? = nil, apns: (url: String, ca: String)? = nil,
         rateLimits: RateLimits = RateLimits(), logger: Logger = .discard, configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        self.directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("islet-it-\(UUID().uuidString)")
        database = try IntegrationEngine.database(in: self.directory)
        var configuration = ServerConfiguration(
            listen: ListenAddress(host: "127.0.0.1", port: 0),
            database: database,
            apns: apns == nil ? .simulator : .apple, apnsURL: apns?.url, apnsCA: apns?.ca)
        configuration.rateLimits = rateLimits
        configuration.auditLogSetting = self.directory.appendingPathComponent("audit.log").path
        configure(&configuration)
        let delivery = delivery ?? DeliveryConfiguration(workers: 2, batchSize: 3, retry: RetryPolicy(firstDelay: .seconds(1), maximumDelay: .seconds(8)),
                                                         idlePoll: .milliseconds(50))
        let now: @Sendable () -> Date
        if let clock { now = { clock.now } } else { now = { Date() } }
        server = try IsletServer(configuration: configuration, logger: logger, transport: transport, delivery: delivery, clock: now)
        if demo { _ = try server.createDemoIfEligible() }
        try server.start()
    }

    /// What `islet app …` does from another process: its own handle on the same file. A change of an existing
    /// token or application made so reaches the running server's cached credentials within a second.
    func admin() throws -> ApplicationAdmin {
        ApplicationAdmin(store: try Storage(StorageLocation(database)).applications(masterKey: nil))
    }

    /// A change made through the server's own store (as the console makes it): the next call sees it.
    func serverAdmin() -> ApplicationAdmin {
        ApplicationAdmin(store: server.store)
    }

    /// Stops without removing the database, to start another server on it.
    func stop() { server.shutdown() }

    /// Moves `clock` `step` seconds at a time, sending the delivery workers to look each time, until `condition`
    /// holds (or `seconds` of real time pass).
    func advanceUntil(_ clock: TestClock, step: TimeInterval, seconds: TimeInterval = 10, _ condition: () throws -> Bool) rethrows -> Bool {
        try eventually(seconds) {
            if try condition() { return true }
            clock.advance(step)
            server.delivery?.kick()
            return false
        }
    }

    /// Sends a worker to look for work and waits until a look has found none: whatever was due has been taken by then.
    func lookFindsNothing() -> Bool {
        guard let delivery = server.delivery else { return false }
        let looks = delivery.metrics.clusterSnapshot().emptyLooks
        delivery.kick()
        return eventually { delivery.metrics.clusterSnapshot().emptyLooks > looks }
    }

    deinit {
        server.shutdown()
        IntegrationEngine.remove(directory)
    }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>
    init(_ start: Date = Date()) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

extension RecordingTransport {
    /// A fake APNs that also plays Apple's channel management API: every channel it creates is `channelID`; deletes answer 204.
    static func withChannels(_ channelID: String = "Y2hhbm5lbC0x", answer: @escaping @Sendable (Push, Int) -> PushOutcome = { _, _ in .delivered })
        -> RecordingTransport {
        RecordingTransport { push, sent in
            guard case .manageChannels(let method, _, _) = push.route else { return answer(push, sent) }
            if method == "DELETE" { return PushOutcome(status: 204) }
            var created = PushOutcome(status: 201)
            created.management = ManagementResponse(channelID: channelID, body: [])
            return created
        }
    }
}

/// A fake APNs: records every push and answers 200, or what `answer` says for a push.
final class RecordingTransport: PushTransport {
    private let state = Mutex<[Push]>([])
    private let answer: @Sendable (Push, Int) -> PushOutcome

    /// `answer` gets the push and how many times this apns-id was sent before.
    init(answer: @escaping @Sendable (Push, Int) -> PushOutcome = { _, _ in .delivered }) { self.answer = answer }

    func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome] {
        batchSizes.withLock { $0.append(pushes.count) }
        // Answered outside the lock: a slow answer for one push must not hold up other workers' sends.
        let earlier = state.withLock { sent in
            pushes.map { push in
                defer { sent.append(push) }
                return sent.filter { $0.apnsID == push.apnsID }.count
            }
        }
        return zip(pushes, earlier).map { answer($0, $1) }
    }

    var pushes: [Push] { state.withLock { $0 } }
    /// How many pushes each send carried, in order.
    let batchSizes = Mutex<[Int]>([])
    func reset() { state.withLock { $0 = [] } }
}

/// Runs a program to its end and returns its exit status and everything it printed (stdout and stderr).
func runProgram(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                in directory: URL? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    if let directory { process.currentDirectoryURL = directory }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}

/// The nodes `islet cluster status --json` lists for `database`, by node id (empty when the command fails).
func clusterNodes(_ database: String) -> [String: JSONObject] {
    guard let status = try? runProgram(try builtExecutable("islet"), ["cluster", "status", "--json", "--database", database]),
          let nodes = try? JSONParser.parse(Array(status.output.utf8)).objectValue?["nodes"]?.arrayValue else { return [:] }
    return Dictionary(nodes.compactMap { node in node.objectValue.flatMap { object in object["node"]?.stringValue.map { ($0, object) } } },
                      uniquingKeysWith: { $1 })
}

/// Polls `condition` until it holds or `seconds` pass.
func eventually(_ seconds: TimeInterval = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}

/// The path of an executable of this package, built beside the test bundle.
func builtExecutable(_ name: String) throws -> URL {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    let fallback = packageRoot.appendingPathComponent(".build/debug/\(name)")
    guard FileManager.default.isExecutableFile(atPath: fallback.path) else {
        throw TestClientError(description: "\(name) is not built; run swift build --build-tests first")
    }
    return fallback
}
