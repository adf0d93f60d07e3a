import CEpoll
import CNGHTTP2
import COpenSSL
import Foundation
import Synchronization

/// An HTTP/2 request or response: headers (pseudo-headers included, names lowercase) and a body.
public struct H2Message: Sendable {
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(headers: [(name: String, value: String)], body: [UInt8] = []) {
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// What a connection reports, on its loop thread.
public protocol H2ConnectionDelegate: AnyObject {
    /// TLS is up, h2 agreed, and our SETTINGS are on their way.
    func h2Ready(_ connection: H2Connection)
    /// Server side: a whole request arrived on `stream`; answer with `respond`.
    func h2Request(_ connection: H2Connection, _ request: H2Message, stream: Int32)
    /// Client side: `stream` closed; `response` is nil when none came (reset, refused, connection lost).
    func h2StreamClosed(_ connection: H2Connection, stream: Int32, response: H2Message?, errorCode: UInt32)
    /// The peer's SETTINGS changed (e.g. MAX_CONCURRENT_STREAMS).
    func h2Settings(_ connection: H2Connection)
    /// The peer sent GOAWAY: streams above `lastStream` were not processed.
    func h2GoAway(_ connection: H2Connection, lastStream: Int32)
    /// The peer acknowledged our PING: the connection is alive both ways.
    func h2PingAcknowledged(_ connection: H2Connection)
    /// The connection is gone; every stream still open was reported closed first.
    func h2Closed(_ connection: H2Connection, reason: String)
}

extension H2ConnectionDelegate {
    public func h2Ready(_ connection: H2Connection) {}
    public func h2Request(_ connection: H2Connection, _ request: H2Message, stream: Int32) {}
    public func h2StreamClosed(_ connection: H2Connection, stream: Int32, response: H2Message?, errorCode: UInt32) {}
    public func h2Settings(_ connection: H2Connection) {}
    public func h2GoAway(_ connection: H2Connection, lastStream: Int32) {}
    public func h2PingAcknowledged(_ connection: H2Connection) {}
}

/// One TLS + HTTP/2 connection driven by an event loop, client or server side, on nghttp2 and OpenSSL.
///
/// `@unchecked Sendable`: every property is touched only on `loop`'s thread (the delegate calls, the
/// nghttp2 callbacks and the public methods, which callers invoke from that thread).
public final class H2Connection: LoopHandler, @unchecked Sendable {
    public enum Role: Sendable { case client, server }
    private enum Phase { case connecting, handshaking, open, closed }

    public let loop: EventLoop
    public let role: Role
    /// A number no other connection of this process has had.
    public let serial = H2Connection.serials.add(1, ordering: .relaxed).newValue
    private static let serials = Atomic<Int>(0)
    let fd: Int32
    public let peer: String
    /// Held strongly until the connection closes, then released.
    var delegate: (any H2ConnectionDelegate)?
    private let ssl: OpaquePointer
    private var session: OpaquePointer?
    private var phase: Phase
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    private var incoming: [Int32: H2Message] = [:]
    private var outgoingBodies: [Int32: (bytes: [UInt8], offset: Int)] = [:]
    private var wantsWrite = false
    /// A flush is due at the end of the loop's turn (requests and responses are written together).
    private var flushQueued = false
    /// Streams opened by this side and not yet closed.
    public private(set) var openStreams = 0
    /// When bytes last arrived from the peer: a connection that sends but never hears back is dead.
    public private(set) var lastReceived = ContinuousClock.now
    /// Bytes taken from nghttp2 to be written, since the connection opened. A stream submitted when
    /// this was N has all its frames past byte N of the connection.
    public private(set) var bytesGathered = 0
    /// Bytes handed to TLS and the socket, since the connection opened. A stream whose frames all lie
    /// past this never left the process: the peer cannot have processed it.
    public private(set) var bytesWritten = 0
    /// The names of the incoming headers kept (lowercase, as HTTP/2 sends them); nil keeps every one. A client
    /// that reads a few headers of each response need not make strings of the others.
    public var keptHeaders: [String]? {
        didSet { keptHeaderBytes = keptHeaders?.map { Array($0.utf8) } }
    }
    private var keptHeaderBytes: [[UInt8]]?

    fileprivate func keeps(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let keptHeaderBytes else { return true }
        return keptHeaderBytes.contains { $0.count == name.count && $0.elementsEqual(name) }
    }

    /// Opens a client connection to host:port; call on `loop`'s thread. Progress and failure reach `delegate`.
    public static func connect(loop: EventLoop, host: String, port: Int, tls: TLSContext,
                               delegate: any H2ConnectionDelegate) throws(TLSError) -> H2Connection {
        var error = [CChar](repeating: 0, count: 256)
        let fd = islet_tcp_connect(host, Int32(port), &error, 256)
        guard fd >= 0 else { throw TLSError(description: String(cBuffer: error)) }
        guard let ssl = islet_tls_client(tls.context, fd, host) else {
            Foundation.close(fd)
            throw TLSError(description: "cannot create a TLS session for \(host)")
        }
        return H2Connection(loop: loop, fd: fd, ssl: ssl, role: .client, connecting: true, peer: "\(host):\(port)", delegate: delegate)
    }

    init(loop: EventLoop, fd: Int32, ssl: OpaquePointer, role: Role, connecting: Bool, peer: String,
         delegate: any H2ConnectionDelegate) {
        self.loop = loop
        self.fd = fd
        self.ssl = ssl
        self.role = role
        self.peer = peer
        self.delegate = delegate
        SSL_set_read_ahead(ssl, 1)   // read whole socket buffers, not a record header and body at a time
        phase = connecting ? .connecting : .handshaking
        loop.register(fd, events: UInt32(ISLET_EPOLLIN | ISLET_EPOLLOUT), handler: self)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        SSL_free(ssl)
    }

    public var isOpen: Bool { phase == .open }
    public var isClosed: Bool { phase == .closed }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (nghttp2 reports 2^31-1 until the peer says otherwise).
    public var peerMaxStreams: UInt32 { session.map { islet_h2_remote_max_streams($0) } ?? 1 }

    // MARK: Sending

    /// Opens a stream with `request`; `nil` when the connection cannot take it.
    public func submitRequest(_ request: H2Message) -> Int32? {
        loop.preconditionInLoop()
        guard phase == .open, let session else { return nil }
        let stream = Self.withNameValues(request.headers) { nvs, count in
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            return request.body.isEmpty ? nghttp2_submit_request(session, nil, nvs, count, nil, nil)
                                        : nghttp2_submit_request(session, nil, nvs, count, &provider, nil)
        }
        guard stream > 0 else { return nil }
        if !request.body.isEmpty { outgoingBodies[stream] = (request.body, 0) }
        openStreams += 1
        stage()
        return stream
    }

    /// Answers the request on `stream`.
    public func respond(stream: Int32, _ response: H2Message) {
        loop.preconditionInLoop()
        guard phase == .open, let session else { return }
        let result = Self.withNameValues(response.headers) { nvs, count in
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            return response.body.isEmpty ? nghttp2_submit_response(session, stream, nvs, count, nil)
                                         : nghttp2_submit_response(session, stream, nvs, count, &provider)
        }
        if result == 0 && !response.body.isEmpty { outgoingBodies[stream] = (response.body, 0) }
        stage()
    }

    public func submitMaxStreams(_ streams: UInt32) {
        guard let session else { return }
        _ = islet_h2_submit_max_streams(session, streams)
        flush()
    }

    public func resetStream(_ stream: Int32, errorCode: UInt32) {
        guard let session else { return }
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, errorCode)
        flush()
    }

    /// Sends GOAWAY naming the last stream processed; the peer retries the rest elsewhere.
    public func goAway(lastStream: Int32, errorCode: UInt32 = UInt32(ISLET_H2_NO_ERROR)) {
        guard let session else { return }
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, errorCode, nil, 0)
        flush()
    }

    public func ping() {
        loop.preconditionInLoop()
        guard let session else { return }
        _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        flush()
    }

    /// The highest stream id the peer opened so far (server side).
    public var lastPeerStream: Int32 { session.map { nghttp2_session_get_last_proc_stream_id($0) } ?? 0 }

    /// Closes the connection at once; open streams are reported closed without a response.
    public func close(reason: String) {
        loop.preconditionInLoop()
        guard phase != .closed else { return }
        if flushQueued && phase == .open {
            // What this turn submitted is written before the socket closes, as when every submit wrote at once.
            flush()
            guard phase != .closed else { return }
        }
        phase = .closed
        loop.unregister(fd)
        Foundation.close(fd)
        let open = Array(incoming.keys)
        incoming = [:]
        outgoingBodies = [:]
        if role == .client {
            for stream in open.sorted() {
                delegate?.h2StreamClosed(self, stream: stream, response: nil, errorCode: UInt32(ISLET_H2_CANCEL))
            }
        }
        delegate?.h2Closed(self, reason: reason)
        delegate = nil
    }

    // MARK: Events

    func ready(_ events: UInt32) {
        loop.preconditionInLoop()
        switch phase {
        case .connecting:
            guard events & UInt32(ISLET_EPOLLOUT | ISLET_EPOLLERR | ISLET_EPOLLHUP) != 0 else { return }
            let error = islet_socket_error(fd)
            guard error == 0 else { return close(reason: "cannot connect to \(peer): \(String(cString: strerror(error)))") }
            phase = .handshaking
            handshake()
        case .handshaking:
            handshake()
        case .open:
            if events & UInt32(ISLET_EPOLLIN | ISLET_EPOLLHUP | ISLET_EPOLLERR) != 0 { readAvailable() }
            if phase == .open { flush() }
        case .closed:
            break
        }
    }

    private func handshake() {
        let result = Int(islet_tls_handshake(ssl))
        switch result {
        case 1:
            guard islet_tls_alpn_h2(ssl) == 1 else { return close(reason: "\(peer) did not agree to HTTP/2 (ALPN h2)") }
            startSession()
        case ISLET_TLS_WANT_READ:
            loop.modify(fd, events: UInt32(ISLET_EPOLLIN))
        case ISLET_TLS_WANT_WRITE:
            loop.modify(fd, events: UInt32(ISLET_EPOLLIN | ISLET_EPOLLOUT))
        default:
            var buffer = [CChar](repeating: 0, count: 256)
            islet_tls_error(&buffer, 256)
            close(reason: "TLS handshake with \(peer) failed: \(String(cBuffer: buffer))")
        }
    }

    private func startSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onData)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrame)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        let me = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        if role == .client {
            nghttp2_session_client_new(&created, callbacks, me)
        } else {
            nghttp2_session_server_new(&created, callbacks, me)
        }
        session = created
        phase = .open
        loop.modify(fd, events: UInt32(ISLET_EPOLLIN))
        if role == .client { submitMaxStreams(0) }   // no server push
        delegate?.h2Ready(self)
        flush()
        // With read-ahead, records that came with the end of the handshake may already sit in OpenSSL's
        // buffer, where epoll cannot see them: read them now.
        if phase == .open && SSL_has_pending(ssl) == 1 { readAvailable() }
    }

    private func readAvailable() {
        guard let session, !loop.receiving else { return }
        let buffer = loop.readBuffer
        loop.receiving = true
        defer { loop.receiving = false }
        while phase == .open {
            let count = islet_tls_read(ssl, buffer.baseAddress, Int32(buffer.count))
            if count > 0 {
                lastReceived = ContinuousClock.now
                let consumed = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int(count))
                if consumed < 0 { return close(reason: "HTTP/2 protocol error from \(peer): \(String(cString: nghttp2_strerror(Int32(consumed))))") }
                continue
            }
            switch Int(count) {
            case ISLET_TLS_WANT_READ: return
            case ISLET_TLS_WANT_WRITE:
                loop.modify(fd, events: UInt32(ISLET_EPOLLIN | ISLET_EPOLLOUT))
                return
            case ISLET_TLS_CLOSED: return close(reason: "\(peer) closed the connection")
            default: return close(reason: "connection to \(peer) failed")
            }
        }
    }

    /// After a request or response is submitted: its frames are taken from nghttp2 at once, so the
    /// peer sees each message's HEADERS and DATA together, in submission order, and written at the end
    /// of the loop's turn with everything else the turn submitted (or at once past 64 KiB).
    private func stage() {
        guard phase == .open, let session, gather(session) else { return }
        if outbound.count - outboundOffset >= 65536 { flush() } else { flushSoon() }
    }

    /// Moves nghttp2's pending frames into `outbound`, up to 64 KiB waiting; false when that failed
    /// and the connection closed.
    private func gather(_ session: OpaquePointer) -> Bool {
        while outbound.count - outboundOffset < 65536 {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            if length < 0 {
                close(reason: "HTTP/2 error: \(String(cString: nghttp2_strerror(Int32(length))))")
                return false
            }
            if length == 0 { break }
            outbound.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            bytesGathered += length
        }
        return true
    }

    /// Flushes at the end of the loop's turn, once for everything the turn submitted.
    private func flushSoon() {
        guard !flushQueued else { return }
        flushQueued = true
        loop.atEndOfTurn { [self] in
            if flushQueued { flush() }
        }
    }

    /// Moves nghttp2's pending frames into TLS; waits for writability when the socket is full.
    func flush() {
        flushQueued = false
        guard phase == .open, let session else { return }
        while true {
            if outboundOffset < outbound.count {
                let remaining = outbound.count - outboundOffset
                let written = outbound.withUnsafeBytes { islet_tls_write(ssl, $0.baseAddress! + outboundOffset, Int32(remaining)) }
                if written > 0 {
                    outboundOffset += Int(written)
                    bytesWritten += Int(written)
                    continue
                }
                if Int(written) == ISLET_TLS_WANT_WRITE || Int(written) == ISLET_TLS_WANT_READ {
                    if !wantsWrite { wantsWrite = true; loop.modify(fd, events: UInt32(ISLET_EPOLLIN | ISLET_EPOLLOUT)) }
                    return
                }
                // The peer may have answered, sent GOAWAY and closed before this write: what it sent is
                // still readable, and taking it in settles the streams it answered or refused.
                readAvailable()
                return close(reason: "writing to \(peer) failed")
            }
            outbound.removeAll(keepingCapacity: true)
            outboundOffset = 0
            // Frames are gathered (up to 64 KiB) so that many go out in one TLS record and one write.
            guard gather(session) else { return }
            if outbound.isEmpty { break }
        }
        if wantsWrite { wantsWrite = false; loop.modify(fd, events: UInt32(ISLET_EPOLLIN)) }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            close(reason: "HTTP/2 session with \(peer) ended")
        }
    }

    // MARK: nghttp2 callbacks (on the loop thread, inside mem_recv or mem_send)

    fileprivate func beginHeaders(stream: Int32) {
        incoming[stream] = H2Message(headers: [])
    }

    fileprivate func header(stream: Int32, name: String, value: String) {
        incoming[stream]?.headers.append((name, value))
    }

    fileprivate func data(stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        incoming[stream]?.body.append(contentsOf: bytes)
    }

    fileprivate func frame(type: UInt8, flags: UInt8, stream: Int32, frame: UnsafePointer<nghttp2_frame>) {
        switch Int(type) {
        case ISLET_H2_SETTINGS where flags & UInt8(ISLET_H2_FLAG_ACK) == 0:
            delegate?.h2Settings(self)
        case ISLET_H2_GOAWAY:
            delegate?.h2GoAway(self, lastStream: islet_h2_goaway_last_stream(frame))
        case ISLET_H2_PING where flags & UInt8(ISLET_H2_FLAG_ACK) != 0:
            delegate?.h2PingAcknowledged(self)
        case ISLET_H2_HEADERS, ISLET_H2_DATA:
            if role == .server, flags & UInt8(ISLET_H2_FLAG_END_STREAM) != 0, let request = incoming[stream] {
                incoming[stream] = nil
                delegate?.h2Request(self, request, stream: stream)
            }
        default:
            break
        }
    }

    fileprivate func streamClosed(stream: Int32, errorCode: UInt32) {
        outgoingBodies[stream] = nil
        let response = incoming.removeValue(forKey: stream)
        if role == .client {
            openStreams -= 1
            let complete = errorCode == UInt32(ISLET_H2_NO_ERROR) ? response : nil
            delegate?.h2StreamClosed(self, stream: stream, response: complete, errorCode: errorCode)
        }
    }

    fileprivate func readBody(stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let body = outgoingBodies[stream] else {
            flags.pointee |= UInt32(ISLET_H2_DATA_FLAG_EOF)
            return 0
        }
        let count = min(length, body.bytes.count - body.offset)
        body.bytes.withUnsafeBufferPointer { source in
            buffer.update(from: source.baseAddress! + body.offset, count: count)
        }
        if body.offset + count >= body.bytes.count {
            flags.pointee |= UInt32(ISLET_H2_DATA_FLAG_EOF)
            outgoingBodies[stream] = nil
        } else {
            outgoingBodies[stream]?.offset += count
        }
        return count
    }

    /// Headers whose value is new in every message (APNs' request and answer id): HPACK sends them as
    /// literals never indexed, since indexing them only churns the dynamic table (RFC 7541 §6.2.3),
    /// evicting the entries that do repeat, such as the provider token.
    static func neverIndexed(_ name: String) -> Bool { name == "apns-id" }
    private static let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
    private static let indexable = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)

    /// Calls `body` with nghttp2 name/value pairs pointing into one buffer (nghttp2 copies them).
    /// The buffers are temporary allocations (on the stack when small): no heap traffic per message.
    static func withNameValues<T>(_ headers: [(name: String, value: String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> T) -> T {
        let byteCount = headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, byteCount)) { bytes in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(1, headers.count)) { nvs in
                var offset = 0
                func copy(_ text: String) -> (UnsafeMutablePointer<UInt8>, Int) {
                    var text = text
                    let start = bytes.baseAddress! + offset
                    let count = text.withUTF8 { utf8 in
                        if let source = utf8.baseAddress { start.initialize(from: source, count: utf8.count) }
                        return utf8.count
                    }
                    offset += count
                    return (start, count)
                }
                for (index, header) in headers.enumerated() {
                    let name = copy(header.name), value = copy(header.value)
                    (nvs.baseAddress! + index).initialize(to: nghttp2_nv(name: name.0, value: value.0, namelen: name.1, valuelen: value.1,
                                                                          flags: neverIndexed(header.name) ? noIndex : indexable))
                }
                return body(nvs.baseAddress!, headers.count)
            }
        }
    }
}

private func connection(_ userData: UnsafeMutableRawPointer?) -> H2Connection {
    Unmanaged<H2Connection>.fromOpaque(userData!).takeUnretainedValue()
}

private func text(_ pointer: UnsafePointer<UInt8>?, _ length: Int) -> String {
    guard let pointer else { return "" }
    return String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    connection(userData).beginHeaders(stream: islet_h2_frame_stream(frame))
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, let name else { return 0 }
    let target = connection(userData)
    guard target.keeps(UnsafeBufferPointer(start: name, count: nameLength)) else { return 0 }
    target.header(stream: islet_h2_frame_stream(frame), name: text(name, nameLength), value: text(value, valueLength))
    return 0
}

private let onData: nghttp2_on_data_chunk_recv_callback = { _, _, stream, data, length, userData in
    connection(userData).data(stream: stream, UnsafeBufferPointer(start: data, count: length))
    return 0
}

private let onFrame: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    connection(userData).frame(type: islet_h2_frame_type(frame), flags: islet_h2_frame_flags(frame),
                               stream: islet_h2_frame_stream(frame), frame: frame)
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, stream, errorCode, userData in
    connection(userData).streamClosed(stream: stream, errorCode: errorCode)
    return 0
}

private let readBodyCallback: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, userData in
    guard let buffer, let flags else { return Int(ISLET_H2_ERR_CALLBACK_FAILURE) }
    return connection(userData).readBody(stream: stream, into: buffer, length: length, flags: flags)
}
