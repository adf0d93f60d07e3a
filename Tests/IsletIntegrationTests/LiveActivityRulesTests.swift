import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

/// A start notification in the reference's shape, with fields replaced or removed (nil) as a test needs.
func startNotification(_ changes: JSONObject = [:], activity: JSONObject = [:], id: String = "ORDER_1") -> JSONObject {
    var liveActivity: JSONObject = [
        "event": "start", "title": "Order status", "content-state": ["status": "Third", "estimatedTime": "37 min"],
        "attributes-type": "FoodDeliveryAttributes", "attributes": [:],
    ]
    for (key, value) in activity.entries { liveActivity[key] = value == .null ? nil : value }
    var n: JSONObject = ["content": "Your order is being prepared", "title": "Food Delivery", "live_activity": .object(liveActivity),
                         "live_activity_id": .string(id), "devices": ["first_third", "second_device"]]
    for (key, value) in changes.entries { n[key] = value == .null ? nil : value }
    return n
}

func updateNotification(_ changes: JSONObject = [:], activity: JSONObject = [:], id: String = "ORDER_1", event: String = "update") -> JSONObject {
    var liveActivity: JSONObject = ["event": .string(event), "content-state": ["status": "On its way", "estimatedTime": "10 min"]]
    for (key, value) in activity.entries { liveActivity[key] = value == .null ? nil : value }
    var n: JSONObject = ["live_activity": .object(liveActivity), "live_activity_id": .string(id)]
    for (key, value) in changes.entries { n[key] = value == .null ? nil : value }
    return n
}

@Suite("startLiveActivity rules (S1–S8, E5, A4)")
struct StartRulesTests {
    let world: LiveActivityWorld
    init() throws { world = try LiveActivityWorld() }

    func start(_ notifications: [JSONObject], extra: JSONObject = [:]) throws -> RawHTTPResponse {
        try world.server("startLiveActivity", (["notifications": .array(notifications.map { .object($0) })] as JSONObject).merging(extra))
    }

    @Test(arguments: [
        (startNotification(["live_activity": nil]), "notifications[0].live_activity: is required"),
        (startNotification(activity: ["content-state": "x"]), "notifications[0].live_activity.content-state: must be an object, got string"),
        (startNotification(activity: ["content-state": nil]), "notifications[0].live_activity.content-state: is required"),
        (startNotification(["live_activity_id": nil, "liveactivity_id": "ORDER_9"]),
         "notifications[0].live_activity_id: is required; notifications[0].liveactivity_id was given: is it live_activity_id misspelt?"),
        (startNotification(activity: ["attributes-type": ""]), "notifications[0].live_activity.attributes-type: must not be empty"),
        (startNotification(activity: ["attributes": [1]]), "notifications[0].live_activity.attributes: must be an object, got array"),
        (startNotification(activity: ["event": "update"]), "notifications[0].live_activity.event: must be \"start\" in startLiveActivity (use updateLiveActivity for \"update\")"),
        (startNotification(activity: ["attributes": ["pushwoosh": "x"]]), "notifications[0].live_activity.attributes.pushwoosh: must be an object like {\"activityId\": \"...\"}, got string"),
        (startNotification(["content": "", "title": nil]), "notifications[0]: content or title must be a non-empty string: they are the start push's alert (S2)"),
        (startNotification(["content": 5]), "notifications[0].content: must be a string, got number"),
        (startNotification(["live_activity_id": ""]), "notifications[0].live_activity_id: must not be empty"),
        (startNotification(["devices": nil]), "notifications[0]: a target is required: filter or devices (or users) (S4)"),
        (startNotification(["filter": "FILTER_NAME_1"]), "notifications[0]: give one target, not filter and devices (S4)"),
        (startNotification(["devices": nil, "filter": "NO_SUCH"]), "notifications[0].filter: no filter named 'NO_SUCH' in this application (create it with createFilter)"),
        (startNotification(["devices": []]), "notifications[0].devices: must hold at least one entry"),
        (startNotification(["devices": ["a", 5]]), "notifications[0].devices[1]: must be a non-empty string"),
        (startNotification(["send_date": "tomorrow"]), "notifications[0].send_date: must be \"now\" or a date and time as YYYY-MM-DD HH:mm, got 'tomorrow'"),
        (startNotification(["send_date": "2026-02-30 10:00"]), "notifications[0].send_date: must be \"now\" or a date and time as YYYY-MM-DD HH:mm, got '2026-02-30 10:00'"),
        (startNotification(["timezone": "Mars/Olympus"]), "notifications[0].timezone: unknown time zone 'Mars/Olympus' (use an IANA name such as Europe/Lisbon)"),
    ])
    func refusesBadNotificationsNamingTheField(notification: JSONObject, message: String) throws {
        let response = try start([notification])
        #expect(response.status == 400)
        #expect(response.message == message)
    }

    @Test func oneBadNotificationRejectsTheWholeRequest() throws {
        let response = try start([startNotification(id: "A"), startNotification(activity: ["content-state": nil], id: "B")])
        #expect(response.message == "notifications[1].live_activity.content-state: is required")
        #expect(try world.running.server.messages.activity("A", in: ApplicationCode(world.code)!) == nil, "nothing half-applied (E4)")
        Thread.sleep(forTimeInterval: 0.1)
        #expect(world.transport.pushes.isEmpty)
    }

    @Test func eachNotificationGetsItsOwnUniqueCodeInOrder() throws {
        let codes = try world.messageCodes(try start([startNotification(id: "A"), startNotification(id: "B"), startNotification(id: "C")]))
        #expect(codes.count == 3 && Set(codes).count == 3)
        #expect(codes.allSatisfy { $0.range(of: #"^[A-Z0-9]{5}-[A-Z0-9]{8}-[A-Z0-9]{8}$"#, options: .regularExpression) != nil })
        let details = try world.waitUntilSent(codes)
        #expect(details.map(\.activityID) == ["A", "B", "C"], "E5: codes in notification order")
    }

    @Test func anActiveIdCannotStartAgainUntilItEnds() throws {
        _ = try world.waitUntilSent(try world.messageCodes(try start([startNotification()])))
        let again = try start([startNotification()])
        #expect(again.status == 400)
        #expect(again.message == "notifications[0].live_activity_id: 'ORDER_1' is still active in this application; end it before starting it again (S3)")
        let twice = try start([startNotification(id: "X"), startNotification(id: "X")])
        #expect(twice.message == "notifications[1].live_activity_id: 'X' is already started by notifications[0] of this request (S3)")

        _ = try world.waitUntilSent(try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(event: "end"))]])))
        #expect(try start([startNotification()]).status == 200, "after the end, the id starts a new session")
    }

    /// S6, and issue 12: ten however it is written; any other value is 5 without an error, but named in a warning.
    @Test(arguments: [(JSONValue.int(10), "10", false), (.int(5), "5", false), (.int(7), "5", true), (.string("10"), "10", false),
                      (.double(10), "10", false), (.string("5"), "5", false), (.string("high"), "5", true), (.null, "5", false)])
    func priorityIsTenOnlyWhenAskedFor(priority: JSONValue, header: String, warned: Bool) throws {
        let response = try start([startNotification(["apns_priority": priority])])
        _ = try world.waitUntilSent(try world.messageCodes(response))
        #expect(!world.transport.pushes.isEmpty)
        #expect(world.transport.pushes.allSatisfy { $0.priority == Int(header)! }, "S6")
        let warnings = response.json?.objectValue?["response"]?.objectValue?["warnings"]?.arrayValue ?? []
        #expect(warnings == (warned ? [.string("notifications[0].apns_priority: \(priority.jsonText) is neither 5 nor 10, so the push goes at priority 5 (S6)")] : []))
    }

    /// Issue 12: a misspelt field is not silently ignored: the answer names it, with the nearest known name.
    @Test func unknownFieldsAreNamedInWarnings() throws {
        let response = try start([startNotification(["dryrun": true, "live_activty_id": "typo"], activity: ["contentstate": [:]])])
        #expect(response.status == 200)
        let warnings = Set((response.json?.objectValue?["response"]?.objectValue?["warnings"]?.arrayValue ?? []).compactMap(\.stringValue))
        #expect(warnings == ["notifications[0].dryrun: unknown field, ignored (did you mean dry_run?)",
                             "notifications[0].live_activty_id: unknown field, ignored (did you mean live_activity_id?)",
                             "notifications[0].live_activity.contentstate: unknown field, ignored (did you mean content-state?)"])
    }

    /// Issue 12: `dry_run` inside the notification is honoured: nothing is stored or sent.
    @Test func aDryRunInsideTheNotificationSendsNothing() throws {
        let response = try start([startNotification(["dry_run": true])])
        #expect(response.status == 200)
        let answer = try #require(response.json?.objectValue?["response"]?.objectValue)
        #expect(answer["Messages"] == [] && answer["dry_run"]?.arrayValue?.isEmpty == false)
        world.running.server.delivery?.kick()
        #expect(world.transport.pushes.isEmpty)
        #expect(try start([startNotification()]).status == 200, "the dry run started nothing, so the id is free")
        let mixed = try start([startNotification(["dry_run": true], id: "A"), startNotification(id: "B")])
        #expect(mixed.status == 400)
        #expect(mixed.message == "dry_run: set in notifications[0] but not in every notification; a request is sent whole or not at all, so put \"dry_run\": true beside notifications (X3)")
    }

    @Test func pushwooshActivityIdIsAddedUnlessTheCallerSetIt() throws {
        let codes = try world.messageCodes(try start([
            startNotification(activity: ["attributes": ["restaurant": "Mario's", "pushwoosh": ["activityId": "CUSTOM"]]], id: "A"),
            startNotification(activity: ["attributes": ["pushwoosh": ["other": 1]]], id: "B"),
        ]))
        _ = try world.waitUntilSent(codes)
        func attributes(_ id: String) -> JSONValue? {
            world.transport.pushes.compactMap { try? JSONParser.parse($0.payload) }
                .first { $0.objectValue?["aps"]?.objectValue?["attributes"]?.objectValue?["pushwoosh"] != nil && $0.jsonText.contains(id) }?
                .objectValue?["aps"]?.objectValue?["attributes"]
        }
        #expect(attributes("CUSTOM") == ["restaurant": "Mario's", "pushwoosh": ["activityId": "CUSTOM"]])
        #expect(attributes("\"B\"") == ["pushwoosh": ["other": 1, "activityId": "B"]])
    }

    @Test func payloadsOverFourKilobytesAreRefusedWithTheirSize() throws {
        let big = String(repeating: "x", count: 4000)
        let response = try start([startNotification(activity: ["content-state": ["text": .string(big)]])])
        #expect(response.status == 400)
        let message = try #require(response.message)
        #expect(message.hasPrefix("notifications[0]: the APNs payload would be "))
        #expect(message.hasSuffix(" bytes, over Apple's limit of 4096 (A4); shorten content-state, attributes or the alert"))
    }

    @Test func theSameActivityOnManyDevicesIsOneActivityAndOthersAreUntouched() throws {
        _ = try world.waitUntilSent(try world.messageCodes(try start([startNotification(id: "ONE"), startNotification(id: "TWO")])))
        for (hwid, token) in [("first_third", "d1"), ("second_device", "d2")] {
            try world.reportUpdateToken(hwid, activity: "ONE", token: LiveActivityWorld.hex(token, 40))
            try world.reportUpdateToken(hwid, activity: "TWO", token: LiveActivityWorld.hex(token + "0", 20))
        }
        world.transport.reset()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "ONE"))]])))
        #expect(Set(world.transport.pushes.map(\.deviceToken)) == [LiveActivityWorld.hex("d1", 40), LiveActivityWorld.hex("d2", 40)], "S8")
        let activity = try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "TWO"]))["live_activity"]?.objectValue
        #expect(activity?["content_state"] == ["status": "Third", "estimatedTime": "37 min"], "the other activity is untouched")
        #expect(activity?["devices"]?.arrayValue?.count == 2)
    }

    @Test func usersTargetEveryDeviceOfTheUser() throws {
        for hwid in ["first_third", "second_device"] {
            try world.expectOK(call(world.running.port, "registerDevice", [
                "application": .string(world.code), "hwid": .string(hwid),
                "push_token": .string(LiveActivityWorld.devices.first { $0.hwid == hwid }!.push), "userId": "alice",
            ], token: world.auth))
        }
        _ = try world.waitUntilSent(try world.messageCodes(try start([startNotification(["devices": nil, "users": ["alice"]])])))
        #expect(world.transport.pushes.count == 2)
    }

    @Test func aDryRunShowsTheExactPushesAndSendsNothing() throws {
        let response = try world.expectOK(try start([startNotification(["devices": nil, "filter": "FILTER_NAME_1", "apns_priority": 10])],
                                                    extra: ["dry_run": true]))
        #expect(response["Messages"] == [])
        let run = try #require(response["dry_run"]?.arrayValue?.first?.objectValue)
        #expect(run["targets"] == 5)
        let pushes = try #require(run["pushes"]?.arrayValue)
        let first = try #require(pushes.first { $0.objectValue?["hwid"] == "first_third" }?.objectValue)
        #expect(first["path"] == .string("/3/device/\(LiveActivityWorld.hex("51", 80))"))
        #expect(first["headers"]?.objectValue?["apns-push-type"] == "liveactivity")
        #expect(first["headers"]?.objectValue?["apns-priority"] == "10")
        #expect(first["payload"]?.objectValue?["aps"]?.objectValue?["event"] == "start")
        #expect(first["bytes"]?.intValue ?? 0 > 100)
        // S7: iOS 16.1–17.1 cannot be started remotely, and gets the fallback alert (issue 45) unless it is turned off.
        let mid = try #require(pushes.first { $0.objectValue?["hwid"] == "mid_phone" }?.objectValue)
        #expect(mid["headers"]?.objectValue?["apns-push-type"] == "alert")
        let off = try world.expectOK(try start([startNotification(["devices": nil, "filter": "FILTER_NAME_1", "fallback_alert": false])],
                                               extra: ["dry_run": true]))
        let skips = off["dry_run"]?.arrayValue?.first?.objectValue?["pushes"]?.arrayValue?.compactMap { $0.objectValue?["skipped"]?.stringValue } ?? []
        #expect(Set(skips) == ["iOS 16.1–17.1", "iOS below 16.1", "no push-to-start token"], "\(skips)")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(world.transport.pushes.isEmpty)
        #expect(try world.running.server.messages.activity("ORDER_1", in: ApplicationCode(world.code)!) == nil, "a dry run stores nothing")
    }
}

@Suite("updateLiveActivity rules (U1–U6)")
struct UpdateRulesTests {
    let world: LiveActivityWorld

    init() throws {
        world = try LiveActivityWorld()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: LiveActivityWorld.hex("e1", 40))
        try world.reportUpdateToken("second_device", activity: "ORDER_1", token: LiveActivityWorld.hex("e2", 40))
        world.transport.reset()
    }

    func update(_ notifications: [JSONObject]) throws -> RawHTTPResponse {
        try world.server("updateLiveActivity", ["notifications": .array(notifications.map { .object($0) })])
    }

    func sentAPS(_ notification: JSONObject) throws -> [JSONObject] {
        _ = try world.waitUntilSent(try world.messageCodes(try update([notification])))
        return world.transport.pushes.compactMap { try? JSONParser.parse($0.payload).objectValue?["aps"]?.objectValue }
    }

    @Test(arguments: [
        (updateNotification(id: "NOPE"), "notifications[0].live_activity_id: no activity 'NOPE' in this application; start it with startLiveActivity first (U1)"),
        (updateNotification(activity: ["event": nil]), "notifications[0].live_activity.event: is required: \"update\" or \"end\""),
        (updateNotification(activity: ["event": "start"]), "notifications[0].live_activity.event: must be \"update\" or \"end\" (start with startLiveActivity)"),
        (updateNotification(activity: ["content-state": nil]), "notifications[0].live_activity.content-state: is required"),
        (updateNotification(activity: ["dismissal-date": "soon"]), "notifications[0].live_activity.dismissal-date: must be a date as an integer of seconds since 1970 (e.g. 1767225600), got string"),
        (updateNotification(activity: ["relevance-score": 0]), "notifications[0].live_activity.relevance-score: must be an integer of at least 1"),
        (updateNotification(activity: ["relevance-score": 1.5]), "notifications[0].live_activity.relevance-score: must be an integer, got number"),
        (updateNotification(activity: ["stale-date": true]), "notifications[0].live_activity.stale-date: must be a date as an integer of seconds since 1970 (e.g. 1767225600), got boolean"),
        (updateNotification(["live_activity_id": nil]), "notifications[0].live_activity_id: is required"),
        // Issue 48: a missing required field names the given field that looks like its misspelling.
        (updateNotification(["live_activity_id": nil, "live_activty_id": "ORDER_1"]),
         "notifications[0].live_activity_id: is required; notifications[0].live_activty_id was given: is it live_activity_id misspelt?"),
        (updateNotification(activity: ["content-state": nil, "content_state": ["step": 2]]),
         "notifications[0].live_activity.content-state: is required; notifications[0].live_activity.content_state was given: is it content-state misspelt?"),
    ])
    func refusesBadUpdatesNamingTheField(notification: JSONObject, message: String) throws {
        let response = try update([notification])
        #expect(response.status == 400)
        #expect(response.message == message)
    }

    @Test func aSilentUpdateCarriesNoAlertAndNoSound() throws {
        let aps = try sentAPS(updateNotification(["ios_sound": "ding.caf"]))
        #expect(aps.count == 2)
        #expect(aps.allSatisfy { $0["alert"] == nil && $0["sound"] == nil && $0["event"] == "update" }, "U6")
    }

    @Test func anAlertingUpdateCarriesTheSoundInsideTheAlert() throws {
        let aps = try sentAPS(updateNotification(["title": "Almost there", "subtitle": "Driver nearby", "content": "2 min", "ios_sound": "ding.caf"]))
        #expect(aps.first?["alert"] == ["title": "Almost there", "subtitle": "Driver nearby", "body": "2 min", "sound": "ding.caf"])
        #expect(aps.first?["sound"] == nil, "never top-level aps.sound (U6)")
    }

    @Test func relevanceAndStaleDatesPassThrough() throws {
        let aps = try sentAPS(updateNotification(activity: ["relevance-score": 60, "stale-date": 1_900_000_000]))
        #expect(aps.first?["relevance-score"] == 60)
        #expect(aps.first?["stale-date"] == 1_900_000_000)
        #expect(aps.first?["dismissal-date"] == nil)
    }

    @Test func anEndWithoutDismissalDateCarriesNone() throws {
        let end = try world.messageCodes(try update([updateNotification(event: "end")]))
        _ = try world.waitUntilSent(end)
        let aps = world.transport.pushes.compactMap { try? JSONParser.parse($0.payload).objectValue?["aps"]?.objectValue }
        #expect(aps.first?["event"] == "end")
        #expect(aps.first?.keys.contains("dismissal-date") == false, "U3: the card stays up to 4 h")
        let after = try update([updateNotification()])
        #expect(after.message == "notifications[0].live_activity_id: 'ORDER_1' has ended; it takes no more updates (U1)")
        // Issue 45: the same end again (a backend retrying after a timeout) worked the first time: 200, the first end's
        // code, a warning, and nothing stored or sent.
        let pushes = world.transport.pushes.count
        let again = try world.expectOK(try update([updateNotification(event: "end")]))
        #expect(again["Messages"] == [.string(end[0])])
        #expect(again["warnings"] == [.string("notifications[0]: 'ORDER_1' had already ended (message \(end[0])); nothing was sent again (U1)")])
        let dry = try world.expectOK(try update([updateNotification(event: "end")].map { $0.merging(["dry_run": true]) }))
        #expect(dry["dry_run"]?.arrayValue?.first?.objectValue?["targets"] == 0, "\(dry)")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(world.transport.pushes.count == pushes)
    }

    @Test func anEndWithAPastDismissalDateCarriesIt() throws {
        let aps = try sentAPS(updateNotification(activity: ["dismissal-date": 1_000_000_000], event: "end"))
        #expect(aps.first?["dismissal-date"] == 1_000_000_000)
    }

    @Test func devicesWhereTheActivityEndedOrWhoseTokenDiedAreSkippedAndCounted() throws {
        try world.expectOK(call(world.running.port, "setActivityToken", [
            "application": .string(world.code), "hwid": "first_third", "activity_id": "ORDER_1", "activity_token": "",
        ], token: world.auth))
        let codes = try world.messageCodes(try update([updateNotification()]))
        let details = try world.waitUntilSent(codes)
        #expect(details.first?.skipped == ["activity ended on device": 1])
        #expect(world.transport.pushes.map(\.deviceToken) == [LiveActivityWorld.hex("e2", 40)])
    }

    @Test func updatesGoOutInOrderWithRisingTimestamps() throws {
        var codes: [String] = []
        for status in ["a", "b", "c"] {
            codes += try world.messageCodes(try update([updateNotification(activity: ["content-state": ["status": .string(status)]])]))
            world.clock.advance(1)
        }
        let details = try world.waitUntilSent(codes)
        let toFirst = world.pushes(to: LiveActivityWorld.hex("e1", 40)).compactMap { try? JSONParser.parse($0.payload).objectValue?["aps"]?.objectValue }
        // In order, and the latest state last; an update still waiting when a newer one came was
        // superseded (latest state wins, issue 10) rather than sent late.
        let statuses = toFirst.compactMap { $0["content-state"]?.objectValue?["status"]?.stringValue }
        #expect(statuses.last == "c" && statuses == statuses.sorted() && Set(statuses).count == statuses.count, "\(statuses)")
        let stamps = toFirst.compactMap { $0["timestamp"]?.intValue }
        #expect(stamps == stamps.sorted() && Set(stamps).count == stamps.count)
        for (code, detail) in zip(codes, details) where !statuses.contains(["a", "b", "c"][codes.firstIndex(of: code)!]) {
            #expect(detail.supersededBy != nil && detail.targeted == 0, "\(code) neither sent nor superseded")
        }
    }
}
