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

    init() throws { files = try TestFiles() }

    /// How often the slow application's key was asked for.
    final class Asked: Sendable {
        let count = Mutex(0)
    }

    /// A client whose key lookup for `slow` waits until `gate` opens (a store that stopped answering).
    func client(_ fake: FakeAPNs, gate: DispatchSemaphore, asked: Asked, timeout: Duration = .seconds(30)) throws -> APNsClient {
        let signingKey = files.signingKey, slow = self.slow
        var configuration = APNsClientConfiguration(overrideURL: fake.url, extraCA: files.certificate, reconnectDelays: (.milliseconds(20), .milliseconds(200)))
        configuration.requestTimeout = timeout
        return try APNsClient(configuration: configuration, keys: { code in
            if code == slow {
                asked.count.withLock { $0 += 1 }
                gate.wait()
                return nil
            }
            return code == application ? signingKey : nil
        }, logger: .discard)
    }

    func slowPush() -> Push {
        Push(application: slow, deviceToken: String(format: "%064x", 7), gateway: .production, pushType: .liveActivity,
             topic: "com.example.slow.push-type.liveactivity", priority: 10, apnsID: UUID().uuidString, payload: Array(#"{"aps":{}}"#.utf8))
    }

    @Test func aStoreThatDoesNotAnswerHoldsUpOnlyItsOwnApplication() throws {
        let fake = try FakeAPNs(files: files, key: try SigningKey(files.signingKey))
        let gate = DispatchSemaphore(value: 0), asked = Asked()
        let client = try client(fake, gate: gate, asked: asked)
        defer {
            gate.signal()
            client.shutdown()
        }
        #expect(client.send([push(1)]).map(\.status) == [200], "the application's key and token in hand")
        let waiting = client.submit([slowPush()], deadline: .now + .seconds(30))
        #expect(try eventually { asked.count.withLock { $0 } == 1 }, "the slow application's key is being read")
        // On the loop this read would stop every connection; off it, the other application's pushes go on.
        #expect(client.send([push(2), push(3)], deadline: .now + .seconds(5)).map(\.status) == [200, 200])
        gate.signal()
        let outcome = waiting.wait(deadline: .now + .seconds(10)).first
        #expect(outcome == PushOutcome(status: 403, reason: "NoAPNsKey"), "answered once the store answers: it has no key")
    }

    @Test func aPushWaitingForItsKeyIsAnsweredByItsDeadline() throws {
        let fake = try FakeAPNs(files: files, key: try SigningKey(files.signingKey))
        let gate = DispatchSemaphore(value: 0), asked = Asked()
        let client = try client(fake, gate: gate, asked: asked, timeout: .milliseconds(800))
        defer {
            gate.signal()
            client.shutdown()
        }
        let outcome = client.send([slowPush()], deadline: .now + .milliseconds(800)).first
        #expect(outcome?.status == 0 && outcome?.fate == .notSent, "never written: safe to send again")
        #expect(outcome?.unanswered == "no APNs key or provider token in time (its store did not answer)")
        #expect(fake.processed.isEmpty)
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
