import Foundation
import IsletCore
import IsletCrypto
import IsletHTTP2
import IsletStore
import Synchronization

/// The application a simulated FCM service account belongs to, its project and the key its assertions must be signed with.
public struct SimulatorFCMAccount: Sendable {
    public let application: ApplicationCode
    public let projectID: String
    public let key: RSASigningKey

    public init(application: ApplicationCode, projectID: String, key: RSASigningKey) {
        self.application = application
        self.projectID = projectID
        self.key = key
    }
}

/// FCM HTTP v1 as the simulator answers it (issue 46), beside APNs on the same listener: Google's token endpoint
/// (`POST /token`, an RS256 assertion of the application's simulated service account traded for an access token) and
/// `POST /v1/projects/<project>/messages:send`, which checks the message as FCM does, answers FCM's errors
/// (UNREGISTERED for an uninstalled app or an unknown token, SENDER_ID_MISMATCH for another project's phone,
/// QUOTA_EXCEEDED past a phone's minute), and hands the data to the simulated Android phone.
final class SimulatedFCM: Sendable {
    typealias Accounts = @Sendable (_ keyID: String) -> SimulatorFCMAccount?

    let store: any SimulatorStore
    let accounts: Accounts
    let now: @Sendable () -> Date
    /// Access tokens given out: the application and project they send for, and when they expire.
    private let tokens = Mutex<[String: (application: ApplicationCode, project: String, expires: Double)]>([:])
    private let messages = Atomic<Int>(0)

    init(store: any SimulatorStore, accounts: @escaping Accounts, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.accounts = accounts
        self.now = now
    }

    static func handles(_ path: String) -> Bool { path == "/token" || path.hasPrefix("/v1/projects/") }

    func handle(_ exchange: H2Exchange) {
        let path = exchange.request.header(":path") ?? ""
        let (status, body, headers) = path == "/token" ? token(exchange.request) : send(exchange, path: path)
        exchange.respond(status: status, headers: [("content-type", "application/json")] + headers, body: body.jsonBytes)
    }

    /// Google's token endpoint: a form with the jwt-bearer grant and an assertion signed by a simulated account's key.
    private func token(_ request: H2Message) -> (Int, JSONValue, [(name: String, value: String)]) {
        func refused(_ why: String) -> (Int, JSONValue, [(name: String, value: String)]) {
            (400, ["error": "invalid_grant", "error_description": .string(why)], [])
        }
        guard request.header(":method") == "POST" else { return (405, ["error": "invalid_request"], []) }
        var form: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else { return (400, ["error": "unsupported_grant_type"], []) }
        let parts = (form["assertion"] ?? "").split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]).flatMap({ try? JSONParser.parse($0).objectValue }),
              let claims = Base64URL.decode(parts[1]).flatMap({ try? JSONParser.parse($0).objectValue }),
              let signature = Base64URL.decode(parts[2]) else { return refused("the assertion is not a JWT") }
        guard header["alg"] == "RS256", let keyID = header["kid"]?.stringValue, let account = accounts(keyID) else {
            return refused("no simulated service account has the key \(header["kid"]?.jsonText ?? "nothing")")
        }
        guard account.key.verify(Array("\(parts[0]).\(parts[1])".utf8), signature: signature) else { return refused("Invalid JWT Signature.") }
        guard claims["scope"]?.stringValue?.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging") == true else {
            return refused("the assertion asks for no FCM scope")
        }
        let issued = Double(claims["iat"]?.intValue ?? 0), expires = Double(claims["exp"]?.intValue ?? 0), at = now().timeIntervalSince1970
        guard issued <= at + 60, expires > at, expires - issued <= 3600 else {
            return refused("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        let token = "ya29.simulated-\(UUID().uuidString.lowercased())"
        tokens.withLock { $0[token] = (account.application, account.projectID, at + 3600) }
        return (200, ["access_token": .string(token), "expires_in": 3599, "token_type": "Bearer"], [])
    }

    /// FCM's error answer: `status` canonical, `code` FCM's own.
    static func error(_ http: Int, _ status: String, _ code: String?, _ message: String) -> JSONValue {
        var error: JSONObject = ["code": .int(Int64(http)), "message": .string(message), "status": .string(status)]
        if let code { error["details"] = [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": .string(code)]] }
        return ["error": .object(error)]
    }

    private func send(_ exchange: H2Exchange, path: String) -> (Int, JSONValue, [(name: String, value: String)]) {
        let request = exchange.request
        guard request.header(":method") == "POST" else { return (405, Self.error(405, "METHOD_NOT_ALLOWED", nil, "use POST"), []) }
        let bearer = request.header("authorization").flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let at = now().timeIntervalSince1970
        guard let bearer, let caller = tokens.withLock({ $0[bearer] }), caller.expires > at else {
            return (401, Self.error(401, "UNAUTHENTICATED", nil, "Request had invalid authentication credentials."), [])
        }
        exchange.allowStreams(1000)
        guard path == "/v1/projects/\(caller.project)/messages:send" else {
            return (403, Self.error(403, "PERMISSION_DENIED", nil, "The service account may not send for \(path)"), [])
        }
        guard let message = (try? JSONParser.parse(request.body))?.objectValue?["message"]?.objectValue else {
            return (400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "the body must be {\"message\": {...}}"), [])
        }
        guard let token = message["token"]?.stringValue, !token.isEmpty else {
            return (400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "message.token is required"), [])
        }
        let data = message["data"]?.objectValue ?? [:]
        guard data.entries.allSatisfy({ $0.value.stringValue != nil }) else {
            return (400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data': every value must be a string"), [])
        }
        guard AndroidLiveUpdate.dataSize(data) <= AndroidLiveUpdate.maximumDataBytes else {
            return (400, Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Android message is too big"), [])
        }
        let number = messages.add(1, ordering: .relaxed).newValue
        let name = "projects/\(caller.project)/messages/\(number)"
        return SimulatorEngine.lock.withLock { _ in
            guard let entry = try? store.simulatedDevice(token: token),
                  var device = try? JSONDecoder().decode(SimulatedDevice.self, from: Data(entry.state.utf8)), device.isAndroid, device.pushToken == token else {
                return (404, Self.error(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found."), [])
            }
            guard entry.application == caller.application else {
                return (403, Self.error(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch"), [])
            }
            guard device.uninstalledAt == nil else { return (404, Self.error(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found."), []) }
            guard device.admitFCMMessage(now: now()) else {
                try? store.save(device, application: entry.application)
                return (429, Self.error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded for the device"), [("retry-after", "60")])
            }
            device.receiveFCM(data: data, messageID: name, now: now())
            try? store.save(device, application: entry.application)
            return (200, ["name": .string(name)], [])
        }
    }
}
