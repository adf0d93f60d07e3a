import Foundation
import Testing
import IsletCore
import IsletStore
import IsletDelivery
import Synchronization

/// A8, `renew: true`, through the API on the server's test clock: shortly before iOS's 8 hours, Islet ends
/// the card and starts it again by push-to-start with the latest state, and renews the new session too.
@Suite("Activity renewal through the API (A8)")
struct ActivityRenewalAPITests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)   // 2027-01-15 08:00 UTC
    static let firstToken = LiveActivityWorld.hex("e1", 40)
    static let secondToken = LiveActivityWorld.hex("e2", 40)
    static let pushToStart = LiveActivityWorld.hex("51", 80)   // first_third's

    func aps(_ pushes: [Push]) -> [JSONObject] {
        pushes.compactMap { (try? JSONParser.parse($0.payload))?.objectValue?["aps"]?.objectValue }
    }

    func activity(_ world: LiveActivityWorld) throws -> JSONObject {
        try #require(try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue)
    }

    func iso(_ date: Date) -> JSONValue { .string(date.formatted(.iso8601)) }

    /// X5: an activity started on a channel is renewed on it: the old card's end goes to the channel as a
    /// broadcast, and once that has gone the new start subscribes the phone again (`input-push-channel`).
    @Test func anActivityStartedOnAChannelIsRenewedOnIt() throws {
        let world = try LiveActivityWorld(transport: .withChannels(), clock: TestClock(Self.t0))
        _ = try world.expectOK(try world.server("createLiveActivityChannel", ["name": "match-1", "environment": "production"]))
        let startToken = LiveActivityWorld.hex("53", 80)   // second_device's, iOS 18
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["devices": ["second_device"], "renew": true, "channel": "match-1"]))]])))
        #expect(aps(world.pushes(to: startToken)).first?["input-push-channel"] == "Y2hhbm5lbC0x")
        func isBroadcast(_ push: Push) -> Bool { if case .broadcast = push.route { true } else { false } }
        world.clock.advance(8 * 3600 - ActivityRenewal.lead)
        world.running.server.delivery?.kick()
        #expect(eventually { world.transport.pushes.contains(where: isBroadcast) }, "the old card's end went to the channel")
        #expect(aps(world.transport.pushes.filter(isBroadcast)).map { $0["event"] } == ["end"])
        #expect(eventually {
            if world.pushes(to: startToken).count < 2 {
                world.clock.advance(1)
                world.running.server.delivery?.kick()
            }
            return world.pushes(to: startToken).count == 2
        }, "the new start went out")
        let restart = try #require(aps(world.pushes(to: startToken)).last)
        #expect(restart["event"] == "start" && restart["input-push-channel"] == "Y2hhbm5lbC0x", "the new card listens to the channel too")
        let endIndex = try #require(world.transport.pushes.firstIndex(where: isBroadcast))
        let startIndex = try #require(world.transport.pushes.lastIndex { $0.deviceToken == startToken })
        #expect(endIndex < startIndex, "the old card ends before the new one starts")
    }

    @Test func aRenewedActivityEndsAndStartsAgainWithItsLatestStateBeforeEightHours() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["devices": ["first_third"], "renew": true], activity: ["stale-date": .int(Int64(Self.t0.timeIntervalSince1970) + 3600)]))]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstToken)
        let firstRenewal = Self.t0.addingTimeInterval(8 * 3600 - ActivityRenewal.lead)
        #expect(try activity(world)["renews_at"] == iso(firstRenewal))
        world.nextUpdateTurn()
        let updateCode = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        _ = try world.waitUntilSent([updateCode])
        // An update held for after the renewal belongs to the activity, not to one session of it.
        let held = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            ["send_date": "2027-01-15 15:55"], activity: ["content-state": ["status": "At your door", "estimatedTime": "0 min"]]))]]))[0]
        #expect(world.pushes(to: Self.pushToStart).count == 1)

        world.clock.advance(firstRenewal.timeIntervalSince(world.clock.now) - 1)
        #expect(try world.running.server.messages.releaseScheduledUpdates(at: world.clock.now, limit: 10, pacing: .off) == 0, "not due yet")
        world.clock.advance(1)
        world.running.server.delivery?.kick()
        #expect(eventually { world.pushes(to: Self.firstToken).count == 2 }, "the old card's end went out")
        let now = Int64(firstRenewal.timeIntervalSince1970)
        // The old card: ended with its latest state, dismissed at once.
        let end = try #require(aps(world.pushes(to: Self.firstToken)).last)
        #expect(end["event"] == "end" && end["alert"] == nil)
        #expect(end["dismissal-date"] == JSONValue.int(now) && end["timestamp"] == JSONValue.int(now))
        // The end's code, once recorded; once it is done the new card starts (at the latest the next time
        // the workers look: a second on, on the test clock).
        var endCode: String?
        #expect(try eventually {
            endCode = try activity(world)["devices"]?.arrayValue?.first?.objectValue?["last_message"]?.stringValue
            return endCode != nil && endCode != updateCode
        })
        _ = try world.waitUntilSent([try #require(endCode)])
        if world.pushes(to: Self.pushToStart).count < 2 {
            world.clock.advance(1)
            world.running.server.delivery?.kick()
        }
        #expect(eventually { world.pushes(to: Self.pushToStart).count == 2 }, "the new start went out")
        #expect(end["content-state"]?.objectValue?["status"] == "On its way")
        // The new card: the same start with the latest state, now; its stale-date long past, left out.
        let start = try #require(aps(world.pushes(to: Self.pushToStart)).last)
        let original = try #require(aps(world.pushes(to: Self.pushToStart)).first)
        let restartedAt = Date(timeIntervalSince1970: Double(start["timestamp"]?.intValue ?? 0))
        #expect(start["event"] == "start" && [now, now + 1].contains(start["timestamp"]?.intValue ?? 0))
        #expect(start["content-state"]?.objectValue?["status"] == "On its way")
        #expect(start["attributes"] == original["attributes"] && start["alert"] == original["alert"])
        #expect(start["attributes-type"] == original["attributes-type"])
        #expect(original["stale-date"] != nil && start["stale-date"] == nil)
        let end2Index = try #require(world.transport.pushes.lastIndex { $0.deviceToken == Self.firstToken })
        let startIndex = try #require(world.transport.pushes.lastIndex { $0.deviceToken == Self.pushToStart })
        #expect(end2Index < startIndex, "the old card ends before the new one starts")

        let renewed = try activity(world)
        #expect(renewed["state"] == "active" && renewed["started_at"] == iso(restartedAt))
        #expect(renewed["renews_at"] == iso(restartedAt.addingTimeInterval(8 * 3600 - ActivityRenewal.lead)), "the new session is renewed too")
        // The phone reports the new card's token; updates go to it, the held one included.
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.secondToken)
        world.clock.advance(10 * 60)
        world.running.server.delivery?.kick()
        _ = try world.waitUntilSent([held])
        #expect(aps(world.pushes(to: Self.secondToken)).last?["content-state"]?.objectValue?["status"] == "At your door")
        #expect(world.pushes(to: Self.firstToken).count == 2, "nothing more to the old card's token")
    }

    @Test func anActivityEndedBeforeItsRenewalIsNotRenewed() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["devices": ["first_third"], "renew": true]))]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstToken)
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(event: "end"))]])))
        #expect(try activity(world)["renews_at"] == .null, "an end stops the renewals at once")
        world.clock.advance(8 * 3600)
        world.running.server.delivery?.kick()
        #expect(try world.running.server.messages.releaseScheduledUpdates(at: world.clock.now, limit: 10, pacing: .off) == 0,
                "an ended activity's renewal is dropped, not taken")
        #expect(world.pushes(to: Self.pushToStart).count == 1)
        #expect(try activity(world)["renews_at"] == .null)
    }

    /// APNs refuses the old card's end for a while: the new card waits for the end's retry, so the phone never
    /// shows both, and an update meanwhile does not cancel that retry.
    @Test func theNewCardWaitsForTheOldCardsEndThroughARetry() throws {
        let refusals = Mutex(1)
        let transport = RecordingTransport { push, _ in
            let isEnd = (try? JSONParser.parse(push.payload))?.objectValue?["aps"]?.objectValue?["event"] == "end"
            return isEnd && refusals.withLock { left in defer { left -= 1 }; return left > 0 } ? PushOutcome(status: 503, reason: "ServiceUnavailable") : .delivered
        }
        let world = try LiveActivityWorld(transport: transport, clock: TestClock(Self.t0))
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["devices": ["first_third"], "renew": true]))]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstToken)
        world.clock.advance(8 * 3600 - ActivityRenewal.lead)
        world.running.server.delivery?.kick()
        #expect(eventually { world.pushes(to: Self.firstToken).count == 1 }, "the end went, and APNs refused it")
        // An update while the end waits for its retry goes to the old card, and does not supersede the end.
        // (It goes after the end's message is done: one activity's messages go in order.)
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["status": "Landed", "estimatedTime": "0 min"]]))]]))[0]
        _ = try world.waitUntilSent([update])
        // The renewal looks again a quarter of a second on; the end's retry is not due before half a second.
        world.clock.advance(0.3)
        #expect(try world.running.server.messages.releaseScheduledUpdates(at: world.clock.now, limit: 10, pacing: .off) == 0)
        #expect(try activity(world)["started_at"] == iso(Self.t0), "no new card while the old one may still show")
        // The retry goes (backoff on the test clock), then the new card, with the latest state.
        #expect(eventually {
            world.clock.advance(5)
            world.running.server.delivery?.kick()
            return world.pushes(to: Self.pushToStart).count == 2
        })
        let ends = world.pushes(to: Self.firstToken).filter { (try? JSONParser.parse($0.payload))?.objectValue?["aps"]?.objectValue?["event"] == "end" }
        #expect(ends.count == 2, "the end was retried, not superseded by the update")
        let endIndex = try #require(world.transport.pushes.lastIndex { $0 == ends.last })
        let startIndex = try #require(world.transport.pushes.lastIndex { $0.deviceToken == Self.pushToStart })
        #expect(endIndex < startIndex)
        let start = try #require(aps(world.pushes(to: Self.pushToStart)).last)
        #expect(start["content-state"]?.objectValue?["status"] == "Landed")
    }

    @Test func renewMustBeABoolean() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        let refused = try world.server("startLiveActivity", ["notifications": [.object(startNotification(["renew": "yes"]))]])
        #expect(refused.status == 400 && refused.message == "notifications[0].renew: must be a boolean, got string")
        let plain = try world.expectOK(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["renew": false]))]]))
        #expect(plain["warnings"] == nil)
        #expect(try activity(world)["renews_at"] == .null)
    }
}
