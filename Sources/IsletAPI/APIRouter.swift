import Foundation
import IsletCore
import IsletHTTP
import IsletStore

/// Routes HTTP requests to the JSON API methods, health and metrics, always answering in the envelope (E1–E4).
public struct APIRouter: HTTPHandler {
    static let prefix = "/json/1.3/"

    let methods: [String: APIMethod]
    let authenticator: Authenticator
    let store: any ApplicationStore
    let metrics: Metrics
    let logger: Logger
    let now: @Sendable () -> Date
    /// Extra routes by path prefix (the simulator's inspection pages), answered before the JSON API.
    let extraRoutes: [(prefix: String, handle: @Sendable (HTTPRequest) -> HTTPResponse)]
    let perAddress: RateLimiter?
    let perDeviceToken: RateLimiter?
    let perServerToken: RateLimiter?
    /// Reads wait too (storage across the network, PostgreSQL): every storage call runs on a worker.
    let readsWait: Bool
    /// What `/healthz` says besides the database's state: this node's id and liveness (issue 14).
    let healthDetails: @Sendable () -> JSONObject

    public init(methods: [APIMethod], store: any ApplicationStore, metrics: Metrics, logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() },
                extraRoutes: [(prefix: String, handle: @Sendable (HTTPRequest) -> HTTPResponse)] = [],
                limits: RateLimits = RateLimits(), readsWait: Bool = false, healthDetails: @escaping @Sendable () -> JSONObject = { [:] }) {
        self.now = now
        self.healthDetails = healthDetails
        self.readsWait = readsWait
        self.perAddress = limits.devicePerAddress.map { RateLimiter(limit: $0) }
        self.perDeviceToken = limits.devicePerToken.map { RateLimiter(limit: $0) }
        self.perServerToken = limits.serverPerToken.map { RateLimiter(limit: $0) }
        self.extraRoutes = extraRoutes
        self.methods = Dictionary(methods.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        self.authenticator = Authenticator(store: store)
        self.store = store
        self.metrics = metrics
        self.logger = logger
    }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        let started = ContinuousClock.now
        let (route, response) = route(request)
        metrics.record(route: route, status: response.status, since: started)
        return response
    }

    public func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        let route = request.path.hasPrefix(Self.prefix) && methods[String(request.path.dropFirst(Self.prefix.count))] != nil
            ? String(request.path.dropFirst(Self.prefix.count)) : "unknown"
        metrics.record(route: route, status: 413, seconds: 0)
        return Self.json(Envelope.error(APIError(.payloadTooLarge, "request body: larger than the limit of \(limit) bytes")), status: 413)
    }

    /// The bodies being received fill their memory (`BodyBudget`): 503 with `Retry-After`, nothing read or done.
    public func bodiesBusy(_ request: HTTPRequest, retryAfter: Int) -> HTTPResponse {
        var response = Self.json(Envelope.error(APIError(.unavailable, BodyBudget.busyMessage(retryAfter: retryAfter))), status: 503)
        response.headers.append(("Retry-After", String(retryAfter)))
        return response
    }

    /// Writes wait for their durable commit on a worker (so the writes of concurrent requests share one
    /// sync); reads of local SQLite, and what touches no storage, answer on the connection's thread.
    public func execution(for request: HTTPRequest) -> HTTPExecution {
        switch request.path {
        case "/openapi.json": return .connectionThread
        case "/healthz", "/metrics": return readsWait ? .workerPool : .connectionThread   // both read the database
        default: break
        }
        guard request.path.hasPrefix(Self.prefix) else {
            // The simulator's routes add devices (writes); anything else is a 404 answered at once.
            return extraRoute(for: request) != nil ? .workerPool : .connectionThread
        }
        guard let method = methods[String(request.path.dropFirst(Self.prefix.count))] else { return .connectionThread }
        // On PostgreSQL a call reads across the network (its credential now and then), so it runs on a worker.
        if method.later != nil, !readsWait, request.method == "POST" { return .later }
        return method.effect == .writes || readsWait ? .workerPool : .connectionThread
    }

    /// A method that answers later (`APIMethod.later`), on the connection's thread: its checks and reads (local) here, its
    /// write handed to the group commit, its answer from the thread that commits it.
    public func handleLater(_ request: HTTPRequest, _ answer: HTTPLaterAnswer) {
        let started = ContinuousClock.now
        let name = String(request.path.dropFirst(Self.prefix.count))
        guard request.path.hasPrefix(Self.prefix), let method = methods[name], let later = method.later else {
            return answer.onWorker { handle(request) }
        }
        // The envelope, counted under the method's name from the request's start, as `handle` counts it.
        let answered: @Sendable (_ body: () throws -> JSONObject) -> HTTPResponse = { [self] body in
            let response = self.answer(name, body)
            metrics.record(route: name, status: response.status, since: started)
            return response
        }
        let respond: @Sendable (Result<JSONObject, any Error>) -> Void = { result in answer.respond(answered { try result.get() }) }
        do {
            let call = try authorized(method, request)
            try later(call, LaterAnswer(respond: respond, onWorker: { answer.onWorker { answered { try method.run(call) } } }))
        } catch {
            respond(.failure(error))
        }
    }

    public func unfinished(_ request: HTTPRequest, started: Bool) -> HTTPResponse {
        let message = started
            ? "the server stopped before this request finished; it may or may not have been applied, check before retrying"
            : "the server is stopping; nothing was changed, retry later"
        var response = Self.failure(APIError(.unavailable, message))
        response.headers.append(("Connection", "close"))
        return response
    }

    /// The extra route that owns the path: its prefix, or what lies below it, not every path that merely starts alike.
    private func extraRoute(for request: HTTPRequest) -> (prefix: String, handle: @Sendable (HTTPRequest) -> HTTPResponse)? {
        extraRoutes.first { request.path == $0.prefix || request.path.hasPrefix($0.prefix + "/") }
    }

    private func route(_ request: HTTPRequest) -> (String, HTTPResponse) {
        switch request.path {
        case "/healthz":
            guard request.method == "GET" || request.method == "HEAD" else { return ("healthz", Self.methodNotAllowed(request, allow: "GET, HEAD")) }
            var details = healthDetails()
            details["version"] = .string(IsletVersion.current)   // which build answers, even when the database does not
            do {
                _ = try store.hasNoApplications()
                details["status"] = "ok"
                details["database"] = "reachable"
                return ("healthz", Self.json(.object(details), status: 200))
            } catch {
                logger.error("health check failed", ["error": .string("\(error)")])
                details["status"] = "unavailable"
                details["reason"] = "database"
                details["database"] = "unreachable"
                return ("healthz", Self.json(.object(details), status: 503))
            }
        case "/metrics":
            guard request.method == "GET" else { return ("metrics", Self.methodNotAllowed(request, allow: "GET")) }
            return ("metrics", HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                                            body: Array(metrics.render().utf8)))
        case "/openapi.json":
            guard request.method == "GET" else { return ("openapi", Self.methodNotAllowed(request, allow: "GET")) }
            return ("openapi", HTTPResponse(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: Self.openAPIBytes))
        default:
            break
        }
        if let route = extraRoute(for: request) {
            return (route.prefix == "/simulator/devices" ? "simulator" : String(route.prefix.dropFirst()), route.handle(request))
        }
        guard request.path.hasPrefix(Self.prefix) else {
            return ("unknown", Self.failure(APIError(.notFound, "no such path \(request.path); JSON API methods are POST /json/1.3/<method>")))
        }
        let name = String(request.path.dropFirst(Self.prefix.count))
        guard let method = methods[name] else { return ("unknown", Self.failure(unknownMethod(name))) }
        guard request.method == "POST" else { return (name, Self.methodNotAllowed(request, allow: "POST")) }
        return (name, answer(name) { try call(method, request) })
    }

    /// The envelope for what `body` returns, or for the error it throws.
    private func answer(_ name: String, _ body: () throws -> JSONObject) -> HTTPResponse {
        do {
            return Self.json(Envelope.ok(try body()), status: 200)
        } catch {
            return failure(error, method: name)
        }
    }

    /// The answer to an error from a method (or another route, named in `method`): its own message for an API
    /// error, 429 with `Retry-After` for a rate limit, 503 with `Retry-After: 1` for storage, 500 for anything else (logged).
    public func failure(_ error: any Error, method name: String) -> HTTPResponse {
        switch error {
        case let error as APIError:
            return Self.failure(error)
        case let limited as RateLimited:
            var response = Self.failure(APIError(.tooManyRequests, limited.message))
            response.headers.append(("Retry-After", String(limited.retryAfter)))
            return response
        case let error as StoreError:
            logger.error("storage failure", ["method": .string(name), "error": .string(error.message)])
            // A database away (a failover, a restart, a cut network) is back within seconds; Islet reconnects by itself.
            var response = Self.failure(.storageUnavailable)
            response.headers.append(("Retry-After", "1"))
            return response
        default:
            logger.error("unexpected failure", ["method": .string(name), "error": .string("\(error)")])
            return Self.failure(APIError(.internalError, "internal error; nothing was changed"))
        }
    }

    /// Runs the JSON API method `name` for the console (issue 17) as a server API token of `application` would:
    /// the same checks, answers and metrics as `POST /json/1.3/<name>`. `body` is `{"request": {...}}`; its
    /// `application`, if any, must be the session's, and its `auth` is ignored (the session stands for it).
    public func consoleCall(_ name: String, body: [UInt8], application: Application, tokenID: String?) -> HTTPResponse {
        let started = ContinuousClock.now
        let response: HTTPResponse
        if let method = methods[name] {
            response = answer(name) {
                let fields = try Self.requestFields(body)
                if let code = try fields.string("application"), code != application.code.rawValue {
                    throw APIError(.unauthorized, "application: this console session is signed in to \(application.code), not \(code.prefix(64))")
                }
                if let limiter = perServerToken, let wait = limiter.take(application.code.rawValue) {
                    throw RateLimited.message("the server API tokens of \(application.code)", limit: limiter.limit, retryAfter: wait)
                }
                var call = APICall(application: application, request: fields, receivedAt: now(), tokenKind: .api, tokenID: tokenID ?? "")
                call.throughConsole = true
                return try method.run(call)
            }
        } else {
            response = Self.failure(unknownMethod(name))
        }
        metrics.record(route: methods[name] == nil ? "unknown" : name, status: response.status, since: started)
        return response
    }

    /// The 404 for a method this router does not serve: where to turn for a Pushwoosh method Islet does not serve
    /// (issue 45), else the nearest name it serves.
    private func unknownMethod(_ name: String) -> APIError {
        if let message = SDKCalls.notServedMessage(name) { return APIError(.notFound, message) }
        let hint = Suggestion.nearest(name, among: Array(methods.keys)).map { "; did you mean '\($0)'?" } ?? ""
        return APIError(.notFound, "unknown method '\(name.prefix(64))'\(hint)")
    }

    /// The `request` object of a `{"request": {...}}` body, with paths relative to it.
    static func requestFields(_ body: [UInt8]) throws -> FieldReader {
        let document: JSONValue
        do {
            document = try JSONParser.parse(body)
        } catch {
            throw APIError(.badRequest, "body: malformed JSON: \(error)")
        }
        guard case .object(let envelope) = document else {
            throw APIError(.badRequest, "body: must be a JSON object {\"request\": {...}}, got \(document.typeName)")
        }
        guard let requestValue = envelope["request"] else {
            throw APIError(.badRequest, "request: is required (the body is {\"request\": {...}})")
        }
        try requestValue.refuseNUL()
        let fields = try FieldReader(requestValue, path: "request")
        return FieldReader(fields.object)   // paths below are relative to `request`, as in the docs
    }

    private func call(_ method: APIMethod, _ request: HTTPRequest) throws -> JSONObject {
        try method.run(try authorized(method, request))
    }

    /// The call `request` makes of `method`: its fields read, its token checked (E2, E3) and counted against the rate
    /// limits (E6).
    private func authorized(_ method: APIMethod, _ request: HTTPRequest) throws -> APICall {
        let receivedAt = now()
        let body = try Self.requestFields(request.body)
        var code: ApplicationCode?
        if let codeText = try body.string("application") {
            guard let parsed = ApplicationCode(codeText) else {
                throw APIError.invalid("application", "must be an application code of the form XXXXX-XXXXX")
            }
            code = parsed
        } else if method.access == .device {
            throw APIError.invalid("application", "is required")
        }
        // Server calls carry `auth` (or the header); the SDK's device calls carry the header (E2, E3).
        let secret = method.access == .server
            ? try body.string("auth") ?? Self.headerToken(request)
            : try Self.headerToken(request) ?? body.string("auth")
        let (application, kind, tokenID) = try authenticator.authenticateWithKind(application: code, secret: secret, access: method.access)
        // E6: the device API token is public, so its calls are limited per client address and per application;
        // a server API token (the backend, e.g. importing devices) is limited only when configured.
        if kind == .device, let limiter = perAddress {
            let forwarded = request.headers.filter { $0.name == "x-forwarded-for" }.map(\.value)
            let client = RateLimiter.clientAddress(peer: request.clientAddress, forwardedFor: forwarded)
            if let wait = limiter.take(ClientAddress.key(client)) {
                throw RateLimited.message("one client address (\(client.prefix(64))) on the device API", limit: limiter.limit, retryAfter: wait)
            }
        }
        if let limiter = kind == .device ? perDeviceToken : (method.access == .server ? perServerToken : nil),
           let wait = limiter.take(application.code.rawValue) {
            let what = kind == .device ? "the device API tokens of \(application.code)" : "the server API tokens of \(application.code)"
            throw RateLimited.message(what, limit: limiter.limit, retryAfter: wait)
        }
        return APICall(application: application, request: body, receivedAt: receivedAt, tokenKind: kind, tokenID: tokenID)
    }

    /// `GET /openapi.json`: the document of every route, encoded once.
    static let openAPIBytes = Array(OpenAPIDocument.json.utf8)

    /// The JSON API methods this router serves, for the OpenAPI conformance test.
    public var methodNames: [String] { methods.keys.sorted() }

    /// The token of `Authorization: Token <token>`, the Pushwoosh style.
    public static func headerToken(_ request: HTTPRequest) -> String? {
        guard let value = request.header("authorization") else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "token" || parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }

    public static func json(_ value: JSONValue, status: Int) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: value.jsonBytes)
    }

    public static func failure(_ error: APIError) -> HTTPResponse {
        json(Envelope.error(error), status: error.code.httpStatus)
    }

    public static func methodNotAllowed(_ request: HTTPRequest, allow: String) -> HTTPResponse {
        var response = failure(APIError(.methodNotAllowed, "HTTP method \(request.method) is not allowed on \(request.path); use \(allow)"))
        response.headers.append(("Allow", allow))
        return response
    }
}
