import Foundation
import Testing
import IsletAPI
import IsletCore
import IsletStore

/// Calls one JSON API method with a `request` object and optional `Authorization: Token`.
func call(_ port: Int, _ method: String, _ request: JSONObject, token: String? = nil) throws -> RawHTTPResponse {
    try IsletIntegrationTests.request(port, "/json/1.3/\(method)", body: JSONValue.object(["request": .object(request)]).jsonText,
                                      headers: token.map { ["Authorization": "Token \($0)"] } ?? [:])
}

private let pushToken = "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0"

@Suite("Device API over HTTP (D1–D4, E3)")
struct DeviceAPITests {
    let running: RunningServer
    let app: ApplicationAdmin.Created

    init() throws {
        running = try RunningServer(demo: false)
        app = try running.admin().create(name: "Shop", bundleID: "com.example.shop")
    }

    var code: String { app.application.code.rawValue }

    /// What the Pushwoosh SDK puts in every device call: application, hwid, v, device_type, userId.
    func sdk(_ fields: JSONObject, hwid: String = "hwid-1") -> JSONObject {
        let request: JSONObject = ["application": .string(code), "hwid": .string(hwid), "v": "6.8.0", "device_type": 1, "userId": "user-1"]
        return request.merging(fields)
    }

    func register(_ hwid: String = "hwid-1", token: String = pushToken, extra: JSONObject = [:]) throws -> RawHTTPResponse {
        let fields: JSONObject = ["push_token": .string(token), "language": "en", "timezone": 10800, "gateway": "sandbox"]
        return try call(running.port, "registerDevice", sdk(fields.merging(extra), hwid: hwid), token: app.deviceToken.secret)
    }

    @Test func registerAndReadTagsAsTheSDKDoes() throws {
        let registered = try register(extra: ["os_version": "17.4", "tags": ["Level": 3, "Sports": ["ski"]]])
        #expect(registered.status == 200, "\(registered.message ?? "")")
        #expect(registered.json == ["status_code": 200, "status_message": "OK", "response": [:]])
        let device = try #require(try running.server.devices.device(hwid: "hwid-1", in: app.application.code))
        #expect(device.pushToken == pushToken.lowercased(), "tokens are stored lowercase (D4)")
        #expect(device.gateway == .sandbox)
        #expect(device.timezone == "10800", "the SDK sends timezone as a number (D1)")

        let tags = try call(running.port, "getTags", sdk([:]), token: app.deviceToken.secret)
        #expect(tags.json?.objectValue?["response"] == ["result": [
            "Language": "en", "OS Version": "17.4", "Timezone": "10800", "User ID": "user-1", "Level": 3, "Sports": ["ski"],
        ]])
    }

    @Test func setTagsMergesAndNullRemoves() throws {
        _ = try register(extra: ["tags": ["Level": 3, "City": "Lisbon"]])
        let set = try call(running.port, "setTags", sdk(["tags": ["Level": nil, "Plan": "gold"]]), token: app.deviceToken.secret)
        #expect(set.status == 200)
        #expect(try running.server.devices.tags(hwid: "hwid-1", in: app.application.code) == ["City": .string("Lisbon"), "Plan": .string("gold")])
    }

    @Test(arguments: [
        (#"{"push_token": "xyz"}"#, "push_token: must be an even-length hex string of 16 to 400 characters"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "device_type": 7}"#, "device_type: must be 1 (iOS) or 3 (Android)"),
        (#"{"push_token": "fcm token with spaces and more than 32 characters", "device_type": 3}"#, "push_token: must be an FCM registration token: 32 to 4096 letters, digits, '-', '_', ':' or '.'"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "gateway": "development"}"#, "gateway: must be \"production\" or \"sandbox\""),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "tags": {"Language": "fr"}}"#, "tags.Language: is a built-in tag; registerDevice sets it"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "tags": {"Score": 1.5}}"#, "tags.Score: must be an integer; decimals are not tag values"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "tags": {"Flags": [1]}}"#, "tags.Flags[0]: list tags hold strings of at most 1024 characters"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "tags": {"On": {"operation": "toggle", "value": 1}}}"#, "tags.On.operation: must be increment, append or remove, got 'toggle'"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "tags": {"Score": {"operation": "increment", "value": "1"}}}"#, "tags.Score.value: increment takes an integer, got string"),
        (#"{"push_token": "A1B2C3D4E5F60718293A4B5C6D7E8F900112233445566778899AABBCCDDEEFF0", "tags": {"Sports": {"operation": "append"}}}"#, "tags.Sports.value: is required"),
        (#"{}"#, "push_token: is required"),
    ])
    func registerRejectsBadFields(fields: String, message: String) throws {
        let response = try call(running.port, "registerDevice", sdk(try #require(try JSONParser.parse(fields).objectValue)),
                                token: app.deviceToken.secret)
        #expect(response.status == 400)
        #expect(response.message == message)
        #expect(try running.server.devices.device(hwid: "hwid-1", in: app.application.code) == nil, "nothing half-applied")
    }

    @Test func aTagKeepsItsTypeAndAClashingValueIsSkippedAndNamed() throws {
        _ = try register(extra: ["tags": ["Level": 3]])
        let response = try call(running.port, "setTags", sdk(["tags": ["City": "Porto", "Level": "high"]]), token: app.deviceToken.secret)
        #expect(response.status == 200)
        let reason = "is a tag of type integer; got a value of type string, not stored (D2)"
        #expect(response.json?.objectValue?["response"] == ["skipped_tags": [["tag": "Level", "reason": .string(reason)]],
                                                            "warnings": .array([.string("tags.Level: " + reason)])])
        #expect(try running.server.devices.tags(hwid: "hwid-1", in: app.application.code) == ["Level": .integer(3), "City": .string("Porto")])
    }

    /// Issue 12: a tag another device typed differently never costs a registration.
    @Test func aRegistrationIsNeverRefusedForATag() throws {
        _ = try register(extra: ["tags": ["level": 5]])
        let response = try register("hwid-2", token: String(repeating: "b2", count: 32), extra: ["tags": ["level": "5", "city": "Faro"]])
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        #expect(response.json?.objectValue?["response"]?.objectValue?["skipped_tags"]?.arrayValue?.count == 1)
        let device = try #require(try running.server.devices.device(hwid: "hwid-2", in: app.application.code), "hwid-2 is registered")
        #expect(device.pushToken == String(repeating: "b2", count: 32))
        #expect(try running.server.devices.tags(hwid: "hwid-2", in: app.application.code) == ["city": .string("Faro")])
    }

    /// Issue 13: U+0000 is refused by name before anything is stored, whatever the engine (PostgreSQL text
    /// cannot hold it, SQLite can): the same request gets the same answer on both.
    @Test func aNULCharacterIsRefusedByNameAndNothingIsStored() throws {
        let response = try register("hw\u{0}id-9", extra: ["tags": ["city": "Faro"]])
        #expect(response.status == 400)
        #expect(response.message == "hwid: must not contain the NUL character (\\u0000)")
        let tagged = try register(extra: ["tags": ["city": "Fa\u{0}ro"]])
        #expect(tagged.message == "tags.city: must not contain the NUL character (\\u0000)")
        #expect(try running.server.devices.device(hwid: "hwid-1", in: app.application.code) == nil, "nothing half-applied")
    }

    /// Issue 45: the SDK calls getTags and setTags before registerDevice, and an app whose user declines notifications
    /// never registers but still reports its Live Activity tokens. Each is answered as Pushwoosh does and kept for the
    /// device, known by its HWID without a push token, until it registers.
    @Test func callsBeforeRegistrationAreKeptForTheDevice() throws {
        let first = try call(running.port, "getTags", sdk([:], hwid: "ghost"), token: app.deviceToken.secret)
        #expect(first.json == ["status_code": 200, "status_message": "OK", "response": ["result": [:]]], "nothing known of it yet")
        #expect(try running.server.devices.device(hwid: "ghost", in: app.application.code) == nil, "a read creates nothing")
        let typedToken = String(pushToken.reversed())
        for (method, fields) in [("setTags", ["tags": ["a": "b"]] as JSONObject),
                                 ("setActivityPushToStartToken", ["activity_push_to_start_token": .string(typedToken)]),
                                 ("setActivityToken", ["activity_id": "A", "activity_token": .string(pushToken)])] {
            let response = try call(running.port, method, sdk(fields, hwid: "ghost"), token: app.deviceToken.secret)
            #expect(response.status == 200, "\(method): \(response.message ?? "")")
        }
        let known = try #require(try running.server.devices.device(hwid: "ghost", in: app.application.code))
        #expect(known.pushToken == nil, "known, not registered")
        #expect(try running.server.devices.activityTokens(hwid: "ghost", in: app.application.code).map(\.activityID) == ["A"])
        #expect(try running.server.devices.targets(.devices(["ghost"]), in: app.application.code, attributesType: "T", afterID: 0, limit: 5)
                    .map(\.pushToStartToken) == [typedToken.lowercased()])
        // Registering later keeps what was said before.
        #expect(try register("ghost", extra: ["language": "pt"]).status == 200)
        let tags = try call(running.port, "getTags", sdk([:], hwid: "ghost"), token: app.deviceToken.secret)
        #expect(tags.json?.objectValue?["response"]?.objectValue?["result"]?.objectValue?["a"] == "b")
        #expect(try running.server.devices.device(hwid: "ghost", in: app.application.code)?.pushToken == pushToken.lowercased())
        #expect(try call(running.port, "unregisterDevice", sdk([:], hwid: "nobody"), token: app.deviceToken.secret).status == 200,
                "unregister is idempotent")
    }

    @Test func liveActivityTokensAsTheSDKSendsThem() throws {
        _ = try register()
        let devices = running.server.devices
        let start = try call(running.port, "setActivityPushToStartToken", sdk(["activity_push_to_start_token": .string(pushToken)]),
                             token: app.deviceToken.secret)
        #expect(start.status == 200)
        #expect(try devices.targets(.devices(["hwid-1"]), in: app.application.code, attributesType: "Any", afterID: 0, limit: 1)
            .first?.pushToStartToken == pushToken.lowercased())

        let update = try call(running.port, "setActivityToken", sdk(["activity_id": "ORDER_1", "activity_token": "ABCDEF0123456789ABCDEF"]),
                              token: app.deviceToken.secret)
        #expect(update.status == 200)
        #expect(try devices.activityTokens(hwid: "hwid-1", in: app.application.code).map(\.token) == ["abcdef0123456789abcdef"])

        // The SDK's stopLiveActivity() without an id: no activity_token key at all, activity_id "".
        let stop = try call(running.port, "setActivityToken", sdk(["activity_id": ""]), token: app.deviceToken.secret)
        #expect(stop.status == 200)
        #expect(try devices.activityTokens(hwid: "hwid-1", in: app.application.code).map(\.token) == [nil])

        let missingID = try call(running.port, "setActivityToken", sdk(["activity_token": .string(pushToken)]), token: app.deviceToken.secret)
        #expect(missingID.message == "activity_id: is required with an activity_token (only an ending may omit it)")
    }

    @Test func unregisterStopsTargeting() throws {
        _ = try register()
        #expect(try call(running.port, "unregisterDevice", sdk([:]), token: app.deviceToken.secret).status == 200)
        let named = try running.server.devices.targets(.devices(["hwid-1"]), in: app.application.code, attributesType: nil, afterID: 0, limit: 1)
        #expect(named.map(\.pushToken) == [nil], "named, it comes back without a token, to be counted as unregistered")
    }

    @Test func deviceMethodsNeedATokenOfTheirApplication() throws {
        let missing = try call(running.port, "registerDevice", sdk(["push_token": .string(pushToken)]))
        #expect(missing.status == 401)
        #expect(missing.message == "Authorization: a device API token is required (header Authorization: Token <token>)")
        let other = try running.admin().create(name: "Other", bundleID: "com.example.other")
        let foreign = try call(running.port, "registerDevice", sdk(["push_token": .string(pushToken)]), token: other.deviceToken.secret)
        #expect(foreign.status == 401)
        #expect(foreign.message == "Authorization: not a valid device API token for application \(code)")
        // A server API token may act for its application on the device API too.
        #expect(try call(running.port, "registerDevice", sdk(["push_token": .string(pushToken)]), token: app.apiToken.secret).status == 200)
    }

    @Test func applicationsAreIsolated() throws {
        _ = try register(extra: ["tags": ["Level": 3]])
        let other = try running.admin().create(name: "Other", bundleID: "com.example.other")
        var request = sdk([:])
        request["application"] = .string(other.application.code.rawValue)
        let tags = try call(running.port, "getTags", request, token: other.deviceToken.secret)
        #expect(tags.json?.objectValue?["response"] == ["result": [:]], "another application does not see this device")
        let filters = try call(running.port, "createFilter", ["application": .string(other.application.code.rawValue), "auth": .string(other.apiToken.secret),
                                                              "name": "L", "conditions": [["Level", "EQ", 3]]])
        #expect(filters.message == "conditions[0][0]: unknown tag 'Level'; built-in tags are Language, OS Version, Timezone, User ID, Platform, custom tags exist once a device sets them")
        request["tags"] = ["Level": 9]
        #expect(try call(running.port, "setTags", request, token: other.deviceToken.secret).status == 200, "its own device of that HWID")
        #expect(try running.server.devices.tags(hwid: "hwid-1", in: other.application.code) == ["Level": .integer(9)])
        #expect(try running.server.devices.tags(hwid: "hwid-1", in: app.application.code) == ["Level": .integer(3)])
    }
}

@Suite("Filters over HTTP (X1)")
struct FilterAPITests {
    let running: RunningServer
    let app: ApplicationAdmin.Created

    init() throws {
        running = try RunningServer(demo: false)
        app = try running.admin().create(name: "Shop", bundleID: "com.example.shop")
        for (n, language) in ["en", "pt", "en"].enumerated() {
            let response = try call(running.port, "registerDevice", [
                "application": .string(app.application.code.rawValue), "hwid": .string("h\(n)"),
                "push_token": .string(String(repeating: "\(n)", count: 64)), "language": .string(language), "tags": ["Level": .int(Int64(n))],
            ], token: app.deviceToken.secret)
            #expect(response.status == 200)
        }
    }

    func server(_ fields: JSONObject) -> JSONObject {
        let request: JSONObject = ["application": .string(app.application.code.rawValue), "auth": .string(app.apiToken.secret)]
        return request.merging(fields)
    }

    @Test func createListUseAndDelete() throws {
        let created = try call(running.port, "createFilter", server(["name": "English", "operator": "OR",
                                                                    "conditions": [["Language", "EQ", "en"], ["Level", "GTE", 5]]]))
        #expect(created.status == 200, "\(created.message ?? "")")
        #expect(created.json?.objectValue?["response"] == ["filter": ["name": "English", "operator": "OR",
                                                                      "conditions": [["Language", "EQ", "en"], ["Level", "GTE", 5]]]])
        let listed = try call(running.port, "listFilters", server([:]))
        #expect(listed.json?.objectValue?["response"]?.objectValue?["filters"]?.arrayValue?.count == 1)

        let filter = try #require(try running.server.devices.filter(named: "English", in: app.application.code))
        let audience = try running.server.devices.targets(.filter(filter), in: app.application.code, attributesType: nil, afterID: 0, limit: 10)
        #expect(Set(audience.map(\.hwid)) == ["h0", "h2"])

        let duplicate = try call(running.port, "createFilter", server(["name": "English", "conditions": [["Language", "EQ", "pt"]]]))
        #expect(duplicate.status == 400)
        #expect(duplicate.message == "name: a filter named 'English' already exists")

        #expect(try call(running.port, "deleteFilter", server(["name": "English"])).status == 200)
        let gone = try call(running.port, "deleteFilter", server(["name": "English"]))
        #expect(gone.message == "name: no filter named 'English'")
    }

    @Test(arguments: [
        (#"{"name": "x", "conditions": [["Level", "EQ", "high"]]}"#, "conditions[0][2]: 'Level' is an integer tag: expected an integer, got string"),
        (#"{"name": "x", "operator": "XOR", "conditions": [["Level", "EQ", 1]]}"#, "operator: must be \"AND\" or \"OR\""),
        (#"{"name": "x"}"#, "conditions: is required: a list of [tag, operator, value]"),
        (#"{"conditions": [["Level", "EQ", 1]]}"#, "name: is required"),
    ])
    func createFilterNamesTheBadField(fields: String, message: String) throws {
        let response = try call(running.port, "createFilter", server(try #require(try JSONParser.parse(fields).objectValue)))
        #expect(response.status == 400)
        #expect(response.message == message)
        #expect(try running.server.devices.filters(in: app.application.code).isEmpty)
    }

    @Test func aDeviceTokenCannotManageFilters() throws {
        var request = server(["name": "x", "conditions": [["Level", "EQ", 1]]])
        request["auth"] = .string(app.deviceToken.secret)
        let response = try call(running.port, "createFilter", request)
        #expect(response.status == 401)
        #expect(response.message == "auth: a device API token cannot call server API methods; use a server API token")
    }
}
