import CMicroHTTPD
import Synchronization

/// A response body written over time, such as Server-Sent Events: the handler answers with the stream and
/// keeps sending to it from any thread until it finishes it or the client goes away.
///
/// While nothing is waiting to be written, the connection is suspended (libmicrohttpd allows that from the
/// content reader), so an idle stream holds no thread and costs no CPU; `send` resumes it.
public final class HTTPEventStream: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var finished = false
        var closed = false
        /// Set once the response is queued on a connection; nil again once libmicrohttpd releases it.
        var connection: ConnectionHandle?
        var suspended = false
        var onClose: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())

    public init() {}

    /// What may wait unwritten: a client that stops reading is let go rather than buffered for.
    public static let pendingLimit = 1 << 20

    /// Queues `text` to be written; false once the client has gone or the stream was finished (or its client
    /// has left more than `pendingLimit` bytes unread, which finishes it).
    @discardableResult
    public func send(_ text: String) -> Bool {
        state.withLock { state in
            guard !state.closed, !state.finished else { return false }
            guard state.pending.count + text.utf8.count <= Self.pendingLimit else {
                state.finished = true
                state.pending = []
                resumeIfSuspended(&state)
                return false
            }
            state.pending.append(contentsOf: text.utf8)
            resumeIfSuspended(&state)
            return true
        }
    }

    /// Ends the body once what is queued is written.
    public func finish() {
        state.withLock { state in
            state.finished = true
            resumeIfSuspended(&state)
        }
    }

    /// True once the connection is gone (client closed, write failed, server stopped).
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Runs `body` once, when the connection is gone (at once if it already is).
    public func onClose(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.closed { return true }
            state.onClose.append(body)
            return false
        }
        if now { body() }
    }

    private func resumeIfSuspended(_ state: inout State) {
        // Only a connection this stream suspended is resumed: libmicrohttpd cannot free it while it is suspended.
        guard state.suspended, let connection = state.connection else { return }
        state.suspended = false
        MHD_resume_connection(connection.pointer)
    }

    func attach(_ connection: OpaquePointer) {
        state.withLock { $0.connection = ConnectionHandle(pointer: connection) }
    }

    /// libmicrohttpd's content reader, on the connection's thread: what is queued, the end, or (nothing yet)
    /// a suspension until `send` or `finish`.
    func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        state.withLock { state in
            if !state.pending.isEmpty {
                let count = min(capacity, state.pending.count)
                state.pending.withUnsafeBytes { bytes in
                    UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress!, byteCount: count)
                }
                state.pending.removeFirst(count)
                return count
            }
            if state.finished { return -1 }   // MHD_CONTENT_READER_END_OF_STREAM
            guard let connection = state.connection else { return -1 }
            MHD_suspend_connection(connection.pointer)
            state.suspended = true
            return 0
        }
    }

    /// libmicrohttpd is done with the response: the connection is finished or gone. Also called for a stream
    /// whose response was never queued (answered 503 at shutdown instead, or its client gone), so whoever
    /// listens on it lets go.
    func released() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            state.closed = true
            state.connection = nil
            state.suspended = false
            state.pending = []
            defer { state.onClose = [] }
            return state.onClose
        }
        for handler in handlers { handler() }
    }
}

/// The streams being written, so shutdown can end them (libmicrohttpd must not stop with one suspended).
final class OpenStreams: Sendable {
    private struct State {
        var streams: [ObjectIdentifier: HTTPEventStream] = [:]
        var closing = false
    }
    private let state = Mutex(State())

    /// Keeps `stream` until it closes; once shutdown began, finishes it at once (a client reconnecting on a
    /// kept-alive connection, or a request a worker finishes late, must not leave a suspended connection).
    func add(_ stream: HTTPEventStream) {
        let closing = state.withLock { state -> Bool in
            if !state.closing { state.streams[ObjectIdentifier(stream)] = stream }
            return state.closing
        }
        if closing { return stream.finish() }
        stream.onClose { [weak self, id = ObjectIdentifier(stream)] in self?.state.withLock { _ = $0.streams.removeValue(forKey: id) } }
    }

    /// Finishes every open stream and every stream added from now on; returns how many were open.
    @discardableResult
    func finishAll() -> Int {
        let open = state.withLock { state -> [HTTPEventStream] in
            state.closing = true
            return Array(state.streams.values)
        }
        for stream in open { stream.finish() }
        return open.count
    }
}

let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, capacity in
    guard let cls, let buffer else { return -1 }
    return Unmanaged<HTTPEventStream>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, capacity: capacity)
}

let streamReleased: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let stream = Unmanaged<HTTPEventStream>.fromOpaque(cls).takeRetainedValue()
    stream.released()
}
