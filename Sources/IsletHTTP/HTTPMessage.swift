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

    public init(method: String, path: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
                clientAddress: String = "") {
        self.method = method
        self.path = path
        self.headers = headers.map { (name: $0.name.lowercased(), value: $0.value) }
        self.body = body
        self.clientAddress = clientAddress
    }

    /// The first value of a header, by case-insensitive name.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first(where: { $0.name == lowered })?.value
    }
}

/// An HTTP response: status, headers and a body sent as one buffer.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What the server calls; runs on the server's worker threads, so it must be thread-safe.
public protocol HTTPHandler: Sendable {
    /// Answers a complete request.
    func handle(_ request: HTTPRequest) -> HTTPResponse
    /// Answers a request whose body is larger than the server accepts (413); its body is empty.
    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse
}
