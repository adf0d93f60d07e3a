import Foundation
import Synchronization
import Testing
@testable import IsletConsole

/// Issue 44: console password checks (PBKDF2, CPU) run at most a few at once, so a flood of sign-ins from many
/// addresses cannot take every shared HTTP worker; one over the limit is refused at once, never queued.
@Suite("Console password checks at once")
struct PasswordChecksTests {
    @Test func aCheckOverTheLimitIsRefusedAtOnceAndRunsOnceOneEnds() {
        let checks = PasswordChecks(limit: 2)
        let release = DispatchSemaphore(value: 0)
        let started = Atomic<Int>(0), finished = Atomic<Int>(0)
        for _ in 0..<2 {
            Thread {
                _ = checks.run { () -> Bool in
                    started.add(1, ordering: .relaxed)
                    release.wait()
                    return true
                }
                finished.add(1, ordering: .relaxed)
            }.start()
        }
        #expect(waitUntil(seconds: 10) { started.load(ordering: .relaxed) == 2 })
        #expect(checks.inProgress == 2)
        var ran = false
        #expect(checks.run { ran = true } == nil, "a third check is refused while two run")
        #expect(!ran, "and nothing of it ran")
        release.signal()
        #expect(waitUntil(seconds: 10) { finished.load(ordering: .relaxed) == 1 })
        #expect(checks.run { 7 } == 7, "one ended: a check runs again")
        release.signal()
        #expect(waitUntil(seconds: 10) { finished.load(ordering: .relaxed) == 2 && checks.inProgress == 0 })
    }

    @Test func theRefusalSaysWhatIsBusyAndWhenToRetry() {
        #expect(ConsoleCredentials.passwordChecksBusy(limit: 1)
                == "console password sign-ins: 1 is being checked, the most this server checks at once (each costs a fifth of a second of a core); retry after 1 s")
        #expect(ConsoleCredentials.passwordChecksAtOnce >= 1)
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
