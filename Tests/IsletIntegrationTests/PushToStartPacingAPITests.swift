import Foundation
import Testing
import IsletCore
import IsletSimulator
import IsletStore

/// A12 through the API on the server's test clock: 20 starts to one phone at once go as 10, then 10 a
/// minute later, each once; a phone that drops push-to-start past 10 a minute shows all 20.
@Suite("Push-to-start pacing through the API (A12)")
struct PushToStartPacingAPITests {
    static let pushToStart = LiveActivityWorld.hex("51", 80)   // first_third's

    @Test func twentyStartsToOnePhoneAreHeldPastTenAMinuteAndNoneIsLost() throws {
        let world = try LiveActivityWorld()
        let t0 = world.clock.now
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": .array((1...20).map { n in
            .object(startNotification(["devices": ["first_third"]], id: "ORDER_\(n)"))
        })]))
        #expect(codes.count == 20)
        let details = try world.waitUntilSent(codes)
        #expect(world.pushes(to: Self.pushToStart).count == 10, "ten go at once")
        #expect(details.filter { $0.sent == 1 }.count == 10 && details.filter { $0.pending[.retrying] == 1 }.count == 10)
        let held = try #require(details.first { $0.pending[.retrying] == 1 })
        #expect(held.nextAttemptAt.map { abs($0.timeIntervalSince(t0.addingTimeInterval(60))) < 0.002 } == true, "held a minute")
        let shown = try world.expectOK(try world.server("getMessageDetails", ["message": .string(held.code)]))["message"]?.objectValue
        #expect(shown?["status"] == "retrying")

        world.clock.advance(60)
        world.running.server.delivery?.kick()
        #expect(eventually { world.pushes(to: Self.pushToStart).count == 20 })
        // The transport has the pushes before their records are written: wait for the records.
        let messages = world.running.server.messages, application = ApplicationCode(world.code)!
        #expect(try eventually {
            try codes.allSatisfy { code in try messages.messageDetails(code: code, in: application).map { $0.sent == 1 && $0.pending.isEmpty } ?? false }
        })
        let pushes = world.pushes(to: Self.pushToStart)
        #expect(Set(pushes.map(\.apnsID)).count == 20, "each start once")

        // The phone, as ActivityKit: 10 at t0 and 10 a minute later are all shown.
        var phone = SimulatedDevice(application: world.code, hwid: "first_third", iosVersion: "17.4", locked: false, pushToken: "aa",
                                    pushToStartTokens: ["": Self.pushToStart])
        for (index, push) in pushes.enumerated() {
            _ = phone.receive(payload: push.payload, token: Self.pushToStart, pushType: .liveActivity, priority: push.priority, apnsID: push.apnsID,
                              now: t0.addingTimeInterval(index < 10 ? 0 : 60), newToken: { UUID().uuidString })
        }
        #expect(phone.log.allSatisfy { $0.dropped == nil } && phone.activities.count == 20, "\(phone.log.compactMap(\.dropped))")
    }

    @Test func aFanOutByFilterIsNotPaced() throws {
        let world = try LiveActivityWorld(configure: { $0.pushToStartPacing = PushToStartPacing(perMinute: 1) })
        let first = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]], id: "A"))]]))
        _ = try world.waitUntilSent(first)
        let second = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["devices": ["first_third"]], id: "B")),
        ]])))
        #expect(second.first?.pending[.retrying] == 1, "a second named start within the minute is held at 1 a minute")
        let byFilter = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["filter": "FILTER_NAME_1", "devices": nil], id: "C")),
        ]])))
        #expect(byFilter.first?.pending.isEmpty == true && (byFilter.first?.sent ?? 0) > 0, "a filter's fan-out sends each device one: not paced")
    }
}
