import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// Issue 43: keys and provider tokens are read off the APNs loop. A store that does not answer holds up only the
/// pushes of the application waiting for it, never the loop and the other applications' pushes.
@Suite("APNs credentials off the loop")
struct CredentialTests {
    let files: TestFiles
    let slow = ApplicationCode("SLOWW-00001")!
    /// Signs with the same key as `application`, read for the first time while `slow`'s read hangs.
    let other = ApplicationCode("OTHER-00003")!
    /// Its store read fails (a database that is down), as opposed to having no key.
    let failing = ApplicationCode("FAILS-00004")!

    init() throws { files = try TestFiles() }

    /// A fake APNs and a client of it whose key lookup for `slow` waits until `gate` opens (a store that stopped
    /// answering), counting the asks. `stop()` opens the gate and shuts the client down.
    final class Stalled {
        let fake: FakeAPNs
        let client: APNsClient
        let gate = DispatchSemaphore(value: 0)
        /// How often the slow application's key was asked for.
        let asked = Asked()

        final class Asked: Sendable {
            let count = Mutex(0)
        }

        init(_ test: CredentialTests, timeout: Duration = .seconds(30)) throws {
            fake = try FakeAPNs(files: test.files, key: try SigningKey(test.files.signingKey))
            let signingKey = test.files.signingKey, slow = test.slow, other = test.other, failing = test.failing
            let gate = self.gate
            var configuration = APNsClientConfiguration(overrideURL: fake.url, extraCA: test.files.certificate,
                                                        reconnectDelays: (.milliseconds(20), .milliseconds(200)))
            configuration.requestTimeout = timeout
            client = try APNsClient(configuration: configuration, keys: { [asked] code in
                if code == slow {
                    asked.count.withLock { $0 += 1 }
                    gate.wait()
                    return nil
                }
                if code == failing { throw StoreError(.io, "storage is unavailable") }
                return code == application || code == other ? signingKey : nil
            }, logger: .discard)
        }

        func stop() {
            gate.signal()
            client.shutdown()
        }
    }

    func slowPush(_ code: ApplicationCode? = nil) -> Push {
        Push(application: code ?? slow, deviceToken: String(format: "%064x", 7), gateway: .production, pushType: .liveActivity,
             topic: "com.example.slow.push-type.liveactivity", priority: 10, apnsID: UUID().uuidString, payload: Array(#"{"aps":{}}"#.utf8))
    }

    @Test func aStoreThatDoesNotAnswerHoldsUpOnlyItsOwnApplication() throws {
        let stalled = try Stalled(self), client = stalled.client
        defer { stalled.stop() }
        #expect(client.send([push(1)]).map(\.status) == [200], "the application's key and token in hand")
        let waiting = client.submit([slowPush()], deadline: .now + .seconds(30))
        #expect(try eventually { stalled.asked.count.withLock { $0 } == 1 }, "the slow application's key is being read")
        // On the loop this read would stop every connection; off it, the other application's pushes go on.
        #expect(client.send([push(2), push(3)], deadline: .now + .seconds(5)).map(\.status) == [200, 200])
        // Nor does it hold up an application whose key is read for the first time now.
        #expect(client.send([slowPush(other)], deadline: .now + .seconds(5)).map(\.status) == [200], "read beside the hanging one")
        stalled.gate.signal()
        let outcome = waiting.wait(deadline: .now + .seconds(10)).first
        #expect(outcome == PushOutcome(status: 403, reason: "NoAPNsKey"), "answered once the store answers: it has no key")
    }

    @Test func aStoreThatFailsGivesThePushBackNotSent() throws {
        let stalled = try Stalled(self), client = stalled.client
        defer { stalled.stop() }
        let outcome = client.send([slowPush(failing)], deadline: .now + .seconds(5)).first
        #expect(outcome?.status == 0 && outcome?.fate == .notSent, "delivery retries it, where a missing key would fail it")
        #expect(outcome?.unanswered?.hasPrefix("cannot read the application's APNs key") == true, "\(outcome?.unanswered ?? "")")
    }

    @Test func aPushParkedLaterWithAnEarlierDeadlineIsAnsweredByIt() throws {
        let stalled = try Stalled(self), client = stalled.client
        defer { stalled.stop() }
        _ = client.submit([slowPush()], deadline: .now + .seconds(20))
        let outcome = client.send([slowPush()], deadline: .now + .milliseconds(300)).first
        #expect(outcome?.fate == .notSent && outcome?.unanswered == "no APNs key or provider token in time (its store did not answer)",
                "answered by its own deadline, not the first one's: \(String(describing: outcome))")
    }

    @Test func aPushWaitingForItsKeyIsAnsweredByItsDeadline() throws {
        let stalled = try Stalled(self, timeout: .milliseconds(800)), client = stalled.client
        defer { stalled.stop() }
        let outcome = client.send([slowPush()], deadline: .now + .milliseconds(800)).first
        #expect(outcome?.status == 0 && outcome?.fate == .notSent, "never written: safe to send again")
        #expect(outcome?.unanswered == "no APNs key or provider token in time (its store did not answer)")
        #expect(stalled.fake.processed.isEmpty)
    }
}

/// Polls `condition` until it holds or `deadline` passes.
private func eventually(within deadline: Duration = .seconds(5), _ condition: () throws -> Bool) throws -> Bool {
    let end = ContinuousClock.now + deadline
    while ContinuousClock.now < end {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}
