import Foundation
import IsletCore
import IsletHTTP2

/// What came of one request: its response, or none, with what is known of whether the server saw it.
enum H2Result: Sendable {
    case response(H2Message)
    case failed(PushFate, String)
}

/// Requests to one HTTPS origin over one HTTP/2 connection, opened when a request needs it and again after it closed
/// (issue 46: the FCM client's, to FCM and to the token endpoint). Callers hand requests over from any thread; every
/// state change happens on `loop`'s thread, and each request's completion is called there, once.
///
/// `@unchecked Sendable`: its state is touched only on `loop`'s thread (asserted), which `request` hops to.
final class H2Requests: H2ConnectionDelegate, @unchecked Sendable {
    typealias Completion = @Sendable (H2Result) -> Void

    let loop: EventLoop
    let host: String
    let port: Int
    private let tls: TLSContext
    private var connection: H2Connection?
    /// Requests not yet on a stream, in order.
    private var waiting: [(message: H2Message, completion: Completion)] = []
    /// Requests on a stream of `connection`.
    private var streams: [Int32: Completion] = [:]
    /// Connects in a row that closed before they opened: after two, the waiting requests fail (not sent).
    private var failedConnects = 0
    /// The last connection that reached h2's settings.
    private var opened: ObjectIdentifier?
    private var stopped = false

    init(loop: EventLoop, host: String, port: Int, tls: TLSContext) {
        self.loop = loop
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// Sends `message`; `completion` gets the response, or why none came.
    func request(_ message: H2Message, completion: @escaping Completion) {
        loop.execute { [self] in
            guard !stopped else { return completion(.failed(.notSent, "the client stopped")) }
            waiting.append((message, completion))
            pump()
        }
    }

    /// Puts waiting requests on streams, connecting first if there is no connection.
    private func pump() {
        loop.preconditionInLoop()
        guard !waiting.isEmpty, !stopped else { return }
        guard let connection, !connection.isClosed else {
            do {
                connection = try H2Connection.connect(loop: loop, host: host, port: port, tls: tls, delegate: self)
            } catch {
                fail(waiting: "cannot connect to \(host):\(port): \(error)")
            }
            return
        }
        guard connection.isOpen else { return }   // h2Ready pumps
        while !waiting.isEmpty, UInt32(connection.openStreams) < connection.peerMaxStreams {
            let next = waiting.removeFirst()
            guard let stream = connection.submitRequest(next.message) else {
                waiting.insert(next, at: 0)
                return
            }
            streams[stream] = next.completion
        }
    }

    private func fail(waiting reason: String) {
        let failed = waiting
        waiting = []
        for request in failed { request.completion(.failed(.notSent, reason)) }
    }

    func h2Ready(_ connection: H2Connection) {
        failedConnects = 0
        opened = ObjectIdentifier(connection)
        pump()
    }

    func h2Settings(_ connection: H2Connection) { pump() }

    func h2StreamClosed(_ connection: H2Connection, stream: Int32, response: H2Message?, errorCode: UInt32) {
        guard let completion = streams.removeValue(forKey: stream) else { return }
        if let response {
            completion(.response(response))
        } else if errorCode == H2ErrorCode.refusedStream {
            // Refused (above a GOAWAY's last stream, or past the server's limit): never processed.
            completion(.failed(.notSent, "the server refused the stream"))
        } else {
            // The stream was written: the server may have processed it.
            completion(.failed(.unknown, "the stream closed without a response (HTTP/2 error \(errorCode))"))
        }
        pump()
    }

    func h2GoAway(_ connection: H2Connection, lastStream: Int32) {
        // No new stream goes on it; the next request opens another connection.
        if self.connection === connection { self.connection = nil }
    }

    func h2Closed(_ connection: H2Connection, reason: String) {
        if self.connection === connection { self.connection = nil }
        if opened != ObjectIdentifier(connection) { failedConnects += 1 }
        if failedConnects >= 2 {
            fail(waiting: "cannot connect to \(host):\(port): \(reason)")
        } else {
            pump()
        }
    }

    /// Fails what waits and closes the connection (its streams are reported closed first); on the loop.
    func stop() {
        loop.preconditionInLoop()
        stopped = true
        fail(waiting: "the client stopped")
        connection?.close(reason: "the client stopped")
        connection = nil
    }
}
