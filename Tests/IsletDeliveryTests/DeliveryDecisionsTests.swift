import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore
import IsletCrypto

/// The retry, expiry, supersede, confirmation and catch-up decisions, in-process: no sockets, no store.
@Suite("Delivery decisions (issue 10)")
struct DeliveryDecisionsTests {
    let decisions = DeliveryDecisions(policy: RetryPolicy(), jitter: { 1.0 })
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    var expiresAt: Date { now.addingTimeInterval(3600) }
    let push = Push(application: ApplicationCode("APPAA-00001")!, deviceToken: "ab", gateway: .production, pushType: .liveActivity,
                    topic: "t", priority: 10, apnsID: "ID", payload: [])

    func record(_ outcome: PushOutcome, start: Bool = false, attempts: Int = 1, copies: Int = 0, expires: Date? = nil) -> DeliveryRecord {
        decisions.record(device: 7, push: push, outcome: outcome, isStart: start, attempts: attempts, uncertainCopies: copies,
                         expiresAt: expires ?? expiresAt, now: now)
    }

    @Test func retryableAnswersWaitLongerEachTimeUpToTheCap() {
        let waits = (1...9).map { record(PushOutcome(status: 503, reason: "ServiceUnavailable"), attempts: $0).nextAttemptAt!.timeIntervalSince(now) }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60, 60])
        #expect(record(PushOutcome(status: 429, reason: "TooManyRequests")).state == .retrying)
        #expect(record(.notSent("cannot connect")).state == .retrying)
        #expect(record(PushOutcome(status: 403, reason: "ExpiredProviderToken")).state == .retrying)
    }

    @Test func retryAfterIsHonoured() {
        let outcome = PushOutcome(status: 429, reason: "TooManyRequests", retryAfter: .seconds(300))
        #expect(record(outcome).nextAttemptAt == now.addingTimeInterval(300))
    }

    @Test func aRetryThatWouldFallAfterTheExpiryExpiresNow() {
        let late = record(PushOutcome(status: 500, reason: "InternalServerError"), attempts: 8, expires: now.addingTimeInterval(30))
        #expect(late.state == .expired && late.nextAttemptAt == nil)
    }

    @Test func finalAnswersAreFinal() {
        #expect(record(.delivered).state == .sent)
        #expect(record(PushOutcome(status: 410, reason: "Unregistered")).state == .failed)
        #expect(record(PushOutcome(status: 400, reason: "BadTopic")).state == .failed)
    }

    @Test func aStartWithALostAnswerWaitsForConfirmationButAnUpdateIsRetried() {
        let start = record(.unknown("connection lost"), start: true)
        #expect(start.state == .unconfirmed && start.uncertainCopies == 1 && start.nextAttemptAt == now.addingTimeInterval(60))
        let update = record(.unknown("connection lost"))
        #expect(update.state == .retrying && update.uncertainCopies == 0)
        // A start refused before APNs processed it is simply retried: it is not a copy on the phone.
        #expect(record(.notSent("REFUSED_STREAM"), start: true).state == .retrying)
    }

    func due(_ event: LiveActivityEvent, state: DeliveryState = .retrying, copies: Int = 0, ended: Bool = false, newer: Bool = false,
             token: Bool = false, expires: Date? = nil) -> DueDelivery {
        DueDelivery(message: 1, code: "C", application: ApplicationCode("APPAA-00001")!, event: event, activity: 1, device: 7, gateway: .production,
                    state: state, pushType: .liveActivity, token: "ab", payload: [], priority: 10, expiresAt: expires ?? expiresAt, attempts: 1,
                    uncertainCopies: copies, catchUp: false, activityEnded: ended, newerMessage: newer, tokenReportedSince: token)
    }

    @Test func claimVerdicts() {
        #expect(decisions.verdict(due(.update), now: now) == .send)
        #expect(decisions.verdict(due(.update, newer: true), now: now) == .settle(.superseded, reason: "a newer update or end of the activity went instead"))
        #expect(decisions.verdict(due(.end, newer: true), now: now) != .send)
        // A start is not superseded by updates (the device needs it), only by the activity's end.
        #expect(decisions.verdict(due(.start, newer: true), now: now) == .send)
        #expect(decisions.verdict(due(.start, ended: true), now: now) != .send)
        #expect(decisions.verdict(due(.start, state: .unconfirmed, copies: 1, token: true), now: now)
                == .settle(.sent, reason: "confirmed: the device reported its update token"))
        #expect(decisions.verdict(due(.start, state: .unconfirmed, copies: 1), now: now) == .send, "the second copy")
        if case .settle(.failed, _) = decisions.verdict(due(.start, state: .retrying, copies: 2), now: now) {} else {
            Issue.record("two possible copies already: not even a retry after a 429 sends a third")
        }
        if case .settle(.failed, _) = decisions.verdict(due(.start, state: .unconfirmed, copies: 2), now: now) {} else {
            Issue.record("never a third copy")
        }
        #expect(decisions.verdict(due(.update, expires: now), now: now) == .settle(.expired, reason: "expired before it could be delivered"))
        // A8: a retry or catch-up of an activity iOS has ended (8 hours after its start) reaches no device.
        var old = due(.update)
        old.activityStartedAt = now.addingTimeInterval(-8 * 3600)
        #expect(decisions.verdict(old, now: now) == .settle(.skipped, reason: "activity past its 8-hour lifetime"))
        old.activityStartedAt = now.addingTimeInterval(-8 * 3600 + 1)
        #expect(decisions.verdict(old, now: now) == .send)
    }

    @Test func catchUpRule() {
        let token = "new"
        #expect(!CatchUpRule.needed(latest: nil, delivery: nil, token: token), "no update or end since the start")
        #expect(!CatchUpRule.needed(latest: .pending, delivery: nil, token: token), "it will go out with the new token anyway")
        // The fan-out may have read the device's page before the device joined: better a repeat than a miss.
        #expect(CatchUpRule.needed(latest: .sending, delivery: nil, token: token))
        #expect(CatchUpRule.needed(latest: .done, delivery: nil, token: token), "the device was not started when it went out")
        #expect(CatchUpRule.needed(latest: .done, delivery: (.skipped, nil), token: token))
        #expect(CatchUpRule.needed(latest: .done, delivery: (.sent, "old"), token: token), "token rotation")
        #expect(!CatchUpRule.needed(latest: .done, delivery: (.sent, token), token: token), "already has it")
        #expect(!CatchUpRule.needed(latest: .done, delivery: (.superseded, "old"), token: token))
    }

    @Test func aCatchUpCarriesTheStateWithoutTheAlert() throws {
        let original = Array(#"{"aps":{"timestamp":5,"event":"end","content-state":{"s":1},"dismissal-date":9,"alert":{"title":"t"},"sound":"default"}}"#.utf8)
        let caughtUp = try #require(try JSONParser.parse(CatchUpPayload.make(original)).objectValue?["aps"]?.objectValue)
        #expect(caughtUp.keys == ["timestamp", "event", "content-state", "dismissal-date"])
    }
}

@Suite("apns-id")
struct APNsIDTests {
    /// The apns-id is a pure function of message code and device: a resend after a crash or an upgrade
    /// carries the same one. Checked against the definition, written out the long way.
    @Test func isTheUUIDOfTheMessageAndDevice() {
        for (code, device) in [("Q3J7B-0D8XK2LM-7TPA94ZC", Int64(1)), ("AAAAA-00000000-00000000", 123_456_789)] {
            var chars = Array(Crypto.hex(Crypto.sha256(Array("\(code):\(device)".utf8)).prefix(16)).uppercased())
            chars[12] = "4"
            chars[16] = ["8", "9", "A", "B"][Int(String(chars[16]), radix: 16)! & 3]
            let s = String(chars)
            let expected = [s.prefix(8), s.dropFirst(8).prefix(4), s.dropFirst(12).prefix(4), s.dropFirst(16).prefix(4), s.dropFirst(20)].joined(separator: "-")
            let due = DueDelivery(message: 1, code: code, application: ApplicationCode("APPAA-00001")!, event: .update, activity: 1, device: device,
                                  gateway: .production, state: .retrying, pushType: .liveActivity, token: "ab", payload: [], priority: 10,
                                  expiresAt: Date(), attempts: 0, uncertainCopies: 0, catchUp: false, activityEnded: false, newerMessage: false,
                                  tokenReportedSince: false)
            #expect(PushPlanner.push(due, bundleID: "b").apnsID == expected)
        }
    }
}

@Suite("Fan-out shards")
struct ShardPolicyTests {
    @Test func shardsCoverEveryIdOnceAndTheLastIsOpenEnded() {
        let policy = ShardPolicy(span: 100, maximum: 4)
        #expect(policy.shards(lowest: 1, highest: 150).isEmpty, "under two spans: one job")
        let shards = policy.shards(lowest: 1, highest: 1000)
        #expect(shards.count == 4, "capped")
        #expect(shards.first?.after == 0 && shards.last?.upTo == Int64.max, "devices registered later still fall in the last shard")
        for (a, b) in zip(shards, shards.dropFirst()) { #expect(a.upTo == b.after, "contiguous: \(shards)") }
        #expect(ShardPolicy(span: 100, maximum: 8).shards(lowest: 501, highest: 800).count == 3)
    }
}
