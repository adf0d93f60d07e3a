import Foundation
import Testing
import IsletCore

/// A9: one update per activity per interval; a newer one takes a waiting one's turn.
@Suite("Update pacing (A9)")
struct UpdatePacingTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func anUpdateSoonAfterOneThatWentOutWaitsForItsTurn() {
        let pacing = UpdatePacing(interval: 1)
        #expect(pacing.dueAt(now: now, previous: nil) == now, "the first goes at once")
        #expect(pacing.dueAt(now: now, previous: .init(dueAt: now.addingTimeInterval(-0.4), waiting: false)) == now.addingTimeInterval(0.6))
        #expect(pacing.dueAt(now: now, previous: .init(dueAt: now.addingTimeInterval(-5), waiting: false)) == now, "long after: at once")
    }

    @Test func aNewerUpdateTakesTheTurnOfTheOneItSupersedes() {
        let pacing = UpdatePacing(interval: 1)
        let turn = now.addingTimeInterval(0.7)
        #expect(pacing.dueAt(now: now, previous: .init(dueAt: turn, waiting: true)) == turn, "not a turn later")
        #expect(pacing.dueAt(now: now, previous: .init(dueAt: now.addingTimeInterval(-3), waiting: true)) == now, "an overdue one: at once")
    }

    @Test func pacingOffSendsEveryUpdateAtOnce() {
        #expect(UpdatePacing.off.dueAt(now: now, previous: .init(dueAt: now, waiting: false)) == now)
    }
}

/// A12: the next push-to-start slot of a device, from its slots of the last minute.
@Suite("Push-to-start pacing (A12)")
struct PushToStartPacingTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func tenAMinuteThenEachSlotAMinuteAfterTheOneTenBack() {
        let pacing = PushToStartPacing(perMinute: 3)
        var slots: [Date] = []
        for _ in 0..<7 { slots.append(pacing.nextSlot(after: slots, now: now)) }
        #expect(slots.map { $0.timeIntervalSince(now) } == [0, 0, 0, 60, 60, 60, 120])
        #expect(pacing.nextSlot(after: [now.addingTimeInterval(-61)], now: now) == now, "a slot older than a minute no longer counts")
        #expect(PushToStartPacing(perMinute: 0).nextSlot(after: Array(repeating: now, count: 50), now: now) == now, "0: off")
        #expect(PushToStartPacing.isPaced(pacing.reason(until: now)) && !PushToStartPacing.isPaced("TooManyRequests"))
    }
}
