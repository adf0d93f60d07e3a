import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

/// Golden tests: every example request of the reference documents, through the real server, to the
/// exact APNs requests per device (issue 4). Payloads are compared as decoded JSON.
@Suite("Reference examples → exact APNs requests")
struct ReferenceExampleTests {
    static let liveActivityTopic = "\(LiveActivityWorld.bundle).push-type.liveactivity"
    static let alert: JSONValue = ["title": "Food Delivery", "body": "Your order is being prepared"]

    enum Kind { case startWithFilter, startWithDevices, scheduledStart, update }

    static func kind(_ body: JSONValue) -> Kind? {
        guard let n = body.objectValue?["request"]?.objectValue?["notifications"]?.arrayValue?.first?.objectValue else { return nil }
        if n["send_date"] != nil { return .scheduledStart }
        if n["live_activity"]?.objectValue?["event"] == "update" { return .update }
        if n["filter"] != nil { return .startWithFilter }
        if n["devices"] != nil { return .startWithDevices }
        return nil
    }

    static func notification(_ body: JSONValue) -> JSONObject {
        body.objectValue!["request"]!.objectValue!["notifications"]!.arrayValue![0].objectValue!
    }

    /// The start payload of A4 for an example, at `timestamp`.
    static func startPayload(_ body: JSONValue, timestamp: Int64) -> JSONValue {
        let n = notification(body), activity = n["live_activity"]!.objectValue!
        return ["aps": [
            "timestamp": .int(timestamp), "event": "start", "content-state": activity["content-state"]!,
            "attributes-type": "FoodDeliveryAttributes",
            "attributes": ["pushwoosh": ["activityId": n["live_activity_id"]!]],
            "alert": alert,
        ]]
    }

    static func priority(_ body: JSONValue) -> Int { notification(body)["apns_priority"] == 10 ? 10 : 5 }

    /// The pushes a start makes in the example world: push-to-start tokens (the typed one wins),
    /// and the fallback alert for the devices below iOS 17.2 when the filter reaches them (S7: 15.7 and 16.4), with the
    /// keys that make the Pushwoosh SDK report its receipt: `pw_msg` and `p`, the message's code (issue 45).
    static func expectedStart(_ body: JSONValue, code: String, timestamp: Int64, withFallback: Bool) -> [ExpectedPush] {
        let payload = startPayload(body, timestamp: timestamp), priority = priority(body)
        var expected = [
            ExpectedPush(token: LiveActivityWorld.hex("51", 80), pushType: "liveactivity", topic: liveActivityTopic, priority: priority, payload: payload),
            ExpectedPush(token: LiveActivityWorld.hex("53", 80), pushType: "liveactivity", topic: liveActivityTopic, priority: priority, payload: payload),
        ]
        if withFallback {
            for token in [LiveActivityWorld.hex("a3", 32), LiveActivityWorld.hex("a4", 32)] {
                expected.append(ExpectedPush(token: token, pushType: "alert", topic: LiveActivityWorld.bundle,
                                             priority: priority, payload: ["aps": ["alert": alert], "pw_msg": "1", "p": .string(code)]))
            }
        }
        return expected
    }

    @Test func theReferenceDocumentsHoldEveryKindOfExample() throws {
        let examples = try ReferenceExamples.all()
        #expect(examples.count >= 8)
        let kinds = examples.map { Self.kind($0.body) }
        #expect(!kinds.contains(nil), "an example of a kind these tests do not know")
        for kind in [Kind.startWithFilter, .startWithDevices, .scheduledStart, .update] {
            #expect(kinds.contains(kind))
        }
    }

    @Test func startExamplesMakeExactlyTheDocumentedPushes() throws {
        for (file, body) in try ReferenceExamples.all() {
            guard let kind = Self.kind(body), kind == .startWithFilter || kind == .startWithDevices else { continue }
            let world = try LiveActivityWorld()
            let codes = try world.messageCodes(try world.post("startLiveActivity", body))
            #expect(codes.count == 1, "\(file)")
            let details = try world.waitUntilSent(codes)
            let timestamp = Int64(world.clock.now.timeIntervalSince1970)
            let expected = Self.expectedStart(body, code: codes[0], timestamp: timestamp, withFallback: kind == .startWithFilter)
            let sent = world.transport.pushes.map(ExpectedPush.init)
            #expect(sent.sorted { $0.path < $1.path } == expected.sorted { $0.path < $1.path }, "\(file)")
            #expect(world.transport.pushes.allSatisfy { UUID(uuidString: $0.apnsID) != nil })
            if kind == .startWithFilter {
                #expect(details.first?.targeted == 5)
                #expect(details.first?.sent == 4)
                #expect(details.first?.fallbackAlerts == 2)
                #expect(details.first?.skipped == ["no push-to-start token": 1])
            }
        }
    }

    @Test func theScheduledExampleFiresAtItsTimeAndIsRefusedOnceItsDateHasPassed() throws {
        let examples = try ReferenceExamples.all().filter { Self.kind($0.body) == .scheduledStart }
        #expect(!examples.isEmpty)
        for (file, body) in examples {
            let sendDate = try #require(Schedule.parse(Self.notification(body)["send_date"]!.stringValue!, in: TimeZone(identifier: "UTC")!))
            // At the documents' own time, half an hour before the send date: accepted and scheduled.
            let world = try LiveActivityWorld(clock: TestClock(sendDate.addingTimeInterval(-1800)))
            let codes = try world.messageCodes(try world.post("startLiveActivity", body))
            let scheduled = try world.expectOK(try world.server("getMessageDetails", ["message": .string(codes[0])]))
            #expect(scheduled["message"]?.objectValue?["status"] == "scheduled", "\(file)")
            Thread.sleep(forTimeInterval: 0.2)
            #expect(world.transport.pushes.isEmpty, "nothing before the send date")

            world.clock.advance(1800)
            _ = try world.waitUntilSent(codes)
            let expected = Self.expectedStart(body, code: codes[0], timestamp: Int64(sendDate.timeIntervalSince1970), withFallback: true)
            #expect(world.transport.pushes.map(ExpectedPush.init).sorted { $0.path < $1.path } == expected.sorted { $0.path < $1.path })

            // Today (2026-11-29 in this project's time) the same request is too old: S5 refuses it.
            let today = try LiveActivityWorld(clock: TestClock(sendDate.addingTimeInterval(86_400 * 2)))
            let refused = try today.post("startLiveActivity", body)
            #expect(refused.status == 400)
            #expect(refused.message == "notifications[0].send_date: 2026-06-16 16:00 (UTC) is more than 1 day in the past (S5)")
        }
    }

    @Test func updateExamplesReachEveryDeviceWhereTheActivityStarted() throws {
        let examples = try ReferenceExamples.all()
        let start = try #require(examples.first { Self.kind($0.body) == .startWithFilter }?.body)
        for (file, body) in examples where Self.kind(body) == .update {
            let world = try LiveActivityWorld()
            _ = try world.waitUntilSent(try world.messageCodes(try world.post("startLiveActivity", start)))
            try world.reportUpdateToken("first_third", activity: "FIRST_LIVE_ACTIVITY", token: LiveActivityWorld.hex("c1", 80))
            try world.reportUpdateToken("second_device", activity: "FIRST_LIVE_ACTIVITY", token: LiveActivityWorld.hex("c2", 80))
            world.transport.reset()
            world.clock.advance(60)

            let codes = try world.messageCodes(try world.post("updateLiveActivity", body))
            _ = try world.waitUntilSent(codes)
            let n = Self.notification(body)
            let payload: JSONValue = ["aps": [
                "timestamp": .int(Int64(world.clock.now.timeIntervalSince1970)), "event": "update",
                "content-state": n["live_activity"]!.objectValue!["content-state"]!, "relevance-score": 60,
                "alert": ["title": "Live Activity Update"],
            ]]
            let expected = ["c1", "c2"].map {
                ExpectedPush(token: LiveActivityWorld.hex($0, 80), pushType: "liveactivity", topic: Self.liveActivityTopic,
                             priority: Self.priority(body), payload: payload)
            }
            #expect(world.transport.pushes.map(ExpectedPush.init).sorted { $0.path < $1.path } == expected, "\(file)")
        }
    }
}
