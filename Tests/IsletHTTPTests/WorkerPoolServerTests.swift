import Foundation
import Testing
import IsletHTTP
import IsletTestPeers
import Synchronization

/// Handlers that wait run on workers while their connections are suspended: more requests wait at once than
/// there are connection threads (so group commit can share a sync among them), the connection threads keep
/// answering others, and shutdown answers whatever is still waiting by its deadline.
@Suite("HTTP server: waiting handlers on workers")
struct WorkerPoolServerTests {
    /// `/wait` runs on a worker and holds until `release` is opened (or its own deadline passes);
    /// `/at-once` answers on the connection thread.
    final class GatedHandler: HTTPHandler {
        let arrived = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        let gate = Mutex<Int>(0)   // requests /wait may let through; Int.max opens it for all
        let threads = Mutex<Set<String>>([])

        func execution(for request: HTTPRequest) -> HTTPExecution {
            request.path == "/wait" ? .workerPool : .connectionThread
        }

        func handle(_ request: HTTPRequest) -> HTTPResponse {
            guard request.path == "/wait" else { return HTTPResponse(status: 200, body: Array("at once".utf8)) }
            let number = arrived.add(1, ordering: .acquiringAndReleasing).newValue
            threads.withLock { _ = $0.insert(Self.threadName()) }
            let deadline = ContinuousClock.now + .seconds(120)   // only a safety valve
            while gate.withLock({ $0 }) < number && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.002) }
            finished.add(1, ordering: .acquiringAndReleasing)
            return HTTPResponse(status: gate.withLock({ $0 }) >= number ? 200 : 504, body: Array("waited \(number)".utf8))
        }

        /// The kernel's name of the calling thread.
        static func threadName() -> String {
            ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    }

    /// A server on a free port of 127.0.0.1 with `handler`, started.
    static func started(_ handler: any HTTPHandler, threads: Int = 2, workerThreads: Int) throws -> HTTPServer {
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: threads, workerThreads: workerThreads),
                                handler: handler)
        try server.start()
        return server
    }

    // The tests block their own thread (synchronous tests): once started, they never wait for a turn on
    // the cooperative threads, which other suites may keep busy for seconds.
    static func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.002)
        }
        return true
    }

    @Test func moreRequestsWaitAtOnceThanThereAreConnectionThreads() throws {
        let handler = GatedHandler()
        let server = try Self.started(handler, workerThreads: 16)
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        let port = server.port

        // 12 requests on 12 connections, all waiting at once: with only the 2 connection threads to run
        // them, no more than 2 could ever arrive before the gate opens.
        let waiting = (0..<12).map { _ in RawHTTPClient.onThread { try RawHTTPClient.send("POST", "/wait", port: port) } }
        #expect(Self.waitUntil { handler.arrived.load(ordering: .acquiring) == 12 }, "only \(handler.arrived.load(ordering: .acquiring)) of 12 waiting at once")
        #expect(handler.threads.withLock { $0.allSatisfy { $0.hasPrefix("islet-http-") } }, "\(handler.threads.withLock { $0 })")

        // Meanwhile the connection threads still answer.
        let atOnce = try RawHTTPClient.send("GET", "/at-once", port: port)
        #expect(atOnce.status == 200 && atOnce.body == "at once")
        #expect(handler.finished.load(ordering: .acquiring) == 0, "the quick answer did not need any waiting request to finish")

        handler.gate.withLock { $0 = .max }
        for request in waiting {
            let response = try request.value()
            #expect(response.status == 200, "\(response)")
        }
        #expect(server.requestsInFlight == 0)
    }

    @Test func shutdownAnswersWhatIsStillWaitingByItsDeadline() throws {
        let handler = GatedHandler()
        // One worker: the first request runs and holds it, the second waits in the queue, never started.
        let server = try Self.started(handler, workerThreads: 1)
        let port = server.port
        let running = RawHTTPClient.onThread { try RawHTTPClient.send("POST", "/wait", port: port) }
        #expect(Self.waitUntil { handler.arrived.load(ordering: .acquiring) == 1 })
        let queued = RawHTTPClient.onThread { try RawHTTPClient.send("POST", "/wait", port: port) }
        #expect(Self.waitUntil { server.requestsInFlight == 2 })

        let started = ContinuousClock.now
        let drained = server.shutdown(gracePeriod: .milliseconds(300))
        let took = ContinuousClock.now - started
        #expect(!drained, "two requests were still waiting at the deadline")
        #expect(took < .seconds(5), "shutdown took \(took)")

        let first = try running.value(), second = try queued.value()
        #expect(first.status == 503 && first.body.contains("outcome is unknown"), "\(first)")
        #expect(second.status == 503 && second.body.contains("not handled"), "\(second)")
        handler.gate.withLock { $0 = .max }   // lets the stuck worker return; its answer goes nowhere
        #expect(Self.waitUntil { handler.finished.load(ordering: .acquiring) == 1 })
        #expect(handler.arrived.load(ordering: .acquiring) == 1, "the request answered 503 before it started never runs")
    }

    @Test func aCleanShutdownWaitsForTheWaitingRequests() throws {
        let handler = GatedHandler()
        let server = try Self.started(handler, workerThreads: 4)
        let port = server.port
        let request = RawHTTPClient.onThread { try RawHTTPClient.send("POST", "/wait", port: port) }
        #expect(Self.waitUntil { handler.arrived.load(ordering: .acquiring) == 1 })
        Thread {
            Thread.sleep(forTimeInterval: 0.1)
            handler.gate.withLock { $0 = .max }
        }.start()
        #expect(server.shutdown(gracePeriod: .seconds(10)), "the request finished within the grace period")
        let response = try request.value()
        #expect(response.status == 200, "\(response)")
    }
}

/// The query string reaches handlers as arguments, percent-decoded, apart from the path.
@Suite("HTTP server: query strings")
struct QueryStringTests {
    struct EchoQuery: HTTPHandler {
        func execution(for request: HTTPRequest) -> HTTPExecution { .connectionThread }
        func handle(_ request: HTTPRequest) -> HTTPResponse {
            let text = ([request.path] + request.query.map { "\($0.name)=\($0.value)" }).joined(separator: "|")
            return HTTPResponse(status: 200, body: Array(text.utf8))
        }
        func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    }

    @Test func argumentsArriveDecodedAndInOrder() throws {
        let server = try WorkerPoolServerTests.started(EchoQuery(), threads: 1, workerThreads: 1)
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        #expect(try RawHTTPClient.send("GET", "/list?limit=2&cursor=a%20b%26c&cursor=second", port: server.port).body
                == "/list|limit=2|cursor=a b&c|cursor=second")
        #expect(try RawHTTPClient.send("GET", "/list?%E6%97%A5=%27%3B--", port: server.port).body == "/list|日=';--")
        #expect(try RawHTTPClient.send("GET", "/list", port: server.port).body == "/list")
        #expect(try RawHTTPClient.send("GET", "/list?flag", port: server.port).body == "/list|flag=")
        #expect(try RawHTTPClient.send("GET", "/list?limit=5%00x", port: server.port).body == "/list|limit=5\0x", "a NUL is kept, not a cut")
        #expect(try RawHTTPClient.send("GET", "/list?cursor=a%2Bb", port: server.port).body == "/list|cursor=a+b")
    }
}

/// A minimal HTTP/1.1 client on a plain socket, sharing nothing with the server's code.
enum RawHTTPClient {
    struct Response: CustomStringConvertible {
        let status: Int
        let body: String
        var description: String { "\(status) \(body)" }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// A blocking call started at once on a thread of its own, never on the tests' cooperative threads
    /// (other suites may keep those busy for seconds).
    final class OnThread: Sendable {
        private let result = Mutex<Result<Response, any Error>?>(nil)

        init(_ body: @escaping @Sendable () throws -> Response) {
            Thread { [self] in
                let outcome = Result { try body() }
                result.withLock { $0 = outcome }
            }.start()
        }

        /// Waits for the call to end (it has its own socket timeout).
        func value() throws -> Response {
            while true {
                if let outcome = result.withLock({ $0 }) { return try outcome.get() }
                Thread.sleep(forTimeInterval: 0.002)
            }
        }
    }

    static func onThread(_ body: @escaping @Sendable () throws -> Response) -> OnThread { OnThread(body) }

    static func send(_ method: String, _ path: String, port: Int) throws -> Response {
        let socket = try LoopbackSocket.connect(port: port, timeout: 30)
        defer { close(socket) }
        let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ Glibc.send(socket, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw Failure(description: "send: \(errno)")
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received.append(contentsOf: buffer[0..<count])
        }
        let text = String(decoding: received, as: UTF8.self)
        guard let headerEnd = text.range(of: "\r\n\r\n"),
              let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap({ Int($0) }) else {
            throw Failure(description: "no HTTP response: \(text.prefix(200))")
        }
        return Response(status: status, body: String(text[headerEnd.upperBound...]))
    }
}
