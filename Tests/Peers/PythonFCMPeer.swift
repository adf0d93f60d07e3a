import Foundation
import IsletCore
import Synchronization

/// `Tests/Peers/fcm_peer.py` as a child process (issue 46): an FCM HTTP v1 stand-in with its token endpoint, on h2 and
/// PyJWT. Commands on stdin; every request it read is an event (a JSON object) read from its stdout.
public final class PythonFCMPeer: Sendable {
    let process = Process()
    private let input = Pipe()
    private final class Log: Sendable { let events = Mutex<[JSONObject]>([]) }
    private let log = Log()
    public let port: Int

    /// Starts the peer with a TLS certificate and key (PEM files) for 127.0.0.1, the service account's private key (PEM
    /// file: it checks assertions with its public half) and the project id it takes messages for.
    public init(certificate: String, key: String, accountKey: String, project: String) throws {
        let reader = try PythonH2Peer.run(process, "fcm_peer.py", [certificate, key, accountKey, project], input: input)
        let log = self.log
        readJSONObjects(from: reader) { object in log.events.withLock { $0.append(object) } }
        let deadline = ContinuousClock.now + .seconds(10)
        var bound: Int?
        while bound == nil && ContinuousClock.now < deadline {
            bound = log.events.withLock { $0.first { $0["event"] == "listening" }?["port"]?.intValue.map(Int.init) }
            if bound == nil { Thread.sleep(forTimeInterval: 0.01) }
        }
        guard let bound else { throw PeerError("the FCM peer did not start") }
        port = bound
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Sends a command and waits for the peer to confirm it.
    public func command(_ line: String) throws {
        let before = events("ok").count
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        let deadline = ContinuousClock.now + .seconds(5)
        while events("ok").count <= before {
            guard ContinuousClock.now < deadline else { throw PeerError("the FCM peer did not confirm '\(line)'") }
            Thread.sleep(forTimeInterval: 0.005)
        }
    }

    /// The events of one kind (`token`, `send`, `connection`, `ok`), once there are at least `count` of them or 5 s
    /// passed: the peer writes its line before it answers, but the line may reach this process after the answer.
    public func events(_ kind: String, atLeast count: Int = 0) -> [JSONObject] {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let found = log.events.withLock { $0.filter { $0["event"]?.stringValue == kind } }
            if found.count >= count || ContinuousClock.now >= deadline { return found }
            Thread.sleep(forTimeInterval: 0.005)
        }
    }
}
