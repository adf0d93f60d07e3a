import Foundation
import Testing
import IsletCore
import IsletStore

/// A9 through the API on the server's test clock: a burst of updates to one activity reaches the phone as
/// its latest state, one interval after the last update that went out; an end is not held back.
@Suite("Update pacing through the API (A9)")
struct UpdatePacingAPITests {
    static let token = LiveActivityWorld.hex("e1", 40)

    func statuses(_ world: LiveActivityWorld) -> [String] {
        world.pushes(to: Self.token).compactMap { (try? JSONParser.parse($0.payload))?.objectValue?["aps"]?.objectValue?["content-state"]?.objectValue?["status"]?.stringValue }
    }

    func update(_ world: LiveActivityWorld, _ status: String, event: String = "update") throws -> String {
        try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["status": .string(status), "estimatedTime": "1 min"]], event: event))]]))[0]
    }

    func started() throws -> LiveActivityWorld {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.token)
        return world
    }

    @Test func aBurstGoesAsItsLatestStateOneIntervalAfterTheLastUpdate() throws {
        let world = try started()
        let first = try update(world, "1")
        _ = try world.waitUntilSent([first])
        let burst = try (2...6).map { try update(world, "\($0)") }
        let details = try #require(try world.running.server.messages.messageDetails(code: burst[4], in: ApplicationCode(world.code)!))
        #expect(details.state == .pending && abs(details.dueAt.timeIntervalSince(world.clock.now.addingTimeInterval(1))) < 0.002,
                "the latest waits for its turn, one interval after the first")
        let shown = try world.expectOK(try world.server("getMessageDetails", ["message": .string(burst[4])]))["message"]?.objectValue
        #expect(shown?["status"] == "scheduled")
        world.nextUpdateTurn()
        _ = try world.waitUntilSent(burst)
        #expect(statuses(world) == ["1", "6"], "the phone gets the latest state, not a burst of stale ones")
        for (code, newer) in zip(burst, burst.dropFirst()) {
            let older = try world.expectOK(try world.server("getMessageDetails", ["message": .string(code)]))["message"]?.objectValue
            #expect(older?["status"] == "superseded" && older?["superseded_by"] == .string(newer), "each taken over by the next")
        }
    }

    @Test func anUpdateSupersededBeforeItWentSpendsNoBudget() throws {
        let world = try started()
        _ = try world.running.serverAdmin().setUpdateBudget(for: ApplicationCode(world.code)!, perHour: 3, frequentPerHour: nil)
        func priority10(_ status: String) throws -> String {
            try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(["apns_priority": 10],
                activity: ["content-state": ["status": .string(status), "estimatedTime": "1 min"]]))]]))[0]
        }
        _ = try world.waitUntilSent([try priority10("1")])
        let burst = try (2...6).map { try priority10("\($0)") }
        world.nextUpdateTurn()
        _ = try world.waitUntilSent(burst)
        world.nextUpdateTurn()
        _ = try world.waitUntilSent([try priority10("7")])
        world.nextUpdateTurn()
        _ = try world.waitUntilSent([try priority10("8")])
        let sent = world.pushes(to: Self.token).map { push in
            "\((try? JSONParser.parse(push.payload))?.objectValue?["aps"]?.objectValue?["content-state"]?.objectValue?["status"]?.stringValue ?? "?")@\(push.priority)"
        }
        #expect(sent == ["1@10", "6@10", "7@10", "8@5"], "the burst's four superseded updates left the budget of 3 alone: \(sent)")
    }

    @Test func anEndIsNotHeldBack() throws {
        let world = try started()
        _ = try world.waitUntilSent([try update(world, "1")])
        let waiting = try update(world, "2")
        let end = try update(world, "Delivered", event: "end")
        let details = try world.waitUntilSent([end])
        #expect(details.first?.sent == 1, "the end went at once, on the same clock")
        #expect(statuses(world) == ["1", "Delivered"])
        let older = try world.expectOK(try world.server("getMessageDetails", ["message": .string(waiting)]))["message"]?.objectValue
        #expect(older?["status"] == "superseded")
    }

    @Test func pacingOffSendsEveryUpdate() throws {
        let world = try LiveActivityWorld(configure: { $0.updatePacing = .off })
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.token)
        for n in 1...3 { _ = try world.waitUntilSent([try update(world, "\(n)")]) }
        #expect(statuses(world) == ["1", "2", "3"])
    }
}
