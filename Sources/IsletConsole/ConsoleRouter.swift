import Foundation
import IsletAPI
import IsletCore
import IsletHTTP
import IsletStore

/// `/console`: the web console (issue 17). Its pages are static assets built into the binary; what they show
/// comes from `/console/api/…`, which runs the JSON API's own methods for the signed-in session (so the console
/// can do exactly what its token allows), a few reads of its own, and Server-Sent Events.
public struct ConsoleRouter: Sendable {
    public static let prefix = "/console"

    let api: APIRouter
    let applications: any ApplicationStore
    let store: any ConsoleStore
    let messages: any MessageStore
    let events: ConsoleEvents
    /// The simulator's routes for an application (simulator mode only).
    let simulator: (@Sendable (HTTPRequest, ApplicationCode) -> HTTPResponse)?
    let logger: Logger
    let now: @Sendable () -> Date
    /// Sign-in attempts per client address.
    let signIns: RateLimiter
    /// Console password checks running now, at most `passwordChecksAtOnce`: they are CPU, and the HTTP workers are shared.
    let passwordChecks: AtOnceLimit

    public init(api: APIRouter, applications: any ApplicationStore, store: any ConsoleStore, messages: any MessageStore, events: ConsoleEvents,
                simulator: (@Sendable (HTTPRequest, ApplicationCode) -> HTTPResponse)?, logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() }, signInLimit: RateLimit = RateLimit(perSecond: 0.2, burst: 10),
                passwordChecksAtOnce: Int = ConsoleCredentials.passwordChecksAtOnce) {
        self.api = api
        self.applications = applications
        self.store = store
        self.messages = messages
        self.events = events
        self.simulator = simulator
        self.logger = logger
        self.now = now
        self.signIns = RateLimiter(limit: signInLimit)
        self.passwordChecks = AtOnceLimit(limit: passwordChecksAtOnce)
    }

    /// The pages answer at once from memory; everything under /console/api reads or writes storage, on a worker.
    public func execution(for request: HTTPRequest) -> HTTPExecution {
        request.path.hasPrefix(Self.prefix + "/api/") ? .workerPool : .connectionThread
    }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        var response: HTTPResponse
        do {
            response = try route(request)
        } catch {
            response = api.failure(error, method: request.path)
        }
        response.headers += Self.securityHeaders
        return response
    }

    /// No page of the console may be framed, sniffed or load anything from elsewhere.
    static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"), ("Referrer-Policy", "same-origin"),
    ]

    private func route(_ request: HTTPRequest) throws -> HTTPResponse {
        let rest = String(request.path.dropFirst(Self.prefix.count))
        if rest.isEmpty || rest == "/" {
            guard ["GET", "HEAD"].contains(request.method) else { return APIRouter.methodNotAllowed(request, allow: "GET, HEAD") }
            return Self.asset("index.html", request)!
        }
        if rest.hasPrefix("/assets/") {
            guard ["GET", "HEAD"].contains(request.method) else { return APIRouter.methodNotAllowed(request, allow: "GET, HEAD") }
            guard let response = Self.asset(String(rest.dropFirst("/assets/".count)), request) else {
                throw APIError(.notFound, "no console asset \(rest.dropFirst("/assets/".count).prefix(64))")
            }
            return response
        }
        guard rest.hasPrefix("/api/") else { throw APIError(.notFound, "no console page \(request.path.prefix(128)); the console is at /console") }
        let endpoint = String(rest.dropFirst("/api/".count))
        if endpoint == "session" { return try session(request) }
        let signedIn = try self.signedIn(request)
        if request.method != "GET" && request.method != "HEAD" {
            // Every call that may change something carries the session's CSRF token.
            guard ConsoleCredentials.csrfAccepted(expected: signedIn.session.csrfToken, presented: request.header(ConsoleCredentials.csrfHeader)) else {
                throw APIError(.forbidden, "X-CSRF-Token: missing or wrong; the console sends the token it got at sign-in with every change")
            }
        }
        if endpoint.hasPrefix("call/") {
            guard request.method == "POST" else { return APIRouter.methodNotAllowed(request, allow: "POST") }
            var response = api.consoleCall(String(endpoint.dropFirst("call/".count)), body: request.body, application: signedIn.application,
                                           tokenID: signedIn.session.tokenID)
            response.headers.append(("Cache-Control", "no-store"))
            return response
        }
        if endpoint == "simulator/devices" || endpoint.hasPrefix("simulator/devices/") {
            guard let simulator else { throw APIError(.notFound, "the simulator runs only with --apns simulator") }
            let forwarded = HTTPRequest(method: request.method, path: "/" + endpoint, headers: request.headers.filter { $0.name != "authorization" },
                                        body: request.body, clientAddress: request.clientAddress, query: request.query)
            // The simulator's routes answer bare JSON; the console's answers are all in the API's envelope.
            let answer = simulator(forwarded, signedIn.application.code)
            guard answer.status == 200, case .object(let object)? = try? JSONParser.parse(answer.body) else { return answer }
            return Self.ok(object)
        }
        guard request.method == "GET" else { return APIRouter.methodNotAllowed(request, allow: "GET") }
        let reads = ConsoleReads(store: store, messages: messages, now: now)
        switch endpoint {
        case "overview": return Self.ok(try reads.overview(signedIn.application))
        case "activities": return Self.ok(try reads.activities(signedIn.application, request))
        case "messages": return Self.ok(try reads.messages(signedIn.application, request))
        case "devices": return Self.ok(try reads.devices(signedIn.application, request))
        case "events":
            let stream = HTTPEventStream()
            let session = signedIn.session
            try events.subscribe(stream, application: signedIn.application.code, session: session.idHash,
                                 signedIn: { [self] in (try? self.stillOpen(session)) == true })
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store"),
                                                       ("X-Accel-Buffering", "no")], stream: stream)
        default:
            throw APIError(.notFound, "no console endpoint /console/api/\(endpoint.prefix(64))")
        }
    }

    // MARK: - Sessions

    struct SignedIn {
        let session: ConsoleSession
        let application: Application
    }

    /// The session of the request's cookie, and the application it acts on: the token's, or for the console
    /// password the one the page names (header X-Islet-Application, or `application` in the query for events).
    private func signedIn(_ request: HTTPRequest) throws -> SignedIn {
        guard let session = try currentSession(request) else {
            throw APIError(.unauthorized, "console: not signed in, or the session has expired; sign in at /console")
        }
        let named = request.header("x-islet-application") ?? request.queryValue("application")
        guard let code = session.application ?? named.flatMap(ApplicationCode.init) else {
            throw APIError.invalid("X-Islet-Application", "names the application to act on (signed in with the console password); one of getApplication's codes")
        }
        if let named, !named.isEmpty, named != code.rawValue {
            throw APIError(.unauthorized, "X-Islet-Application: this console session is signed in to \(code), not \(named.prefix(64))")
        }
        guard let application = try applications.application(code) else {
            throw APIError(.notFound, "X-Islet-Application: no application \(code)")
        }
        return SignedIn(session: session, application: application)
    }

    /// The request's session: its cookie's, unexpired, and (opened with a token) that token still valid. A token
    /// revoked since the sign-in ends the session at once.
    private func currentSession(_ request: HTTPRequest) throws -> ConsoleSession? {
        guard let id = ConsoleCredentials.sessionID(cookieHeader: request.header("cookie")),
              let session = try store.consoleSession(idHash: ConsoleCredentials.idHash(id), at: now()) else { return nil }
        guard try stillOpen(session, reread: false) else {
            throw APIError(.unauthorized, "console: the token this session signed in with was revoked; sign in again")
        }
        return session
    }

    /// Whether `session` is still signed in: not expired, not signed out (`reread`: read again), its token (if
    /// any) not revoked.
    private func stillOpen(_ session: ConsoleSession, reread: Bool = true) throws -> Bool {
        if reread, try store.consoleSession(idHash: session.idHash, at: now()) == nil { return false }
        guard let tokenID = session.tokenID, let code = session.application else { return true }
        guard try applications.tokens(of: code).contains(where: { $0.id == tokenID && !$0.isRevoked }) else {
            try store.deleteConsoleSession(idHash: session.idHash)
            return false
        }
        return true
    }

    /// POST signs in ({token} or {password}), GET says who is signed in, DELETE signs out.
    private func session(_ request: HTTPRequest) throws -> HTTPResponse {
        let secure = ConsoleCredentials.isHTTPS(forwardedProto: request.header("x-forwarded-proto"))
        switch request.method {
        case "GET":
            guard let session = try currentSession(request) else { throw APIError(.unauthorized, "console: not signed in") }
            return Self.ok(try describe(session))
        case "POST":
            return try signIn(request, secure: secure)
        case "DELETE":
            if let id = ConsoleCredentials.sessionID(cookieHeader: request.header("cookie")),
               let session = try store.consoleSession(idHash: ConsoleCredentials.idHash(id), at: now()) {
                guard ConsoleCredentials.csrfAccepted(expected: session.csrfToken, presented: request.header(ConsoleCredentials.csrfHeader)) else {
                    throw APIError(.forbidden, "X-CSRF-Token: missing or wrong; the console sends the token it got at sign-in with every change")
                }
                try store.deleteConsoleSession(idHash: session.idHash)
            }
            var response = Self.ok([:])
            response.headers.append(("Set-Cookie", ConsoleCredentials.clearedCookie(secure: secure)))
            return response
        default:
            return APIRouter.methodNotAllowed(request, allow: "GET, POST, DELETE")
        }
    }

    private func signIn(_ request: HTTPRequest, secure: Bool) throws -> HTTPResponse {
        // No CSRF token exists before the sign-in: a JSON body (which a form of another site cannot send without
        // the browser asking first) and no cross-site fetch keep another site from signing a browser in.
        guard request.header("content-type")?.lowercased().hasPrefix("application/json") == true else {
            throw APIError(.unsupportedMediaType, "Content-Type: must be application/json to sign in")
        }
        if request.header("sec-fetch-site") == "cross-site" {
            throw APIError(.forbidden, "Sec-Fetch-Site: a sign-in started by another site is refused")
        }
        let client = RateLimiter.clientAddress(peer: request.clientAddress, forwardedFor: request.headers.filter { $0.name == "x-forwarded-for" }.map(\.value))
        if let wait = signIns.take(ClientAddress.key(client)) {
            throw RateLimited.message("console sign-ins from one client address (\(client.prefix(64)))", limit: signIns.limit, retryAfter: wait)
        }
        let document: JSONValue
        do { document = try JSONParser.parse(request.body) } catch { throw APIError(.badRequest, "body: malformed JSON: \(error)") }
        guard case .object = document else {
            throw APIError(.badRequest, "body: must be a JSON object {\"token\": \"…\"} or {\"password\": \"…\"}, got \(document.typeName)")
        }
        try document.refuseNUL()
        let body = try FieldReader(document, path: "")
        let date = now()
        var application: ApplicationCode?
        var tokenID: String?
        if let secret = try body.string("token") {
            guard let token = try applications.token(hash: Credentials.hash(secret)), token.kind == .api else {
                throw APIError(.unauthorized, "token: not a valid server API token (the console signs in with an application's server API token)")
            }
            guard !token.isRevoked else { throw APIError(.unauthorized, "token: this token was revoked") }
            application = token.application
            tokenID = token.id
        } else if let password = try body.string("password") {
            guard let record = try store.consolePassword() else {
                throw APIError(.unauthorized, "password: no console password is set; set one with `islet console set-password`, or sign in with a server API token")
            }
            guard let matches = passwordChecks.run({ ConsoleCredentials.passwordMatches(password, record: record) }) else {
                throw RateLimited(message: ConsoleCredentials.passwordChecksBusy(limit: passwordChecks.limit), retryAfter: 1)
            }
            guard matches else { throw APIError(.unauthorized, "password: wrong console password") }
        } else {
            throw APIError.invalid("token", "is required: an application's server API token (or `password`, the console password)")
        }
        try store.deleteExpiredConsoleSessions(before: date)
        let id = ConsoleCredentials.newSecret()
        let session = ConsoleSession(idHash: ConsoleCredentials.idHash(id), application: application, tokenID: tokenID,
                                     csrfToken: ConsoleCredentials.newSecret(), createdAt: date,
                                     expiresAt: date.addingTimeInterval(ConsoleCredentials.sessionLifetime))
        try store.createConsoleSession(session)
        logger.info("console: signed in", ["application": application.map { .string($0.rawValue) } ?? "all (console password)",
                                           "token": tokenID.map { .string($0) } ?? .null, "client": .string(client)])
        var response = Self.ok(try describe(session))
        response.headers.append(("Set-Cookie", ConsoleCredentials.sessionCookie(id, secure: secure)))
        return response
    }

    /// The session as the page needs it: the applications it may act on, the CSRF token, the server's mode.
    private func describe(_ session: ConsoleSession) throws -> JSONObject {
        let allowed = try session.application.map { code in try applications.application(code).map { [$0] } ?? [] } ?? applications.applications()
        return [
            "applications": .array(allowed.map { ["code": .string($0.code.rawValue), "name": .string($0.name), "bundle_id": .string($0.bundleID)] }),
            "credential": .string(session.tokenID == nil ? "console password" : "server API token"),
            "csrf_token": .string(session.csrfToken), "expires_at": .string(session.expiresAt.formatted(.iso8601)),
            "simulator": .bool(simulator != nil),
        ]
    }

    // MARK: - Answers

    static func ok(_ response: JSONObject) -> HTTPResponse {
        var answer = APIRouter.json(Envelope.ok(response), status: 200)
        answer.headers.append(("Cache-Control", "no-store"))
        return answer
    }

    /// A built-in asset by file name, with its type; nil when there is none.
    static func asset(_ name: String, _ request: HTTPRequest) -> HTTPResponse? {
        guard let asset = ConsoleAssets.byName[name] else { return nil }
        return HTTPResponse(status: 200, headers: [("Content-Type", asset.contentType), ("Cache-Control", "no-cache")],
                            body: request.method == "HEAD" ? [] : asset.bytes)
    }
}
