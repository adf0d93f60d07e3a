import Foundation
import Testing
import IsletApp
import IsletCore
import IsletHTTP
#if canImport(Glibc)
import Glibc
#endif

/// `islet serve` as a real process, as `make run` starts it (or another server executable of the package).
final class ServeProcess {
    let process = Process()
    let directory: URL
    let logPath: URL
    let outputPath: URL
    /// Removed with the process when the process made it.
    private let ownsDirectory: Bool
    private(set) var port = 0

    convenience init(arguments: [String] = []) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-serve-\(UUID().uuidString)")
        // The audit log in the test's folder, whatever the engine (with PostgreSQL it would go to ./var).
        try self.init(executable: "islet", arguments: ["serve", "--listen", "127.0.0.1:0", "--database",
                                                       try IntegrationEngine.database(in: directory),
                                                       "--audit-log", directory.appendingPathComponent("audit.log").path] + arguments,
                      directory: directory, ownsDirectory: true)
    }

    /// Runs `executable` (built beside the tests) in `directory`, and waits for its "listening" log line.
    init(executable: String, arguments: [String], directory: URL, ownsDirectory: Bool = false) throws {
        self.directory = directory
        self.ownsDirectory = ownsDirectory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logPath = directory.appendingPathComponent("stderr-\(UUID().uuidString).log")
        outputPath = directory.appendingPathComponent("stdout-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logPath.path, contents: nil)
        _ = FileManager.default.createFile(atPath: outputPath.path, contents: nil)
        process.executableURL = try builtExecutable(executable)
        process.arguments = arguments
        process.standardError = try FileHandle(forWritingTo: logPath)
        process.standardOutput = try FileHandle(forWritingTo: outputPath)
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while port == 0 && Date() < deadline && process.isRunning {
            for line in log.split(separator: "\n") {
                if let object = try? JSONParser.parse(String(line)).objectValue, object["msg"] == "listening" {
                    port = Int(object["port"]?.intValue ?? 0)
                }
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        guard port != 0 else { throw TestClientError(description: "\(executable) did not start: \(log)") }
    }

    var log: String { (try? String(contentsOf: logPath, encoding: .utf8)) ?? "" }
    var output: String { (try? String(contentsOf: outputPath, encoding: .utf8)) ?? "" }

    /// Waits for the process to exit and returns its status.
    func waitForExit(timeout: TimeInterval = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        return process.isRunning ? nil : process.terminationStatus
    }

    deinit {
        if process.isRunning { process.terminate() }
        if ownsDirectory { IntegrationEngine.remove(directory) }
    }
}

@Suite("islet serve process: demo and graceful shutdown")
struct ServeProcessTests {
    @Test(arguments: [SIGTERM, SIGINT])
    func shutdownFinishesTheRequestInFlightAndExitsZero(signal: Int32) throws {
        let serve = try ServeProcess()
        let body = Array(#"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}"#.utf8)
        let connection = try RawHTTPConnection(port: serve.port)
        try connection.send(Array("POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body[..<10])
        Thread.sleep(forTimeInterval: 0.2)   // the server has begun this request

        kill(serve.process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(10)
        while !serve.log.contains("\"shutting down\"") && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(serve.log.contains("\"shutting down\""))
        #expect(throws: (any Error).self, "no new connections once shutting down") { _ = try RawHTTPConnection(port: serve.port) }

        try connection.send(Array(body[10...]))
        let response = try connection.readResponse()
        #expect(response.status == 200, "the request in flight still gets its answer")
        #expect(response.statusCode == 200)
        #expect(serve.waitForExit() == 0)
        #expect(serve.log.contains(#""msg":"stopped","drained":true"#))
    }

    /// Issue 44: a client that never sends the rest of its body held the stop for the whole grace period (10 s), and the
    /// exit status was then 1. Nothing of such a request ran: the stop waits a moment for bodies on their way (the test
    /// above), then closes it, and exits 0.
    @Test func aBodyThatNeverArrivesHoldsUpNeitherTheStopNorItsStatus() throws {
        let serve = try ServeProcess()
        let connection = try RawHTTPConnection(port: serve.port)
        try connection.send(Array("POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"request\":".utf8))
        Thread.sleep(forTimeInterval: 0.2)   // the server has begun this request
        let signalled = Date()
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.waitForExit() == 0)
        let took = Date().timeIntervalSince(signalled)
        #expect(took < 5, "the stop took \(took) s")
        #expect(serve.log.contains(#""msg":"stopped","drained":true"#), "\(serve.log.suffix(600))")
    }

    /// Issue 44: 1,000 connections each declaring a 1 MiB body and sending all but its last byte took the server from
    /// 46 MB to 1.46 GB, and it kept 1.37 GB once they closed. Large bodies now reserve their room before they are
    /// read, from 64 MiB in all: 80 clients (distinct forwarded addresses) each sending all but one byte of 1 MiB, 64
    /// are held and 16 refused at once with 503 and `Retry-After`; a small call beside them is answered; memory stays
    /// within the budget and is given back when they close.
    @Test func slowLargeBodiesStayWithinTheirBudgetAndTheirMemoryIsGivenBack() throws {
        let serve = try ServeProcess()
        let status = "/proc/\(serve.process.processIdentifier)/status"
        let rss = { () -> Int in
            let text = (try? String(contentsOfFile: status, encoding: .utf8)) ?? ""
            let line = text.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024   // MB
        }
        let baseline = rss()
        let body = [UInt8](repeating: 0x20, count: 1 << 20)
        var held: [RawHTTPConnection] = [], refused: [RawHTTPResponse] = []
        for n in 0..<80 {
            let connection = try RawHTTPConnection(port: serve.port)
            try connection.send("POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.\(n)\r\nContent-Length: \(body.count)\r\n\r\n")
            // Refused: the answer comes at once, and the server closes; held: nothing comes, and the body goes.
            var ready = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, 100) > 0 {
                refused.append(try connection.readResponse())
            } else {
                try connection.send(Array(body.dropLast()))
                held.append(connection)
            }
        }
        #expect(held.count == 64 && refused.count == 16, "held \(held.count), refused \(refused.count)")
        #expect(refused.allSatisfy { $0.status == 503 && $0.headers["retry-after"] == "1" && $0.message == BodyBudget.busyMessage(retryAfter: 1) },
                "\(refused.first.map { "\($0.status) \($0.headers) \($0.message ?? "")" } ?? "")")
        let probe = try request(serve.port, "/json/1.3/getApplication", body: #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}"#)
        #expect(probe.status == 200, "a small call beside them is answered")
        let holding = rss()
        #expect(holding < baseline + 64 + 48, "RSS \(baseline) MB, then \(holding) MB with 64 MiB of bodies held")
        held.removeAll()   // closed
        #expect(eventually(30) { rss() < baseline + 24 }, "RSS \(baseline) MB before, \(holding) MB held, \(rss()) MB once they closed")
        print("slow bodies: RSS \(baseline) MB before, \(holding) MB with 64 held, \(rss()) MB after they closed")
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.waitForExit() == 0)
    }

    @Test func theDemoApplicationAnswersTheReferenceCredentials() throws {
        let serve = try ServeProcess()
        #expect(serve.output.contains("application code:  XXXXX-XXXXX"))
        #expect(serve.output.contains("server API token:  SECRET_API_TOKEN"))
        #expect(serve.output.contains("curl -s http://127.0.0.1:\(serve.port)/json/1.3/getApplication"))
        #expect(serve.output.contains("The console: http://127.0.0.1:\(serve.port)/console (sign in with the server API token)"))
        let response = try request(serve.port, "/json/1.3/getApplication",
                                   body: #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}"#)
        #expect(response.status == 200)
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.waitForExit() == 0)
    }

    @Test func noDemoWithAppleAPNs() throws {
        let serve = try ServeProcess(arguments: ["--apns", "apple"])
        #expect(!serve.output.contains("XXXXX-XXXXX"))
        let response = try request(serve.port, "/json/1.3/getApplication",
                                   body: #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}"#)
        #expect(response.status == 401)
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.waitForExit() == 0)
    }

    /// Issue 44: a database made with the simulator keeps the demo's public token; served with Apple's APNs, anyone who
    /// read the documentation could push with it. The server refuses to start until it is revoked.
    @Test func appleAPNsRefusesADatabaseWhoseDemoTokenStillWorks() throws {
        let demo = try ServeProcess()
        let database = try IntegrationEngine.database(in: demo.directory)
        kill(demo.process.processIdentifier, SIGTERM)
        #expect(demo.waitForExit() == 0)
        let refused = try Self.serveRefused(["--database", database, "--apns", "apple"], logsIn: demo.directory)
        #expect(refused.status == 1)
        #expect(refused.errors.contains("the demo application XXXXX-XXXXX still has its public server API token SECRET_API_TOKEN"), "\(refused.errors)")
        let revoked = try runProgram(try builtExecutable("islet"), ["app", "token", "revoke", "XXXXX-XXXXX", "SECRET_API_TOKEN", "--database", database])
        #expect(revoked.status == 0, "\(revoked.output)")
        let apple = try ServeProcess(executable: "islet", arguments: ["serve", "--listen", "127.0.0.1:0", "--database", database, "--apns", "apple"],
                                     directory: demo.directory)
        #expect(apple.port != 0, "it starts once the token is revoked")
        kill(apple.process.processIdentifier, SIGTERM)
        #expect(apple.waitForExit() == 0)
    }

    @Test func noDemoOnANonLoopbackAddressOrANonEmptyDatabase() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-demo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("islet.sqlite").path
        // Built but never started: tests bind to 127.0.0.1 only.
        let exposed = try IsletServer(configuration: ServerConfiguration(listen: ListenAddress("0.0.0.0:0")!, database: database),
                                      logger: .discard)
        #expect(try exposed.createDemoIfEligible() == nil)
        let local = try IsletServer(configuration: ServerConfiguration(listen: ListenAddress("127.0.0.1:0")!, database: database),
                                    logger: .discard)
        #expect(try local.createDemoIfEligible() != nil)
        #expect(try local.createDemoIfEligible() == nil, "only into an empty database")
    }

    /// Issue 48: the built `islet`, as a shell runs it, answers `--version` and `version` with its version, exit 0.
    @Test func theExecutablePrintsItsVersion() throws {
        for words in [["--version"], ["version"]] {
            let run = try runProgram(try builtExecutable("islet"), words)
            #expect(run.status == 0, "\(words): \(run.output)")
            #expect(run.output == "islet \(IsletVersion.current)\n", "\(words)")
        }
    }

    @Test func refusesToStartOnAnAddressInUse() throws {
        let first = try ServeProcess()
        let process = Process()
        process.executableURL = try builtExecutable("islet")
        process.arguments = ["serve", "--listen", "127.0.0.1:\(first.port)", "--database", first.directory.appendingPathComponent("b.sqlite").path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 1)
        #expect(text.contains("error: cannot start: cannot listen on 127.0.0.1:\(first.port)"))
        kill(first.process.processIdentifier, SIGTERM)
        #expect(first.waitForExit() == 0)
    }

    /// `islet serve --listen 127.0.0.1:0 <arguments>` expected to refuse to start: its exit status (-1 if it was
    /// still running after 20 s, then killed) and what it wrote on stderr.
    static func serveRefused(_ arguments: [String], logsIn directory: URL) throws -> (status: Int32, errors: String) {
        let process = Process()
        process.executableURL = try builtExecutable("islet")
        process.arguments = ["serve", "--listen", "127.0.0.1:0"] + arguments
        let errors = directory.appendingPathComponent("refused-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let exited = eventually(20) { !process.isRunning }
        if !exited { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return (exited ? process.terminationStatus : -1, (try? String(contentsOf: errors, encoding: .utf8)) ?? "")
    }

    /// Issue 14: the simulator's phones live in one process, so a `--apns simulator` node runs alone on a PostgreSQL
    /// database: a second simulator node, and a node with Apple's APNs, refuse to start beside it and name it; once
    /// it stopped, an Apple node starts, and a simulator node refuses to start beside that one. `islet cluster
    /// status` shows a node stopped with SIGTERM as stopped and one killed with kill -9 as gone.
    @Test(.enabled(if: IntegrationEngine.isPostgreSQL, "several nodes need PostgreSQL"))
    func aSimulatorNodeRunsAloneAndNamesTheNodeInItsWay() throws {
        let first = try ServeProcess(arguments: ["--node-id", "sim-1"])
        let database = try IntegrationEngine.database(in: first.directory)
        let second = try Self.serveRefused(["--database", database, "--node-id", "sim-2", "--audit-log", "off"], logsIn: first.directory)
        #expect(second.status == 1)
        #expect(second.errors.contains("--apns simulator runs on one node only, and node sim-1 ("), "\(second.errors)")
        // The demo's public token must go before Apple's APNs serves this database (issue 44).
        #expect(try runProgram(try builtExecutable("islet"), ["app", "token", "revoke", "XXXXX-XXXXX", "SECRET_API_TOKEN", "--database", database]).status == 0)
        let appleBeside = try Self.serveRefused(["--database", database, "--apns", "apple", "--node-id", "apple-0", "--audit-log", "off"],
                                                logsIn: first.directory)
        #expect(appleBeside.status == 1)
        #expect(appleBeside.errors.contains("node sim-1 (") && appleBeside.errors.contains("runs with --apns simulator on this database"),
                "\(appleBeside.errors)")
        let states = { clusterNodes(database).compactMapValues { $0["state"]?.stringValue } }
        // The refused nodes took their own locks before they met sim-1's: stopped, not nodes that vanished.
        #expect(states() == ["sim-1": "running", "sim-2": "stopped", "apple-0": "stopped"], "\(states())")

        kill(first.process.processIdentifier, SIGTERM)
        #expect(first.waitForExit() == 0)
        let apple = try ServeProcess(executable: "islet", arguments: ["serve", "--listen", "127.0.0.1:0", "--database", database, "--apns", "apple",
                                                                      "--node-id", "apple-1", "--audit-log", "off"], directory: first.directory)
        #expect(try request(apple.port, method: "GET", "/healthz").json?.objectValue?["node"] == "apple-1")
        let third = try Self.serveRefused(["--database", database, "--node-id", "sim-3", "--audit-log", "off"], logsIn: first.directory)
        #expect(third.status == 1)
        #expect(third.errors.contains("--apns simulator runs on one node only, and node apple-1 ("), "\(third.errors)")
        let status = try runProgram(try builtExecutable("islet"), ["cluster", "status", "--database", database])
        #expect(status.output.split(separator: "\n").contains { $0.hasPrefix("sim-1 ") && $0.contains("stopped") }, "\(status.output)")
        #expect(status.output.split(separator: "\n").contains { $0.hasPrefix("apple-1 ") && $0.contains("running") })
        // A node killed with kill -9 shows as gone (its liveness lock went with its connection).
        kill(apple.process.processIdentifier, SIGKILL)
        _ = apple.waitForExit()
        #expect(eventually { states()["apple-1"] == "gone" }, "\(states())")
        #expect(states()["sim-1"] == "stopped")
    }

    /// Issue 13: two servers on one SQLite file would both send some pushes; the second refuses to start and
    /// names the first, while CLI commands keep working beside it. After the first stops, a server starts.
    @Test(.enabled(if: !IntegrationEngine.isPostgreSQL, "one server per SQLite file; PostgreSQL takes several"))
    func aSecondServerOnTheSameSQLiteFileRefusesNamingTheFirst() throws {
        let first = try ServeProcess()
        let database = try IntegrationEngine.database(in: first.directory)
        let second = try Self.serveRefused(["--database", database], logsIn: first.directory)
        #expect(second.status == 1)
        #expect(second.errors.contains("another islet serve (pid \(first.process.processIdentifier)) is using \(database)"), "\(second.errors)")
        // Issue 44: the lock is the file's own, whatever names it: a symlink (the holder named through the real path)
        // and a hard link in another folder are refused as well.
        let symlink = first.directory.appendingPathComponent("another-name.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: symlink, withDestinationPath: database)
        let throughSymlink = try Self.serveRefused(["--database", symlink], logsIn: first.directory)
        #expect(throughSymlink.status == 1)
        #expect(throughSymlink.errors.contains("another islet serve (pid \(first.process.processIdentifier)) is using \(symlink)"), "\(throughSymlink.errors)")
        let folder = first.directory.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let hardLink = folder.appendingPathComponent("linked.sqlite").path
        try FileManager.default.linkItem(atPath: database, toPath: hardLink)
        let throughHardLink = try Self.serveRefused(["--database", hardLink], logsIn: first.directory)
        #expect(throughHardLink.status == 1)
        #expect(throughHardLink.errors.contains("is using \(hardLink): one server per SQLite file"), "\(throughHardLink.errors)")
        let listed = try runProgram(try builtExecutable("islet"), ["app", "list", "--database", database])
        #expect(listed.status == 0 && listed.output.contains("XXXXX-XXXXX"), "the CLI works beside the server: \(listed.output)")
        kill(first.process.processIdentifier, SIGTERM)
        #expect(first.waitForExit() == 0)
        let third = try ServeProcess(executable: "islet", arguments: ["serve", "--listen", "127.0.0.1:0", "--database", database],
                                     directory: first.directory)
        #expect(third.port != 0, "the file is free once the first server stopped")
        kill(third.process.processIdentifier, SIGTERM)
        #expect(third.waitForExit() == 0)
    }
}

/// Issue 44: one client held all 1,024 connections (idle, or trickling a request) and every other client timed out.
@Suite("Connections per client address")
struct ConnectionsPerAddressTests {
    /// A keep-alive connection from `source` (another loopback address: the server still listens on 127.0.0.1 only).
    final class Client {
        let fd: Int32
        init(from source: String, port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var timeout = timeval(tv_sec: 3, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var local = sockaddr_in(), remote = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            remote.sin_family = sa_family_t(AF_INET)
            remote.sin_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0, connected == 0 else { close(fd); throw TestClientError(description: "cannot connect from \(source): errno \(errno)") }
        }
        deinit { close(fd) }

        /// GET /healthz on this connection: its status, or nil when the server closed the connection instead.
        func healthz() -> Int? {
            let request = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
            var data: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return nil }
                data += buffer[0..<count]
                let text = String(decoding: data, as: UTF8.self)
                guard let end = text.range(of: "\r\n\r\n") else { continue }
                let head = text[..<end.lowerBound]
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                guard text.utf8.count - text[..<end.upperBound].utf8.count >= length else { continue }
                return Int(head.split(separator: " ")[1])
            }
        }
    }

    @Test func oneAddressHoldsAtMostSoManyConnectionsAndOthersAreServed() throws {
        let serve = try ServeProcess(arguments: ["--connections-per-address", "8"])
        var held = try (0..<8).map { _ in try Client(from: "127.0.0.2", port: serve.port) }
        #expect(held.allSatisfy { $0.healthz() == 200 }, "eight connections of one address are served")
        #expect(try Client(from: "127.0.0.2", port: serve.port).healthz() == nil, "the ninth is closed at once")
        #expect(try Client(from: "127.0.0.3", port: serve.port).healthz() == 200, "another address is served beside them")
        #expect(try Client(from: "127.0.0.1", port: serve.port).healthz() == 200, "loopback (a proxy on this machine) is not counted")
        held.removeLast()   // one closes: its place is free again
        #expect(eventually { (try? Client(from: "127.0.0.2", port: serve.port).healthz()) == 200 }, "a place freed is taken again")
        #expect(held.allSatisfy { $0.healthz() == 200 }, "the ones held are still served")
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.waitForExit() == 0)
    }
}
