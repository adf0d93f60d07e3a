import Foundation
import IsletCore
import Synchronization

/// `Tests/Peers/h2_apns.py` as a child process: commands on stdin, events read from stdout.
public final class PythonH2Peer: Sendable {
    public struct Event: Sendable {
        public let event: String
        public let connection: Int
        public let apnsID: String
        /// The request's `apns-expiration`, when it had one.
        public let expiration: String?
        /// A request's method, path, `apns-channel-id`, `content-type` and body.
        public var method: String?
        public var path: String?
        public var channelID: String?
        public var contentType: String?
        public var body: String?
        /// Events of this kind seen so far, this one included.
        public let count: Int
    }

    let process = Process()
    private let input = Pipe()
    private final class Log: Sendable { let events = Mutex<[Event]>([]) }
    private let log = Log()
    public let url: URL

    static var repository: URL {
        // Tests/Peers/PythonH2Peer.swift → the repository.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Starts the peer with a TLS certificate and key (PEM files) for 127.0.0.1.
    public init(certificate: String, key: String) throws {
        let reader = try Self.run(process, "h2_apns.py", [certificate, key], input: input)
        let port = Mutex<Int?>(nil)
        let log = self.log
        readJSONObjects(from: reader) { object in
            if let listening = object["port"]?.intValue { port.withLock { $0 = Int(listening) } }
            log.events.withLock { list in
                let kind = object["event"]?.stringValue ?? ""
                var event = Event(event: kind, connection: Int(object["connection"]?.intValue ?? 0),
                                  apnsID: object["apns_id"]?.stringValue ?? "",
                                  expiration: object["expiration"]?.stringValue, count: list.filter { $0.event == kind }.count + 1)
                event.method = object["method"]?.stringValue
                event.path = object["path"]?.stringValue
                event.channelID = object["channel_id"]?.stringValue
                event.contentType = object["content_type"]?.stringValue
                event.body = object["body"]?.stringValue
                list.append(event)
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
    public func command(_ line: String) throws {
        let before = log.events.withLock { $0.filter { $0.event == "ok" }.count }
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        guard try wait(deadline: .now + .seconds(5), { $0.event == "ok" && $0.count > before }) != nil else {
            throw PeerError("the h2 peer did not confirm '\(line)'")
        }
    }

    /// The first event that matches, waiting for it until `deadline`.
    public func wait(deadline: ContinuousClock.Instant, _ matches: (Event) -> Bool) throws -> Event? {
        while ContinuousClock.now < deadline {
            if let found = log.events.withLock({ $0.first(where: matches) }) { return found }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return nil
    }

    /// Every request the peer read, once it has reported at least `count` (its report may trail its answer).
    public func requests(atLeast count: Int = 0) throws -> [Event] {
        _ = try wait(deadline: .now + .seconds(5)) { $0.event == "request" && $0.count >= count }
        return log.events.withLock { $0.filter { $0.event == "request" } }
    }
}

public struct PeerError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension PythonH2Peer {
    /// Runs `Tests/Peers/<script>` with `arguments` in `process`, on the tests' .venv Python, reading commands from
    /// `input`; returns what it writes.
    static func run(_ process: Process, _ script: String, _ arguments: [String], input: Pipe) throws -> FileHandle {
        let python = repository.appendingPathComponent(".venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw PeerError("no \(python): run scripts/install-deps (make test does) to install h2 and PyJWT")
        }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [repository.appendingPathComponent("Tests/Peers/" + script).path] + arguments
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        return output.fileHandleForReading
    }
}

/// Reads `handle` on a thread of its own until it closes, handing each line that is a JSON object to `each`, in order.
func readJSONObjects(from handle: FileHandle, _ each: @escaping @Sendable (JSONObject) -> Void) {
    Thread.detachNewThread {
        var buffer = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { return }
            buffer.append(chunk)
            while let newline = buffer.firstIndex(of: 10) {
                let line = buffer[buffer.startIndex..<newline]
                buffer = Data(buffer[(newline + 1)...])
                if let object = try? JSONParser.parse(Array(line)).objectValue { each(object) }
            }
        }
    }
}
