import Foundation
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// Issue 5's benchmark: the APNs client against a sink HTTP/2 server on loopback, side by side in one
/// run with h2load (the ceiling of that sink) and aioapns (a third-party client), all sending the
/// same request: `POST /3/device/<64 hex>`, the APNs headers, a provider token and the same payload.
///
/// The sink runs in a child process (`islet-bench apns-sink`), so the peak RSS read here is the
/// client's alone.
struct APNsBenchmark {
    var pushes = 200_000
    var batch = 1000
    var senders = 2
    var sinkThreads = 1
    var h2loadRequests: Int?
    var aioapnsPushes = 20_000
    var python = ".venv/bin/python3"
    var aioapnsScript = "scripts/bench/aioapns_bench.py"

    static let application = ApplicationCode("BENCH-00001")!
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = PushType.liveActivity.topic(bundleID: "com.example.bench")
    /// A Live Activity update (176 bytes), about the size of the reference examples' updates.
    static let payload = Array(#"{"aps":{"timestamp":1764434739,"event":"update","content-state":{"status":"Third","estimatedTime":"37 min","emoji":"chef"},"alert":{"title":"Food Delivery","body":"Order 12"}}}"#.utf8)
    static let tokenPrefix = String(repeating: "ab", count: 24)

    /// Push number `n`: its own 64-hex device token and apns-id, the shared payload.
    static func push(_ n: Int) -> Push {
        let hex = hex16(UInt64(n))
        return Push(application: application, deviceToken: tokenPrefix + hex, gateway: .production, pushType: .liveActivity,
                    topic: topic, priority: 10, apnsID: "00000000-0000-4000-8000-" + hex.suffix(12), payload: payload)
    }

    static func hex16(_ value: UInt64) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<16 { bytes[15 - index] = digits[Int((value >> (4 * UInt64(index))) & 15)] }
        return String(decoding: bytes, as: UTF8.self)
    }

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-bench-apns-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = directory + "/cert.pem", keyFile = directory + "/key.pem", payloadFile = directory + "/payload.json"
        try TLSContext.writeSelfSigned(certificate: certificate, key: keyFile)
        try Data(Self.payload).write(to: URL(fileURLWithPath: payloadFile))
        let signingKey = APNsSigningKey(info: APNsKeyInfo(teamID: Self.teamID, keyID: Self.keyID, environment: .both),
                                        pem: try String(contentsOfFile: keyFile, encoding: .utf8))

        let sink = try Sink(threads: sinkThreads, certificate: certificate, key: keyFile)
        defer { sink.stop() }
        print("""
            APNs client benchmark: \(ProcessInfo.processInfo.activeProcessorCount) cores; sink (islet-bench apns-sink, \
            \(sinkThreads) thread\(sinkThreads == 1 ? "" : "s")) on 127.0.0.1:\(sink.port), pid \(sink.pid)
            request: POST /3/device/<64 hex>, apns-push-type/topic/priority/id, authorization: bearer <ES256 JWT>, \
            \(Self.payload.count)-byte body
            """)

        // (a) Our client, as the delivery service drives it: `senders` threads, each sending a batch and waiting.
        print("\n(a) IsletAPNs.APNsClient: \(pushes) pushes, batches of \(batch), \(senders) concurrent send() callers")
        let ours = try runClient(url: URL(string: "https://127.0.0.1:\(sink.port)")!, certificate: certificate, key: signingKey, sink: sink)
        let (sinkSeen, sinkBad) = sink.counts()
        print("""
              \(ours.delivered) answered 200, \(ours.failed) other; \(String(format: "%.3f", ours.seconds)) s; \
            \(Self.rate(ours.rate)) pushes/s; CPU \(String(format: "%.2f", ours.cpuSeconds)) s \
            (\(Self.rate(Double(pushes) / ours.cpuSeconds)) pushes per CPU-second); the sink's CPU \(String(format: "%.2f", ours.sinkCPUSeconds)) s
              peak RSS (VmHWM) \(ours.peakRSS / 1024) MB; the sink saw \(sinkSeen) requests, \(sinkBad) not of the expected shape
            """)

        // (b) h2load against the same sink, with the same request.
        let token = try SigningKey(signingKey).providerToken(issuedAt: Date()) ?? ""
        let requests = h2loadRequests ?? pushes
        let h2load = runH2load(sink: sink, requests: requests, token: token, payloadFile: payloadFile)
        let (afterH2load, badH2load) = sink.counts()

        // (c) aioapns, from PyPI, sending the same pushes.
        let aioapns = runAioapns(sink: sink, certificate: certificate, keyFile: keyFile, payloadFile: payloadFile)
        let (afterAioapns, badAioapns) = sink.counts()
        let sinkPeak = sink.peakRSS()

        func cpu(_ seconds: Double) -> String { String(format: "%.2f", seconds) }
        print("""

            | client | requests | answered 200 | pushes/s | its CPU s | sink's CPU s | ours ÷ it |
            |---|---|---|---|---|---|---|
            | IsletAPNs.APNsClient, \(senders) send() callers × batches of \(batch) | \(pushes) | \(ours.delivered) | \
            \(Self.rate(ours.rate)) | \(cpu(ours.cpuSeconds)) | \(cpu(ours.sinkCPUSeconds)) | 1 |
            """)
        if let h2load {
            print("| h2load -c 2 -m 1000 (the ceiling) | \(h2load.requests) | \(h2load.succeeded) | \(Self.rate(h2load.rate)) | "
                  + "\(cpu(h2load.clientCPU)) | \(cpu(h2load.sinkCPU)) | \(String(format: "%.2f", ours.rate / h2load.rate)) |")
        } else {
            print("| h2load | did not run | | | | | |")
        }
        if let aioapns {
            print("| aioapns 4.0, 2 connections, 100 in flight | \(aioapns.requests) | \(aioapns.succeeded) | \(Self.rate(aioapns.rate)) | "
                  + "\(cpu(aioapns.clientCPU)) | \(cpu(aioapns.sinkCPU)) | \(String(format: "%.1f", ours.rate / aioapns.rate)) |")
        } else {
            print("| aioapns | did not run | | | | | |")
        }
        print("""

            our client's peak RSS: \(ours.peakRSS / 1024) MB (VmHWM of this process; the sink is another, \(sinkPeak / 1024) MB)
            the sink answered \(sinkSeen) + \(afterH2load - sinkSeen) + \(afterAioapns - afterH2load) requests, \
            \(sinkBad + badH2load + badAioapns) not shaped like the push
            """)
        print("\ngoals (issue 5):")
        print("  >= 100,000 pushes/s:  \(Self.rate(ours.rate)) — \(ours.rate >= 100_000 ? "met" : "MISSED")")
        if let h2load {
            print("  >= 0.2 of h2load:     \(String(format: "%.2f", ours.rate / h2load.rate)) — \(ours.rate / h2load.rate >= 0.2 ? "met" : "MISSED")")
        }
        if let aioapns {
            print("  >= 50x aioapns:       \(String(format: "%.1f", ours.rate / aioapns.rate))x — \(ours.rate / aioapns.rate >= 50 ? "met" : "MISSED")")
        }
        print("  RSS under 200 MB:     \(ours.peakRSS / 1024) MB — \(ours.peakRSS < 200 * 1024 ? "met" : "MISSED")")
    }

    static func rate(_ value: Double) -> String {
        let whole = Int(value.rounded())
        var digits = String(whole), grouped = ""
        while digits.count > 3 {
            grouped = "," + digits.suffix(3) + grouped
            digits.removeLast(3)
        }
        return digits + grouped
    }

    // MARK: (a) our client

    struct ClientResult {
        var delivered = 0
        var failed = 0
        var seconds = 0.0
        var cpuSeconds = 0.0
        var sinkCPUSeconds = 0.0
        var peakRSS = 0   // KiB
        /// Pushes answered 200 per second.
        var rate: Double { Double(delivered) / seconds }
    }

    func runClient(url: URL, certificate: String, key: APNsSigningKey, sink: Sink) throws -> ClientResult {
        let client = try APNsClient(configuration: APNsClientConfiguration(overrideURL: url, extraCA: certificate),
                                    keys: { _ in key }, logger: .discard)
        defer { client.shutdown() }
        let next = Atomic<Int>(0)
        let delivered = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        let firstFailure = Mutex<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let total = pushes, batch = self.batch
        let cpuBefore = Self.cpuSeconds(), sinkBefore = sink.cpuSeconds()
        let start = ContinuousClock.now
        for index in 0..<senders {
            let thread = Thread {
                nameCurrentThread("bench-sender-\(index)")
                while true {
                    let first = next.add(batch, ordering: .relaxed).oldValue
                    guard first < total else { break }
                    let pushes = (first..<min(first + batch, total)).map(Self.push)
                    var ok = 0
                    for outcome in client.send(pushes) {
                        if outcome.status == 200 {
                            ok += 1
                        } else {
                            firstFailure.withLock { $0 = $0 ?? "\(outcome.status) \(outcome.recordedReason ?? "")" }
                        }
                    }
                    delivered.add(ok, ordering: .relaxed)
                    failed.add(pushes.count - ok, ordering: .relaxed)
                }
                finished.signal()
            }
            thread.start()
        }
        for _ in 0..<senders { finished.wait() }
        let elapsed = ContinuousClock.now - start
        var result = ClientResult()
        result.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        result.cpuSeconds = Self.cpuSeconds() - cpuBefore
        result.sinkCPUSeconds = sink.cpuSeconds() - sinkBefore
        result.delivered = delivered.load(ordering: .relaxed)
        result.failed = failed.load(ordering: .relaxed)
        result.peakRSS = Self.status("VmHWM") ?? 0
        if let failure = firstFailure.withLock({ $0 }) { print("  first failure: \(failure)") }
        return result
    }

    /// User + system CPU time of this process (or of its finished children) so far.
    static func cpuSeconds(_ who: Int32 = RUSAGE_SELF.rawValue) -> Double {
        var usage = rusage()
        getrusage(who, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// A `kB` field of /proc/<pid>/status.
    static func status(_ field: String, pid: String = "self") -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    // MARK: (b) h2load

    struct LoadResult {
        var requests = 0
        var succeeded = 0
        var rate = 0.0
        var clientCPU = 0.0
        var sinkCPU = 0.0
    }

    func runH2load(sink: Sink, requests: Int, token: String, payloadFile: String) -> LoadResult? {
        let port = sink.port
        let push = Self.push(0)
        var arguments = ["h2load", "-n", String(requests), "-c", "2", "-m", "1000", "-t", "1", "-d", payloadFile]
        for (name, value) in push.headers + [("authorization", "bearer \(token)")] { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("https://127.0.0.1:\(port)\(push.path)")
        print("\n(b) h2load against the same sink: \(arguments.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ").replacingOccurrences(of: token, with: "<JWT>"))")
        let childrenBefore = Self.cpuSeconds(RUSAGE_CHILDREN.rawValue), sinkBefore = sink.cpuSeconds()
        let output = Self.runProcess(arguments)
        let h2loadCPU = Self.cpuSeconds(RUSAGE_CHILDREN.rawValue) - childrenBefore, sinkCPU = sink.cpuSeconds() - sinkBefore
        guard let output else {
            print("  h2load did not run (Debian package nghttp2-client; `make bench` installs it)")
            return nil
        }
        var result = LoadResult(requests: requests, clientCPU: h2loadCPU, sinkCPU: sinkCPU)
        for line in output.split(separator: "\n") {
            let words = line.split(separator: " ")
            if line.hasPrefix("finished in"), let index = words.firstIndex(where: { $0.hasPrefix("req/s") }), index > 0 {
                result.rate = Double(words[index - 1]) ?? 0
            }
            if line.hasPrefix("status codes:"), words.count > 2 { result.succeeded = Int(words[2]) ?? 0 }
            if line.hasPrefix("finished in") || line.hasPrefix("requests:") || line.hasPrefix("status codes:") { print("  " + line) }
        }
        print("  h2load's CPU \(String(format: "%.2f", h2loadCPU)) s; the sink's CPU \(String(format: "%.2f", sinkCPU)) s")
        if result.succeeded < requests {
            print("  (h2load opens 100 streams before it reads the sink's SETTINGS; the sink, like APNs, allows 1 at first and refuses the rest)")
        }
        return result.rate > 0 ? result : nil
    }

    // MARK: (c) aioapns

    func runAioapns(sink: Sink, certificate: String, keyFile: String, payloadFile: String) -> LoadResult? {
        let arguments = [python, aioapnsScript, "--port", String(sink.port), "--ca", certificate, "--key", keyFile, "--key-id", Self.keyID,
                         "--team-id", Self.teamID, "--topic", Self.topic, "--payload", payloadFile, "--pushes", String(aioapnsPushes)]
        print("\n(c) aioapns: \(arguments.joined(separator: " "))")
        let childrenBefore = Self.cpuSeconds(RUSAGE_CHILDREN.rawValue), sinkBefore = sink.cpuSeconds()
        let output = FileManager.default.isExecutableFile(atPath: python) ? Self.runProcess(arguments) : nil
        let clientCPU = Self.cpuSeconds(RUSAGE_CHILDREN.rawValue) - childrenBefore, sinkCPU = sink.cpuSeconds() - sinkBefore
        guard let output else {
            print("  aioapns did not run (`make bench` installs it into .venv)")
            return nil
        }
        var result = LoadResult(clientCPU: clientCPU, sinkCPU: sinkCPU)
        let busy = output.split(separator: "\n").filter { $0.hasPrefix("Pool is completely busy") }.count
        if busy > 0 { print("  (aioapns warned \(busy) times: \"Pool is completely busy and has hit max connections, retrying...\")") }
        for line in output.split(separator: "\n") where !line.hasPrefix("Pool is completely busy") {
            print("  " + line)
            guard line.hasPrefix("RESULT ") else { continue }
            for field in line.split(separator: " ").dropFirst() {
                let pair = field.split(separator: "=")
                guard pair.count == 2 else { continue }
                switch pair[0] {
                case "pushes": result.requests = Int(pair[1]) ?? 0
                case "ok": result.succeeded = Int(pair[1]) ?? 0
                case "rate": result.rate = Double(pair[1]) ?? 0
                default: break
                }
            }
        }
        print("  aioapns' CPU (python) \(String(format: "%.2f", clientCPU)) s; the sink's CPU \(String(format: "%.2f", sinkCPU)) s")
        return result.rate > 0 ? result : nil
    }

    /// Runs a program (looked up on PATH) and returns its standard output and error; nil when it did not run or failed.
    static func runProcess(_ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do { try process.run() } catch { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            print(text.split(separator: "\n").suffix(10).map { "  " + $0 }.joined(separator: "\n"))
            return nil
        }
        return text
    }
}

// MARK: The sink

extension APNsBenchmark {
    /// The sink in its child process: started, asked for its counts, stopped (closing its stdin stops it too).
    final class Sink {
        let process = Process()
        let input = Pipe()
        let output = Pipe()
        var buffer: [UInt8] = []
        private(set) var port = 0
        var pid: Int32 { process.processIdentifier }

        init(threads: Int, certificate: String, key: String) throws {
            process.executableURL = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            process.arguments = ["apns-sink", "--threads", String(threads), "--certificate", certificate, "--key", key]
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            let line = readLine()
            guard line.hasPrefix("port "), let port = Int(line.dropFirst(5)) else {
                stop()
                throw SinkError(description: "the sink did not start: \(line)")
            }
            self.port = port
        }

        private func readLine() -> String {
            while true {
                if let newline = buffer.firstIndex(of: 10) {
                    let line = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    return line
                }
                let data = output.fileHandleForReading.availableData
                if data.isEmpty { return "" }
                buffer += data
            }
        }

        /// Requests answered so far, and those not shaped like an APNs push.
        func counts() -> (Int, Int) {
            input.fileHandleForWriting.write(Data("count\n".utf8))
            let words = readLine().split(separator: " ")
            guard words.count == 3 else { return (0, 0) }
            return (Int(words[1]) ?? 0, Int(words[2]) ?? 0)
        }

        /// User + system CPU seconds the sink used so far.
        func cpuSeconds() -> Double {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")") else { return 0 }
            // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }

        /// The sink's peak RSS in KiB.
        func peakRSS() -> Int { APNsBenchmark.status("VmHWM", pid: String(pid)) ?? 0 }

        /// Closes the sink's stdin, which stops it; terminates it if it is still there after 5 s.
        func stop() {
            guard process.isRunning else { return }
            try? input.fileHandleForWriting.close()
            let deadline = ContinuousClock.now + .seconds(5)
            while process.isRunning && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }

    struct SinkError: Error, CustomStringConvertible {
        let description: String
    }

    /// `islet-bench apns-sink`: answers every request 200 with its apns-id, as APNs does, allowing 1
    /// stream per connection until the first request and 1000 after it. Prints `port N`, then answers
    /// `count` on stdin with `count <requests> <malformed>`; exits when stdin closes.
    static func runSink(threads: Int, certificate: String, key: String) throws {
        let seen = Atomic<Int>(0)
        let malformed = Atomic<Int>(0)
        let tls = try TLSContext(serverCertificate: certificate, key: key)
        let server = try H2Server(host: "127.0.0.1", port: 0, tls: tls, threads: threads, initialMaxStreams: 1) { exchange in
            let request = exchange.request
            var id = "", path = false, authorized = false
            for (name, value) in request.headers {
                switch name {
                case "apns-id": id = value
                case ":path": path = value.utf8.count == 74 && value.hasPrefix("/3/device/")
                case "authorization": authorized = value.hasPrefix("bearer ")
                default: break
                }
            }
            seen.add(1, ordering: .relaxed)
            if !path || !authorized || id.isEmpty || request.body.count < 100 { malformed.add(1, ordering: .relaxed) }
            // The client's first stream is 1: after it, the connection may use 1000 (as APNs after a valid token).
            if exchange.stream == 1 { exchange.allowStreams(1000) }
            exchange.respond(status: 200, headers: [("apns-id", id)])
        }
        FileHandle.standardOutput.write(Data("port \(server.port)\n".utf8))
        while let line = Swift.readLine() {
            if line == "count" {
                FileHandle.standardOutput.write(Data("count \(seen.load(ordering: .relaxed)) \(malformed.load(ordering: .relaxed))\n".utf8))
            }
        }
        server.stop()
    }
}
