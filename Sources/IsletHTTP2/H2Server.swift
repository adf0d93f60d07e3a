import CNGHTTP2
import Foundation

/// HTTP/2 error codes Islet uses.
public enum H2ErrorCode {
    public static let noError = UInt32(ISLET_H2_NO_ERROR)
    public static let refusedStream = UInt32(ISLET_H2_REFUSED_STREAM)
    public static let cancel = UInt32(ISLET_H2_CANCEL)
}

/// One request on an `H2Server`, with the ways to answer it. Used on the server loop's thread only.
///
/// `@unchecked Sendable`: loop-confined, like the connection it belongs to.
public final class H2Exchange: @unchecked Sendable {
    public let request: H2Message
    public let stream: Int32
    let connection: H2Connection
    /// Identifies the connection for per-connection state in handlers; never reused, unlike an object's address.
    public let connectionID: Int

    init(request: H2Message, stream: Int32, connection: H2Connection) {
        self.request = request
        self.stream = stream
        self.connection = connection
        connectionID = connection.serial
    }

    public var loop: EventLoop { connection.loop }

    public func respond(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        var all: [(name: String, value: String)] = [(":status", String(status))]
        all += headers
        if !body.isEmpty { all.append(("content-length", String(body.count))) }
        connection.respond(stream: stream, H2Message(headers: all, body: body))
    }

    /// RST_STREAM REFUSED_STREAM: the client may retry it elsewhere.
    public func refuse() { connection.resetStream(stream, errorCode: H2ErrorCode.refusedStream) }

    /// GOAWAY naming the last stream the server took (as APNs does): later streams were not processed.
    /// Returns that stream id.
    @discardableResult
    public func goAway() -> Int32 {
        let last = connection.lastPeerStream
        connection.goAway(lastStream: last)
        return last
    }

    /// Drops the TCP connection without a word.
    public func dropConnection() { connection.close(reason: "dropped on purpose") }

    /// Changes the connection's SETTINGS_MAX_CONCURRENT_STREAMS.
    public func allowStreams(_ streams: UInt32) { connection.submitMaxStreams(streams) }
}

/// An HTTP/2 over TLS server on 127.0.0.1 (or any numeric host): one event loop per thread, each with
/// its own SO_REUSEPORT listener. `handler` runs on the loop thread of the request's connection.
public final class H2Server: Sendable {
    public let port: Int
    private let loops: [EventLoop]

    /// `initialMaxStreams` goes in each connection's first SETTINGS (APNs starts at 1).
    public init(host: String = "127.0.0.1", port: Int = 0, tls: TLSContext, threads: Int = 1, initialMaxStreams: UInt32 = 1000,
                handler: @escaping @Sendable (H2Exchange) -> Void) throws(TLSError) {
        var loops: [EventLoop] = []
        var boundPort = port
        for index in 0..<max(1, threads) {
            let loop = EventLoop(name: "islet-h2srv-\(index)")
            let listener: H2Listener
            do {
                listener = try H2Listener(loop: loop, host: host, port: boundPort, tls: tls) {
                    ServerConnectionDelegate(initialMaxStreams: initialMaxStreams, handler: handler)
                }
            } catch {
                loop.stop()
                loops.forEach { $0.stop() }
                throw error
            }
            boundPort = listener.port
            loop.execute { listener.start() }
            loops.append(loop)
        }
        self.port = boundPort
        self.loops = loops
    }

    /// Closes every connection and stops the threads.
    public func stop() { loops.forEach { $0.stop() } }
}

/// Turns connection events into `H2Exchange`s for the handler.
final class ServerConnectionDelegate: H2ConnectionDelegate {
    let initialMaxStreams: UInt32
    let handler: @Sendable (H2Exchange) -> Void

    init(initialMaxStreams: UInt32, handler: @escaping @Sendable (H2Exchange) -> Void) {
        self.initialMaxStreams = initialMaxStreams
        self.handler = handler
    }

    func h2Ready(_ connection: H2Connection) { connection.submitMaxStreams(initialMaxStreams) }

    func h2Request(_ connection: H2Connection, _ request: H2Message, stream: Int32) {
        handler(H2Exchange(request: request, stream: stream, connection: connection))
    }

    func h2Closed(_ connection: H2Connection, reason: String) {}
}
