import Foundation
import Testing
import IsletCore
import IsletStore

/// Issue 12, D5: the device API token is public (it ships in the app), so a device may attach an update
/// token only to an activity meant for it; otherwise anyone could read another customer's updates.
@Suite("Joining an activity (D5)")
struct ActivityJoinTests {
    let world: LiveActivityWorld
    let deviceToken: String

    init() throws {
        world = try LiveActivityWorld()
        deviceToken = try world.running.admin().issueToken(for: ApplicationCode(world.code)!, kind: .device, label: "app").secret
        for (hwid, user, byte) in [("attacker", "mallory", "c1"), ("alice_phone", "alice", "c2"), ("alice_ipad", "alice", "c3"),
                                   ("bob_phone", "bob", "c4"), ("bob_ipad", "bob", "c5")] {
            _ = try world.expectOK(call(world.running.port, "registerDevice", [
                "application": .string(world.code), "hwid": .string(hwid), "push_token": .string(LiveActivityWorld.hex(byte, 32)),
                "userId": .string(user), "os_version": "17.4"], token: deviceToken))
        }
    }

    func report(_ hwid: String, _ activity: String, byte: String, token: String? = nil) throws -> RawHTTPResponse {
        try call(world.running.port, "setActivityToken", ["application": .string(world.code), "hwid": .string(hwid),
                                                          "activity_id": .string(activity), "activity_token": .string(LiveActivityWorld.hex(byte, 40))],
                 token: token ?? deviceToken)
    }

    @Test func anotherCustomersActivityCannotBeJoinedWithTheAppsToken() throws {
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(
            startNotification(["devices": ["first_third"]], id: "ORDER_42"))]]))[0]])
        let refused = try report("attacker", "ORDER_42", byte: "66")
        #expect(refused.status == 403)
        #expect(refused.message == "activity_id: this device may not join activity 'ORDER_42': its start did not address this device (start it with devices or users that include it) (D5)")
        #expect(try world.running.server.devices.activityTokens(hwid: "attacker", in: ApplicationCode(world.code)!).isEmpty, "nothing written")
        #expect(try report("first_third", "ORDER_42", byte: "e1").status == 200, "the addressed device reports as usual")

        world.transport.reset()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "ORDER_42"))]])))
        #expect(world.transport.pushes.map(\.deviceToken) == [LiveActivityWorld.hex("e1", 40)], "the update goes to first_third only")
        #expect(try report("attacker", "ORDER_42", byte: "66", token: world.auth).status == 200, "the backend's server token is trusted")
    }

    @Test func aClaimedUserIDOpensNothingButAStartByUserReachesEveryDeviceOfTheUser() throws {
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(
            startNotification(["devices": ["alice_phone"]], id: "ORDER_7"))]]))[0]])
        // Anyone can call registerDevice with the app's token and claim Alice's User ID: that proves nothing.
        _ = try world.expectOK(call(world.running.port, "registerDevice", [
            "application": .string(world.code), "hwid": "attacker", "push_token": .string(LiveActivityWorld.hex("c1", 32)), "userId": "alice"],
            token: deviceToken))
        #expect(try report("attacker", "ORDER_7", byte: "66").status == 403)
        #expect(try report("alice_ipad", "ORDER_7", byte: "a7").status == 403, "not addressed by the start")
        // A start by User ID addresses every device of the user, so the customer's iPad joins.
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(
            startNotification(["devices": .null, "users": ["bob"]], id: "ORDER_8"))]]))[0]])
        #expect(try report("bob_ipad", "ORDER_8", byte: "b8").status == 200)
    }

    /// Issue 44: an application may take User IDs from its server only. The app's claim is then not stored (and the
    /// answer says so), a start by User ID does not reach the device that claimed it, and the server still sets one.
    @Test func anApplicationThatTakesUserIDsFromItsServerStoresNoneTheAppClaims() throws {
        let code = try #require(ApplicationCode(world.code))
        let register = { (userID: String, token: String) throws -> JSONObject in
            try world.expectOK(call(world.running.port, "registerDevice", [
                "application": .string(world.code), "hwid": "attacker", "push_token": .string(LiveActivityWorld.hex("c1", 32)),
                "userId": .string(userID)], token: token))
        }
        let userID = { () throws -> JSONValue? in
            try call(world.running.port, "getTags", ["application": .string(world.code), "hwid": "attacker"], token: deviceToken)
                .json?.objectValue?["response"]?.objectValue?["result"]?.objectValue?["User ID"]
        }
        #expect(try register("alice", deviceToken)["warnings"] == nil, "by default the app sets it, as with Pushwoosh")
        #expect(try userID() == "alice")
        _ = try register("mallory", deviceToken)

        try world.running.serverAdmin().setUserIDSource(for: code, .server)
        #expect(try world.expectOK(world.server("getApplication", [:]))["application"]?.objectValue?["user_ids_from"] == "server")
        #expect(try register("alice", deviceToken)["warnings"] == [.string(UserIDSource.ignoredWarning)])
        #expect(try userID() == "mallory", "the app's claim was not stored")
        let start = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(
            startNotification(["devices": .null, "users": ["alice"]], id: "ORDER_U"))]]))[0]
        _ = try world.waitUntilSent([start])
        let details = try world.expectOK(world.server("getMessageDetails", ["message": .string(start)]))["message"]?.objectValue ?? [:]
        #expect(details["counts"]?.objectValue?["targeted"] == 2, "alice's phone and iPad, not the device that claimed her ID: \(details)")

        #expect(try register("alice", world.auth)["warnings"] == nil, "the backend's server token sets it")
        #expect(try userID() == "alice")
    }

    @Test func aRestartedActivityAdmitsOnlyTheDevicesOfItsNewStart() throws {
        func start(_ devices: [JSONValue]) throws {
            _ = try world.waitUntilSent([try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(
                startNotification(["devices": .array(devices)], id: "ORDER_9"))]]))[0]])
        }
        try start(["alice_phone"])
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(
            updateNotification(id: "ORDER_9", event: "end"))]])))
        try start(["bob_phone"])   // S3: the id starts a new session after its end
        #expect(try report("alice_phone", "ORDER_9", byte: "a9").status == 403, "the last session's device is not addressed now")
        #expect(try report("bob_phone", "ORDER_9", byte: "b9").status == 200)
    }

    @Test func aDeviceInTheAudienceOfAStartNotSentYetMayJoin() throws {
        // A scheduled start has recorded no device yet; its target decides (as for a fan-out under way).
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        let later = formatter.string(from: world.clock.now.addingTimeInterval(7200))
        _ = try world.expectOK(world.server("startLiveActivity", ["notifications": [.object(
            startNotification(["devices": ["alice_phone"], "send_date": .string(later)], id: "ORDER_10"))]]))
        #expect(try report("alice_phone", "ORDER_10", byte: "aa").status == 200)
        #expect(try report("attacker", "ORDER_10", byte: "66").status == 403)
    }

    @Test func anActivityStartedOnAPhoneBelongsToItsReporter() throws {
        #expect(try report("bob_phone", "LOCAL_1", byte: "b1").status == 200, "the first report defines it")
        #expect(try report("bob_phone", "LOCAL_1", byte: "b2").status == 200, "a member renews its token")
        let refused = try report("bob_ipad", "LOCAL_1", byte: "b3")
        #expect(refused.status == 403)
        #expect(refused.message?.hasSuffix("it runs on other devices (D5)") == true)
        #expect(try report("attacker", "LOCAL_1", byte: "66").status == 403)
        #expect(try call(world.running.port, "setActivityToken", ["application": .string(world.code), "hwid": "attacker",
                                                                  "activity_id": "LOCAL_1", "activity_token": ""], token: deviceToken).status == 200,
                "ending (an empty token) joins nothing and is always accepted")
        #expect(try report("bob_ipad", "LOCAL_1", byte: "b3", token: world.auth).status == 200, "the backend may add a device")
    }
}

@Suite("Joining an activity (D5): phone-started activities refused")
struct PhoneStartedActivitiesTests {
    @Test func aServerThatRefusesThemAcceptsOnlyActivitiesItStarted() throws {
        let running = try RunningServer(configure: { $0.phoneStartedActivities = .refuse })
        let code = ApplicationCode("XXXXX-XXXXX")!
        let device = try running.admin().issueToken(for: code, kind: .device, label: "app").secret
        func report(_ activity: String, token: String) throws -> RawHTTPResponse {
            try call(running.port, "setActivityToken", ["application": "XXXXX-XXXXX", "hwid": "first_third", "activity_id": .string(activity),
                                                        "activity_token": .string(LiveActivityWorld.hex("f1", 40))], token: token)
        }
        let refused = try report("GUESSABLE_1", token: device)
        #expect(refused.status == 403 && refused.message?.hasSuffix("this server takes no phone-started activities (D5)") == true)
        #expect(try report("GUESSABLE_1", token: "SECRET_API_TOKEN").status == 200, "the backend may bind one")
    }
}

/// Issue 12: getLiveActivity pages its devices with a cursor instead of silently stopping at 1,000.
@Suite("getLiveActivity paging")
struct LiveActivityPagingTests {
    @Test func everyDeviceComesOnceAcrossPages() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]]))[0]])
        for (hwid, byte) in [("old_phone", "d1"), ("mid_phone", "d2"), ("portuguese", "d3")] {
            try world.reportUpdateToken(hwid, activity: "ORDER_1", token: LiveActivityWorld.hex(byte, 40))
        }
        var seen: [String] = [], cursor: JSONValue = .null, pages = 0
        repeat {
            var fields: JSONObject = ["live_activity_id": "ORDER_1", "limit": 2]
            if cursor != .null { fields["cursor"] = cursor }
            let answer = try #require(try world.expectOK(world.server("getLiveActivity", fields))["live_activity"]?.objectValue)
            let devices = answer["devices"]?.arrayValue ?? []
            #expect(devices.count <= 2)
            #expect(answer["device_count"] == .int(5))
            seen += devices.compactMap { $0.objectValue?["hwid"]?.stringValue }
            cursor = answer["next_cursor"] ?? .null
            pages += 1
        } while cursor != .null && pages < 10
        #expect(pages == 3)
        #expect(seen.count == 5 && Set(seen) == ["first_third", "second_device", "old_phone", "mid_phone", "portuguese"])
        for (field, value, message) in [("limit", JSONValue.int(0), "limit: must be an integer from 1 to 1000"),
                                        ("limit", .int(1001), "limit: must be an integer from 1 to 1000"),
                                        ("cursor", .string("abc"), "cursor: must be the next_cursor of a previous getLiveActivity answer")] {
            let refused = try world.server("getLiveActivity", ["live_activity_id": "ORDER_1", .init(field): value])
            #expect(refused.status == 400 && refused.message == message)
        }
    }
}
