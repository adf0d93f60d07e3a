import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// The APNs client against `Tests/Peers/h2_apns.py`, an HTTP/2 server built on Python's `h2` package:
/// a peer that shares no code with Islet, driven from the test to go idle, close, stall and fail.
@Suite("APNs client against an independent HTTP/2 server")
struct IndependentPeerTests {
    let files: TestFiles
    let key: SigningKey

    init() throws {
        files = try TestFiles()
        key = try SigningKey(files.signingKey)
    }

    func client(_ peer: PythonH2Peer, _ configure: (inout APNsClientConfiguration) -> Void = { _ in }) throws -> APNsClient {
        let signingKey = files.signingKey
        var configuration = APNsClientConfiguration(overrideURL: peer.url, extraCA: files.certificate,
                                                    reconnectDelays: (.milliseconds(20), .milliseconds(200)))
        configure(&configuration)
        return try APNsClient(configuration: configuration, keys: { $0 == application ? signingKey : nil }, logger: .discard)
    }

    /// The reported stall: a push after 16 s idle (past the 15 s check) with default settings.
    @Test func aPushAfterALongIdleLeavesAtOnce() throws {
        let peer = try PythonH2Peer(files: files)
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
        let peer = try PythonH2Peer(files: files)
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
        let peer = try PythonH2Peer(files: files)
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
        let peer = try PythonH2Peer(files: files)
        let client = try client(peer)
        defer { client.shutdown() }
        #expect(client.send([push(1)]).first?.status == 200)
        try peer.command("drop-next")
        let outcome = try #require(client.send([push(2)], deadline: .now + .seconds(10)).first)
        #expect(outcome.status == 0 && outcome.fate == .unknown, "\(outcome)")
        #expect(client.send([push(3)]).first?.status == 200)
        #expect(try peer.requests(atLeast: 3).count == 3, "push 2 reached the peer once")
    }

    /// Shutdown answers what is in flight and stops within its deadline, even with APNs stalled.
    @Test func shutdownIsBoundedWithPushesInFlight() throws {
        let peer = try PythonH2Peer(files: files)
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

    /// The length of quiet under test; nothing is asserted about what happens during it.
    func idle(_ seconds: Double) { Thread.sleep(forTimeInterval: seconds) }
}

/// `Tests/Peers/h2_apns.py` as a child process: commands on stdin, events read from stdout.
final class PythonH2Peer: Sendable {
    struct Event: Sendable {
        let event: String
        let connection: Int
        let apnsID: String
        /// Events of this kind seen so far, this one included.
        let count: Int
    }

    let process = Process()
    private let input = Pipe()
    private final class Log: Sendable { let events = Mutex<[Event]>([]) }
    private let log = Log()
    let url: URL

    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    init(files: TestFiles) throws {
        let python = Self.repository.appendingPathComponent(".venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw PeerError("no \(python): run scripts/install-deps (make test does) to install the h2 package")
        }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.repository.appendingPathComponent("Tests/Peers/h2_apns.py").path, files.certificate, files.key]
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        let reader = output.fileHandleForReading
        let port = Mutex<Int?>(nil)
        let log = self.log
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { return }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 10) {
                    let line = buffer[buffer.startIndex..<newline]
                    buffer = Data(buffer[(newline + 1)...])
                    guard let object = try? JSONParser.parse(Array(line)).objectValue else { continue }
                    if let listening = object["port"]?.intValue { port.withLock { $0 = Int(listening) } }
                    log.events.withLock { list in
                        let kind = object["event"]?.stringValue ?? ""
                        list.append(Event(event: kind, connection: Int(object["connection"]?.intValue ?? 0),
                                          apnsID: object["apns_id"]?.stringValue ?? "", count: list.filter { $0.event == kind }.count + 1))
                    }
                }
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while port.withLock({ $0 }) == nil && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        guard let bound = port.withLock({ $0 }) else { throw PeerError("the h2 peer did not start") }
        url = URL(string: "https://127.0.0.1:\(bound)")!
    }

    deinit {
        // SIGKILL: a child of the test runner may inherit an ignored SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Sends a command and waits for the peer to confirm it.
    func command(_ line: String) throws {
        let before = log.events.withLock { $0.filter { $0.event == "ok" }.count }
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        guard try wait(deadline: .now + .seconds(5), { $0.event == "ok" && $0.count > before }) != nil else {
            throw PeerError("the h2 peer did not confirm '\(line)'")
        }
    }

    /// The first event that matches, waiting for it until `deadline`.
    func wait(deadline: ContinuousClock.Instant, _ matches: (Event) -> Bool) throws -> Event? {
        while ContinuousClock.now < deadline {
            if let found = log.events.withLock({ $0.first(where: matches) }) { return found }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return nil
    }

    /// Every request the peer read, once it has reported at least `count` (its report may trail its answer).
    func requests(atLeast count: Int = 0) throws -> [Event] {
        _ = try wait(deadline: .now + .seconds(5)) { $0.event == "request" && $0.count >= count }
        return log.events.withLock { $0.filter { $0.event == "request" } }
    }
}

struct PeerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
