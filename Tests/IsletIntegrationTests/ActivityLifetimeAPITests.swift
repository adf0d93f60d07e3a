import Foundation
import Testing
import IsletCore
import IsletStore

/// A8 through the API, on the server's test clock: iOS ends an activity 8 hours after its start, so later
/// updates reach no device; getLiveActivity shows when it ends and leaves the lock screen.
@Suite("Activity lifetime through the API (A8)")
struct ActivityLifetimeAPITests {
    static let updateToken = LiveActivityWorld.hex("e1", 40)

    @Test func updatesPastEightHoursAreSkippedWithTheReasonAndAWarning() throws {
        let world = try LiveActivityWorld()
        let startedAt = world.clock.now
        let start = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]]))
        _ = try world.waitUntilSent(start)
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.updateToken)

        world.clock.advance(7 * 3600)
        let early = try world.expectOK(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))
        #expect(early["warnings"] == nil)
        let earlyCode = try #require(early["Messages"]?.arrayValue?.first?.stringValue)
        #expect(try world.waitUntilSent([earlyCode]).first?.sent == 1)

        world.clock.advance(3600 + 12 * 60)
        let late = try world.expectOK(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(["apns_priority": 10]))]]))
        #expect(late["warnings"] == [.string("notifications[0].live_activity_id: activity 'ORDER_1' started 8 h 12 min ago, and iOS ends a Live Activity after 8 hours, so this reaches no device (A8); start a new activity to go on showing it")])
        let lateCode = try #require(late["Messages"]?.arrayValue?.first?.stringValue)
        let details = try #require(try world.waitUntilSent([lateCode]).first)
        #expect(details.skipped == ["activity past its 8-hour lifetime": 1] && details.sent == 0)
        #expect(world.pushes(to: Self.updateToken).count == 1, "only the early update went out")

        let activity = try #require(try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue)
        func iso(_ date: Date) -> JSONValue { .string(Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)).formatted(.iso8601)) }
        #expect(activity["started_at"] == iso(startedAt))
        #expect(activity["ends_by"] == iso(startedAt.addingTimeInterval(8 * 3600)))
        #expect(activity["dismiss_at"] == iso(startedAt.addingTimeInterval(12 * 3600)), "iOS ended it: on the lock screen 4 hours more")
    }

    @Test func anEndKeepsItsDismissalTimeAndANewSessionStartsItsOwnEightHours() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]])))
        world.clock.advance(3600)
        let endedAt = world.clock.now
        let end = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["status": "Delivered", "estimatedTime": "0 min"], "dismissal-date": .int(Int64(endedAt.timeIntervalSince1970) + 900)],
            event: "end"))]]))
        _ = try world.waitUntilSent(end)
        var activity = try #require(try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue)
        #expect(activity["state"] == "ended")
        #expect(activity["dismiss_at"] == .string(Date(timeIntervalSince1970: (endedAt.timeIntervalSince1970 + 900).rounded(.down)).formatted(.iso8601)))

        world.clock.advance(8 * 3600)
        let restartedAt = world.clock.now
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]])))
        activity = try #require(try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue)
        #expect(activity["started_at"] == .string(Date(timeIntervalSince1970: restartedAt.timeIntervalSince1970.rounded(.down)).formatted(.iso8601)))
        #expect(activity["dismiss_at"] == .null, "running again")
        let update = try world.expectOK(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]]))
        #expect(update["warnings"] == nil, "the new session is 0 hours old")
    }
}
