import Foundation
import IsletAPI
import IsletAPNs
import IsletCore
import IsletCrypto
import IsletHTTP
import IsletHTTP2
import IsletSimulator
import IsletStore

/// Gives the simulator what it needs from Islet's storage: keys, devices, and the SDK's reports.
struct SimulatorWiring: Sendable {
    let applications: any ApplicationStore
    let devices: any DeviceStore
    let simulated: any SimulatorStore
    let schemas: any SchemaStore

    /// What a simulated app's Codable decoding would say, by the application's current schema for the type (X2).
    func decodingError(_ application: ApplicationCode, attributesType: String, contentState: JSONObject, attributes: JSONObject?) -> String? {
        guard let schema = (try? schemas.currentSchema(attributesType, in: application))??.schema else { return nil }
        var errors = LiveActivitySchema.check(contentState, against: schema.contentState, path: "content-state").errors
        if let attributes { errors += LiveActivitySchema.check(attributes, against: schema.attributes, path: "attributes").errors }
        return errors.first
    }

    /// A simulated application needs no real key: one is made for it on first use ("develop without a .p8").
    func signingKey(for application: ApplicationCode) throws -> APNsSigningKey? {
        if let key = try applications.apnsKey(for: application) { return key }
        guard try applications.application(application) != nil else { return nil }
        let keyID = String(Crypto.hex(Crypto.randomBytes(5)).uppercased())
        let key = APNsSigningKey(info: APNsKeyInfo(teamID: "SIMULATED0", keyID: keyID, environment: .both),
                                 pem: Crypto.generateAPNsSigningKey())
        try applications.setAPNsKey(key, for: application)
        return key
    }

    /// A simulated application's FCM service account (issue 46): made on first use, like its APNs key, so its Android
    /// phones get Live Updates without a Firebase project. Returns the account's key JSON.
    @discardableResult
    func fcmAccount(for application: ApplicationCode) throws -> String? {
        if let json = try applications.fcmAccountKey(for: application) { return json }
        guard try applications.application(application) != nil else { return nil }
        let project = "simulated-\(application.rawValue.lowercased())"
        let email = "islet-simulator@\(project).iam.gserviceaccount.com"
        let account: JSONValue = [
            "type": "service_account", "project_id": .string(project), "private_key_id": .string("simulated-\(application.rawValue)"),
            "private_key": .string(RSASigningKey.generatePEM()), "client_email": .string(email), "token_uri": "https://127.0.0.1/token",
        ]
        try applications.setFCMAccount(FCMAccountInfo(projectID: project, clientEmail: email), keyJSON: account.jsonText, for: application)
        return account.jsonText
    }

    /// The application's service account key as the FCM client reads it under the simulator: its `token_uri` the
    /// simulator's, wherever it listens this time.
    func fcmAccountKey(for application: ApplicationCode, tokenURI: String) throws -> String? {
        guard let json = try applications.fcmAccountKey(for: application),
              var object = (try? JSONParser.parse(Array(json.utf8)))?.objectValue else { return nil }
        object["token_uri"] = .string(tokenURI)
        return JSONValue.object(object).jsonText
    }

    /// The service account whose key has the id `keyID`, for the simulator's token endpoint.
    func fcmAccount(keyID: String) -> SimulatorFCMAccount? {
        guard let all = try? applications.applications() else { return nil }
        for application in all where application.fcmAccount != nil {
            guard let json = try? applications.fcmAccountKey(for: application.code),
                  let object = (try? JSONParser.parse(Array(json.utf8)))?.objectValue, object["private_key_id"]?.stringValue == keyID,
                  let pem = object["private_key"]?.stringValue, let key = RSASigningKey(pem: pem) else { continue }
            return SimulatorFCMAccount(application: application.code, projectID: object["project_id"]?.stringValue ?? "", key: key)
        }
        return nil
    }

    /// Creates a simulated Android phone (issue 46) and registers it as the Pushwoosh Android SDK would: `device_type` 3,
    /// its FCM token, its Android release as `os_version`. Its application gets a simulated FCM account if it has none.
    func addAndroidDevice(application: ApplicationCode, hwid: String, androidVersion: String,
                          tags: [(name: String, change: TagChange)] = []) throws -> SimulatedDevice {
        guard try applications.application(application) != nil else { throw APIError.invalid("application", "no application \(application)") }
        guard !hwid.isEmpty, hwid.count <= 256 else { throw APIError.invalid("hwid", "must be 1 to 256 characters") }
        guard VersionKey.make(androidVersion) != nil else { throw APIError.invalid("android_version", "must be a version such as 16") }
        try fcmAccount(for: application)
        // The shape of a real one: an instance id, a colon, and a long base64url body.
        let token = Base64URL.encode(Crypto.randomBytes(16)) + ":APA91b" + Base64URL.encode(Crypto.randomBytes(100))
        var device = SimulatedDevice(application: application.rawValue, hwid: hwid, iosVersion: androidVersion, locked: false, pushToken: token,
                                     pushToStartTokens: [:])
        device.platform = DevicePlatform.android.rawValue
        try simulated.save(device, application: application)
        _ = try devices.registerDevice(DeviceRegistration(hwid: hwid, pushToken: token, language: "en", timezone: "0", osVersion: androidVersion,
                                                          platform: .android), tags: tags, in: application, at: Date())
        return device
    }

    /// The application and key a provider token's `kid` names.
    func credential(keyID: String) -> SimulatorCredential? {
        guard let applications = try? applications.applications() else { return nil }
        for application in applications where application.apnsKey?.keyID == keyID {
            guard let stored = try? self.applications.apnsKey(for: application.code), let key = try? SigningKey(stored) else { return nil }
            return SimulatorCredential(key: key, application: application.code, bundleID: application.bundleID)
        }
        return nil
    }

    /// What the Pushwoosh SDK reports when an activity starts on the device (D4).
    func report(_ application: ApplicationCode, hwid: String, activityID: String, token: String) {
        _ = try? devices.setActivityToken(token, activityID: activityID, hwid: hwid, in: application, at: Date())
    }

    /// Creates a simulated iPhone and registers it with Islet as the SDK would: registerDevice, its tags,
    /// and a push-to-start token per attributes type ("" for any) when its iOS has push-to-start (17.2+).
    func addDevice(application: ApplicationCode, hwid: String, iosVersion: String, locked: Bool, attributesTypes: [String],
                   frequentUpdates: Bool? = nil, tags: [(name: String, change: TagChange)] = []) throws -> SimulatedDevice {
        guard try applications.application(application) != nil else { throw APIError.invalid("application", "no application \(application)") }
        guard !hwid.isEmpty, hwid.count <= 256 else { throw APIError.invalid("hwid", "must be 1 to 256 characters") }
        guard let version = VersionKey.make(iosVersion) else { throw APIError.invalid("ios_version", "must be a version such as 17.4") }
        let pushToStart = version >= VersionKey.make("17.2")!
            ? Dictionary((attributesTypes.isEmpty ? [""] : attributesTypes).map { ($0, APNsSimulator.token(bytes: 40)) }, uniquingKeysWith: { first, _ in first })
            : [:]
        var device = SimulatedDevice(application: application.rawValue, hwid: hwid, iosVersion: iosVersion, locked: locked,
                                     pushToken: APNsSimulator.token(bytes: 32), pushToStartTokens: pushToStart)
        device.frequentUpdates = frequentUpdates
        try simulated.save(device, application: application)
        let now = Date()
        _ = try devices.registerDevice(DeviceRegistration(hwid: hwid, pushToken: device.pushToken, language: "en", timezone: "0",
                                                          osVersion: iosVersion, frequentUpdates: frequentUpdates), tags: tags, in: application, at: now)
        for (type, token) in pushToStart {
            _ = try devices.setPushToStartToken(token, attributesType: type, hwid: hwid, in: application, at: now)
        }
        return device
    }

    /// The simulated devices, of one application or of all; only the ones asked for are decoded.
    func allDevices(of application: ApplicationCode? = nil) -> [SimulatedDevice] {
        ((try? simulated.simulatedDevices()) ?? []).filter { application == nil || $0.application == application }
            .compactMap { Self.decode($0.state) }
    }

    /// A page of one application's simulated devices, in HWID order after `after`; nil for a stored state
    /// this Islet cannot read (kept in the page, so paging counts it).
    func devices(of application: ApplicationCode, after: String?, limit: Int) throws -> [(hwid: String, device: SimulatedDevice?)] {
        try simulated.simulatedDevices(of: application, after: after, limit: limit).map { ($0.hwid, Self.decode($0.state)) }
    }

    /// One application's simulated device, read alone.
    func device(_ hwid: String, of application: ApplicationCode) throws -> SimulatedDevice? {
        try simulated.simulatedDevice(application: application, hwid: hwid).flatMap(Self.decode)
    }

    private static func decode(_ state: String) -> SimulatedDevice? {
        try? JSONDecoder().decode(SimulatedDevice.self, from: Data(state.utf8))
    }
}

/// `GET /simulator/devices`, `GET /simulator/devices/<hwid>`, `POST /simulator/devices` on the API server, in
/// simulator mode only. Each call is authorised by an application's server API token (`Authorization: Token …`)
/// and sees and adds only that application's simulated devices (issue 12).
struct SimulatorRoutes: Sendable {
    let wiring: SimulatorWiring
    let authenticator: Authenticator

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        do {
            let application = try authenticator.authenticate(application: nil, secret: APIRouter.headerToken(request), access: .server)
            return handle(request, as: application.code)
        } catch let error as APIError {
            return APIRouter.failure(error)
        } catch {
            return APIRouter.failure(APIError(.internalError, "\(error)"))
        }
    }

    /// The same routes for a caller already authorised for `application` (the console's session).
    func handle(_ request: HTTPRequest, as application: ApplicationCode) -> HTTPResponse {
        do {
            return try route(request, application: application)
        } catch let error as APIError {
            return APIRouter.failure(error)
        } catch let error as JSONSyntaxError {
            return APIRouter.failure(APIError(.badRequest, "body: malformed JSON: \(error)"))
        } catch {
            return APIRouter.failure(APIError(.internalError, "\(error)"))
        }
    }

    private func route(_ request: HTTPRequest, application: ApplicationCode) throws -> HTTPResponse {
        let rest = request.path.dropFirst("/simulator/devices".count)
        let now = Date()
        if rest.isEmpty || rest == "/" {
            if request.method == "POST" { return try add(request, application: application) }
            guard request.method == "GET" else {
                var refused = APIRouter.failure(APIError(.methodNotAllowed, "use GET or POST on /simulator/devices"))
                refused.headers.append(("Allow", "GET, POST"))
                return refused
            }
            let paging = try ListPaging(query: request.query, method: "GET /simulator/devices")
            let (page, nextCursor) = paging.page(try wiring.devices(of: application, after: paging.cursor, limit: paging.fetch)) { $0.hwid }
            return APIRouter.json(["devices": .array(page.compactMap { $0.device?.json(now: now, withLog: false) }), "next_cursor": nextCursor],
                                  status: 200)
        }
        // The app starts an activity on the phone itself, subscribed to a broadcast channel (X5).
        if rest.hasSuffix("/activities"), rest.count > "/activities".count + 1 {
            if let refused = Self.onlyPOST(request, "/simulator/devices/<hwid>/activities") { return refused }
            return try startOnChannel(request, hwid: String(rest.dropFirst().dropLast("/activities".count)), application: application)
        }
        // A tester locks, unlocks or uninstalls the app on a phone, as `islet simulator set` does.
        if rest.hasSuffix("/state"), rest.count > "/state".count + 1 {
            if let refused = Self.onlyPOST(request, "/simulator/devices/<hwid>/state") { return refused }
            return try setState(request, hwid: String(rest.dropFirst().dropLast("/state".count)), application: application)
        }
        let hwid = String(rest.dropFirst())   // libmicrohttpd has already decoded the path once
        guard request.method == "GET" else {
            var refused = APIRouter.failure(APIError(.methodNotAllowed, "use GET on /simulator/devices/<hwid>"))
            refused.headers.append(("Allow", "GET"))
            return refused
        }
        guard let device = try wiring.device(hwid, of: application) else {
            throw APIError(.notFound, "no simulated device '\(hwid.prefix(256))' in application \(application)")
        }
        return APIRouter.json(device.json(now: now, withLog: true), status: 200)
    }

    /// {activity_id, attributes_type, content_state, attributes?, channel_id}: what an app does with
    /// `Activity.request(..., pushType: .channel(id))`; iOS refuses a channel APNs does not have.
    private func startOnChannel(_ request: HTTPRequest, hwid: String, application: ApplicationCode) throws -> HTTPResponse {
        let document = try JSONParser.parse(request.body)
        guard case .object = document else {
            throw APIError.invalid("body", "must be a JSON object such as {\"activity_id\": \"match-42\", \"channel_id\": \"…\"}, got \(document.typeName)")
        }
        try document.refuseNUL()
        let body = try FieldReader(document, path: "")
        let activityID = try body.requiredString("activity_id"), attributesType = try body.requiredString("attributes_type")
        let contentState = try body.requiredObject("content_state").object
        let attributes = try body.objectField("attributes")?.object ?? [:]
        let channelID = try body.requiredString("channel_id")
        guard let policy = try wiring.simulated.simulatedChannelPolicy(application: application, id: channelID, gateway: nil) else {
            throw APIError.invalid("channel_id", "APNs has no such channel for this application, so iOS would not start the activity (X5)")
        }
        let now = Date()
        let started = try APNsSimulator.withDevice(wiring.simulated, application, hwid) { device in
            // A channel that stores its latest message hands it to a phone that joins later, while it is kept (read
            // under the simulator's lock, so a broadcast meanwhile is not missed).
            let stored = policy == 1 ? try wiring.simulated.simulatedChannelMessage(application: application, id: channelID)
                .flatMap { now < $0.keptUntil ? $0.payload : nil } : nil
            device.startOnChannel(activityID: activityID, attributesType: attributesType, attributes: attributes, contentState: contentState,
                                  channelID: channelID, now: now)
            if let stored { device.receiveBroadcast(payload: stored, channelID: channelID, priority: 10, apnsID: "stored", now: now) }
            return device
        }
        guard let device = started else { throw APIError(.notFound, "no simulated device '\(hwid.prefix(256))' in application \(application)") }
        return APIRouter.json(device.json(now: Date(), withLog: false), status: 200)
    }

    /// 405 with `Allow: POST` unless the request is a POST.
    private static func onlyPOST(_ request: HTTPRequest, _ route: String) -> HTTPResponse? {
        guard request.method != "POST" else { return nil }
        var refused = APIRouter.failure(APIError(.methodNotAllowed, "use POST on \(route)"))
        refused.headers.append(("Allow", "POST"))
        return refused
    }

    /// {state: "locked" | "unlocked" | "uninstalled"}: unlocking shows the updates that waited for it (A6).
    private func setState(_ request: HTTPRequest, hwid: String, application: ApplicationCode) throws -> HTTPResponse {
        let document = try JSONParser.parse(request.body)
        guard case .object = document else {
            throw APIError.invalid("body", "must be a JSON object such as {\"state\": \"locked\"}, got \(document.typeName)")
        }
        let text = try FieldReader(document, path: "").requiredString("state")
        guard let setting = SimulatedDevice.Setting(rawValue: text) else {
            throw APIError.invalid("state", "must be one of locked, unlocked, uninstalled")
        }
        let now = Date()
        guard let device = try APNsSimulator.withDevice(wiring.simulated, application, hwid, { device in
            device.apply(setting, now: now)
            return device
        }) else { throw APIError(.notFound, "no simulated device '\(hwid.prefix(256))' in application \(application)") }
        return APIRouter.json(device.json(now: now, withLog: false), status: 200)
    }

    /// {hwid, platform?, ios_version?, locked?, attributes_types?, android_version?, application?}: the application is the
    /// token's; naming another one is refused like a wrong token.
    private func add(_ request: HTTPRequest, application: ApplicationCode) throws -> HTTPResponse {
        let document = try JSONParser.parse(request.body)
        guard case .object = document else {
            throw APIError.invalid("body", "must be a JSON object such as {\"hwid\": \"my_iphone\"}, got \(document.typeName)")
        }
        try document.refuseNUL()
        let body = try FieldReader(document, path: "")
        if let code = try body.string("application"), code != application.rawValue {
            throw APIError(.unauthorized, "Authorization: not a valid server API token for application \(code.prefix(64))")
        }
        switch try body.string("platform") ?? DevicePlatform.ios.rawValue {
        case DevicePlatform.ios.rawValue:
            if body.value("android_version") != nil { throw APIError.invalid("android_version", "is for Android phones (platform android)") }
        case DevicePlatform.android.rawValue:
            for key in ["ios_version", "locked", "attributes_types", "frequent_updates"] where body.value(key) != nil {
                throw APIError.invalid(key, "is for iPhones; an Android phone takes android_version")
            }
            let device = try wiring.addAndroidDevice(application: application, hwid: try body.requiredString("hwid"),
                                                     androidVersion: try body.string("android_version") ?? "16")
            return APIRouter.json(device.json(now: Date(), withLog: false), status: 200)
        case let other:
            throw APIError.invalid("platform", "must be ios or android, got '\(other.prefix(64))'")
        }
        let types = try (body.array("attributes_types") ?? []).enumerated().map { (index, value) throws -> String in
            guard let text = value.stringValue, text.count <= 256 else {
                throw APIError.invalid("attributes_types[\(index)]", "must be a string of at most 256 characters")
            }
            return text
        }
        let device = try wiring.addDevice(application: application, hwid: try body.requiredString("hwid"),
                                          iosVersion: try body.string("ios_version") ?? "17.4", locked: try body.bool("locked") ?? false,
                                          attributesTypes: types, frequentUpdates: try body.bool("frequent_updates"))
        return APIRouter.json(device.json(now: Date(), withLog: false), status: 200)
    }
}
