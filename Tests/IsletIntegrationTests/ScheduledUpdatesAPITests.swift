import Foundation
import Testing
import IsletCore
import IsletStore

/// A11 through the API on the server's test clock: updates sent later with `send_date`, and the end a start's
/// `end_date` makes Islet send itself; both held apart until due, cancellable, and fired once across a restart.
@Suite("Scheduled updates and ends through the API (A11)")
struct ScheduledUpdatesAPITests {
    static let token = LiveActivityWorld.hex("e1", 40)
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)   // 2027-01-15 08:00 UTC

    func started(_ world: LiveActivityWorld, _ extra: JSONObject = [:]) throws -> JSONObject {
        let answer = try world.expectOK(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(extra.merging(["devices": ["first_third"]])))]]))
        _ = try world.waitUntilSent(answer["Messages"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.token)
        return answer
    }

    func aps(_ world: LiveActivityWorld) -> [JSONObject] {
        world.pushes(to: Self.token).compactMap { (try? JSONParser.parse($0.payload))?.objectValue?["aps"]?.objectValue }
    }

    func details(_ world: LiveActivityWorld, _ code: String) throws -> JSONObject? {
        try world.expectOK(try world.server("getMessageDetails", ["message": .string(code)]))["message"]?.objectValue
    }

    @Test func anUpdateWithASendDateGoesThenAndNotBefore() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        _ = try started(world)
        let later = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            ["send_date": "2027-01-15 08:10"], activity: ["content-state": ["status": "At your door", "estimatedTime": "0 min"]]))]]))[0]
        #expect(try details(world, later)?["status"] == "scheduled")
        #expect(try details(world, later)?["send_at"] == "2027-01-15T08:10:00Z")
        // An update for now goes now, and the held one does not hold it back.
        let now = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        _ = try world.waitUntilSent([now])
        #expect(aps(world).compactMap { $0["content-state"]?.objectValue?["status"]?.stringValue } == ["On its way"])
        #expect(try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue?["content_state"]?
            .objectValue?["status"] == "On its way", "a held update has not changed the activity yet")

        world.clock.advance(10 * 60)
        world.running.server.delivery?.kick()
        _ = try world.waitUntilSent([later])
        let sent = aps(world)
        #expect(sent.compactMap { $0["content-state"]?.objectValue?["status"]?.stringValue } == ["On its way", "At your door"])
        #expect(sent.last?["timestamp"] == .int(Int64(Self.t0.timeIntervalSince1970) + 600), "its own send time")
        #expect(try details(world, later)?["status"] == "done")
    }

    @Test func aHeldUpdateIsCancelledWithDeleteMessage() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        _ = try started(world)
        let later = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            ["send_date": "2027-01-15 09:00", "timezone": "Europe/Lisbon"]))]]))[0]
        try world.expectOK(try world.server("deleteMessage", ["message": .string(later)]))
        #expect(try details(world, later)?["status"] == "cancelled", "its code still answers")
        #expect(try world.running.server.messages.releaseScheduledUpdates(at: .distantFuture, limit: 10, pacing: .off) == 0, "nothing is held any more")
        // A dry run with a send_date holds nothing either.
        try world.expectOK(try world.server("updateLiveActivity", ["dry_run": true, "notifications": [.object(updateNotification(["send_date": "2027-01-15 09:00"]))]]))
        #expect(try world.running.server.messages.releaseScheduledUpdates(at: .distantFuture, limit: 10, pacing: .off) == 0)
        world.clock.advance(3600)
        let probe = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["status": "probe", "estimatedTime": "1 min"]]))]]))[0]
        _ = try world.waitUntilSent([probe])
        #expect(aps(world).compactMap { $0["content-state"]?.objectValue?["status"]?.stringValue } == ["probe"], "the cancelled one never went")
        let refused = try world.server("deleteMessage", ["message": .string(later)])
        #expect(refused.status == 400)
    }

    @Test func anEndDateEndsTheActivityWithItsLatestStateOnceAcrossARestart() throws {
        let clock = TestClock(Self.t0)
        let first = RecordingTransport()
        let world = try LiveActivityWorld(transport: first, clock: clock)
        let answer = try started(world, ["end_date": "2027-01-15 10:00"])
        let ends = answer["scheduled_ends"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(ends.count == 1 && ends.first?["live_activity_id"] == "ORDER_1" && ends.first?["send_at"] == "2027-01-15T10:00:00Z")
        let endCode = try #require(ends.first?["message"]?.stringValue)
        #expect(try details(world, endCode)?["status"] == "scheduled")
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["status": "Delivered", "estimatedTime": "0 min"]]))]]))[0]])
        world.running.stop()

        clock.advance(2 * 3600)
        let second = RecordingTransport()
        let restarted = try world.restarted(transport: second)
        #expect(try eventually { try restarted.server.messages.messageDetails(code: endCode, in: ApplicationCode(world.code)!)?.state == .done })
        let endPushes = second.pushes.filter { $0.deviceToken == Self.token }
        #expect(endPushes.count == 1, "fired once")
        let end = try #require(endPushes.first.flatMap { try? JSONParser.parse($0.payload).objectValue?["aps"]?.objectValue })
        #expect(end["event"] == "end" && end["alert"] == nil)
        #expect(end["content-state"]?.objectValue?["status"] == "Delivered", "the latest state")
        #expect(end["timestamp"] == .int(Int64(Self.t0.timeIntervalSince1970) + 7200))
        #expect(try restarted.server.messages.activity("ORDER_1", in: ApplicationCode(world.code)!)?.state == .ended)
    }

    @Test func anEndDateOfAnActivityEndedBeforeIsCancelledNotSent() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        let answer = try started(world, ["end_date": "2027-01-15 09:00"])
        let endCode = try #require(answer["scheduled_ends"]?.arrayValue?.first?.objectValue?["message"]?.stringValue)
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["status": "Delivered", "estimatedTime": "0 min"]], event: "end"))]]))[0]])
        world.clock.advance(3600)
        world.running.server.delivery?.kick()
        #expect(try eventually { try details(world, endCode)?["status"] == "cancelled" })
        #expect(aps(world).filter { $0["event"] == "end" }.count == 1, "only the app's own end")
    }

    @Test func aHeldEndOfAnActivityStartedAgainMeanwhileIsCancelled() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        _ = try started(world)
        let heldEnd = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            ["send_date": "2027-01-15 10:00"], activity: ["content-state": ["status": "old session", "estimatedTime": "0 min"]], event: "end"))]]))[0]
        _ = try world.waitUntilSent([try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(event: "end"))]]))[0]])
        world.clock.advance(5400)   // 09:30: ORDER_1 again
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]])))
        world.clock.advance(3600)   // 10:30, past the held end's 10:00
        world.running.server.delivery?.kick()
        var status: JSONValue?
        #expect(try eventually { status = try details(world, heldEnd)?["status"]; return status == "cancelled" }, "\(String(describing: status))")
        #expect(try world.running.server.messages.activity("ORDER_1", in: ApplicationCode(world.code)!)?.state == .active, "the new session runs on")
    }

    @Test func badScheduleFieldsAreRefusedNamingTheField() throws {
        let world = try LiveActivityWorld(clock: TestClock(Self.t0))
        for (fields, message) in [
            (["end_date": "2027-01-15 07:00"] as JSONObject, "notifications[0].end_date: 2027-01-15 07:00 (UTC) is not after the start (2027-01-15T08:00:00Z) (A11)"),
            (["end_date": "2027-01-15 16:01"], "notifications[0].end_date: 2027-01-15 16:01 (UTC) is more than 8 hours after the start: iOS ends a Live Activity after 8 hours (A8)"),
            (["end_date": "tomorrow"], "notifications[0].end_date: must be a date and time as YYYY-MM-DD HH:mm, got 'tomorrow'"),
        ] {
            let refused = try world.server("startLiveActivity", ["notifications": [.object(startNotification(fields))]])
            #expect(refused.status == 400 && refused.message == message, "\(refused.message ?? "")")
        }
        _ = try started(world)
        let late = try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(["send_date": "2027-03-01 08:00"]))]])
        #expect(late.status == 400 && late.message == "notifications[0].send_date: 2027-03-01 08:00 (UTC) is more than 30 days in the future (S5)")
    }
}
