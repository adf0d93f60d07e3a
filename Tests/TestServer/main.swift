// islet-test-server: `islet serve` with a transport that appends every push to a file instead of
// sending it, slowly, so a test can kill -9 the process in the middle of a fan-out (issue 4).
// Usage: islet-test-server --database PATH --record FILE [--batch-size N] [--batch-delay-ms N] [--workers N] [--shard-span N]
import Foundation
import IsletApp
import IsletCore
import IsletDelivery
import IsletStore

final class FileRecordingTransport: PushTransport {
    let handle: FileHandle
    let delay: TimeInterval
    let lock = NSLock()

    init(path: String, delay: TimeInterval) throws {
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        handle.seekToEndOfFile()
        self.delay = delay
    }

    func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome] {
        Thread.sleep(forTimeInterval: delay)
        lock.lock()
        defer { lock.unlock() }
        var lines = ""
        for push in pushes {
            let line: JSONValue = ["token": .string(push.deviceToken), "apns_id": .string(push.apnsID),
                                   "payload": .string(String(decoding: push.payload, as: UTF8.self))]
            lines += line.jsonText + "\n"
        }
        // Written and flushed before answering: what the recorder holds was really "sent".
        handle.write(Data(lines.utf8))
        try? handle.synchronize()
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
    let transport = try FileRecordingTransport(path: record, delay: Double(option("--batch-delay-ms") ?? "20")! / 1000)
    let configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: database)
    let delivery = DeliveryConfiguration(workers: Int(option("--workers") ?? "1")!, batchSize: Int(option("--batch-size") ?? "10")!,
                                         sharding: ShardPolicy(span: Int64(option("--shard-span") ?? "50000")!))
    let logger = Logger(label: "islet-test-server")
    let server = try IsletServer(configuration: configuration, logger: logger, transport: transport, delivery: delivery)
    _ = try server.createDemoIfEligible()
    try server.start()
    while true { sleep(60) }
} catch {
    FileHandle.standardError.write(Data("islet-test-server: \(error)\n".utf8))
    exit(1)
}
