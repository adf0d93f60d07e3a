import CMicroHTTPD
import Foundation
import IsletCore
import Synchronization

/// Limits and address of the HTTP server.
public struct HTTPServerConfiguration: Sendable {
    /// Numeric IPv4 or IPv6 address to bind.
    public var host: String
    /// 0 picks a free port; read it back from `HTTPServer.port`.
    public var port: Int
    public var maximumBodyBytes: Int
    /// An idle or stalled connection is closed after this long.
    public var connectionTimeoutSeconds: Int
    /// Memory libmicrohttpd may use per connection for headers and buffers (the body is ours).
    public var connectionMemoryLimit: Int
    public var connectionLimit: Int
    /// Threads that read and write connections and run the handlers that do not wait (one per core).
    public var threads: Int
    /// Threads for handlers that wait (`HTTPExecution.workerPool`): the most such requests handled at once.
    public var workerThreads: Int
    /// The memory bodies may hold while they arrive (`BodyBudget`).
    public var bodies = BodyBudget()
    /// Connections one client address may hold open at once (`ConnectionsPerAddress`); nil: no limit.
    public var connectionsPerAddress: Int? = 128
    /// How long a client may take to send a request's headers and body (`ReceiveDeadline`); nil: only the idle timeout.
    public var receiveDeadline: ReceiveDeadline? = ReceiveDeadline()

    public init(host: String = "127.0.0.1", port: Int = 8080, maximumBodyBytes: Int = 1 << 20,
                connectionTimeoutSeconds: Int = 30, connectionMemoryLimit: Int = 64 << 10,
                connectionLimit: Int = 1024, threads: Int = max(2, ProcessInfo.processInfo.activeProcessorCount),
                workerThreads: Int = 64) {
        self.host = host
        self.port = port
        self.maximumBodyBytes = maximumBodyBytes
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.connectionMemoryLimit = connectionMemoryLimit
        self.connectionLimit = connectionLimit
        self.threads = threads
        self.workerThreads = workerThreads
    }
}

public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// An HTTP/1.1 server on libmicrohttpd: an epoll thread pool that hands whole requests to an `HTTPHandler`.
/// A request the handler places on the worker pool suspends its connection (libmicrohttpd's
/// suspend/resume) while a worker runs it, so the connection threads go on serving other connections.
///
/// `@unchecked Sendable`: the daemon handle is guarded by `daemon`'s mutex; everything the C
/// callbacks touch lives in `ServerContext`, which is itself thread-safe.
public final class HTTPServer: @unchecked Sendable {
    public let configuration: HTTPServerConfiguration
    private let context: ServerContext
    private let daemon = Mutex<DaemonHandle?>(nil)
    private let boundPort = Atomic<Int>(0)

    public init(configuration: HTTPServerConfiguration, handler: any HTTPHandler) {
        self.configuration = configuration
        self.context = ServerContext(handler: handler, maximumBodyBytes: configuration.maximumBodyBytes, bodies: configuration.bodies,
                                     connections: ConnectionsPerAddress(limit: configuration.connectionsPerAddress),
                                     deadlines: configuration.receiveDeadline.map(ReceiveDeadlines.init),
                                     workers: WorkerPool(threads: configuration.workerThreads, name: "islet-http"))
    }

    deinit {
        // Never MHD_stop_daemon alone: libmicrohttpd aborts when a connection is still suspended.
        shutdown(gracePeriod: .zero)
    }

    /// The bound port, once started.
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// Requests whose handling has begun and not yet finished.
    public var requestsInFlight: Int { context.inFlight.load(ordering: .acquiring) }

    /// Connections ended because their request did not arrive by its deadline (`ReceiveDeadline`), since the start.
    public var connectionsEndedLate: Int { context.deadlines?.ended ?? 0 }

    /// Binds and starts serving on the worker threads; returns at once.
    public func start() throws(HTTPServerError) {
        var storage = sockaddr_storage()
        try Self.socketAddress(host: configuration.host, port: configuration.port, into: &storage)
        let contextPointer = Unmanaged.passUnretained(context).toOpaque()
        let started: OpaquePointer? = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                var options = islet_mhd_options(
                    address: address, thread_pool_size: UInt32(configuration.threads),
                    connection_timeout_seconds: UInt32(configuration.connectionTimeoutSeconds),
                    connection_memory_limit: configuration.connectionMemoryLimit,
                    connection_limit: UInt32(configuration.connectionLimit),
                    accept_policy: acceptPolicy, accept_context: contextPointer,
                    notify_connection: connectionNotice, notify_context: contextPointer,
                    request_line: requestLineNotice, request_line_context: contextPointer)
                return islet_mhd_start(&options, accessHandler, contextPointer, completedHandler, contextPointer)
            }
        }
        guard let started else {
            throw HTTPServerError(description: "cannot listen on \(configuration.host):\(configuration.port) (address in use or not available)")
        }
        context.workers.start()
        context.deadlines?.start()
        daemon.withLock { $0 = DaemonHandle(pointer: started) }
        boundPort.store(Int(islet_mhd_bound_port(started)), ordering: .releasing)
    }

    /// How long a shutdown waits for the bodies of requests still arriving.
    static let bodyGrace: Duration = .seconds(2)

    /// Stops accepting connections, lets in-flight requests finish (up to `gracePeriod`), then stops.
    ///
    /// A request still waiting for a worker at the deadline is answered 503 and never run; one a worker is
    /// still running is answered 503 saying its outcome is unknown (libmicrohttpd must not stop with a
    /// connection suspended). Returns false when some requests were still running at the deadline (a
    /// worker may still be running one: its outcome is unknown).
    @discardableResult
    public func shutdown(gracePeriod: Duration = .seconds(10)) -> Bool {
        guard let running = daemon.withLock({ current -> DaemonHandle? in defer { current = nil }; return current })?.pointer else {
            return true
        }
        let listener = MHD_quiesce_daemon(running)
        if listener >= 0 { close(listener) }
        let deadline = ContinuousClock.now + gracePeriod
        // Streams never end on their own: they end now, once what they have queued is written.
        context.streams.finishAll()
        // A body on its way gets a moment to arrive, and its request runs; one still coming after that (a client
        // that trickles it, or never sends the rest) is closed at the stop: nothing of it ran, and it holds up neither
        // the stop nor its outcome.
        context.waitForRequests(until: min(deadline, ContinuousClock.now + Self.bodyGrace))
        let drained = context.waitForRunningRequests(until: deadline)
        let handler = context.handler
        let resumes = max(deadline, ContinuousClock.now + .seconds(1))
        if context.suspensions.stop(until: resumes, answer: { request, started in handler.unfinished(request, started: started) }) > 0 {
            // The 503s go out on the connection threads: a moment for them to be written before the stop.
            context.waitForRequests(until: ContinuousClock.now + .milliseconds(250))
        }
        // Again, for any stream that slipped in meanwhile: none may be suspended when libmicrohttpd stops.
        if context.streams.finishAll() > 0 { context.waitForRequests(until: ContinuousClock.now + .milliseconds(250)) }
        MHD_stop_daemon(running)
        context.deadlines?.shutdown(deadline: ContinuousClock.now + .seconds(1))
        // A handler still running was answered 503 above; it may yet commit, so the caller hears of it.
        let workersDone = context.workers.shutdown(deadline: max(deadline, ContinuousClock.now + .milliseconds(100)))
        return drained && workersDone
    }


    @discardableResult
    static func socketAddress(host: String, port: Int, into storage: inout sockaddr_storage) throws(HTTPServerError) -> Int {
        guard (0...65535).contains(port) else { throw HTTPServerError(description: "port \(port) is out of range") }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr = v4
            withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee = address } }
            return MemoryLayout<sockaddr_in>.size
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            address.sin6_addr = v6
            withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee = address } }
            return MemoryLayout<sockaddr_in6>.size
        }
        throw HTTPServerError(description: "\(host) is not a numeric IPv4 or IPv6 address")
    }
}

/// The libmicrohttpd daemon handle; only moved in and out under `HTTPServer.daemon`'s mutex.
struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The libmicrohttpd connection of a suspended request; used only under `Suspensions`' lock, while the
/// connection is known to be suspended (so libmicrohttpd cannot free it).
struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// What the C callbacks share: the handler, the body limit, the in-flight count, the worker pool and the
/// suspended requests.
final class ServerContext: Sendable {
    let handler: any HTTPHandler
    let maximumBodyBytes: Int
    let bodies: BodyBudget
    let connections: ConnectionsPerAddress
    /// Requests still being received, and when each must be in; nil: no deadline.
    let deadlines: ReceiveDeadlines?
    let inFlight = Atomic<Int>(0)
    /// Requests in flight whose body is still coming: nothing of them has run, so a shutdown does not wait for them
    /// (a client sending its body slowly, or never finishing it, would hold the stop for the whole grace period).
    let receiving = Atomic<Int>(0)
    /// Set while the server waits for requests to end: the last one to end wakes it (`requestEnded`).
    let draining = Atomic<Bool>(false)
    let drained = NSCondition()
    let workers: WorkerPool
    let suspensions = Suspensions()
    let streams = OpenStreams()

    init(handler: any HTTPHandler, maximumBodyBytes: Int, bodies: BodyBudget, connections: ConnectionsPerAddress,
         deadlines: ReceiveDeadlines?, workers: WorkerPool) {
        self.connections = connections
        self.deadlines = deadlines
        self.handler = handler
        self.maximumBodyBytes = maximumBodyBytes
        self.bodies = bodies
        self.workers = workers
    }

    /// Suspends the connection and runs the handler on a worker; the answer is queued when libmicrohttpd
    /// calls back after the resume. False when the server is stopping (answer at once instead).
    func handOff(_ request: HTTPRequest, answer: PendingAnswer, connection: OpaquePointer) -> Bool {
        guard let id = suspensions.suspend(connection, answer: answer, request: request) else { return false }
        onWorker(id, request, begun: false) { [handler] in handler.handle(request) }
        return true
    }

    /// Runs `work` for the suspended request `id` on a worker and leaves its answer, unless shutdown answered it first;
    /// a pool that no longer takes work answers 503 at once (`begun`: whether anything of the request may have run).
    func onWorker(_ id: UInt64, _ request: HTTPRequest, begun: Bool, _ work: @escaping @Sendable () -> HTTPResponse) {
        let submitted = workers.submit { [suspensions] in
            guard suspensions.begin(id) else { return }   // answered 503 at shutdown before it ran
            suspensions.finish(id, with: work())
        }
        if !submitted { suspensions.finish(id, with: handler.unfinished(request, started: begun)) }
    }
}

/// The answer a worker leaves for the connection thread, read after libmicrohttpd resumes the connection.
final class PendingAnswer: Sendable {
    private let response = Mutex<HTTPResponse?>(nil)
    func set(_ value: HTTPResponse) { response.withLock { $0 = value } }
    func take() -> HTTPResponse? { response.withLock { current in defer { current = nil }; return current } }
}

/// The requests whose connections are suspended while a worker runs them. Each suspended connection is resumed
/// exactly once: by its worker, which takes its entry under the lock, or at shutdown, which takes every entry left.
/// A suspend happens under the lock (a shutdown never resumes a connection not yet suspended); a worker's resume
/// after it, so the workers and libmicrohttpd's thread do not queue for the lock behind each other's calls into
/// libmicrohttpd (its lock and a wake-up of its thread), and `stop` waits for the resumes under way, so none comes
/// after libmicrohttpd stops. libmicrohttpd never calls back into this while holding its own locks, so the order
/// cannot deadlock.
final class Suspensions: Sendable {
    private struct Entry {
        let connection: ConnectionHandle
        let answer: PendingAnswer
        let request: HTTPRequest
        var started: Bool
    }
    private struct State {
        var nextID: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
        var stopped = false
    }
    private let state = Mutex(State())
    /// Workers between taking their entry (under the lock, so a stop that comes after sees them) and the return of
    /// its `MHD_resume_connection`; left without the lock, so a finish takes the lock once.
    private let resuming = Atomic<Int>(0)

    /// Suspends `connection` (from the access handler, as libmicrohttpd requires); nil once stopped.
    func suspend(_ connection: OpaquePointer, answer: PendingAnswer, request: HTTPRequest) -> UInt64? {
        state.withLock { state in
            guard !state.stopped else { return nil }
            state.nextID += 1
            state.entries[state.nextID] = Entry(connection: ConnectionHandle(pointer: connection), answer: answer, request: request, started: false)
            MHD_suspend_connection(connection)
            return state.nextID
        }
    }

    /// A worker is about to run the request; false when shutdown already answered it.
    func begin(_ id: UInt64) -> Bool {
        state.withLock { state in
            guard state.entries[id] != nil else { return false }
            state.entries[id]?.started = true
            return true
        }
    }

    /// Leaves the answer and resumes the connection, unless shutdown answered it already (then a stream the
    /// handler answered with is let go: it will never be written).
    func finish(_ id: UInt64, with response: HTTPResponse) {
        let connection = state.withLock { state -> ConnectionHandle? in
            guard let entry = state.entries.removeValue(forKey: id) else {
                response.stream?.released()
                return nil
            }
            entry.answer.set(response)
            resuming.add(1, ordering: .relaxed)
            return entry.connection
        }
        guard let connection else { return }
        MHD_resume_connection(connection.pointer)
        resuming.subtract(1, ordering: .releasing)
    }

    /// Refuses further suspensions and resumes every suspended connection with `answer(started)`; returns
    /// how many it resumed, once the workers' resumes under way have returned (until `deadline`: a resume takes
    /// microseconds, a lock and a write to wake libmicrohttpd's thread).
    func stop(until deadline: ContinuousClock.Instant, answer: (_ request: HTTPRequest, _ started: Bool) -> HTTPResponse) -> Int {
        let resumed = state.withLock { state in
            state.stopped = true
            let resumed = state.entries.count
            for (_, entry) in state.entries {
                entry.answer.set(answer(entry.request, entry.started))
                MHD_resume_connection(entry.connection.pointer)
            }
            state.entries = [:]
            return resumed
        }
        while resuming.load(ordering: .acquiring) > 0 && ContinuousClock.now < deadline { sched_yield() }
        return resumed
    }

}

/// One request being read. Only the connection's thread touches it, one call at a time.
final class RequestState {
    let method: String
    let path: String
    var headers: [(name: String, value: String)] = []
    var query: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var tooLarge = false
    /// No room for its body (`BodyBudget`): what arrives is dropped, and the answer is 503.
    var noRoom = false
    /// What it reserved of the body budget, and under which client key: given back when it ends.
    var reservedBytes = 0
    var clientKey = ""
    /// From its headers until its whole body is in: counted in `ServerContext.receiving`.
    var receivingBody = false
    var clientAddress = ""
    /// Set when the request was handed to a worker; its answer arrives here.
    var answer: PendingAnswer?

    init(method: String, path: String) {
        self.method = method
        self.path = path
    }

    var request: HTTPRequest {
        HTTPRequest(method: method, path: path, headers: headers, body: tooLarge ? [] : body, clientAddress: clientAddress, query: query)
    }
}

private let collectHeader: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let state = Unmanaged<RequestState>.fromOpaque(cls).takeUnretainedValue()
    state.headers.append((name: String(cString: key).lowercased(), value: value.map { String(cString: $0) } ?? ""))
    return .YES
}

/// Query arguments with their lengths, so a `%00` inside one is kept (and then refused by whoever reads
/// it) rather than silently cutting it short.
private let collectQueryArgument: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
    guard let cls, let key else { return .YES }
    let state = Unmanaged<RequestState>.fromOpaque(cls).takeUnretainedValue()
    func text(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> String {
        guard let pointer else { return "" }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: count) { String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self) }
    }
    state.query.append((name: text(key, keySize), value: text(value, valueSize)))
    return .YES
}

private func queue(_ response: HTTPResponse, on connection: OpaquePointer?, _ context: ServerContext) -> MHD_Result {
    let mhdResponse: OpaquePointer?
    if let stream = response.stream, let connection {
        stream.attach(connection)
        context.streams.add(stream)
        // Released (and the stream told it is closed) by libmicrohttpd's free callback, even if queueing fails.
        let retained = Unmanaged.passRetained(stream)
        mhdResponse = MHD_create_response_from_callback(UInt64.max /* MHD_SIZE_UNKNOWN */, 4096, streamReader, retained.toOpaque(), streamReleased)
        if mhdResponse == nil { retained.takeRetainedValue().released() }
    } else {
        mhdResponse = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
    }
    guard let mhdResponse else { return .NO }
    for header in response.headers { MHD_add_response_header(mhdResponse, header.name, header.value) }
    let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    MHD_destroy_response(mhdResponse)
    return result
}

// Runs on libmicrohttpd's worker threads: touches only ServerContext and the request's own state.
private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, requestContext in
    guard let cls, let requestContext, let uploadSize else { return .NO }
    let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()

    guard let existing = requestContext.pointee else {
        // First call: headers are in, the body is not. libmicrohttpd has cut the query string from `url`
        // and parsed it into GET arguments.
        let rawPath = url.map { String(cString: $0) } ?? "/"
        let path = rawPath.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? rawPath
        let state = RequestState(method: method.map { String(cString: $0) } ?? "GET", path: path)
        let unmanaged = Unmanaged.passRetained(state)
        requestContext.pointee = unmanaged.toOpaque()
        context.inFlight.add(1, ordering: .sequentiallyConsistent)
        context.receiving.add(1, ordering: .sequentiallyConsistent)
        state.receivingBody = true
        MHD_get_connection_values(connection, .HEADER_KIND, collectHeader, unmanaged.toOpaque())
        MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, collectQueryArgument, unmanaged.toOpaque())
        state.clientAddress = connection.map(ClientAddress.text(of:)) ?? ""
        let declared = state.request.header("content-length").flatMap(Int.init)
        // The headers are in; the body has its own deadline, by its length.
        if let connection, let deadlines = context.deadlines {
            deadlines.arm(connection, within: deadlines.deadline.body(length: declared, maximum: context.maximumBodyBytes))
        }
        if let length = declared, length > context.maximumBodyBytes {
            // Answer before reading a body we would refuse; libmicrohttpd then closes the connection.
            state.tooLarge = true
            context.bodyReceived(state, on: connection)
            return queue(context.handler.bodyTooLarge(state.request, limit: context.maximumBodyBytes), on: connection, context)
        }
        if let length = declared, length > context.bodies.small {
            // A large body takes its room before it is read, or is refused before it is read.
            state.clientKey = context.handler.clientKey(state.request)
            guard context.bodies.reserve(length, for: state.clientKey) else {
                state.noRoom = true
                context.bodyReceived(state, on: connection)
                return queue(context.handler.bodiesBusy(state.request, retryAfter: BodyBudget.retryAfter), on: connection, context)
            }
            state.reservedBytes = length
            state.body.reserveCapacity(length)
        }
        return .YES
    }

    let state = Unmanaged<RequestState>.fromOpaque(existing).takeUnretainedValue()
    if let answer = state.answer {
        // Called again after a worker resumed the connection.
        return queue(answer.take() ?? HTTPResponse(status: 500), on: connection, context)
    }
    if uploadSize.pointee > 0 {
        let count = uploadSize.pointee
        if !state.noRoom, !state.tooLarge, state.reservedBytes == 0, state.body.count + count > context.bodies.small {
            // A body of no declared length grows past the small ones: it takes room for the largest it may become.
            state.clientKey = context.handler.clientKey(state.request)
            if context.bodies.reserve(context.maximumBodyBytes, for: state.clientKey) {
                state.reservedBytes = context.maximumBodyBytes
            } else {
                state.noRoom = true
                state.body = []
            }
        }
        if state.noRoom {
            // Dropped as it arrives; answered 503 at its end.
        } else if !state.tooLarge, state.body.count + count <= context.maximumBodyBytes, let uploadData {
            uploadData.withMemoryRebound(to: UInt8.self, capacity: count) {
                state.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
            }
        } else if !state.tooLarge {
            state.tooLarge = true
            state.body = []
        }
        uploadSize.pointee = 0
        return .YES
    }
    context.bodyReceived(state, on: connection)
    if state.noRoom {
        return queue(context.handler.bodiesBusy(state.request, retryAfter: BodyBudget.retryAfter), on: connection, context)
    }
    if state.tooLarge {
        return queue(context.handler.bodyTooLarge(state.request, limit: context.maximumBodyBytes), on: connection, context)
    }
    let request = state.request
    let execution = context.handler.execution(for: request)
    if execution != .connectionThread, let connection {
        let answer = PendingAnswer()
        state.answer = answer
        if execution == .later ? context.handLater(request, answer: answer, connection: connection)
            : context.handOff(request, answer: answer, connection: connection) { return .YES }
        state.answer = nil
        return queue(context.handler.unfinished(request, started: false), on: connection, context)
    }
    return queue(context.handler.handle(request), on: connection, context)
}

// Before a connection is accepted: refused when its address holds as many as it may.
private let acceptPolicy: MHD_AcceptPolicyCallback = { cls, address, _ in
    guard let cls else { return .YES }
    let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    return context.connections.admits(ClientAddress.text(address)) ? .YES : .NO
}

// A request's first line is in: its headers have a deadline. Returns no request context (the access handler makes it).
private let requestLineNotice: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
    cls, _, connection in
    guard let cls, let connection else { return nil }
    let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    if let deadlines = context.deadlines { deadlines.arm(connection, within: deadlines.deadline.headers) }
    return nil
}

// A connection started or closed: counted for its address. Closed, it has no deadline (before libmicrohttpd closes
// its socket: see `ReceiveDeadlines`).
private let connectionNotice: MHD_NotifyConnectionCallback = { cls, connection, _, code in
    guard let cls, let connection else { return }
    let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    if code.rawValue == 1 { context.deadlines?.clear(connection) }
    guard context.connections.limit != nil else { return }
    // MHD_CONNECTION_NOTIFY_STARTED is 0, MHD_CONNECTION_NOTIFY_CLOSED 1.
    switch code.rawValue {
    case 0: context.connections.opened(ClientAddress.text(of: connection))
    case 1: context.connections.closed(ClientAddress.text(of: connection))
    default: break
    }
}

private let completedHandler: MHD_RequestCompletedCallback = { cls, connection, requestContext, _ in
    guard let cls, let requestContext, let existing = requestContext.pointee else { return }
    let context = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    let state = Unmanaged<RequestState>.fromOpaque(existing).takeUnretainedValue()
    // Ended before its body was in (the client left, or the server stopped): nothing of it ran.
    context.bodyReceived(state, on: connection)
    if state.reservedBytes > 0 {
        state.body = []   // freed first: giving the room back may give the free memory back to the system
        context.bodies.release(state.reservedBytes, for: state.clientKey)
        state.reservedBytes = 0
    }
    // A worker's answer never queued (the client left first): a stream in it is let go.
    state.answer?.take()?.stream?.released()
    Unmanaged<RequestState>.fromOpaque(existing).release()
    requestContext.pointee = nil
    context.requestEnded()
}

extension ServerContext {
    /// A request's body is in (or it ended without it): it no longer counts as receiving, nor has a deadline. Once per
    /// request.
    func bodyReceived(_ state: RequestState, on connection: OpaquePointer?) {
        if let connection { deadlines?.clear(connection) }
        guard state.receivingBody else { return }
        state.receivingBody = false
        receiving.subtract(1, ordering: .sequentiallyConsistent)
        wakeIfDrained()
    }

    /// A request's completion: counted out, and the last one wakes a shutdown waiting for them (one atomic load
    /// otherwise).
    func requestEnded() {
        // Sequentially consistent with `waitForRequests`' store and load: one of the two sees the other's write.
        inFlight.subtract(1, ordering: .sequentiallyConsistent)
        wakeIfDrained()
    }

    /// Requests that are running or being answered: in flight, and not waiting for their body.
    var requestsRunning: Int { inFlight.load(ordering: .sequentiallyConsistent) - receiving.load(ordering: .sequentiallyConsistent) }

    /// Wakes a shutdown waiting for the requests when none runs any more.
    private func wakeIfDrained() {
        guard draining.load(ordering: .sequentiallyConsistent), requestsRunning <= 0 else { return }
        drained.lock()
        drained.broadcast()
        drained.unlock()
    }

    /// Waits until no request is in flight, their bodies' arrival included, or `deadline` passes; true when none is.
    @discardableResult
    func waitForRequests(until deadline: ContinuousClock.Instant) -> Bool {
        draining.store(true, ordering: .sequentiallyConsistent)
        drained.lock()
        defer { drained.unlock() }
        return drained.wait(while: { inFlight.load(ordering: .sequentiallyConsistent) > 0 }, until: deadline)
    }

    /// Waits until no request runs (those still receiving their body do not count: nothing of them ran, and the stop
    /// closes them) or `deadline` passes, woken when the last one ends; true when none runs.
    func waitForRunningRequests(until deadline: ContinuousClock.Instant) -> Bool {
        draining.store(true, ordering: .sequentiallyConsistent)
        drained.lock()
        defer { drained.unlock() }
        return drained.wait(while: { requestsRunning > 0 }, until: deadline)
    }
}
