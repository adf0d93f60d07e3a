import Foundation
import Testing
import IsletCore

/// A service's threads are counted while they run and waited for by a deadline (issue 43: one lifecycle shape).
@Suite("Service threads")
struct ServiceThreadsTests {
    @Test func aWaitEndsWhenTheLastThreadEnds() {
        let threads = ServiceThreads()
        let gate = DispatchSemaphore(value: 0)
        for n in 0..<3 { threads.start("test-\(n)") { gate.wait() } }
        #expect(threads.count == 3)
        #expect(!threads.waitForExit(by: .now + .milliseconds(50)), "they are still running at the deadline")
        for _ in 0..<3 { gate.signal() }
        #expect(threads.waitForExit(by: .now + .seconds(10)), "woken as the last one ends, well before the deadline")
        #expect(threads.count == 0)
    }

    @Test func aWaitWithNothingRunningReturnsAtOnce() {
        #expect(ServiceThreads().waitForExit(by: .now))
    }

    @Test func aThreadThatNeverEndsIsGivenUpAtTheDeadline() {
        let threads = ServiceThreads()
        let gate = DispatchSemaphore(value: 0)
        threads.start("test-stuck") { gate.wait() }
        let started = ContinuousClock.now
        #expect(!threads.waitForExit(by: started + .milliseconds(200)))
        #expect(ContinuousClock.now - started >= .milliseconds(200), "not before the deadline")
        gate.signal()
        #expect(threads.waitForExit(by: .now + .seconds(10)))
    }
}
