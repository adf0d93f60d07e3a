import Foundation
import Synchronization
import Testing
import IsletCore

/// Issue 44: costly work that holds a shared worker runs a few at a time, and a few per key; more is refused at once,
/// never queued.
@Suite("Work at most so many at once")
struct AtOnceLimitTests {
    /// How many held runs began and ended.
    final class Counts: Sendable {
        let running = Atomic<Int>(0)
        let ended = Atomic<Int>(0)
        var endedNow: Int { ended.load(ordering: .relaxed) }
    }

    /// Starts work on a thread that holds its slot until `release` is signalled; returns once it runs.
    func hold(_ limit: AtOnceLimit, key: String, release: DispatchSemaphore, _ counts: Counts) {
        let before = counts.running.load(ordering: .relaxed)
        Thread {
            _ = limit.run(key: key) { () -> Bool in
                counts.running.add(1, ordering: .relaxed)
                release.wait()
                return true
            }
            counts.ended.add(1, ordering: .relaxed)
        }.start()
        #expect(waitUntil(seconds: 10) { counts.running.load(ordering: .relaxed) == before + 1 })
    }

    @Test func overTheLimitIsRefusedAtOnceAndRunsOnceOneEnds() {
        let limit = AtOnceLimit(limit: 2)
        let release = DispatchSemaphore(value: 0)
        let counts = Counts()
        hold(limit, key: "", release: release, counts)
        hold(limit, key: "", release: release, counts)
        #expect(limit.inProgress == 2)
        var ran = false
        #expect(limit.run { ran = true } == nil, "a third is refused while two run")
        #expect(!ran, "and nothing of it ran")
        release.signal()
        #expect(waitUntil(seconds: 10) { counts.endedNow == 1 })
        #expect(limit.run { 7 } == 7, "one ended: work runs again")
        release.signal()
        #expect(waitUntil(seconds: 10) { counts.endedNow == 2 && limit.inProgress == 0 })
    }

    @Test func oneKeyTakesAtMostItsShare() {
        let limit = AtOnceLimit(limit: 3, perKey: 2)
        let release = DispatchSemaphore(value: 0)
        let counts = Counts()
        hold(limit, key: "A", release: release, counts)
        hold(limit, key: "A", release: release, counts)
        #expect(limit.run(key: "A") { 1 } == nil, "A has its two")
        #expect(limit.run(key: "B") { 2 } == 2, "B still runs")
        hold(limit, key: "B", release: release, counts)
        #expect(limit.run(key: "C") { 3 } == nil, "all three slots are taken")
        for _ in 0..<3 { release.signal() }
        #expect(waitUntil(seconds: 10) { counts.endedNow == 3 && limit.inProgress == 0 })
        #expect(limit.run(key: "A") { 4 } == 4)
    }

    /// Polls `condition` until it holds or `seconds` pass.
    func waitUntil(seconds: TimeInterval, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            Thread.sleep(forTimeInterval: 0.002)
        }
        return true
    }
}
