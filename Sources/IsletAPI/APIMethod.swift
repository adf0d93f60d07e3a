import Foundation
import IsletCore
import IsletStore

/// Who may call a JSON API method (E2, E3).
public enum APIAccess: Sendable {
    /// Server API methods: `auth` in the request or `Authorization: Token`, a server API token.
    case server
    /// Device API methods (the Pushwoosh SDK): `Authorization: Token`, a device API token.
    case device
}

/// What a method handler gets: the authenticated application and the `request` object.
public struct APICall: Sendable {
    public let application: Application
    public let request: FieldReader
    public let receivedAt: Date
    /// The kind of token that authorised the call: a device API token is public (it ships in the app).
    public var tokenKind: TokenKind = .api
    /// The id (`tk_…`) of that token, never its secret.
    public var tokenID = ""
    /// Set when the call came through the console (issue 17), which the audit log says.
    public var throughConsole = false

    /// Who made the call, for the audit log.
    public var actor: String {
        guard throughConsole else { return "api token \(tokenID)" }
        return tokenID.isEmpty ? "console (console password)" : "console (api token \(tokenID))"
    }
}

/// What a method does to storage, which decides where the server runs it.
public enum APIEffect: Sendable {
    /// Only reads: on SQLite it runs at once on the connection's thread.
    case reads
    /// Writes, and waits for the durable commit: it runs on a worker, so concurrent writes share a sync.
    case writes
}

/// One `POST /json/1.3/<name>` method.
public struct APIMethod: Sendable {
    public let name: String
    public let access: APIAccess
    public let effect: APIEffect
    public let run: @Sendable (APICall) throws -> JSONObject
    /// `run` without waiting for its write's commit, where reads do not wait either (a local database): on the
    /// connection's thread, it returns once the write is handed to the group commit, and answers through `LaterAnswer`
    /// (what it throws is its answer).
    public let later: (@Sendable (APICall, LaterAnswer) throws -> Void)?

    public init(name: String, access: APIAccess, effect: APIEffect = .writes, run: @escaping @Sendable (APICall) throws -> JSONObject,
                later: (@Sendable (APICall, LaterAnswer) throws -> Void)? = nil) {
        self.name = name
        self.access = access
        self.effect = effect
        self.run = run
        self.later = later
    }
}

/// How a method run with `APIMethod.later` answers, once: with what `run` would have returned or thrown, or by having
/// `run` itself answer on a worker (for what would wait: a dry run's reads, broadcasts, a retry).
public struct LaterAnswer: Sendable {
    public let respond: @Sendable (Result<JSONObject, any Error>) -> Void
    public let onWorker: @Sendable () -> Void

    public init(respond: @escaping @Sendable (Result<JSONObject, any Error>) -> Void, onWorker: @escaping @Sendable () -> Void) {
        self.respond = respond
        self.onWorker = onWorker
    }
}

/// The envelope of every JSON API answer (E1, E4).
public enum Envelope {
    public static func ok(_ response: JSONObject) -> JSONValue {
        ["status_code": 200, "status_message": "OK", "response": .object(response)]
    }

    public static func error(_ error: APIError) -> JSONValue {
        ["status_code": .int(Int64(error.code.httpStatus)), "status_message": .string(error.message), "response": nil]
    }
}
