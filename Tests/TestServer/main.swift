// islet-test-server: `islet serve` with a transport that appends every push to a file instead of
// sending it, slowly, so a test can kill -9 the process in the middle of a fan-out (issue 4).
// Usage: islet-test-server --database PATH|URL --record FILE [--batch-size N] [--batch-delay-ms N] [--workers N] [--shard-span N]
//        [--node-id ID] [--lease-seconds N]
import Foundation
import IsletApp
import IsletCore
import IsletDelivery
import IsletStore

final class FileRecordingTransport: PushTransport {
    /// Opened O_APPEND: several nodes record into one file, each line whole, in the order they were sent.
    let descriptor: Int32
    let node: String
    let delay: TimeInterval

    init(path: String, node: String, delay: TimeInterval) throws {
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown) }
        self.node = node
        self.delay = delay
    }

    /// Like the APNs client, checks `writeBy` at the last moment before the write: a process paused after the
    /// submit writes nothing once it resumes past it.
    func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?) -> PendingOutcomes {
        let pending = PendingOutcomes(count: pushes.count)
        Thread.detachNewThread { [self] in pending.fulfil(record(pushes, writeBy: writeBy)) }
        return pending
    }

    func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome] { record(pushes, writeBy: nil) }

    /// Records the pushes as they are handed over (what a real transport would put on the wire at once), then
    /// waits `delay` for the "answers": a process stopped or killed meanwhile has sent them, unanswered.
    func record(_ pushes: [Push], writeBy: ContinuousClock.Instant?) -> [PushOutcome] {
        var lines = ""
        for push in pushes {
            let line: JSONValue = ["node": .string(node), "token": .string(push.deviceToken), "apns_id": .string(push.apnsID),
                                   "payload": .string(String(decoding: push.payload, as: UTF8.self))]
            lines += line.jsonText + "\n"
        }
        // One write per batch: appends of one write are never interleaved with another process's.
        let bytes = Array(lines.utf8)
        if let writeBy, ContinuousClock.now >= writeBy {
            return pushes.map { _ in .notSent("not written before its sender's claim ran out") }
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written <= 0 { break }
            offset += written
        }
        Thread.sleep(forTimeInterval: delay)
        return pushes.map { _ in .delivered }
    }
}

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

guard let database = option("--database"), let record = option("--record") else {
    FileHandle.standardError.write(Data("usage: islet-test-server --database PATH --record FILE [--batch-size N] [--batch-delay-ms N]\n".utf8))
    exit(64)
}
// A parent may have spawned us with signals blocked (posix_spawn keeps the mask): take SIGTERM's default back.
var unblocked = sigset_t()
sigemptyset(&unblocked)
sigprocmask(SIG_SETMASK, &unblocked, nil)

do {
    let transport = try FileRecordingTransport(path: record, node: option("--node-id") ?? "node",
                                               delay: Double(option("--batch-delay-ms") ?? "20")! / 1000)
    var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: database)
    if let node = option("--node-id").flatMap(NodeID.init) { configuration.node = node }
    let delivery = DeliveryConfiguration(workers: Int(option("--workers") ?? "1")!, batchSize: Int(option("--batch-size") ?? "10")!,
                                         sharding: ShardPolicy(span: Int64(option("--shard-span") ?? "50000")!),
                                         lease: .milliseconds(Int((Double(option("--lease-seconds") ?? "10")! * 1000).rounded())))
    let logger = Logger(label: "islet-test-server")
    let server = try IsletServer(configuration: configuration, logger: logger, transport: transport, delivery: delivery)
    _ = try server.createDemoIfEligible()
    try server.start()
    while true { sleep(60) }
} catch {
    FileHandle.standardError.write(Data("islet-test-server: \(error)\n".utf8))
    exit(1)
}
