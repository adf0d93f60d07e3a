import Foundation
import IsletAPI
import Testing
import IsletCore
import IsletDelivery
import IsletApp
import IsletStore
import IsletSQL
import IsletSQLite
import Synchronization

/// Delivery under APNs outages, lost answers, late and changing tokens, and a slow application (issue 10),
/// through the HTTP API with a scripted transport and a test clock: no sleeps, every wait has a deadline.
@Suite("Reliable delivery: outages, lost answers, late tokens, latest state (issue 10)")
struct ReliableDeliveryTests {
    static let firstStart = LiveActivityWorld.hex("51", 80), secondStart = LiveActivityWorld.hex("53", 80)
    static let firstUpdate = LiveActivityWorld.hex("e1", 40), secondUpdate = LiveActivityWorld.hex("e2", 40)

    func details(_ world: LiveActivityWorld, _ code: String) throws -> MessageDetails? {
        try world.running.server.messages.messageDetails(code: code, in: ApplicationCode(world.code)!)
    }

    /// The message's `counts` as getMessageDetails answers them.
    func apiCounts(_ world: LiveActivityWorld, _ code: String) throws -> JSONObject {
        try world.expectOK(try world.server("getMessageDetails", ["message": .string(code)]))["message"]?.objectValue?["counts"]?.objectValue ?? [:]
    }

    /// The device `hwid` as getLiveActivity lists it under ORDER_1 (asked of `running`, the world's server by default).
    func listedDevice(_ world: LiveActivityWorld, _ hwid: String, on running: RunningServer? = nil) throws -> JSONObject? {
        let answer = try call((running ?? world.running).port, "getLiveActivity",
                              ["application": .string(world.code), "auth": .string(world.auth), "live_activity_id": "ORDER_1"])
        let activity = try world.expectOK(answer)["live_activity"]?.objectValue
        return activity?["devices"]?.arrayValue?.compactMap(\.objectValue).first { $0["hwid"] == .string(hwid) }
    }

    /// getMessageDetails' `next_attempt_at` of `code`.
    func apiNextAttempt(_ world: LiveActivityWorld, _ code: String) throws -> JSONValue? {
        try world.expectOK(try world.server("getMessageDetails", ["message": .string(code)]))["message"]?.objectValue?["next_attempt_at"]
    }

    /// Moves the server's clock `step` seconds at a time until `condition` holds (or 10 s of real time pass).
    func advanceUntil(_ world: LiveActivityWorld, step: TimeInterval, _ condition: () throws -> Bool) rethrows -> Bool {
        try world.running.advanceUntil(world.clock, step: step, condition)
    }

    func started(_ world: LiveActivityWorld, id: String = "ORDER_1", devices: [JSONValue] = ["first_third", "second_device"]) throws -> String {
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": .array(devices)], id: id))]]))
        return codes[0]
    }

    @Test func anOutageLosesNothing() throws {
        let outage = Atomic<Bool>(false)
        let transport = RecordingTransport { _, _ in outage.load(ordering: .relaxed) ? PushOutcome(status: 503, reason: "ServiceUnavailable") : .delivered }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent([try started(world)])
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        try world.reportUpdateToken("second_device", activity: "ORDER_1", token: Self.secondUpdate)
        outage.store(true, ordering: .relaxed)
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        // Five minutes of 503s: the pushes keep being retried, never given up.
        #expect(advanceUntil(world, step: 10) { world.clock.now.timeIntervalSince(world.transport.pushes.first?.expiration.map { Date(timeIntervalSince1970: Double($0 - 3600)) } ?? world.clock.now) > 300 })
        // The clock stops here, so a retry in flight (`sending`) comes back as `retrying`: both still owed,
        // each waiting for its next attempt.
        var during: MessageDetails?
        #expect(try eventually { during = try details(world, update); return during?.pending[.retrying] == 2 }, "\(String(describing: during))")
        #expect(during?.sent == 0 && during?.failed == 0, "\(String(describing: during))")
        #expect(during?.nextAttemptAt != nil)
        #expect(world.pushes(to: Self.firstUpdate).count > 3, "retried during the outage")
        outage.store(false, ordering: .relaxed)
        #expect(try advanceUntil(world, step: 10) { try details(world, update)?.sent == 2 }, "delivered once APNs is back")
        let after = try #require(try details(world, update))
        #expect(after.pending.isEmpty && after.failed == 0)
    }

    /// Retries are rows, not timers: a retry owed when the server stops is made by the next run, when due, as the
    /// same request.
    @Test func aRetryOwedAtShutdownIsMadeAfterTheRestart() throws {
        let transport = RecordingTransport { push, _ in
            push.deviceToken == Self.firstUpdate ? PushOutcome(status: 503, reason: "ServiceUnavailable") : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent([try started(world, devices: ["first_third"])])
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        #expect(try eventually { try details(world, update)?.pending[.retrying] == 1 })
        let refused = try #require(world.pushes(to: Self.firstUpdate).first)
        // getLiveActivity shows the device's push waiting, and when it is tried next (the message's next attempt).
        let waiting = try listedDevice(world, "first_third")
        #expect(waiting?["last_delivery"] == "retrying" && waiting?["last_message"] == .string(update) && waiting?["last_status"] == 503)
        let nextAttempt = try apiNextAttempt(world, update)
        #expect(waiting?["next_attempt_at"]?.stringValue != nil && waiting?["next_attempt_at"] == nextAttempt, "\(String(describing: waiting))")
        world.running.stop()

        let second = RecordingTransport()
        let restarted = try world.restarted(transport: second)
        let application = try #require(ApplicationCode(world.code))
        let retried = { second.pushes.first { $0.deviceToken == Self.firstUpdate } }
        // Past the retry's next attempt (seconds away, at most a minute).
        #expect(restarted.advanceUntil(world.clock, step: 10) { retried() != nil }, "the restarted server made the retry")
        #expect(retried()?.apnsID == refused.apnsID && retried()?.payload == refused.payload, "the same request as before the restart")
        #expect(try eventually { try restarted.server.messages.messageDetails(code: update, in: application)?.sent == 1 })
        let sent = try listedDevice(world, "first_third", on: restarted)
        #expect(sent?["last_delivery"] == "sent" && sent?["next_attempt_at"] == .null && sent?["attempts"] == 2)
    }

    /// A retry freed by a rescue is due at once (stored as due at 0): its next attempt reads as now, not 1970.
    @Test func aNextAttemptAlreadyDueReadsAsNow() {
        let now = Date(timeIntervalSince1970: 1_900_000_000)
        #expect(LiveActivityMethods.nextAttempt(Date(timeIntervalSince1970: 0), now: now) == .string(now.formatted(.iso8601)))
        #expect(LiveActivityMethods.nextAttempt(now.addingTimeInterval(30), now: now) == .string(now.addingTimeInterval(30).formatted(.iso8601)))
    }

    @Test func aStartWhoseAnswerWasLostWaitsForTheDeviceInsteadOfMakingASecondCard() throws {
        // Both start pushes reach "APNs" but the answers are lost; first_third's app then reports its token.
        let transport = RecordingTransport { push, _ in
            push.pushType == .liveActivity && [Self.firstStart, Self.secondStart].contains(push.deviceToken) ? .unknown("connection lost before APNs answered") : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        let code = try started(world)
        #expect(try eventually { try details(world, code)?.pending[.unconfirmed] == 2 })
        #expect(try apiCounts(world, code)["unconfirmed"] == 2)
        // getLiveActivity: not taking part yet (S8), but counted, with the time of the second copy.
        let waiting = try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue
        let secondCopyAt = try apiNextAttempt(world, code)
        #expect(waiting?["devices"]?.arrayValue?.isEmpty == true)
        #expect(secondCopyAt?.stringValue != nil && waiting?["unconfirmed_starts"] == ["count": 2, "next_attempt_at": secondCopyAt ?? .null])
        world.clock.advance(30)
        #expect(world.running.lookFindsNothing())
        #expect(world.pushes(to: Self.firstStart).count == 1 && world.pushes(to: Self.secondStart).count == 1, "not resent at once")

        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        #expect(try details(world, code)?.sent == 1, "the token confirms the start")
        let confirmed = try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue
        #expect(confirmed?["unconfirmed_starts"]?.objectValue?["count"] == 1)
        #expect(confirmed?["devices"]?.arrayValue?.map { $0.objectValue?["hwid"] } == ["first_third"], "the token made it take part")

        // Past the 60-second wait, second_device (no token) gets exactly one more copy, with the same apns-id.
        #expect(advanceUntil(world, step: 20) { world.pushes(to: Self.secondStart).count == 2 })
        let copies = world.pushes(to: Self.secondStart)
        #expect(copies[0].apnsID == copies[1].apnsID && copies[0].payload == copies[1].payload)
        // That copy's answer is lost too: after another wait it is failed, never a third copy.
        #expect(try advanceUntil(world, step: 20) { try details(world, code)?.failed == 1 })
        world.clock.advance(600)
        world.running.server.delivery?.kick()
        #expect(try eventually { try details(world, code)?.pending.isEmpty == true })
        #expect(world.pushes(to: Self.secondStart).count == 2, "at most two copies of one start")
        #expect(world.pushes(to: Self.firstStart).count == 1)
    }

    @Test func updatesAndTheEndBeforeTheTokenAreCaughtUpWhenItComes() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent([try started(world, devices: ["first_third"])])
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        #expect(try world.waitUntilSent([update]).first?.skipped == ["no update token yet": 1])
        world.clock.advance(5)
        let end = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            ["content": "Delivered!"], activity: ["content-state": ["status": "Delivered", "estimatedTime": "0 min"], "dismissal-date": 1_900_000_000],
            event: "end"))]]))[0]
        _ = try world.waitUntilSent([end])
        #expect(world.pushes(to: Self.firstUpdate).isEmpty)
        let endedAt = Int64(world.clock.now.timeIntervalSince1970)

        // The app reports its token a minute late: the device gets the end it missed, as it was, without the alert.
        world.clock.advance(60)
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        #expect(eventually { world.pushes(to: Self.firstUpdate).count == 1 })
        let push = try #require(world.pushes(to: Self.firstUpdate).first)
        let caughtUp = try #require(try JSONParser.parse(push.payload).objectValue?["aps"]?.objectValue)
        #expect(caughtUp["event"] == "end" && caughtUp["dismissal-date"] == 1_900_000_000)
        #expect(caughtUp["content-state"]?.objectValue?["status"] == "Delivered")
        #expect(caughtUp["alert"] == nil, "catch-up is alert-free")
        #expect(caughtUp["timestamp"]?.intValue == endedAt, "the end's own timestamp, not the time of the catch-up")
        #expect(try eventually { try details(world, end)?.caughtUp == 1 && details(world, end)?.sent == 1 })
        #expect(try apiCounts(world, end)["caught_up"] == 1)
        let device = try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue?["devices"]?.arrayValue?.first?.objectValue
        #expect(device?["caught_up"] == true && device?["state"] == "ended")
    }

    @Test func aChangedTokenGetsTheLatestStateAgain() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent([try started(world, devices: ["first_third"])])
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        _ = try world.waitUntilSent([update])
        #expect(world.pushes(to: Self.firstUpdate).count == 1)
        let rotated = LiveActivityWorld.hex("e9", 40)
        world.clock.advance(30)   // the catch-up keeps the update's timestamp (compared below, byte for byte)
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: rotated)
        #expect(eventually { world.pushes(to: rotated).count == 1 })
        #expect(world.pushes(to: rotated).first?.payload == CatchUpPayload.make(world.pushes(to: Self.firstUpdate)[0].payload))
        // Reporting the same token again sends nothing more.
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: rotated)
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: rotated)
        world.nextUpdateTurn()
        let update2 = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(activity: ["content-state": ["status": "x"]]))]]))[0]
        _ = try world.waitUntilSent([update2])
        #expect(world.pushes(to: rotated).count == 2, "the catch-up, then the next update; no repeats")
    }

    @Test func aTokenReportedWhileItsUpdateIsInFlightIsNotOverwrittenByTheBatchRecord() throws {
        // The update's batch reads its targets (second_device has no token yet), then blocks in APNs on
        // first_third's push; second_device reports its token meanwhile, which queues a catch-up. The batch's
        // "no update token yet" record, written after, must not overwrite that catch-up.
        let inFlight = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let transport = RecordingTransport { push, _ in
            if push.deviceToken == Self.firstUpdate { inFlight.signal(); _ = release.wait(timeout: .now() + 20) }
            return .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        defer { release.signal() }
        _ = try world.waitUntilSent([try started(world)])
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        #expect(inFlight.wait(timeout: .now() + 10) == .success, "the update's batch is in APNs")
        try world.reportUpdateToken("second_device", activity: "ORDER_1", token: Self.secondUpdate)
        release.signal()
        var latest: MessageDetails?
        #expect(try eventually { latest = try details(world, update); return world.pushes(to: Self.secondUpdate).count == 1 && latest?.sent == 2 },
                "\(String(describing: latest))")
        let after = try #require(try details(world, update))
        #expect(after.caughtUp == 1 && after.skipped.isEmpty && after.pending.isEmpty)
    }

    @Test func aNewerUpdateSupersedesARetryOfAnOlderOne() throws {
        let failing = Atomic<Bool>(false)
        let transport = RecordingTransport { push, _ in
            failing.load(ordering: .relaxed) && push.deviceToken == Self.firstUpdate
                ? PushOutcome(status: 503, reason: "ServiceUnavailable", retryAfter: .seconds(60)) : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent([try started(world, devices: ["first_third"])])
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        failing.store(true, ordering: .relaxed)
        let older = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(activity: ["content-state": ["status": "old"]]))]]))[0]
        #expect(try eventually { try details(world, older)?.pending[.retrying] == 1 })
        failing.store(false, ordering: .relaxed)
        world.clock.advance(1)
        let newer = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(activity: ["content-state": ["status": "new"]]))]]))[0]
        _ = try world.waitUntilSent([newer])
        #expect(try eventually { try details(world, newer)?.sent == 1 })
        #expect(try details(world, older)?.pending[.superseded] == 1, "counted as superseded, not failed")
        #expect(try apiCounts(world, older)["superseded"] == 1 && apiCounts(world, older)["failed"] == 0)
        world.clock.advance(120)
        world.running.server.delivery?.kick()
        #expect(try eventually { try details(world, older)?.pending[.retrying] == nil })
        let statuses = world.pushes(to: Self.firstUpdate).compactMap { try? JSONParser.parse($0.payload).objectValue?["aps"]?.objectValue?["content-state"]?.objectValue?["status"]?.stringValue }
        #expect(statuses.last == "new" && statuses.filter { $0 == "new" }.count == 1, "\(statuses)")
    }

    @Test func aSlowApplicationDoesNotHoldBackAnother() throws {
        let release = DispatchSemaphore(value: 0)
        let slowBundle = "com.example.slow"
        let transport = RecordingTransport { push, _ in
            if push.topic.hasPrefix(slowBundle) { _ = release.wait(timeout: .now() + 20) }
            return .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        defer { for _ in 0..<4 { release.signal() } }
        let slow = try world.running.admin().create(name: "Slow", bundleID: slowBundle)
        let slowToken = LiveActivityWorld.hex("77", 80)
        try world.expectOK(call(world.running.port, "registerDevice", ["application": .string(slow.application.code.rawValue), "hwid": "slow-phone",
                                                                        "push_token": .string(LiveActivityWorld.hex("78", 32))], token: slow.apiToken.secret))
        try world.expectOK(call(world.running.port, "setActivityPushToStartToken", ["application": .string(slow.application.code.rawValue), "hwid": "slow-phone",
                                                                                     "activity_push_to_start_token": .string(slowToken)], token: slow.apiToken.secret))
        for n in 0..<3 {
            try world.expectOK(call(world.running.port, "startLiveActivity", ["application": .string(slow.application.code.rawValue), "auth": .string(slow.apiToken.secret),
                "notifications": [.object(startNotification(["devices": ["slow-phone"]], id: "SLOW_\(n)"))]]))
        }
        #expect(eventually { world.transport.pushes.contains { $0.deviceToken == slowToken } }, "the slow application's APNs holds a worker")
        // Meanwhile the demo application's start goes out at once.
        let code = try started(world, devices: ["first_third"])
        #expect(try eventually(5) { try details(world, code)?.sent == 1 })
        #expect(world.pushes(to: Self.firstStart).count == 1)
    }
}

@Suite("Sharded fan-outs (issue 10)")
struct ShardedFanOutTests {
    @Test func aLargeStartIsSplitAndEveryTargetGetsItOnce() throws {
        let transport = RecordingTransport()
        let world = try LiveActivityWorld(transport: transport, delivery: DeliveryConfiguration(
            workers: 4, batchSize: 1, sharding: ShardPolicy(span: 2, maximum: 8), idlePoll: .milliseconds(50)))
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["filter": "FILTER_NAME_1", "devices": nil]))]]))
        let details = try #require(try world.waitUntilSent(codes).first)
        #expect(details.targeted == 5 && details.sent == 4, "\(details)")
        let tokens = transport.pushes.map(\.deviceToken)
        #expect(tokens.count == Set(tokens).count && tokens.count == 4, "each target once: \(tokens)")
        let shards = try Storage(StorageLocation(world.running.database)).database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT COUNT(*) AS shards, SUM(CASE WHEN state = 'done' THEN 1 ELSE 0 END) AS done FROM message_shards")[0]
        }
        #expect(shards["shards"].int ?? 0 > 1 && shards["shards"].int == shards["done"].int, "split into shards, all done")
    }
}
