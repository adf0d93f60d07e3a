import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// The APNs client against a fake APNs on 127.0.0.1 speaking real HTTP/2 over TLS (A1–A6).
@Suite("APNs client")
struct APNsClientTests {
    let files: TestFiles
    let key: SigningKey

    init() throws {
        files = try TestFiles()
        key = try SigningKey(files.signingKey)
    }

    func client(_ fake: FakeAPNs, clock: (@Sendable () -> Date)? = nil, timeout: Duration = .seconds(30)) throws -> APNsClient {
        try files.client(url: fake.url, now: clock) { $0.requestTimeout = timeout }
    }

    @Test func deliversWithTheHeadersAndTokenAppleExpects() throws {
        let fake = try FakeAPNs(files: files, key: key)
        let client = try client(fake)
        defer { client.shutdown() }
        let pushes = (0..<200).map { push($0) }
        let outcomes = client.send(pushes)
        #expect(outcomes.allSatisfy { $0.status == 200 })
        let seen = fake.processed
        #expect(seen.count == 200)
        #expect(Set(seen.map(\.apnsID)) == Set(pushes.map(\.apnsID)), "each push once")
        let first = try #require(seen.first { $0.apnsID == pushes[0].apnsID })
        #expect(first.headers[":method"] == "POST")
        #expect(first.headers[":path"] == "/3/device/\(pushes[0].deviceToken)")
        #expect(first.headers["apns-push-type"] == "liveactivity")
        #expect(first.headers["apns-topic"] == "com.example.app.push-type.liveactivity")
        #expect(first.headers["apns-priority"] == "10")
        #expect(first.body == pushes[0].payload)
        #expect(!fake.shared.state.withLock { $0.streamRuleBroken }, "one stream until the first success (A6)")
        let tokens = Set(seen.map { $0.headers["authorization"] ?? "" })
        #expect(tokens.count == 1, "one provider token reused (A3)")
    }

    /// A small message's push submitted after a fan-out's page waits for a stream ahead of that page, not behind it
    /// (one stream here, so the order APNs sees is the order the pool hands pushes out).
    @Test func aSmallMessagesPushGoesAheadOfAWaitingBulkPage() throws {
        let fake = try FakeAPNs(files: files, key: key)
        let client = try files.client(url: fake.url, now: nil) { $0.maximumStreams = 1; $0.connectionsPerPool = 1 }
        defer { client.shutdown() }
        let page = (0..<40).map { push($0) }
        let update = push(1000)
        let bulk = client.submit(page, deadline: .now + .seconds(30), writeBy: nil, bulk: true)
        let small = client.submit([update], deadline: .now + .seconds(30), writeBy: nil, bulk: false)
        #expect(small.wait(deadline: .now + .seconds(30)).map(\.status) == [200])
        #expect(bulk.wait(deadline: .now + .seconds(30)).allSatisfy { $0.status == 200 })
        let order = fake.processed.map(\.apnsID)
        #expect(order.count == 41)
        // At most the page's pushes already on the stream (or handed out in the same turn) go before it.
        let position = try #require(order.firstIndex(of: update.apnsID))
        #expect(position <= 2, "the update was number \(position) of 41")
        #expect(order.filter { $0 != update.apnsID } == page.map(\.apnsID), "the page keeps its own order")
    }

    /// Issue 14: a push handed over with a `writeBy` that has passed (its node's lease on it ran out, say
    /// while the process was paused) is not written at all, and says so; the others go as usual.
    @Test func aPushPastItsWriteByIsNeverWritten() throws {
        let fake = try FakeAPNs(files: files, key: key)
        let client = try client(fake)
        defer { client.shutdown() }
        let inTime = push(3)
        let late = client.submit([push(1), push(2)], deadline: .now + .seconds(30), writeBy: .now - .milliseconds(1))
        let onTime = client.submit([inTime], deadline: .now + .seconds(30), writeBy: .now + .seconds(30))
        let lateOutcomes = late.wait(deadline: .now + .seconds(30))
        #expect(lateOutcomes.allSatisfy { $0.fate == .notSent }, "\(lateOutcomes)")
        #expect(onTime.wait(deadline: .now + .seconds(30)).map(\.status) == [200])
        #expect(fake.processed.map(\.apnsID) == [inTime.apnsID], "only the push still in time reached APNs")
    }

    @Test func reportsEveryAnswerWithItsReason() throws {
        let answers: [Int: FakeAPNs.Answer] = [
            1: .status(410, reason: "Unregistered", timestamp: 1_700_000_000_000), 2: .status(400, reason: "BadDeviceToken"),
            3: .status(429, reason: "TooManyRequests"), 4: .status(500, reason: "InternalServerError"),
            5: .status(413, reason: "PayloadTooLarge"), 6: .status(400, reason: "DeviceTokenNotForTopic"), 7: .status(503, reason: "ServiceUnavailable"),
        ]
        let fake = try FakeAPNs(files: files, key: key) { request, _ in
            answers[Int(request.token, radix: 16) ?? 0] ?? .status(200)
        }
        let client = try client(fake)
        defer { client.shutdown() }
        let outcomes = client.send((0...7).map { push($0) })
        #expect(outcomes.map(\.status) == [200, 410, 400, 429, 500, 413, 400, 503])
        #expect(outcomes[1].timestamp == 1_700_000_000_000)
        #expect(outcomes.map(\.verdict) == [.delivered, .deadToken(invalidSince: 1_700_000_000_000), .deadToken(invalidSince: nil), .retry(after: nil),
                                            .retry(after: nil), .giveUp, .deadToken(invalidSince: nil), .retry(after: nil)])
    }

    @Test func goAwayMidFlightLosesNothingAndDuplicatesNothing() throws {
        let count = Mutex(0)
        let fake = try FakeAPNs(files: files, key: key) { _, _ in
            // Every connection goes away after its 30th request; later streams were never processed.
            let n = count.withLock { $0 += 1; return $0 }
            return n % 30 == 0 ? .goAway : .status(200)
        }
        let client = try client(fake)
        defer { client.shutdown() }
        let pushes = (0..<150).map { push($0) }
        let outcomes = client.send(pushes)
        #expect(outcomes.allSatisfy { $0.status == 200 }, "\(outcomes.filter { $0.status != 200 })")
        let ids = fake.processed.map(\.apnsID)
        #expect(ids.count == 150 && Set(ids) == Set(pushes.map(\.apnsID)), "each apns-id processed exactly once")
        #expect(fake.shared.state.withLock { $0.connections.count } > 1, "retried on fresh connections")
    }

    @Test func refusedStreamsAreRetried() throws {
        let fake = try FakeAPNs(files: files, key: key) { request, earlier in
            (Int(request.token, radix: 16) ?? 0) % 3 == 0 && earlier < 2 ? .refuse : .status(200)
        }
        let client = try client(fake)
        defer { client.shutdown() }
        let pushes = (1...30).map { push($0) }
        #expect(client.send(pushes).allSatisfy { $0.status == 200 })
        #expect(Set(fake.processed.map(\.apnsID)).count == 30 && fake.processed.count == 30)
    }

    @Test func aDroppedConnectionReportsUnknownFatesAndNeverResendsThem() throws {
        let dropped = Mutex(false)
        let fake = try FakeAPNs(files: files, key: key) { request, _ in
            let drop = dropped.withLock { done -> Bool in
                guard !done, (Int(request.token, radix: 16) ?? 0) == 25 else { return false }
                done = true
                return true
            }
            return drop ? .drop : .status(200)
        }
        let client = try client(fake)
        defer { client.shutdown() }
        let pushes = (0..<60).map { push($0) }
        let outcomes = client.send(pushes)
        // The one whose connection dropped after APNs read it may have been processed: the caller
        // decides whether to send it again (a start must not become a second card on the phone).
        #expect(outcomes[25].status == 0 && outcomes[25].fate == .unknown, "\(outcomes[25])")
        #expect(outcomes.allSatisfy { $0.status == 200 || $0.fate == .unknown }, "\(outcomes.filter { $0.status != 200 })")
        let delivered = Set(zip(pushes, outcomes).filter { $0.1.status == 200 }.map(\.0.apnsID))
        #expect(delivered == Set(fake.processed.map(\.apnsID)), "a 200 for each push APNs processed, and only those")
        #expect(fake.shared.state.withLock { $0.seen.values.allSatisfy { $0 == 1 } }, "no apns-id reached APNs twice")
        // The pool replaced the connection.
        #expect(client.send((100..<110).map { push($0) }).allSatisfy { $0.status == 200 })
    }

    @Test func anExpiredProviderTokenIsRenewedOnceAndRetried() throws {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = Mutex(start)
        let fake = try FakeAPNs(files: files, key: key) { request, _ in
            // Tokens issued at the start time count as expired once the clock moved on.
            let claims = request.headers["authorization"].flatMap { $0.split(separator: ".").dropFirst().first }.flatMap { FakeAPNs.decode(String($0)) }
            let iat = claims.flatMap { try? JSONParser.parse($0).objectValue?["iat"]?.intValue } ?? 0
            return clock.withLock { $0 } > start && iat == 1_800_000_000 ? .status(403, reason: "ExpiredProviderToken") : .status(200)
        }
        let client = try client(fake, clock: { clock.withLock { $0 } })
        defer { client.shutdown() }
        #expect(client.send([push(1)]).first?.status == 200)
        clock.withLock { $0 = start.addingTimeInterval(25 * 60) }   // older than 20 min, younger than 50: still reused
        #expect(client.send([push(2)]).first?.status == 200, "renewed once, then delivered")
        let tokens = fake.processed.map { $0.headers["authorization"] ?? "" }
        #expect(Set(tokens).count == 2)
    }

    @Test func anInvalidKeyStopsSendingForThatApplication() throws {
        let other = try TestFiles()
        let wrongKey = try SigningKey(other.signingKey)
        let fake = try FakeAPNs(files: files, key: wrongKey)   // verifies with another key: every token is invalid
        let client = try client(fake)
        defer { client.shutdown() }
        #expect(client.send([push(1)]).first?.reason == "InvalidProviderToken")
        let before = fake.shared.state.withLock { $0.connections.count }
        #expect(client.send((2..<10).map { push($0) }).allSatisfy { $0.reason == "InvalidProviderToken" })
        #expect(fake.processed.isEmpty)
        #expect(fake.shared.state.withLock { $0.connections.count } == before, "nothing more sent with a key APNs refused")
    }

    @Test func aPushWithoutAKeyFailsWithTheReason() throws {
        let fake = try FakeAPNs(files: files, key: key)
        let client = try client(fake)
        defer { client.shutdown() }
        let stranger = Push(application: ApplicationCode("OTHER-00002")!, deviceToken: "00", gateway: .production, pushType: .alert,
                            topic: "x", priority: 5, apnsID: UUID().uuidString, payload: [])
        #expect(client.send([stranger]).first == PushOutcome(status: 403, reason: "NoAPNsKey"))
    }

    @Test func aRequestWithoutAnAnswerTimesOut() throws {
        let fake = try FakeAPNs(files: files, key: key) { request, _ in (Int(request.token, radix: 16) ?? 0) == 2 ? .silence : .status(200) }
        let client = try client(fake, timeout: .milliseconds(1500))
        defer { client.shutdown() }
        let outcomes = client.send([push(1), push(2), push(3)])
        #expect(outcomes.map(\.status) == [200, 0, 200])
        #expect(outcomes[1].unanswered == "no answer from APNs in time")
        #expect(outcomes[1].fate == .unknown, "written and never answered: it may have reached APNs")
    }

    @Test func anUnreachableServerFailsAfterBoundedAttempts() throws {
        let configuration = APNsClientConfiguration(overrideURL: URL(string: "https://127.0.0.1:9")!, extraCA: files.certificate,
                                                    requestTimeout: .milliseconds(1500), reconnectDelays: (.milliseconds(10), .milliseconds(40)))
        let signingKey = files.signingKey
        let client = try APNsClient(configuration: configuration, keys: { _ in signingKey }, logger: .discard)
        defer { client.shutdown() }
        let outcome = client.send([push(1)]).first
        #expect(outcome?.status == 0)
        #expect(outcome?.fate == .notSent, "no connection ever opened: provably not sent")
        #expect(outcome?.reason == nil, "no answer: no reason of Apple's")
        #expect(outcome?.unanswered?.hasPrefix("cannot connect to APNs: cannot connect to 127.0.0.1:9") == true, "\(outcome?.unanswered ?? "")")
    }
}
