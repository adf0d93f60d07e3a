/// The one error type of the JSON API: an HTTP status plus a message naming the field and the rule (E4).
public struct APIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is; decides the HTTP status and `status_code` of the envelope.
    public struct Code: Hashable, Sendable {
        public let httpStatus: Int
        public init(httpStatus: Int) { self.httpStatus = httpStatus }

        public static let badRequest = Code(httpStatus: 400)
        public static let unauthorized = Code(httpStatus: 401)
        public static let forbidden = Code(httpStatus: 403)
        public static let notFound = Code(httpStatus: 404)
        public static let methodNotAllowed = Code(httpStatus: 405)
        public static let payloadTooLarge = Code(httpStatus: 413)
        public static let unsupportedMediaType = Code(httpStatus: 415)
        public static let tooManyRequests = Code(httpStatus: 429)
        public static let internalError = Code(httpStatus: 500)
        public static let unavailable = Code(httpStatus: 503)
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.httpStatus): \(message)" }

    /// The database could not be used: a failover, a restart or a cut network is back within seconds, and Islet
    /// reconnects by itself (sent with `Retry-After: 1`).
    public static let storageUnavailable = APIError(.unavailable, "storage is unavailable; nothing was changed, retry later")

    /// A validation failure of one field: `"<path>: <rule>"`.
    public static func invalid(_ path: String, _ rule: String) -> APIError {
        APIError(.badRequest, "\(path): \(rule)")
    }
}
