import Foundation
import IsletAPI
import IsletApp
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// `islet-bench e2e`: Islet as a user runs it, end to end. Devices are registered through the HTTP API,
/// one `startLiveActivity` by filter fans out to all of them, and nginx (Debian's, one worker, TLS,
/// HTTP/2, `return 200` with the apns-id) stands in for APNs; h2load measures the same nginx in the
/// same run (the ceiling). Then the latency of a one-device update while two large fan-outs run.
struct EndToEndBenchmark {
    var devices = 100_000
    var clients = 4
    var probes = 5
    /// Android phones instead of iPhones: the fan-out goes through FCM HTTP v1 (nginx standing in for FCM and its
    /// token endpoint), one Live Update each (issue 46).
    var android = false

    func run() throws {
        let world = try NginxWorld(name: "e2e", android: android)
        defer { world.stop() }
        let nginx = world.nginx, port = world.port, app = world.app, auth = world.auth
        print("Islet end to end: \(devices) \(android ? "Android phones" : "iPhones") registered through the API, one startLiveActivity by filter, nginx \(nginx.version) on 127.0.0.1:\(nginx.port) as \(android ? "FCM" : "APNs")")
        print("machine: \(ProcessInfo.processInfo.processorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB")

        // 1. Devices through the API: registerDevice with a tag, then the push-to-start token, from `clients` connections.
        var started = ContinuousClock.now
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: clients) { client in
            guard let http = try? KeepAliveClient(port: port) else { failures.add(1, ordering: .relaxed); return }
            for n in stride(from: client, to: devices + 1, by: clients) {
                // Tokens look random, as real ones do (the push-token index keys on their first 16 hex digits).
                let spread = String(format: "%016llx", UInt64(n) &* 0x9E37_79B9_7F4A_7C15)
                let hwid = "bench-\(n)", token = String(repeating: spread, count: 4), start = String(repeating: spread, count: 5)
                let tag = #""tags":{"Bench":"\#(n == devices ? "probe" : "yes")"}"#
                if android {
                    // As the Pushwoosh Android SDK registers: device_type 3, an FCM token, Android's release as os_version.
                    let register = #"{"request":{"application":"\#(app)","auth":"\#(auth)","hwid":"\#(hwid)","push_token":"fcm:\#(token)","device_type":3,"os_version":"16",\#(tag)}}"#
                    if (try? http.post("/json/1.3/registerDevice", register)) != 200 { failures.add(2, ordering: .relaxed) }
                    continue
                }
                let register = #"{"request":{"application":"\#(app)","auth":"\#(auth)","hwid":"\#(hwid)","push_token":"\#(token)",\#(tag)}}"#
                let pushToStart = #"{"request":{"application":"\#(app)","auth":"\#(auth)","hwid":"\#(hwid)","activity_push_to_start_token":"\#(start)"}}"#
                if (try? http.post("/json/1.3/registerDevice", register)) != 200 { failures.add(1, ordering: .relaxed) }
                if (try? http.post("/json/1.3/setActivityPushToStartToken", pushToStart)) != 200 { failures.add(1, ordering: .relaxed) }
            }
        }
        let registration = ContinuousClock.now - started
        print(String(format: "registered %d devices (+1 probe) in %.1f s: %.0f API calls/s, %d failed", devices, registration.seconds,
                     Double((android ? 1 : 2) * (devices + 1)) / registration.seconds, failures.load(ordering: .relaxed)))
        let http = try KeepAliveClient(port: port)
        _ = try http.call("createFilter", app, auth, #""name":"ALL","conditions":[["Bench","EQ","yes"]]"#)
        _ = try http.call("createFilter", app, auth, #""name":"PROBE","conditions":[["Bench","EQ","probe"]]"#)

        // 2. One start by filter to every device, timed from the request until getMessageDetails counts all sent.
        let before = nginx.requests()
        // CPU time beside the wall clock: on a shared 2-core machine the rate varies run to run, CPU per push much less.
        let cpuBefore = (islet: ClusterBenchmark.cpuSeconds(), nginx: ClusterBenchmark.cpuSeconds(named: "nginx"))
        started = ContinuousClock.now
        let fanOut = try startByFilter(http, app, auth, id: "FANOUT", filter: "ALL")
        // Counted where the pushes land (nginx's log), so measuring does not load Islet; then checked in Islet's own record.
        try nginx.waitForRequests(before + devices, deadline: .now + .seconds(600))
        let fanOutTime = ContinuousClock.now - started
        let cpu = (islet: ClusterBenchmark.cpuSeconds() - cpuBefore.islet, nginx: ClusterBenchmark.cpuSeconds(named: "nginx") - cpuBefore.nginx)
        try waitUntilSent(http, app, auth, fanOut, count: devices, deadline: .now + .seconds(60))
        let ours = Double(devices) / fanOutTime.seconds
        print(String(format: "\n(a) Islet: start by filter to %d devices delivered in %.2f s: %.0f pushes/s (nginx counted %d requests)",
                     devices, fanOutTime.seconds, ours, nginx.requests() - before))
        print(String(format: "    CPU per push: Islet (this process) %.1f µs, nginx %.1f µs", cpu.islet * 1e6 / Double(devices), cpu.nginx * 1e6 / Double(devices)))
        print("    peak RSS of the bench process (Islet, its API clients): \(Self.peakRSS() / 1024) MB")

        // 3. h2load against the same nginx, same request shape; the better of two stream depths, on 2 connections as
        //    Islet's pool to one APNs host, is the ceiling. Issue 43 also names 4 connections of 250 streams each: beside it.
        let ceiling = [h2load(port: nginx.port, requests: devices, streams: 100), h2load(port: nginx.port, requests: devices, streams: 1000)]
            .compactMap { $0 }.max()
        let fourConnections = h2load(port: nginx.port, requests: devices, streams: 250, connections: 4)

        // 4. A one-device update while two large fan-outs run (an Android phone needs no update token: its start made it one of the activity's).
        _ = try waitUntilSent(http, app, auth, try startByFilter(http, app, auth, id: "PROBE", filter: "PROBE"), count: 1, deadline: .now + .seconds(60))
        if !android { _ = try http.post("/json/1.3/setActivityToken", #"{"request":{"application":"\#(app)","auth":"\#(auth)","hwid":"bench-\#(devices)","activity_id":"PROBE","activity_token":"\#(String(repeating: "ab", count: 32))"}}"#) }
        let big = try [startByFilter(http, app, auth, id: "BIG1", filter: "ALL"), startByFilter(http, app, auth, id: "BIG2", filter: "ALL")]
        var latencies: [Double] = []
        for n in 0..<probes {
            let begin = ContinuousClock.now
            let update = try http.call("updateLiveActivity", app, auth,
                                       #""notifications":[{"live_activity":{"event":"update","content-state":{"n":\#(n)}},"live_activity_id":"PROBE"}]"#)
            guard let code = Self.messageCode(update) else { throw BenchError("updateLiveActivity failed: \(update)") }
            try waitUntilSent(http, app, auth, code, count: 1, deadline: .now + .seconds(60), poll: .milliseconds(2))
            latencies.append((ContinuousClock.now - begin).seconds * 1000)
            // One interval apart (A9): a probe sooner after the last would wait for its turn, by design.
            Thread.sleep(forTimeInterval: max(0.2, UpdatePacing.standard.interval))
        }
        let bigSent = try big.map { try sentCount(http, app, auth, $0) }
        print(String(format: "\n(c) one-device update while two %d-device fan-outs run (%@ of them sent when the last update landed):",
                     devices, bigSent.map(String.init).joined(separator: " and ")))
        print("    API answer to push answered by nginx, ms: " + latencies.map { String(format: "%.0f", $0) }.joined(separator: ", "))
        for code in big { try waitUntilSent(http, app, auth, code, count: devices, deadline: .now + .seconds(900)) }

        print("\n| scenario | devices | time | rate | ratio to h2load |")
        print("|---|---|---|---|---|")
        print(String(format: "| Islet: start by filter, API to last push answered | %d | %.2f s | %.0f pushes/s | %@ |", devices, fanOutTime.seconds, ours,
                     ceiling.map { String(format: "%.2f", ours / $0) } ?? "n/a"))
        if let ceiling { print(String(format: "| h2load -c 2, same nginx (best of -m 100, -m 1000) | %d | | %.0f req/s | 1.00 |", devices, ceiling)) }
        if let fourConnections {
            print(String(format: "| h2load -c 4 -m 250, same nginx | %d | | %.0f req/s | Islet at %.2f of it |", devices, fourConnections, ours / fourConnections))
        }
        print(String(format: "| one-device update during two fan-outs | 1 | max %.0f ms | | |", latencies.max() ?? 0))
    }

    func startByFilter(_ http: KeepAliveClient, _ app: String, _ auth: String, id: String, filter: String) throws -> String {
        let response = try http.call("startLiveActivity", app, auth, #""notifications":[{"title":"Bench","live_activity":{"event":"start","content-state":{"status":"go"},"attributes-type":"BenchAttributes","attributes":{}},"live_activity_id":"\#(id)","filter":"\#(filter)"}]"#)
        guard let code = Self.messageCode(response) else { throw BenchError("startLiveActivity failed: \(response)") }
        return code
    }

    static func messageCode(_ response: String) -> String? {
        (try? JSONParser.parse(Array(response.utf8)))?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue
    }

    func sentCount(_ http: KeepAliveClient, _ app: String, _ auth: String, _ code: String) throws -> Int {
        let response = try http.call("getMessageDetails", app, auth, #""message":"\#(code)""#)
        let counts = (try? JSONParser.parse(Array(response.utf8)))?.objectValue?["response"]?.objectValue?["message"]?.objectValue?["counts"]?.objectValue
        return Int(counts?["sent"]?.intValue ?? 0)
    }

    func waitUntilSent(_ http: KeepAliveClient, _ app: String, _ auth: String, _ code: String, count: Int, deadline: ContinuousClock.Instant,
                       poll: Duration = .milliseconds(20)) throws {
        while try sentCount(http, app, auth, code) < count {
            guard ContinuousClock.now < deadline else { throw BenchError("message \(code) did not reach \(count) sent in time") }
            Thread.sleep(forTimeInterval: poll.seconds)
        }
    }

    func h2load(port: Int, requests: Int, streams: Int, connections: Int = 2) -> Double? {
        let payload = FileManager.default.temporaryDirectory.appendingPathComponent("islet-bench-payload-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: payload) }
        let arguments: [String]
        if android {
            // The shape of an FCM HTTP v1 send of a Live Update, as Islet's: one message, a data map, android.priority HIGH.
            try? Data(#"{"message":{"token":"fcm-bench-token-0123456789abcdef0123456789","data":{"pw_msg":"1","header":"Bench","p":"XXXXX-XXXXXXXX-XXXXXXXX","pw_live":"{\"op\":\"OPERATION_START\",\"id\":\"FANOUT\",\"progress_bar\":false}"},"android":{"priority":"HIGH","ttl":"3600s"}}}"#.utf8).write(to: payload)
            arguments = ["h2load", "-n", String(requests), "-c", String(connections), "-m", String(streams), "-t", "1", "-d", payload.path,
                         "-H", "content-type: application/json", "-H", "authorization: Bearer bench", "https://127.0.0.1:\(port)/v1/projects/bench/messages:send"]
        } else {
            try? Data(#"{"aps":{"timestamp":1,"event":"start","content-state":{"status":"go"}}}"#.utf8).write(to: payload)
            arguments = ["h2load", "-n", String(requests), "-c", String(connections), "-m", String(streams), "-t", "1", "-d", payload.path,
                         "-H", "apns-push-type: \(PushType.liveActivity.rawValue)", "-H", "apns-topic: \(PushType.liveActivity.topic(bundleID: "com.example.bench"))",
                         "-H", "apns-priority: 10", "-H", "authorization: bearer x", "https://127.0.0.1:\(port)/3/device/\(String(repeating: "ab", count: 40))"]
        }
        print("\n(b) h2load against the same nginx: \(arguments.joined(separator: " "))")
        guard let output = APNsBenchmark.runProcess(arguments) else {
            print("    h2load did not run (Debian package nghttp2-client; `make bench` installs it)")
            return nil
        }
        var rate: Double?
        for line in output.split(separator: "\n") where line.hasPrefix("finished in") || line.hasPrefix("requests:") || line.hasPrefix("status codes:") {
            print("    " + line)
            let words = line.split(separator: " ")
            if line.hasPrefix("finished in"), let index = words.firstIndex(where: { $0.hasPrefix("req/s") }), index > 0 { rate = Double(words[index - 1]) }
        }
        return rate
    }

    static func peakRSS() -> Int { APNsBenchmark.status("VmHWM") ?? 0 }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// nginx from Debian as the APNs stand-in: one worker, TLS, HTTP/2, every request answered 200 with
/// its apns-id, counted in the access log. Runs in the foreground as a child; loopback only.
final class Nginx {
    let process = Process()
    let port: Int
    let log: String
    let version: String

    init(directory: URL, certificate: String, key: String) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else {
            throw BenchError("nginx is missing: `make bench` installs Debian's nginx-light")
        }
        port = try Self.freePort()
        log = directory.appendingPathComponent("nginx-access.log").path
        let config = directory.appendingPathComponent("nginx.conf").path
        try """
            worker_processes 1;
            daemon off;
            pid \(directory.path)/nginx.pid;
            error_log \(directory.path)/nginx-error.log warn;
            events { worker_connections 1024; }
            http {
                access_log \(log);
                client_body_temp_path \(directory.path)/body;
                http2_max_concurrent_streams 1000;
                keepalive_requests 100000000;
                server {
                    listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(certificate);
                    ssl_certificate_key \(key);
                    location / { add_header apns-id $http_apns_id always; return 200; }
                    location = /token {
                        default_type application/json;
                        return 200 '{"access_token":"bench","expires_in":3600,"token_type":"Bearer"}';
                    }
                }
            }
            """.write(toFile: config, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-c", config, "-e", "\(directory.path)/nginx-error.log"]
        try process.run()
        version = APNsBenchmark.runProcess(["/usr/sbin/nginx", "-v"])?.trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "nginx version: ", with: "") ?? "?"
        let deadline = ContinuousClock.now + .seconds(10)
        while !Self.listening(port) {
            guard ContinuousClock.now < deadline, process.isRunning else { throw BenchError("nginx did not start: see \(directory.path)/nginx-error.log") }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// Requests nginx has logged so far (a line each). Read in chunks: the log of a 1,000,000-device run is
    /// about 200 MB, which held whole would count as the bench process's peak memory.
    func requests() -> Int {
        guard let counter = LogLines(path: log) else { return 0 }
        counter.readAppended()
        return counter.count
    }

    /// Waits until nginx has logged `count` requests, reading only what was appended since the last look.
    func waitForRequests(_ count: Int, deadline: ContinuousClock.Instant) throws {
        guard let counter = LogLines(path: log) else { throw BenchError("no nginx log at \(log)") }
        while true {
            let grew = counter.readAppended()
            if counter.count >= count { return }
            guard ContinuousClock.now < deadline else { throw BenchError("nginx saw \(counter.count) of \(count) requests in time") }
            if !grew { Thread.sleep(forTimeInterval: 0.005) }
        }
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw BenchError("no free port on 127.0.0.1") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func listening(_ port: Int) -> Bool { (try? KeepAliveClient(port: port)) != nil }
}

/// A blocking HTTP/1.1 client on one keep-alive connection to 127.0.0.1; a connection the server
/// closed while idle is opened again.
final class KeepAliveClient {
    private var fd: Int32
    private let port: Int
    private var buffer: [UInt8] = []
    /// What `recv` reads into, allocated once: a zeroed 64 KiB array a response was about a third of the clients' own CPU
    /// in a `perf` of `islet-bench updates` (CPU the server and PostgreSQL share with them on one machine).
    private var chunk = [UInt8](repeating: 0, count: 65536)

    init(port: Int) throws {
        self.port = port
        fd = try Self.open(port)
    }

    private static func open(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(fd)
            throw BenchError("cannot connect to 127.0.0.1:\(port)")
        }
        return fd
    }

    deinit { close(fd) }

    /// A server method with `{application, auth, <fields>}`; returns the body.
    func call(_ method: String, _ app: String, _ auth: String, _ fields: String) throws -> String {
        let (_, body) = try exchange("/json/1.3/\(method)", #"{"request":{"application":"\#(app)","auth":"\#(auth)",\#(fields)}}"#)
        return body
    }

    /// POSTs and returns the status.
    func post(_ path: String, _ body: String) throws -> Int { try exchange(path, body).status }

    /// GETs and returns the body (`/metrics`).
    func get(_ path: String) throws -> String { try exchange(path, nil).body }

    func exchange(_ path: String, _ body: String?) throws -> (status: Int, body: String) {
        do {
            return try attempt(path, body)
        } catch let error as Closed where !error.answered {
            // The server closed the idle connection before reading this request: send it on a new one.
            close(fd)
            buffer = []
            fd = try Self.open(port)
            return try attempt(path, body)
        }
    }

    private struct Closed: Error { let answered: Bool }

    private func attempt(_ path: String, _ body: String?) throws -> (status: Int, body: String) {
        let bytes = Array((body ?? "").utf8)
        let request = body == nil ? Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            : Array("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(bytes.count)\r\n\r\n".utf8) + bytes
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Closed(answered: false) }
            sent += n
        }
        while true {
            if let end = headerEnd() {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                if buffer.count >= end + 4 + length {
                    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                    let text = String(decoding: buffer[(end + 4)..<(end + 4 + length)], as: UTF8.self)
                    buffer.removeFirst(end + 4 + length)
                    return (status, text)
                }
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw buffer.isEmpty ? Closed(answered: false) : BenchError("connection closed mid-answer") }
            buffer += chunk[..<n]
        }
    }

    private func headerEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4) where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index
        }
        return nil
    }
}

/// Counts the lines of a file that grows, a fixed 1 MiB buffer at a time.
final class LogLines {
    private let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private(set) var count = 0

    init?(path: String) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
    }

    deinit { close(descriptor) }

    /// Reads to the current end of the file; false when nothing had been appended.
    @discardableResult
    func readAppended() -> Bool {
        var grew = false
        while true {
            let read = buffer.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, $0.count) }
            guard read > 0 else { return grew }
            grew = true
            count += buffer.withUnsafeBytes { bytes in
                var lines = 0
                for index in 0..<read where bytes[index] == 10 { lines += 1 }
                return lines
            }
        }
    }
}
