import Foundation
import Testing
import IsletAPI
import IsletCore
import IsletStore
import IsletTestPeers

/// Issue 46: `--apns simulator` simulates FCM too. The demo's Android phone gets the reference flow as Live Updates on
/// its notification shade; an older Android phone gets the start as a notification; an uninstalled app's token is
/// answered UNREGISTERED and retired.
@Suite("The simulator's Android phones")
struct SimulatedAndroidTests {
    static let auth = ["Authorization": "Token SECRET_API_TOKEN"]

    @Test func theDemosAndroidPhoneShowsTheLiveUpdateFromStartToEnd() throws {
        let running = try RunningServer(demo: true)
        let app = ApplicationCode("XXXXX-XXXXX")!
        func phone(_ hwid: String) throws -> JSONObject {
            try request(running.port, method: "GET", "/simulator/devices/\(hwid)", headers: Self.auth).json?.objectValue ?? [:]
        }
        func send(_ method: String, _ notification: String) throws -> String {
            let answer = try request(running.port, "/json/1.3/\(method)", body: #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[\#(notification)]}}"#)
            let code = try #require(answer.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue, "\(answer.message ?? "")")
            #expect(try eventually { try running.server.messages.messageDetails(code: code, in: app)?.state == .done })
            return code
        }
        let added = try request(running.port, "/simulator/devices", body: #"{"hwid":"old_android","platform":"android","android_version":"14"}"#,
                                headers: Self.auth)
        #expect(added.status == 200 && added.json?.objectValue?["platform"] == "android", "\(added.message ?? "")")
        let refused = try request(running.port, "/simulator/devices", body: #"{"hwid":"x","platform":"android","locked":true}"#, headers: Self.auth)
        #expect(refused.status == 400 && refused.message == "locked: is for iPhones; an Android phone takes android_version")
        _ = try request(running.port, "/json/1.3/setTags", body: #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","hwid":"old_android","tags":{"Demo":"food-delivery"}}}"#)

        let start = try send("startLiveActivity", ##"{"content":"Your order is being prepared","title":"Food Delivery","live_activity":{"content-state":{"status":"Third"},"attributes-type":"FoodDeliveryAttributes","attributes":{}},"live_activity_id":"ORDER_7","filter":"FILTER_NAME_1","android":{"progress":1,"segments":[{"color":"#705289","length":4}]}}"##)
        #expect(try running.server.messages.messageDetails(code: start, in: app)?.sent == 4, "two iPhones, two Android phones")
        let shade = try phone("android_phone")["shade"]?.arrayValue?.first?.objectValue
        #expect(shade?["id"] == "ORDER_7" && shade?["title"] == "Food Delivery" && shade?["text"] == "Your order is being prepared" && shade?["progress"] == 1,
                "\(String(describing: shade))")
        #expect(try phone("old_android")["notifications"]?.arrayValue == ["Food Delivery: Your order is being prepared"],
                "Android 14 shows the start as a notification")

        _ = try send("updateLiveActivity", ##"{"live_activity":{"event":"update","content-state":{"status":"Second"}},"live_activity_id":"ORDER_7","android":{"progress":3,"segments":[{"color":"#705289","length":4}]}}"##)
        let updated = try phone("android_phone")["shade"]?.arrayValue?.first?.objectValue
        #expect(updated?["progress"] == 3 && updated?["text"] == "Your order is being prepared", "\(String(describing: updated))")
        #expect(try phone("old_android")["log"]?.arrayValue?.count == 1, "no update goes to Android below 16")

        _ = try send("updateLiveActivity", #"{"live_activity":{"event":"end","content-state":{"status":"Delivered"}},"live_activity_id":"ORDER_7"}"#)
        #expect(try phone("android_phone")["shade"]?.arrayValue == [], "the end takes it off the shade")
        let log = try phone("android_phone")["log"]?.arrayValue?.compactMap { $0.objectValue?["event"]?.stringValue }
        #expect(log == ["OPERATION_START", "OPERATION_UPDATE", "OPERATION_END"], "\(String(describing: log))")

        // Uninstalled: FCM answers UNREGISTERED, and the token is retired.
        #expect(try request(running.port, "/simulator/devices/android_phone/state", body: #"{"state":"uninstalled"}"#, headers: Self.auth).status == 200)
        let again = try send("startLiveActivity", #"{"content":"Again","live_activity":{"content-state":{"status":"Third"},"attributes-type":"FoodDeliveryAttributes","attributes":{}},"live_activity_id":"ORDER_8","devices":["android_phone"]}"#)
        let details = try #require(try running.server.messages.messageDetails(code: again, in: app))
        #expect(details.failed == 1 && details.reasons["UNREGISTERED"] == 1, "\(details)")
        #expect(try running.server.devices.device(hwid: "android_phone", in: app)?.pushToken == nil)
    }

    /// The server API tokens' rate limit (E6) holds for Pushwoosh's notify call too.
    @Test func theNotifyCallIsRateLimitedLikeTheServerMethods() throws {
        let running = try RunningServer(demo: true, rateLimits: RateLimits(serverPerToken: RateLimit(perSecond: 0.01, burst: 1)))
        let body = #"{"segment":{"platforms":["IOS"]}}"#
        let first = try request(running.port, "/messaging/v2/notify", body: body, headers: Self.auth)
        #expect(first.status == 400 && first.json?.objectValue?["code"] == 3, "the first call is read, and refused for its field")
        let second = try request(running.port, "/messaging/v2/notify", body: body, headers: Self.auth)
        #expect(second.status == 429 && second.json?.objectValue?["code"] == 8 && second.headers["retry-after"] != nil,
                "\(String(decoding: second.body, as: UTF8.self))")
    }
}
