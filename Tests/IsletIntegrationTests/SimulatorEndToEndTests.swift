import Foundation
import Testing
import IsletCore
import IsletStore
import IsletTestPeers

/// Islet end to end against its built-in simulator: the reference flow (start via filter → update → end)
/// and what each simulated lock screen shows (issue 6).
@Suite("End to end with the simulator")
struct SimulatorEndToEndTests {
    @Test func startUpdateEndAsTheLockScreensShowIt() throws {
        let running = try RunningServer(demo: true)   // no transport given: --apns simulator, with its demo devices
        func post(_ method: String, _ body: String) throws -> RawHTTPResponse {
            try request(running.port, "/json/1.3/\(method)", body: body)
        }
        func lockScreen(_ hwid: String) throws -> [JSONObject] {
            let response = try request(running.port, method: "GET", "/simulator/devices/\(hwid)", headers: ["Authorization": "Token SECRET_API_TOKEN"])
            return response.json?.objectValue?["lock_screen"]?.arrayValue?.compactMap(\.objectValue) ?? []
        }
        func sent(_ response: RawHTTPResponse) throws {
            let code = try #require(response.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue,
                                    "\(response.message ?? "")")
            let messages = running.server.messages
            #expect(try eventually { try messages.messageDetails(code: code, in: ApplicationCode("XXXXX-XXXXX")!)?.state == .done })
        }

        try sent(try post("startLiveActivity", #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"content":"Your order is being prepared","title":"Food Delivery","apns_priority":10,"live_activity":{"event":"start","title":"Order status","content-state":{"status":"Third","estimatedTime":"37 min"},"attributes-type":"FoodDeliveryAttributes","attributes":{}},"live_activity_id":"FIRST_LIVE_ACTIVITY","filter":"FILTER_NAME_1"}]}}"#))
        for hwid in ["first_third", "second_device"] {
            let screen = try lockScreen(hwid)
            #expect(screen.map { $0["activity_id"] } == ["FIRST_LIVE_ACTIVITY"], "\(hwid)")
            #expect(screen.first?["content_state"] == ["status": "Third", "estimatedTime": "37 min"])
        }
        // The simulated SDK reported each device's update token: Islet knows where the activity runs.
        #expect(try eventually {
            try running.server.devices.activityTokens(hwid: "first_third", in: ApplicationCode("XXXXX-XXXXX")!).first?.token != nil
        })

        try sent(try post("updateLiveActivity", #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"apns_priority":10,"title":"Live Activity Update","live_activity":{"event":"update","content-state":{"status":"second 66","estimatedTime":"66 min"},"relevance-score":60},"live_activity_id":"FIRST_LIVE_ACTIVITY"}]}}"#))
        for hwid in ["first_third", "second_device"] {
            #expect(try lockScreen(hwid).first?["content_state"] == ["status": "second 66", "estimatedTime": "66 min"], "\(hwid)")
            #expect(try lockScreen(hwid).first?["relevance_score"] == 60)
        }

        try sent(try post("updateLiveActivity", #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"live_activity":{"event":"end","content-state":{"status":"Delivered","estimatedTime":"0 min"}},"live_activity_id":"FIRST_LIVE_ACTIVITY"}]}}"#))
        for hwid in ["first_third", "second_device"] {
            let card = try lockScreen(hwid).first
            #expect(card?["ended"] == true, "\(hwid): ended, and still shown (no dismissal-date)")
            #expect(card?["content_state"] == ["status": "Delivered", "estimatedTime": "0 min"])
        }
        let log = try request(running.port, method: "GET", "/simulator/devices/first_third", headers: ["Authorization": "Token SECRET_API_TOKEN"]).json?.objectValue?["log"]?.arrayValue ?? []
        #expect(log.compactMap { $0.objectValue?["event"]?.stringValue } == ["start", "update", "end"])
        #expect(log.allSatisfy { $0.objectValue?["dropped"] == .null })
    }
}

/// Issue 12: the simulator routes need an application's server API token and see only that application.
@Suite("Simulator routes: authorised and scoped to one application")
struct SimulatorRoutesTenancyTests {
    @Test func eachApplicationSeesAndAddsOnlyItsOwnDevices() throws {
        let running = try RunningServer(demo: true)
        let other = try running.admin().create(name: "Other", bundleID: "com.example.other")
        func get(_ path: String, token: String?) throws -> RawHTTPResponse {
            try request(running.port, method: "GET", path, headers: token.map { ["Authorization": "Token \($0)"] } ?? [:])
        }
        #expect(try get("/simulator/devices", token: nil).status == 401)
        #expect(try get("/simulator/devices/first_third", token: nil).status == 401)
        #expect(try get("/simulator/devices", token: "not-a-token").status == 401)
        #expect(try get("/simulator/devices", token: other.deviceToken.secret).status == 401, "a device token (public, in every app) is not enough")
        #expect(try request(running.port, "/simulator/devices", body: #"{"application":"XXXXX-XXXXX","hwid":"intruder"}"#).status == 401)

        let otherToken = other.apiToken.secret
        #expect(try get("/simulator/devices", token: otherToken).json?.objectValue?["devices"] == [], "no other application's devices")
        #expect(try get("/simulator/devices/first_third", token: otherToken).status == 404)
        let sneaky = try request(running.port, "/simulator/devices", body: #"{"application":"XXXXX-XXXXX","hwid":"intruder"}"#,
                                 headers: ["Authorization": "Token \(otherToken)"])
        #expect(sneaky.status == 401, "naming another application is refused like a wrong token")
        let added = try request(running.port, "/simulator/devices", body: #"{"hwid":"own_phone","ios_version":"18.1"}"#,
                                headers: ["Authorization": "Token \(otherToken)"])
        #expect(added.status == 200)
        #expect(added.json?.objectValue?["application"] == .string(other.application.code.rawValue))
        let demoDevices = try get("/simulator/devices", token: "SECRET_API_TOKEN").json?.objectValue?["devices"]?.arrayValue ?? []
        #expect(Set(demoDevices.compactMap { $0.objectValue?["hwid"]?.stringValue }) == ["first_third", "second_device", "android_phone"])
        #expect(try request(running.port, method: "DELETE", "/simulator/devices", headers: ["Authorization": "Token SECRET_API_TOKEN"]).headers["allow"] == "GET, POST")
        // Found by schemathesis: a repeated attributes type crashed the server.
        let repeated = try request(running.port, "/simulator/devices", body: #"{"hwid":"twice","attributes_types":["", "T", "T", ""]}"#,
                                   headers: ["Authorization": "Token SECRET_API_TOKEN"])
        #expect(repeated.status == 200)
        #expect(repeated.json?.objectValue?["push_to_start_tokens"]?.objectValue?.keys.sorted() == ["", "T"])
        // The path is decoded once: a % in a HWID is found as written.
        _ = try request(running.port, "/simulator/devices", body: #"{"hwid":"x%41"}"#, headers: ["Authorization": "Token SECRET_API_TOKEN"])
        #expect(try get("/simulator/devices/x%2541", token: "SECRET_API_TOKEN").status == 200)
    }

    /// Issue 17: a tester locks, unlocks or uninstalls the app on a phone over HTTP, as `islet simulator device set` does.
    @Test func aPhoneIsLockedUnlockedAndUninstalledOverHTTP() throws {
        let running = try RunningServer(demo: true)
        let other = try running.admin().create(name: "Other", bundleID: "com.example.other")
        func set(_ hwid: String, _ body: String, token: String = "SECRET_API_TOKEN") throws -> RawHTTPResponse {
            try request(running.port, "/simulator/devices/\(hwid)/state", body: body, headers: ["Authorization": "Token \(token)"])
        }
        #expect(try set("first_third", #"{"state":"locked"}"#).json?.objectValue?["locked"] == true)
        #expect(try set("first_third", #"{"state":"unlocked"}"#).json?.objectValue?["locked"] == false)
        #expect(try set("first_third", #"{"state":"uninstalled"}"#).json?.objectValue?["uninstalled"] == true)
        let wrong = try set("first_third", #"{"state":"asleep"}"#)
        #expect(wrong.status == 400 && wrong.message == "state: must be one of locked, unlocked, uninstalled")
        #expect(try set("first_third", #"{"state":"locked"}"#, token: other.apiToken.secret).status == 404, "another application's phone is not found")
        #expect(try set("nobody", #"{"state":"locked"}"#).status == 404)
        let get = try request(running.port, method: "GET", "/simulator/devices/first_third/state", headers: ["Authorization": "Token SECRET_API_TOKEN"])
        #expect(get.status == 405 && get.headers["allow"] == "POST")
    }

    /// Issue 12: the list of simulated phones comes in pages (`limit`, `cursor`, `next_cursor`), never cut.
    @Test func theListOfSimulatedPhonesIsPaged() throws {
        let running = try RunningServer(demo: false)
        let other = try running.admin().create(name: "Other", bundleID: "com.example.other")
        let token = other.apiToken.secret
        // Every HWID but the last becomes a cursor: quotes, a `+` (a bare one reads as a space), non-ASCII.
        let hwids = (0..<5).map { "phone-\($0)" } + ["it's", "a+b", "日本", "日本z"]
        var random = SeededRandom(seed: 7)
        for hwid in hwids.shuffled(using: &random) {
            #expect(try request(running.port, "/simulator/devices", body: #"{"hwid":"\#(hwid)"}"#, headers: ["Authorization": "Token \(token)"]).status == 200)
        }
        func get(_ query: String) throws -> RawHTTPResponse {
            try request(running.port, method: "GET", "/simulator/devices\(query)", headers: ["Authorization": "Token \(token)"])
        }
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
            let query = "?limit=1" + (cursor.map { "&cursor=\($0.addingPercentEncoding(withAllowedCharacters: unreserved)!)" } ?? "")
            let answer = try #require(try get(query).json?.objectValue)
            let devices = answer["devices"]?.arrayValue ?? []
            #expect(devices.count == 1)
            seen += devices.compactMap { $0.objectValue?["hwid"]?.stringValue }
            cursor = answer["next_cursor"]?.stringValue
            pages += 1
        } while cursor != nil && pages < 20
        #expect(seen == hwids.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }, "every phone once, in HWID order")
        #expect(pages == hwids.count)
        let whole = try #require(try get("").json?.objectValue)
        #expect(whole["devices"]?.arrayValue?.count == hwids.count && whole["next_cursor"] == .null, "one page of up to 1,000 by default")
        // Found by schemathesis on PostgreSQL: a NUL in the cursor was a 500.
        let nul = try get("?cursor=a%00b")
        #expect(nul.status == 400 && nul.message == "cursor: must not contain the NUL character (\\u0000)", "\(nul.message ?? "")")
        for bad in ["?limit=0", "?limit=1001", "?limit=ten", "?limit=", "?limit=5%00"] {
            let refused = try get(bad)
            #expect(refused.status == 400 && refused.message == "limit: must be an integer from 1 to 1000", "\(bad): \(refused.message ?? "")")
        }
    }
}
