import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletCrypto
import IsletSimulator
import IsletStore

@Suite("APNs simulator: Apple's checks over real HTTP/2 (issue 6)")
struct SimulatorReasonTests {
    let world: SimulatorWorld
    let raw: RawH2Client
    let device: SimulatedDevice

    init() throws {
        world = try SimulatorWorld()
        raw = try RawH2Client(port: world.simulator.port, ca: world.certificate)
        device = try world.addDevice("phone")
    }

    func token(_ key: SigningKey, issuedAt: Date = Date()) -> String { "bearer " + (key.providerToken(issuedAt: issuedAt) ?? "") }

    func request(token: String? = nil, path: String? = nil, authorization: String?? = nil, type: String? = "liveactivity",
                 topic: String? = "com.example.food.push-type.liveactivity", priority: String? = "10",
                 body: [UInt8] = Array(#"{"aps":{"event":"update"}}"#.utf8)) -> (status: Int, reason: String?, timestamp: Int64?) {
        var headers: [(name: String, value: String)] = [(":method", "POST"), (":scheme", "https"), (":authority", "127.0.0.1"),
                                                        (":path", path ?? "/3/device/\(token ?? device.pushToStartTokens[""]!)")]
        switch authorization {
        case .none: headers.append(("authorization", self.token(world.key)))
        case .some(.some(let value)): headers.append(("authorization", value))
        case .some(.none): break
        }
        if let type { headers.append(("apns-push-type", type)) }
        if let topic { headers.append(("apns-topic", topic)) }
        if let priority { headers.append(("apns-priority", priority)) }
        return raw.send(headers, body: body)
    }

    @Test func appleReasonsForBadRequests() throws {
        #expect(request(authorization: .some(nil)).reason == "MissingProviderToken")
        #expect(request(authorization: "bearer not.a.jwt").reason == "InvalidProviderToken")
        let forged = try SigningKey(APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both),
                                                   pem: Crypto.generateAPNsSigningKey()))
        #expect(request(authorization: token(forged)).reason == "InvalidProviderToken", "signed by another key")
        let expired = request(authorization: token(world.key, issuedAt: Date().addingTimeInterval(-7200)))
        #expect(expired.status == 403 && expired.reason == "ExpiredProviderToken")
        #expect(request(type: "carrier-pigeon").reason == "InvalidPushType")
        #expect(request(type: nil).reason == "InvalidPushType")
        #expect(request(topic: nil).reason == "MissingTopic")
        #expect(request(topic: "com.example.food").reason == "BadTopic", "a liveactivity push needs the .push-type.liveactivity topic")
        #expect(request(priority: "7").reason == "BadPriority")
        #expect(request(body: []).reason == "PayloadEmpty")
        let large = request(body: Array(repeating: UInt8(ascii: "x"), count: 4097))
        #expect(large.status == 413 && large.reason == "PayloadTooLarge")
        #expect(request(token: String(repeating: "ab", count: 32)).reason == "BadDeviceToken", "unknown token")
        #expect(request(path: "/3/device/not-hex").reason == "BadDeviceToken", "malformed token")
        #expect(request(authorization: token(world.otherKey), topic: "com.example.other.push-type.liveactivity").reason == "DeviceTokenNotForTopic")
        #expect(request().status == 200)
    }

    /// A broadcast's apns-priority is required, and one of 10, 5 and 1 (X5).
    @Test func aBroadcastNeedsOneOfApplesPriorities() throws {
        let channel = try #require(world.client.send([.manageChannels(application: world.app, gateway: .production, bundleID: "com.example.food",
                                                                      method: "POST", path: "channels", body: BroadcastChannels.createBody(.none).jsonBytes)])
            .first?.management?.channelID)
        func broadcast(priority: String?) -> (status: Int, reason: String?) {
            var headers: [(name: String, value: String)] = [
                (":method", "POST"), (":scheme", "https"), (":authority", "127.0.0.1"), (":path", "/4/broadcasts/apps/com.example.food"),
                ("authorization", token(world.key)), ("apns-channel-id", channel), ("apns-push-type", "liveactivity"), ("apns-expiration", "0"),
            ]
            if let priority { headers.append(("apns-priority", priority)) }
            let answer = raw.send(headers, body: Array(#"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#.utf8))
            return (answer.status, answer.reason)
        }
        #expect(broadcast(priority: nil) == (400, "BadPriority") && broadcast(priority: "7") == (400, "BadPriority"))
        #expect(broadcast(priority: "1") == (200, nil))
    }

    @Test func anUninstalledAppAnswers410WithItsTime() throws {
        _ = try APNsSimulator.withDevice(world.store, world.app, "phone") { $0.uninstalledAt = 1_700_000_000_000 }
        let answer = request()
        #expect(answer.status == 410 && answer.reason == "Unregistered" && answer.timestamp == 1_700_000_000_000)
    }

    @Test func oneStreamUntilTheFirstAuthenticatedRequest() throws {
        _ = request(authorization: .some(nil))
        #expect(raw.peerMaxStreams() == 1)
        _ = request()
        Thread.sleep(forTimeInterval: 0.05)
        #expect(raw.peerMaxStreams() == 1000, "A6: 1000 streams once a request with a valid token came")
    }
}

@Suite("APNs simulator: ActivityKit's behaviour (issue 6)")
struct SimulatorActivityKitTests {
    let world: SimulatorWorld
    init() throws { world = try SimulatorWorld() }

    @Test func aStartShowsTheActivityAndReportsItsUpdateTokenByPushwooshId() throws {
        let device = try world.addDevice("phone")
        #expect(world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("ORDER_1")).status == 200)
        let after = try world.device("phone")
        #expect(after.activities.map(\.activityID) == ["ORDER_1"])
        #expect(world.reportBox.all.map { [$0.hwid, $0.activity, $0.token] } == [["phone", "ORDER_1", after.activities[0].updateToken]])
    }

    @Test func updatesApplyUnlessOlderAndEndsFollowTheirDismissalDate() throws {
        let device = try world.addDevice("phone")
        _ = world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("A", timestamp: 100))
        let token = try world.device("phone").activities[0].updateToken
        _ = world.push(to: token, ["timestamp": 200, "event": "update", "content-state": ["step": 2], "stale-date": 1])
        #expect(world.push(to: token, ["timestamp": 150, "event": "update", "content-state": ["step": 9]]).status == 200, "APNs accepts it")
        var now = try world.device("phone")
        #expect(now.activities[0].contentState == #"{"step":2}"#)
        #expect(now.log.last?.dropped == "older than what the activity shows (timestamp 150 < 200)")
        #expect(now.lockScreen(now: Date()).arrayValue?.first?.objectValue?["stale"] == true, "stale-date passed")

        _ = world.push(to: token, ["timestamp": 300, "event": "end", "content-state": ["step": 3]])
        now = try world.device("phone")
        #expect(now.activities.first?.ended == true)
        let dismissAt = try #require(now.activities.first?.dismissAt)
        #expect(abs(dismissAt - Date().timeIntervalSince1970 - 4 * 3600) < 60, "an end without dismissal-date stays up to 4 h (U3)")

        _ = world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("B", timestamp: 100))
        let second = try world.device("phone").activities.first { $0.activityID == "B" }!.updateToken
        _ = world.push(to: second, ["timestamp": 200, "event": "end", "content-state": ["step": 4], "dismissal-date": 1])
        #expect(try world.device("phone").activities.map(\.activityID) == ["A"], "a past dismissal-date removes the card at once")
    }

    @Test func relevanceScoreOrdersTheLockScreen() throws {
        let device = try world.addDevice("phone")
        _ = world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("LOW", relevance: 10))
        _ = world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("HIGH", relevance: 90))
        let screen = try world.device("phone").lockScreen(now: Date()).arrayValue ?? []
        #expect(screen.map { $0.objectValue?["activity_id"] } == ["HIGH", "LOW"])
    }

    @Test func aLowPriorityUpdateToALockedDeviceShowsOnUnlock() throws {
        let device = try world.addDevice("phone", locked: true)
        _ = world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("A"))
        let token = try world.device("phone").activities[0].updateToken
        _ = world.push(to: token, ["timestamp": 200, "event": "update", "content-state": ["step": 2]], priority: 5)
        #expect(try world.device("phone").activities[0].contentState == #"{"step":1}"#, "locked: not visible yet")
        _ = world.push(to: token, ["timestamp": 300, "event": "update", "content-state": ["step": 3]], priority: 10)
        #expect(try world.device("phone").activities[0].contentState == #"{"step":3}"#, "priority 10 shows at once")
        _ = world.push(to: token, ["timestamp": 400, "event": "update", "content-state": ["step": 4]], priority: 5)
        _ = try APNsSimulator.withDevice(world.store, world.app, "phone") { $0.unlock() }
        #expect(try world.device("phone").activities[0].contentState == #"{"step":4}"#, "visible on unlock")
    }

    @Test func tooManyStartsInARowAreAcceptedAndSilentlyDropped() throws {
        let device = try world.addDevice("phone")
        let outcomes = (0..<12).map { world.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("S\($0)")) }
        #expect(outcomes.allSatisfy { $0.status == 200 }, "startLiveActivity still sees 200 (reference docs)")
        let after = try world.device("phone")
        #expect(after.activities.count == 10)
        #expect(after.log.filter { $0.dropped?.hasPrefix("push-to-start budget exhausted") == true }.count == 2)
    }

    @Test func aFallbackAlertShowsAsANotification() throws {
        let device = try world.addDevice("old", ios: "15.7")
        #expect(world.push(to: device.pushToken, ["alert": ["title": "Food Delivery", "body": "Your order is being prepared"]], type: .alert).status == 200)
        #expect(try world.device("old").alerts == ["Food Delivery: Your order is being prepared"])
    }

    @Test func goAwayAndDroppedConnectionsStillDeliverEveryPush() throws {
        var faults = SimulatorFaults()
        faults.goAwayEvery = 4
        faults.dropEvery = 7
        let flaky = try SimulatorWorld(faults: faults)
        let devices = try (0..<20).map { try flaky.addDevice("phone-\($0)") }
        let outcomes = devices.map { flaky.push(to: $0.pushToStartTokens[""]!, SimulatorWorld.start("A")) }
        #expect(outcomes.allSatisfy { $0.status == 200 }, "\(outcomes.filter { $0.status != 200 })")
        #expect(try devices.allSatisfy { try flaky.device($0.hwid).activities.count == 1 }, "each device started once")
    }

    @Test func faultsAreInjectedOnDemand() throws {
        var faults = SimulatorFaults()
        faults.unavailable = 1
        let failing = try SimulatorWorld(faults: faults)
        let device = try failing.addDevice("phone")
        let outcome = failing.push(to: device.pushToStartTokens[""]!, SimulatorWorld.start("A"))
        #expect(outcome.status == 503 && outcome.reason == "ServiceUnavailable")
    }
}

/// What a simulated phone's ActivityKit does on its own, at given times (no sockets): the hourly budget of
/// priority-10 updates (A7) and the 8-hour lifetime (A8).
@Suite("Simulated ActivityKit limits (A7, A8)")
struct SimulatedActivityKitLimitsTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// A phone running activity "A", started at `t0`; its update token.
    func phone(frequentUpdates: Bool? = nil) -> (device: SimulatedDevice, token: String) {
        var device = SimulatedDevice(application: "XXXXX-XXXXX", hwid: "p", iosVersion: "17.4", locked: false, pushToken: "aa",
                                     pushToStartTokens: ["": "bb"])
        device.frequentUpdates = frequentUpdates
        let started = device.receive(payload: JSONValue.object(["aps": SimulatorWorld.start("A", timestamp: 1)]).jsonBytes, token: "bb",
                                     pushType: .liveActivity, priority: 10, apnsID: "1", now: t0, newToken: { "cc" })
        return (device, started?.updateToken ?? "")
    }

    func update(_ device: inout SimulatedDevice, _ token: String, step: Int, at: Date, priority: Int = 10, event: String = "update") {
        let aps: JSONObject = ["timestamp": .int(Int64(100 + step)), "event": .string(event), "content-state": ["step": .int(Int64(step))]]
        _ = device.receive(payload: JSONValue.object(["aps": .object(aps)]).jsonBytes, token: token, pushType: .liveActivity,
                           priority: priority, apnsID: "u\(step)", now: at, newToken: { "" })
    }

    @Test func priorityTenUpdatesPastTheHourlyBudgetAreThrottledAndPriorityFiveAreNot() {
        var (device, token) = phone()
        for step in 1...12 { update(&device, token, step: step, at: t0.addingTimeInterval(Double(step))) }
        #expect(device.log.suffix(12).map { $0.dropped == nil } == Array(repeating: true, count: 10) + [false, false])
        #expect(device.log.last?.dropped == "throttled: the activity had its 10 priority-10 updates of the last hour (A7)")
        update(&device, token, step: 13, at: t0.addingTimeInterval(13), priority: 5)
        #expect(device.log.last?.dropped == nil && device.activities[0].contentState == #"{"step":13}"#, "priority 5 is not throttled")
        // An hour after the first ones, the budget is back.
        update(&device, token, step: 14, at: t0.addingTimeInterval(3602))
        #expect(device.log.last?.dropped == nil)

        var (frequent, frequentToken) = phone(frequentUpdates: true)
        for step in 1...12 { update(&frequent, frequentToken, step: step, at: t0.addingTimeInterval(Double(step))) }
        #expect(frequent.log.allSatisfy { $0.dropped == nil }, "frequent updates on: 60 an hour")
    }

    @Test func iOSEndsAnActivityAfterEightHoursAndRemovesItFourHoursLater() {
        var (device, token) = phone()
        update(&device, token, step: 1, at: t0.addingTimeInterval(8 * 3600 - 1))
        #expect(device.log.last?.dropped == nil, "still running just before 8 hours")
        update(&device, token, step: 2, at: t0.addingTimeInterval(8 * 3600 + 1))
        #expect(device.log.last?.dropped == "iOS ended the activity 8 hours after it started (A8)")
        #expect(device.activities.first?.ended == true && device.activities.first?.contentState == #"{"step":1}"#)
        update(&device, token, step: 3, at: t0.addingTimeInterval(8 * 3600 + 2), event: "end")
        #expect(device.log.last?.dropped == "iOS ended the activity 8 hours after it started (A8)", "an end too")
        #expect(device.lockScreen(now: t0.addingTimeInterval(12 * 3600 - 1)).arrayValue?.count == 1, "on the lock screen up to 12 hours")
        device.expire(now: t0.addingTimeInterval(12 * 3600))
        #expect(device.activities.isEmpty, "removed 12 hours after its start")
    }

    /// Islet's renewal (A8, `renew`) as the phone sees it: the old card ends and leaves at once, the new one
    /// shows the latest state and takes updates past the first start's 8 hours.
    @Test func aRenewalShowsOneCardThatOutlivesEightHours() throws {
        var (device, token) = phone()
        update(&device, token, step: 5, at: t0.addingTimeInterval(3600))
        let renewal = ActivityRenewal.dueAt(startedAt: t0), now = Int64(ActivityRenewal.dueAt(startedAt: t0).timeIntervalSince1970)
        _ = device.receive(payload: ActivityRenewal.endPayload(contentState: ["step": 5], timestamp: now).jsonBytes, token: token,
                           pushType: .liveActivity, priority: 10, apnsID: "end", now: renewal, newToken: { "" })
        let original = JSONValue.object(["aps": SimulatorWorld.start("A", timestamp: 1)]).jsonBytes
        let restart = try #require(ActivityRenewal.startPayload(original: original, contentState: ["step": 5], timestamp: now))
        let started = device.receive(payload: restart, token: "bb", pushType: .liveActivity, priority: 10, apnsID: "start", now: renewal,
                                     newToken: { "dd" })
        #expect(device.log.suffix(2).allSatisfy { $0.dropped == nil } && started?.updateToken == "dd")
        let later = t0.addingTimeInterval(8 * 3600 + 600)
        let aps: JSONObject = ["timestamp": .int(Int64(later.timeIntervalSince1970)), "event": "update", "content-state": ["step": 6]]
        _ = device.receive(payload: JSONValue.object(["aps": .object(aps)]).jsonBytes, token: "dd", pushType: .liveActivity,
                           priority: 10, apnsID: "u6", now: later, newToken: { "" })
        #expect(device.log.last?.dropped == nil, "the new card takes updates past the first start's 8 hours")
        let screen = device.lockScreen(now: later).arrayValue ?? []
        #expect(screen.count == 1, "the old card left at once")
        #expect(screen.first?.objectValue?["content_state"] == ["step": 6] && screen.first?.objectValue?["ended"] == false)
    }
}

@Suite("APNs simulator: phones found by their tokens")
struct SimulatorTokenIndexTests {
    /// A push finds its phone through the token index; phones saved before the index (or copied without it) are
    /// indexed when a simulator starts on the store.
    @Test func phonesSavedWithoutTheIndexAreFoundOnceASimulatorStarts() throws {
        let world = try SimulatorWorld()
        let indexed = try world.addDevice("indexed")
        #expect(try world.store.simulatedDevice(token: indexed.pushToStartTokens[""]!)?.hwid == "indexed")
        let legacy = SimulatedDevice(application: world.app.rawValue, hwid: "legacy", iosVersion: "17.4", locked: false,
                                     pushToken: APNsSimulator.token(bytes: 32), pushToStartTokens: ["": APNsSimulator.token(bytes: 40)])
        try world.store.saveSimulatedDevice(application: world.app, hwid: "legacy", state: String(decoding: try JSONEncoder().encode(legacy), as: UTF8.self),
                                            tokens: [])
        #expect(try world.store.simulatedDevice(token: legacy.pushToken) == nil)
        let keyFile = world.directory.appendingPathComponent("key.pem").path
        let restarted = try APNsSimulator(store: world.store, credentials: { _ in nil }, report: { _, _, _, _ in },
                                          tls: try TLSContext(serverCertificate: world.certificate, key: keyFile))
        restarted.stop()
        for token in legacy.tokens { #expect(try world.store.simulatedDevice(token: token)?.hwid == "legacy") }
        #expect(try world.store.unindexedSimulatedDevices().isEmpty)
    }
}

/// Issue 46: what a simulated Android phone does with an FCM data message, as the Pushwoosh Android SDK does.
@Suite("A simulated Android phone")
struct SimulatedAndroidBehaviourTests {
    static func phone(_ version: String = "16") -> SimulatedDevice {
        var device = SimulatedDevice(application: "APPAA-00001", hwid: "p", iosVersion: version, locked: false, pushToken: "fcm", pushToStartTokens: [:])
        device.platform = DevicePlatform.android.rawValue
        return device
    }

    static func data(_ op: String, id: String = "A", progress: Int? = nil, extra: JSONObject = [:]) -> JSONObject {
        var live: JSONObject = ["op": .string(op), "id": .string(id)]
        if let progress { live["progress"] = .int(Int64(progress)) }
        return (["pw_msg": "1", "header": "Match", "title": "0 – 0", "pw_live": .string(JSONValue.object(live).jsonText)] as JSONObject).merging(extra)
    }

    @Test func aStartAnUpdateAndAnEndDriveOneNotification() {
        var device = Self.phone()
        let now = Date(timeIntervalSince1970: 1_000)
        device.receiveFCM(data: Self.data("OPERATION_START", progress: 1), messageID: "m1", now: now)
        device.receiveFCM(data: Self.data("OPERATION_UPDATE", progress: 2, extra: ["title": "1 – 0"]), messageID: "m2", now: now)
        #expect(device.liveUpdates?.count == 1 && device.liveUpdates?.first?.progress == 2 && device.liveUpdates?.first?.text == "1 – 0")
        device.receiveFCM(data: Self.data("OPERATION_END"), messageID: "m3", now: now)
        #expect(device.liveUpdates == [] && device.log.map(\.dropped) == [nil, nil, nil])
    }

    @Test(arguments: [
        (["header": "x"] as JSONObject, "16", "not a Pushwoosh push (no pw_msg): the SDK ignores it"),
        (["pw_msg": "1", "pw_live": "{op"], "16", "pw_live is not valid JSON: the SDK drops the push ({op)"),
        (["pw_msg": "1", "pw_live": #"{"op":"start","id":"A"}"#], "16", "missing or invalid op / id in pw_live: the SDK drops the push"),
        (["pw_msg": "1", "pw_live": #"{"op":"OPERATION_START","id":""}"#], "16", "missing or invalid op / id in pw_live: the SDK drops the push"),
        (["pw_msg": "1", "pw_live": #"{"op":"OPERATION_START","id":"A"}"#], "15", "Android 15 has no Live Updates: the SDK drops the push (no renderer below API 36)"),
    ] as [(JSONObject, String, String)])
    func whatTheSDKDropsIsDroppedWithItsReason(data: JSONObject, version: String, reason: String) {
        var device = Self.phone(version)
        device.receiveFCM(data: data, messageID: "m", now: Date())
        #expect(device.log.last?.dropped == reason && (device.liveUpdates ?? []).isEmpty && device.alerts.isEmpty)
    }

    @Test func aPushWithoutPwLiveIsAnOrdinaryNotificationAndTheQuotaIsAMinute() {
        var device = Self.phone("14")
        device.receiveFCM(data: ["pw_msg": "1", "header": "Match", "title": "Kick-off"], messageID: "m", now: Date())
        #expect(device.alerts == ["Match: Kick-off"] && device.log.last?.pushType == .androidNotification)
        let now = Date(timeIntervalSince1970: 5_000)
        var admitted = 0
        for _ in 0..<SimulatedDevice.fcmMessagesPerMinute where device.admitFCMMessage(now: now) { admitted += 1 }
        #expect(admitted == SimulatedDevice.fcmMessagesPerMinute)
        let over = device.admitFCMMessage(now: now.addingTimeInterval(30)), later = device.admitFCMMessage(now: now.addingTimeInterval(61))
        #expect(!over, "the 241st in a minute: QUOTA_EXCEEDED")
        #expect(later, "a minute later it takes messages again")
    }
}
