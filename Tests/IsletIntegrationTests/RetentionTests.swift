import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

/// Issue 12: finished messages and their delivery records are deleted after the retention period, in
/// small batches; live activities keep theirs.
@Suite("Retention")
struct RetentionTests {
    func details(_ world: LiveActivityWorld, _ code: String) throws -> MessageDetails? {
        try world.running.server.messages.messageDetails(code: code, in: ApplicationCode(world.code)!)
    }

    @Test func oldFinishedMessagesGoInSmallBatchesAndLiveActivitiesKeepTheirs() throws {
        let world = try LiveActivityWorld()
        func start(_ id: String) throws -> String {
            try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["filter": "FILTER_NAME_1", "devices": .null], id: id))]]))[0]
        }
        let ended = try start("ORDER_1")
        let second = try world.server("startLiveActivity", ["notifications": [.object(startNotification(["filter": "FILTER_NAME_1", "devices": .null], id: "ORDER_2"))]])
        #expect(second.status == 200, "\(second.message ?? "")")
        let live = try world.messageCodes(second)[0]
        _ = try world.waitUntilSent([ended, live])
        let end = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "ORDER_1", event: "end"))]]))[0]
        let superseded = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "ORDER_2"))]]))[0]
        _ = try world.waitUntilSent([end, superseded])
        #expect(try details(world, ended)?.targeted == 5)

        world.clock.advance(31 * 86_400)
        // ORDER_2 is still being updated: its messages stay whatever their age.
        try world.reportUpdateToken("first_third", activity: "ORDER_2", token: LiveActivityWorld.hex("e7", 40))
        let recent = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "ORDER_2"))]]))[0]
        _ = try world.waitUntilSent([recent])

        var policy = RetentionPolicy(keep: .seconds(30 * 86_400))
        policy.batch = 2
        policy.pause = .zero
        let clock = world.clock
        let retention = RetentionService(messages: world.running.server.messages, policy: policy, logger: .discard, now: { clock.now })
        // One batch deletes at most `batch` records: the API never waits behind a big delete.
        let first = try world.running.server.messages.pruneFinished(before: world.clock.now.addingTimeInterval(-30 * 86_400), limit: 2)
        #expect(first.deliveries == 2 && first.messages == 0)
        let pruned = retention.pruneNow()
        #expect(pruned.messages == 3, "ORDER_1's start and end, and ORDER_2's old update that a newer one replaced")
        #expect(pruned.deliveries + first.deliveries == 5 + 2 + 2, "every record of them: 5 targets of the start, 2 of the end, 2 of the update")
        #expect(try details(world, ended) == nil && details(world, end) == nil && details(world, superseded) == nil)
        #expect(try details(world, live) != nil && details(world, recent) != nil, "a live activity keeps its start and latest update")
        let activity = try world.expectOK(world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue
        #expect(activity?["state"] == "ended" && activity?["content_state"] != .null, "the activity itself stays")
        let again = retention.pruneNow()
        #expect(again.deliveries == 0 && again.messages == 0)
    }

    @Test func retentionCanBeTurnedOff() throws {
        let world = try LiveActivityWorld()
        let off = RetentionService(messages: world.running.server.messages, policy: RetentionPolicy(keep: nil), logger: .discard)
        let nothing = off.pruneNow()
        #expect(nothing.deliveries == 0 && nothing.messages == 0)
        #expect(off.shutdown(deadline: .now + .seconds(1)))
    }
}
