import Foundation
import Testing
import IsletAPI
import IsletApp
import IsletCore
import IsletDelivery
import IsletStore

/// Issue 45: an app whose Pushwoosh SDK points at Islet. The bodies are the ones the iOS SDK 7.1.3 and the Android
/// SDK 6.10.0 build (their request classes: base fields `application`, `hwid`, `v`, `device_type`, `userId`, then each
/// call's own), in the order the SDK sends them through an app's life.
@Suite("The Pushwoosh SDKs' traffic (issue 45)")
struct SDKTrafficTests {
    let world: LiveActivityWorld
    let deviceToken: String

    init() throws {
        world = try LiveActivityWorld()
        deviceToken = try world.running.admin().issueToken(for: ApplicationCode(world.code)!, kind: .device, label: "app").secret
    }

    static let activityToken = LiveActivityWorld.hex("e7", 40)

    /// The iOS SDK's calls, first launch to unregister: (method, its own fields, what the SDK reads of `response`).
    static let iOSLife: [(String, JSONObject, JSONObject?)] = [
        ("applicationOpen", ["package": "com.example.fooddelivery", "timezone": "3600", "app_version": "2.1", "os_version": "17.4",
                             "device_model": "iPhone15,2", "language": "pt", "time_sensitive_notifications": false,
                             "scheduled_summary": false, "notificationTypes": 0], nil),
        ("getTags", [:], ["result": ["Language": "pt", "OS Version": "17.4", "Timezone": "3600"]]),
        ("registerUser", [:], nil),
        ("getInApps", ["language": "pt"], ["inApps": []]),
        ("postEvent", ["event": "PW_ApplicationOpen", "attributes": [:], "timestampUTC": 1796429455, "timestampCurrent": 1796433055], nil),
        ("registerDevice", ["push_token": .string(LiveActivityWorld.hex("d7", 32)), "gateway": "production", "timezone": "3600",
                            "language": "pt", "os_version": "17.4", "sounds": [], "notificationTypes": 7], nil),
        ("setTags", ["tags": ["badge": 0, "Plan": "gold"]], nil),
        ("setActivityPushToStartToken", ["activity_push_to_start_token": .string(LiveActivityWorld.hex("e8", 40))], nil),
        ("setActivityToken", ["activity_token": .string(activityToken), "activity_id": "ORDER_7"], nil),
        ("messageDeliveryEvent", ["hash": "not-a-message-of-ours", "metaData": "{}"], ["kept": false]),
        ("pushStat", ["hash": "not-a-message-of-ours"], ["kept": false]),
        ("triggerInAppAction", ["action": "show", "code": "r-ABC", "richMediaCode": "ABC", "timestampUTC": 1796429455,
                                "timestampCurrent": 1796433055], nil),
        ("richMediaAction", ["rich_media_code": "ABC", "action_attributes": "{}", "action_type": 4], nil),
        ("getInboxMessages", ["last_code": "", "count": 20, "last_request_time": 0], ["messages": [], "deleted": [], "new_inbox": 0]),
        ("inboxStatus", ["inbox_code": "1", "status": 2], nil),
        ("registerEmail", ["email": "ana@example.com", "language": "pt", "tz_offset": 3600], nil),
        ("registerEmailUser", ["email": "ana@example.com", "tz_offset": 3600], nil),
        ("setEmailTags", ["email": "ana@example.com", "tags": ["Plan": "gold"]], nil),
        ("postEvent", ["event": "PW_InAppPurchase", "attributes": ["productIdentifier": "coins", "quantity": "1", "__amount": 0.99,
                                                                    "__currency": "EUR", "status": "success"],
                       "timestampUTC": 1796429455, "timestampCurrent": 1796433055], nil),
        ("getNearestZone", ["lat": 38.72, "lng": -9.14, "more": 1], ["geozones": []]),
        ("mergeUser", ["oldUserId": "guest-1", "newUserId": "user-ana", "merge": true, "ts": 1796433055], nil),
        ("createTestDevice", ["name": "QA phone", "description": "", "auto_created": true, "push_token": .string(LiveActivityWorld.hex("d7", 32))], nil),
        // Stopping: the Live Activities module sends an empty token, the core API none.
        ("setActivityToken", ["activity_token": "", "activity_id": "ORDER_7"], nil),
        ("setActivityToken", ["activity_id": "ORDER_7"], nil),
        ("unregisterDevice", [:], nil),
        // Older SDKs.
        ("setPurchase", ["productIdentifier": "coins", "quantity": 1, "transactionDate": 1796429455, "price": "0.99", "currency": "EUR"], nil),
        ("setBadge", ["badge": 3], nil),
        ("getConfig", ["features": ["events"]], ["features": ["public_key": "", "events": [], "channels": [], "logger": 0]]),
    ]

    /// An FCM registration token, as Firebase gives them: letters, digits, `-`, `_` and a `:`.
    static let fcmToken = "fWq3Ck2ZR0eX_jH9:APA91bH" + String(repeating: "x7-Kq_", count: 22)

    /// The Android SDK's calls, from its start worker on.
    static let androidLife: [(String, JSONObject, JSONObject?)] = [
        ("registerUser", ["userId": "android-1"], nil),
        ("applicationOpen", ["language": "pt", "timezone": 3600, "android_package": "com.example.fooddelivery", "device_model": "Pixel 9",
                             "device_name": "Phone", "os_version": "16", "app_version": "2.1", "notificationTypes": 1], nil),
        ("registerDevice", ["push_token": .string(fcmToken), "language": "pt", "timezone": 3600, "android_package": "com.example.fooddelivery",
                            "os_version": "16", "app_version": "2.1", "notificationTypes": 1, "tags": ["Plan": "free"]], nil),
        ("getInApps", ["language": "pt"], ["inApps": []]),
        ("messageDeliveryEvent", ["hash": "hash-1"], ["kept": false]),
        ("pushStat", ["hash": "hash-1", "metaData": "{}"], ["kept": false]),
        ("setTags", ["tags": ["Plan": "silver"]], nil),
        ("getTags", [:], ["result": ["Language": "pt", "OS Version": "16", "Timezone": "3600", "User ID": "android-1", "Plan": "silver"]]),
        ("postEvent", ["event": "PW_ScreenOpen", "attributes": ["screen": "home"], "timestampUTC": 1796429455, "timestampCurrent": 1796433055], nil),
        ("getInboxMessages", [:], ["messages": [], "deleted": [], "new_inbox": 0]),
        ("inboxStatus", ["inbox_code": "1", "status": 3, "hash": "hash-1"], nil),
        ("getNearestZone", ["lat": 38.72, "lng": -9.14, "more": 1], ["geozones": []]),
        ("getNearestZone", ["lat": .null, "lng": .null, "more": 1], ["geozones": []]),
        ("registerEmail", ["email": "rui@example.com", "tz_offset": 3600, "language": "Portuguese"], nil),
        ("registerEmailUser", ["email": "rui@example.com", "userId": "android-1", "tz_offset": 3600], nil),
        ("setEmailTags", ["email": "rui@example.com", "tags": [:]], nil),
        ("mergeUser", ["oldUserId": "a", "newUserId": "b", "merge": false, "ts": 1796433055], nil),
        ("createTestDevice", ["name": "QA", "description": "", "auto_created": true, "push_token": "fcm-token", "language": "pt"], nil),
        ("triggerInAppAction", ["action": "show", "code": "", "richMediaCode": "ABC", "timestampUTC": 1796429455, "timestampCurrent": 1796433055], nil),
        ("richMediaAction", ["rich_media_code": "ABC", "inapp_code": "", "action_type": 4], nil),
        ("unregisterDevice", [:], nil),
    ]

    /// Sends one call as the SDK does (the device token in the header) and checks the envelope the SDK needs: HTTP 200,
    /// a numeric `status_code` 200, no `base_url` (the SDKs would move to it), and the `response` keys it reads.
    func expectAnswered(_ method: String, _ fields: JSONObject, reads: JSONObject?, base: JSONObject) throws {
        let answer = try call(world.running.port, method, base.merging(fields), token: deviceToken)
        let envelope = try #require(answer.json?.objectValue, "\(method)")
        #expect(answer.status == 200 && envelope["status_code"] == 200 && envelope["status_message"] == "OK", "\(method): \(envelope)")
        #expect(envelope["base_url"] == nil)
        if let reads {
            let response = envelope["response"]?.objectValue ?? [:]
            for (key, value) in reads.entries { #expect(response[key] == value, "\(method).\(key): \(response)") }
        }
    }

    @Test func everyCallOfTheIOSSDKIsAnsweredAsItNeeds() throws {
        let base: JSONObject = ["application": .string(world.code), "hwid": "ios-ana", "v": "7.1.3", "device_type": 1, "userId": "ios-ana"]
        let devices = world.running.server.devices, code = ApplicationCode(world.code)!
        for (index, (method, fields, reads)) in Self.iOSLife.enumerated() {
            try expectAnswered(method, fields, reads: reads, base: base)
            if index == 1 {
                // Before registerDevice: the app open is kept for the device, known by its HWID without a push token.
                let known = try #require(try devices.device(hwid: "ios-ana", in: code))
                #expect(known.pushToken == nil && known.language == "pt" && known.timezone == "3600" && known.osVersion == "17.4")
            }
            if method == "setActivityToken" && fields["activity_token"] != nil && fields["activity_token"] != "" {
                #expect(try devices.activityTokens(hwid: "ios-ana", in: code).map(\.token) == [Self.activityToken])
            }
        }
        #expect(try devices.activityTokens(hwid: "ios-ana", in: code).map(\.token) == [nil], "ended on the phone")
        #expect(try devices.tags(hwid: "ios-ana", in: code) == ["badge": .integer(0), "Plan": .string("gold")])
        let device = try #require(try devices.device(hwid: "ios-ana", in: code))
        #expect(device.userID == "ios-ana", "registerUser with the SDK's base userId")
        #expect(device.pushToken == nil, "unregistered at the end")
    }

    @Test func everyCallOfTheAndroidSDKIsAnsweredAsItNeeds() throws {
        let base: JSONObject = ["application": .string(world.code), "hwid": "android-rui", "v": "6.10.0", "device_type": 3, "userId": "android-1"]
        let devices = world.running.server.devices, code = ApplicationCode(world.code)!
        for (method, fields, reads) in Self.androidLife {
            try expectAnswered(method, fields, reads: reads, base: base)
            if method == "registerDevice" {
                // Registered and kept: its FCM token as sent (its case matters), its tags and User ID.
                let device = try #require(try devices.device(hwid: "android-rui", in: code))
                #expect(device.platform == .android && device.pushToken == Self.fcmToken && device.userID == "android-1")
                #expect(try devices.tags(hwid: "android-rui", in: code) == ["Plan": .string("free")])
                let health = try world.expectOK(try world.server("getDeviceHealth", ["hwid": "android-rui"]))["device"]?.objectValue
                #expect(health?["platform"] == "android" && health?["registered"] == true)
                #expect(health?["token_history"]?.arrayValue?.first?.objectValue?["slot"] == "fcm")
            }
        }
    }

    /// An Android phone is in a filter's audience and named devices' like an iPhone, and counted as skipped with its
    /// reason: Islet sends it nothing yet (no APNs request ever goes to an FCM token).
    @Test func aStartCountsAnAndroidPhoneAsSkipped() throws {
        try expectAnswered("registerDevice", ["push_token": .string(Self.fcmToken), "language": "en", "os_version": "14"], reads: nil,
                           base: ["application": .string(world.code), "hwid": "android-en", "v": "6.10.0", "device_type": 3])
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [[
            "filter_code": "FILTER_NAME_1",
            "live_activity": ["content-state": ["status": "Preparing"], "attributes-type": "FoodDeliveryAttributes", "attributes": [:]],
            "live_activity_id": "ORDER_A", "title": "Food Delivery", "content": "Your order is being prepared",
        ]]]))
        let details = try #require(try world.waitUntilSent(codes).first)
        #expect(details.skipped[SkipReason.android] == 1, "\(details.skipped)")
        #expect(world.pushes(to: Self.fcmToken).isEmpty, "Android 14 is below 16.1 as a number, yet gets no fallback alert through APNs")
    }

    /// An app open is a sign of life, shown by getDeviceHealth; a User ID set by registerUser follows the application's
    /// rule of who may set one (issue 44).
    @Test func appOpensAndUserIDsAreKeptForRegisteredDevices() throws {
        let base: JSONObject = ["application": .string(world.code), "hwid": "first_third", "v": "7.1.3", "device_type": 1]
        let health = { () throws -> JSONObject in
            try #require(try world.expectOK(try world.server("getDeviceHealth", ["hwid": "first_third"]))["device"]?.objectValue)
        }
        #expect(try health()["app_opened_at"] == .null)
        world.clock.advance(60)
        try expectAnswered("applicationOpen", ["timezone": "7200"], reads: nil, base: base)
        #expect(try health()["app_opened_at"] == .string(world.clock.now.formatted(.iso8601)))
        let device = try #require(try world.running.server.devices.device(hwid: "first_third", in: ApplicationCode(world.code)!))
        #expect(device.pushToken == LiveActivityWorld.hex("a1", 32) && device.timezone == "7200" && device.language == "en", "the rest is kept")

        try expectAnswered("registerUser", ["userId": "ana"], reads: [:], base: base)
        #expect(try world.running.server.devices.device(hwid: "first_third", in: ApplicationCode(world.code)!)?.userID == "ana")
        try world.running.serverAdmin().setUserIDSource(for: ApplicationCode(world.code)!, .server)
        try expectAnswered("registerUser", ["userId": "mallory"], reads: ["warnings": [.string(UserIDSource.ignoredByRegisterUserWarning)]], base: base)
        #expect(try world.running.server.devices.device(hwid: "first_third", in: ApplicationCode(world.code)!)?.userID == "ana")
        let missing = try call(world.running.port, "registerUser", base, token: deviceToken)
        #expect(missing.status == 400 && missing.message == "userId: is required: the User ID to give the device")
    }

    /// The fallback alert of a device below iOS 16.1 carries `pw_msg` and `p` (the message's code), so the SDK reports
    /// its receipt; getMessageDetails counts the devices that did.
    @Test func theSDKsReceiptsOfAFallbackAlertAreCounted() throws {
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [[
            "filter_code": "FILTER_NAME_1",
            "live_activity": ["content-state": ["status": "Preparing"], "attributes-type": "FoodDeliveryAttributes", "attributes": [:]],
            "live_activity_id": "ORDER_R", "title": "Food Delivery", "content": "Your order is being prepared",
        ]]]))
        _ = try world.waitUntilSent(codes)
        let alert = try #require(world.pushes(to: LiveActivityWorld.hex("a3", 32)).first)
        let payload = try #require(try JSONParser.parse(alert.payload).objectValue)
        #expect(payload["pw_msg"] == "1" && payload["p"] == .string(codes[0]))

        let base: JSONObject = ["application": .string(world.code), "hwid": "old_phone", "v": "7.1.3", "device_type": 1, "hash": .string(codes[0])]
        try expectAnswered("messageDeliveryEvent", [:], reads: ["kept": true], base: base)
        try expectAnswered("pushStat", [:], reads: ["kept": true], base: base)
        try expectAnswered("pushStat", [:], reads: ["kept": true], base: base)   // a retried receipt counts once
        try expectAnswered("pushStat", ["hwid": "no_token"], reads: ["kept": false], base: base)   // skipped: never sent to it
        try expectAnswered("pushStat", ["hwid": "nobody"], reads: ["kept": false], base: base)
        let counts = try world.expectOK(try world.server("getMessageDetails", ["message": .string(codes[0])]))["message"]?
            .objectValue?["counts"]?.objectValue
        #expect(counts?["received"] == 1 && counts?["opened"] == 1, "\(String(describing: counts))")
        let tooLong = try call(world.running.port, "pushStat", base.merging(["hash": .string(String(repeating: "x", count: 65))]), token: deviceToken)
        #expect(tooLong.status == 400 && tooLong.message == "hash: must be at most 64 characters")
    }

    /// A user who declines notifications: the app never registers, yet reports its push-to-start token (Live Activities
    /// need no notification permission). A start by `devices` reaches the phone through it; a filter does not.
    @Test func aDeviceThatNeverRegisteredIsStartedThroughItsPushToStartToken() throws {
        let token = LiveActivityWorld.hex("e9", 40)
        try expectAnswered("setActivityPushToStartToken", ["activity_push_to_start_token": .string(token)], reads: nil,
                           base: ["application": .string(world.code), "hwid": "no_permission", "v": "7.1.3", "device_type": 1])
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [[
            "devices": ["no_permission"],
            "live_activity": ["content-state": ["status": "Preparing"], "attributes-type": "FoodDeliveryAttributes", "attributes": [:]],
            "live_activity_id": "ORDER_N", "title": "Food Delivery", "content": "Your order is being prepared",
        ]]]))
        let details = try world.waitUntilSent(codes)
        #expect(details.first?.sent == 1 && details.first?.targeted == 1)
        #expect(world.pushes(to: token).map(\.pushType) == [.liveActivity])
    }

    /// The SDK's tag builders: booleans, dates (a tag the operator typed as date), increments, list appends and removals.
    /// Increments sent at once all count: each is applied under the device's row lock.
    @Test func theSDKsTagTypesAndOperationsAreApplied() throws {
        let base: JSONObject = ["application": .string(world.code), "hwid": "tagger", "v": "7.1.3", "device_type": 1]
        // As `islet app tag set-type CODE Due date` does, from another process on the same database.
        _ = try TagAdmin(store: Storage(StorageLocation(world.running.database)).devices)
            .setType(.date, of: "Due", in: ApplicationCode(world.code)!, droppingValues: false)
        try expectAnswered("setTags", ["tags": ["Vip": true, "Due": "2026-12-04 18:30", "Topics": ["operation": "append", "value": ["news", "sport"]],
                                                "Score": ["operation": "increment", "value": 1]]], reads: [:], base: base)
        let port = world.running.port, token = deviceToken
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            _ = try? call(port, "setTags", base.merging(["tags": ["Score": ["operation": "increment", "value": 2]]]), token: token)
        }
        try expectAnswered("setTags", ["tags": ["Topics": ["operation": "remove", "value": "news"]]], reads: [:], base: base)
        try expectAnswered("getTags", [:], reads: ["result": ["Due": "2026-12-04 18:30", "Score": 41, "Topics": ["sport"], "Vip": true]], base: base)
        let clash = try call(port, "setTags", base.merging(["tags": ["Due": "next week", "Vip": 1]]), token: token)
        #expect(clash.json?.objectValue?["response"]?.objectValue?["skipped_tags"]?.arrayValue?.count == 2, "\(clash.message ?? "")")
    }

    /// Entries of `devices` and `users` that name no device are warned of and counted, not dropped without a word;
    /// a `user_id` in setTags is said to be ignored.
    @Test func unknownTargetsAndIgnoredFieldsAreNamed() throws {
        let response = try world.expectOK(try world.server("startLiveActivity", ["notifications": [[
            "devices": ["first_third", "ghost-1", "ghost-2"],
            "live_activity": ["content-state": ["status": "Preparing"], "attributes-type": "FoodDeliveryAttributes", "attributes": [:]],
            "live_activity_id": "ORDER_G", "title": "Food Delivery", "content": "Your order is being prepared",
        ]]]))
        #expect(response["warnings"] == ["notifications[0].devices: 2 of 3 entries name no device of this application ('ghost-1', 'ghost-2'); nothing goes to them (S4)"])
        let code = try #require(response["Messages"]?.arrayValue?.first?.stringValue)
        _ = try world.waitUntilSent([code])
        let counts = try world.expectOK(try world.server("getMessageDetails", ["message": .string(code)]))["message"]?.objectValue?["counts"]?.objectValue
        #expect(counts?["unknown_targets"] == 2 && counts?["targeted"] == 1, "\(String(describing: counts))")
        let tagged = try world.expectOK(try call(world.running.port, "setTags", ["application": .string(world.code), "hwid": "first_third", "tags": ["a": "b"],
                                                                                  "user_id": "ana"], token: deviceToken))
        #expect(tagged["warnings"] == [.string("user_id: ignored: setTags sets tags; a device's User ID is set by registerUser, or registerDevice's userId")])
    }

    /// A backend calling a Pushwoosh method Islet does not serve is told where to turn, not only "unknown".
    @Test func pushwooshServerMethodsIsletDoesNotServeSayWhereToTurn() throws {
        let created = try world.server("createMessage", ["notifications": [["send_date": "now", "content": "Hi"]]])
        #expect(created.status == 404)
        #expect(created.message == "'createMessage' is a Pushwoosh method Islet does not serve: Islet serves the Live Activities API and the device API; "
                + "Islet sends Live Activities through APNs, not ordinary pushes, email or SMS: start one with startLiveActivity, update or end it with updateLiveActivity")
        #expect(try world.server("getMsgStats", [:]).message?.hasSuffix("getMessageDetails gives a message's counts, states and APNs reasons; GET /metrics gives the server's") == true)
        #expect(try world.server("startLiveActivty", [:]).message == "unknown method 'startLiveActivty'; did you mean 'startLiveActivity'?")
        for name in SDKCalls.notServed.keys {
            #expect(!world.running.server.router.methodNames.contains(name), "\(name) is served, yet listed as not served")
        }
    }
}
