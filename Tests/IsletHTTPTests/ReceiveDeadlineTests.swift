import Foundation
import Testing
import IsletHTTP
import IsletTestPeers

/// Issue 44: a client that trickles a request (slowloris: a header line every few moments, or a body a byte at a time)
/// resets libmicrohttpd's idle timeout forever; the receive deadlines end it, and a normal request beside it is served.
@Suite("HTTP server: deadlines to receive a request")
struct ReceiveDeadlineTests {
    struct Answering: HTTPHandler {
        func execution(for request: HTTPRequest) -> HTTPExecution { .connectionThread }
        func handle(_ request: HTTPRequest) -> HTTPResponse { HTTPResponse(status: 200, body: Array("got \(request.body.count)".utf8)) }
        func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    }

    /// Whether the server ended the connection (its FIN or reset has arrived).
    static func ended(_ socket: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(socket, &byte, 1, Int32(MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    static func send(_ socket: Int32, _ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { Glibc.send(socket, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
    }

    static func answer(port: Int, _ request: String) throws -> String {
        let socket = try LoopbackSocket.connect(port: port, timeout: 5)
        defer { close(socket) }
        send(socket, request)
        var received = ""
        _ = LoopbackSocket.receive(socket, until: "\r\n\r\n", into: &received, seconds: 5)
        _ = LoopbackSocket.receive(socket, until: "got", into: &received, seconds: 5)
        return received
    }

    @Test func tricklingClientsAreEndedAtTheirDeadlineWhileOthersAreServed() throws {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 2, workerThreads: 4)
        configuration.receiveDeadline = ReceiveDeadline(headers: .milliseconds(800), bytesPerSecond: 1000)
        let server = HTTPServer(configuration: configuration, handler: Answering())
        try server.start()
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        let port = server.port

        // 40 slowloris connections: a request line, then a header line every 100 ms.
        let headers = try (0..<40).map { _ in try LoopbackSocket.connect(port: port, timeout: 5) }
        // One body a byte every 100 ms: its 2,000 declared bytes may take 0.8 s + 2 s.
        let body = try LoopbackSocket.connect(port: port, timeout: 5)
        defer { (headers + [body]).forEach { close($0) } }
        for socket in headers { Self.send(socket, "POST /slow HTTP/1.1\r\nHost: x\r\n") }
        Self.send(body, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n")
        let started = ContinuousClock.now
        var headersEndedAt: Duration?, bodyEndedAt: Duration?, bodyOpenAt1500 = false
        var probe = ""
        while ContinuousClock.now - started < .seconds(6) && bodyEndedAt == nil {
            for socket in headers where !Self.ended(socket) { Self.send(socket, "X-Trickle: \(Int.random(in: 0...9))\r\n") }
            if !Self.ended(body) { Self.send(body, "a") }
            let elapsed = ContinuousClock.now - started
            if headersEndedAt == nil && headers.allSatisfy(Self.ended) { headersEndedAt = elapsed }
            if bodyEndedAt == nil && Self.ended(body) { bodyEndedAt = elapsed }
            if elapsed >= .milliseconds(1500) && elapsed < .milliseconds(1700) { bodyOpenAt1500 = bodyEndedAt == nil }
            if probe.isEmpty && elapsed >= .milliseconds(400) {
                probe = try Self.answer(port: port, "POST /probe HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(probe.hasPrefix("HTTP/1.1 200") && probe.hasSuffix("got 5"), "served beside them: \(probe)")
        let ended = try #require(headersEndedAt, "every trickled header ended")
        #expect(ended >= .milliseconds(700) && ended < .seconds(2), "at their deadline: \(ended)")
        #expect(bodyOpenAt1500, "a body has the time its length gives it, beyond the headers' deadline")
        let bodyEnded = try #require(bodyEndedAt, "the trickled body ended")
        #expect(bodyEnded >= .milliseconds(2500) && bodyEnded < .seconds(4), "at its deadline: \(bodyEnded)")
        #expect(server.connectionsEndedLate == 41)
        // A request that arrives whole, on a connection kept alive past the deadlines, is served as ever.
        let socket = try LoopbackSocket.connect(port: port, timeout: 5)
        defer { close(socket) }
        for n in 0..<2 {
            if n == 1 { Thread.sleep(forTimeInterval: 1.2) }
            Self.send(socket, "POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            var received = ""
            #expect(LoopbackSocket.receive(socket, until: "got 3", into: &received, seconds: 5), "request \(n): \(received)")
        }
    }
}
