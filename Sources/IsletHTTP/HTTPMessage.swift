/// An HTTP request as handlers see it: whole, with its body already read.
public struct HTTPRequest: Sendable {
    public let method: String
    /// The path without the query string.
    public let path: String
    /// Header names are lowercased.
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// The peer's IP address as text ("" when unknown).
    public let clientAddress: String
    /// The query string's arguments, percent-decoded, in order.
    public let query: [(name: String, value: String)]

    public init(method: String, path: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
                clientAddress: String = "", query: [(name: String, value: String)] = []) {
        self.method = method
        self.path = path
        self.headers = headers.map { (name: $0.name.lowercased(), value: $0.value) }
        self.body = body
        self.clientAddress = clientAddress
        self.query = query
    }

    /// The first value of a query argument, by exact name.
    public func queryValue(_ name: String) -> String? {
        query.first(where: { $0.name == name })?.value
    }

    /// The first value of a header, by case-insensitive name.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first(where: { $0.name == lowered })?.value
    }
}

/// An HTTP response: status, headers and a body sent as one buffer, or a stream written over time.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// When set, the body is this stream (chunked) and `body` is ignored.
    public var stream: HTTPEventStream?

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public init(status: Int, headers: [(name: String, value: String)] = [], stream: HTTPEventStream) {
        self.status = status
        self.headers = headers
        self.body = []
        self.stream = stream
    }
}

/// Where the server runs a request's handler.
public enum HTTPExecution: Sendable {
    /// On the connection's thread, at once: for handlers that only compute or read local memory and files.
    case connectionThread
    /// On a worker thread while the connection waits, suspended: for handlers that wait on I/O (a durable
    /// commit, a database across the network), so the few connection threads are never all stuck waiting.
    case workerPool
    /// On the connection's thread, which hands the request's one wait on (a write to the group commit) and returns:
    /// `handleLater` answers through its `HTTPLaterAnswer` once that is done, from whichever thread did it, while the
    /// connection waits suspended. No thread waits for it, so no worker's wake-up is paid for it.
    case later
}

/// What the server calls; runs on the server's threads, so it must be thread-safe.
public protocol HTTPHandler: Sendable {
    /// Answers a complete request.
    func handle(_ request: HTTPRequest) -> HTTPResponse
    /// Answers a request whose body is larger than the server accepts (413); its body is empty.
    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse
    /// Answers a request whose body the server cannot hold now (503, retry after `retryAfter` seconds): the bodies being
    /// received at once already fill the memory set aside for them (`BodyBudget`). Its body is empty.
    func bodiesBusy(_ request: HTTPRequest, retryAfter: Int) -> HTTPResponse
    /// The client a request counts against in `BodyBudget`'s share per address (behind a proxy on this machine, the
    /// address it forwards): by default the peer.
    func clientKey(_ request: HTTPRequest) -> String
    /// Where `handle` runs for this request (decided from the method and path; the body is complete).
    func execution(for request: HTTPRequest) -> HTTPExecution
    /// Runs a request of `HTTPExecution.later` on the connection's thread; it must not wait, and must answer through
    /// `answer` once (`onWorker` hands what would wait to a worker).
    func handleLater(_ request: HTTPRequest, _ answer: HTTPLaterAnswer)
    /// The answer (503) for a request the server stops before handling it (`started` false: nothing was
    /// done), or before its handler, still running, returned (`started` true: the outcome is unknown).
    func unfinished(_ request: HTTPRequest, started: Bool) -> HTTPResponse
}

extension HTTPHandler {
    public func execution(for request: HTTPRequest) -> HTTPExecution { .connectionThread }

    public func handleLater(_ request: HTTPRequest, _ answer: HTTPLaterAnswer) { answer.onWorker { handle(request) } }

    public func clientKey(_ request: HTTPRequest) -> String { request.clientAddress }

    public func bodiesBusy(_ request: HTTPRequest, retryAfter: Int) -> HTTPResponse {
        HTTPResponse(status: 503, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Retry-After", String(retryAfter)), ("Connection", "close")],
                     body: Array(BodyBudget.busyMessage(retryAfter: retryAfter).utf8))
    }

    public func unfinished(_ request: HTTPRequest, started: Bool) -> HTTPResponse {
        let text = started ? "the server stopped before this request finished; its outcome is unknown"
                           : "the server is stopping; the request was not handled, retry later"
        return HTTPResponse(status: 503, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")], body: Array(text.utf8))
    }
}
