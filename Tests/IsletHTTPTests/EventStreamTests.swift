import Foundation
import Testing
import IsletHTTP
import IsletTestPeers
import Synchronization

/// A streamed body (Server-Sent Events) over a real socket: what is sent after an idle spell arrives, a client
/// that goes away is noticed, and shutdown ends open streams instead of waiting out its grace period.
@Suite("HTTP server: streamed responses")
struct EventStreamTests {
    final class StreamingHandler: HTTPHandler, Sendable {
        let streams = Mutex<[HTTPEventStream]>([])
        let closed = Atomic<Int>(0)

        func handle(_ request: HTTPRequest) -> HTTPResponse {
            guard request.path == "/events" else { return HTTPResponse(status: 200, body: Array("plain".utf8)) }
            let stream = HTTPEventStream()
            stream.send("event: hello\ndata: 1\n\n")
            stream.onClose { [self] in self.closed.add(1, ordering: .acquiringAndReleasing) }
            streams.withLock { $0.append(stream) }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")], stream: stream)
        }

        func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    }

    static func read(_ socket: Int32, until text: String, into received: inout String) -> Bool {
        LoopbackSocket.receive(socket, until: text, into: &received)
    }

    static func waitUntil(_ condition: () -> Bool) -> Bool { WorkerPoolServerTests.waitUntil(condition) }

    /// A started server with `threads` connection threads and the streaming handler.
    static func started(threads: Int) throws -> (HTTPServer, StreamingHandler) {
        let handler = StreamingHandler()
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: threads), handler: handler)
        try server.start()
        return (server, handler)
    }

    static func openStream(port: Int) throws -> Int32 {
        let socket = try LoopbackSocket.connect(port: port, timeout: 10)
        let request = "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), 0) }
        return socket
    }

    @Test func eventsSentLaterArriveAndTheConnectionStaysFreeMeanwhile() throws {
        let (server, handler) = try Self.started(threads: 1)
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        let socket = try Self.openStream(port: server.port)
        defer { close(socket) }
        var received = ""
        #expect(Self.read(socket, until: "data: 1\n\n", into: &received))
        #expect(received.hasPrefix("HTTP/1.1 200"))
        #expect(received.lowercased().contains("transfer-encoding: chunked"))

        // The stream is idle (its connection suspended): the one connection thread still answers others.
        let other = try LoopbackSocket.connect(port: server.port, timeout: 10)
        defer { close(other) }
        _ = "GET /plain HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".withCString { send(other, $0, strlen($0), 0) }
        var plain = ""
        #expect(Self.read(other, until: "plain", into: &plain))

        let stream = try #require(handler.streams.withLock { $0.first })
        #expect(stream.send("event: later\ndata: 2\n\n"))
        #expect(Self.read(socket, until: "data: 2\n\n", into: &received))
        stream.finish()
        #expect(Self.read(socket, until: "0\r\n\r\n", into: &received), "a finished stream ends its chunked body")
        #expect(Self.waitUntil { handler.closed.load(ordering: .acquiring) == 1 })
        #expect(!stream.send("too late"))
    }

    @Test func aClientThatGoesAwayIsNoticedOnTheNextSend() throws {
        let (server, handler) = try Self.started(threads: 1)
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        let socket = try Self.openStream(port: server.port)
        var received = ""
        #expect(Self.read(socket, until: "data: 1\n\n", into: &received))
        close(socket)
        let stream = try #require(handler.streams.withLock { $0.first })
        // A suspended connection cannot see the close; writing to it can (a heartbeat does this in real use).
        #expect(Self.waitUntil {
            stream.send(": heartbeat\n\n")
            return handler.closed.load(ordering: .acquiring) == 1
        })
        #expect(stream.isClosed)
    }

    @Test func shutdownEndsOpenStreamsWellWithinItsGracePeriod() throws {
        let (server, handler) = try Self.started(threads: 2)
        let sockets = try (0..<3).map { _ in try Self.openStream(port: server.port) }
        defer { sockets.forEach { close($0) } }
        for socket in sockets {
            var received = ""
            #expect(Self.read(socket, until: "data: 1\n\n", into: &received))
        }
        let started = ContinuousClock.now
        #expect(server.shutdown(gracePeriod: .seconds(20)))
        #expect(ContinuousClock.now - started < .seconds(10), "no stream held shutdown to its deadline")
        #expect(handler.closed.load(ordering: .acquiring) == 3)
        for socket in sockets {
            var received = ""
            #expect(Self.read(socket, until: "0\r\n\r\n", into: &received))
        }
    }

    /// A browser reconnects its event stream on the kept-alive connection as soon as shutdown ends the stream:
    /// the new stream is ended at once too, so none is left suspended when libmicrohttpd stops (it would abort).
    @Test func aStreamOpenedDuringShutdownIsEndedAtOnce() throws {
        let (server, handler) = try Self.started(threads: 1)
        let socket = try Self.openStream(port: server.port)
        defer { close(socket) }
        var received = ""
        #expect(Self.read(socket, until: "data: 1\n\n", into: &received))
        let stopped = Atomic<Bool>(false)
        let started = ContinuousClock.now
        let stopper = Thread { _ = server.shutdown(gracePeriod: .seconds(20)); stopped.store(true, ordering: .releasing) }
        stopper.start()
        #expect(Self.read(socket, until: "0\r\n\r\n", into: &received), "shutdown ends the open stream")
        // At once, on the same connection, as EventSource does.
        let again = "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
        _ = again.withCString { send(socket, $0, strlen($0), 0) }
        var second = ""
        _ = Self.read(socket, until: "0\r\n\r\n", into: &second)   // ended at once, or the connection closed: both are fine
        #expect(Self.waitUntil { stopped.load(ordering: .acquiring) }, "shutdown returned")
        #expect(ContinuousClock.now - started < .seconds(10), "no stream held shutdown to its deadline")
        #expect(handler.streams.withLock { $0.allSatisfy(\.isClosed) })
    }
}
