import Foundation
import Testing
import IsletCore

/// A5: what each APNs answer means, as one table (Apple's documented reasons, then what falls back on the
/// status class, then the answers that never came).
@Suite("APNs answers and their verdicts (A5)")
struct APNsVerdictTests {
    /// Every reason Apple documents for device pushes, by its wire spelling, with its status and verdict.
    static let table: [(reason: String, status: Int, verdict: PushVerdict)] = [
        ("BadCollapseId", 400, .giveUp), ("BadDeviceToken", 400, .deadToken(invalidSince: nil)),
        ("BadExpirationDate", 400, .giveUp), ("BadMessageId", 400, .giveUp), ("BadPriority", 400, .giveUp), ("BadTopic", 400, .giveUp),
        ("DeviceTokenNotForTopic", 400, .deadToken(invalidSince: nil)), ("DuplicateHeaders", 400, .giveUp),
        ("IdleTimeout", 400, .retry(after: nil)), ("InvalidPushType", 400, .giveUp), ("MissingDeviceToken", 400, .giveUp),
        ("MissingTopic", 400, .giveUp), ("PayloadEmpty", 400, .giveUp), ("TopicDisallowed", 400, .giveUp),
        ("BadCertificate", 403, .giveUp), ("BadCertificateEnvironment", 403, .giveUp), ("ExpiredProviderToken", 403, .refreshProviderToken),
        ("Forbidden", 403, .giveUp), ("InvalidProviderToken", 403, .invalidProviderToken), ("MissingProviderToken", 403, .giveUp),
        ("BadPath", 404, .giveUp), ("MethodNotAllowed", 405, .giveUp),
        ("ExpiredToken", 410, .deadToken(invalidSince: nil)), ("Unregistered", 410, .deadToken(invalidSince: nil)),
        ("PayloadTooLarge", 413, .giveUp), ("TooManyProviderTokenUpdates", 429, .retry(after: nil)), ("TooManyRequests", 429, .retry(after: nil)),
        ("InternalServerError", 500, .retry(after: nil)), ("ServiceUnavailable", 503, .retry(after: nil)), ("Shutdown", 503, .retry(after: nil)),
    ]

    @Test func everyDocumentedReasonHasItsVerdict() {
        for row in Self.table {
            let reason = APNsReason(row.reason)
            #expect(reason.isKnown, "\(row.reason) is known by name")
            #expect(reason.rawValue == row.reason, "spelt back as Apple spells it")
            #expect(APNsReason.known.first { $0.reason == reason }?.status == row.status, "\(row.reason): Apple's status")
            #expect(PushVerdict.of(status: row.status, reason: reason) == row.verdict, "\(row.reason)")
        }
        #expect(APNsReason.known.count == Self.table.count + 1, "the table above and ChannelNotRegistered (X5): no reason untested")
    }

    @Test func anUnknownReasonFallsBackOnItsStatusClass() {
        let novel = APNsReason("SomethingAppleAddsLater")
        #expect(novel == .unknown("SomethingAppleAddsLater") && !novel.isKnown && novel.rawValue == "SomethingAppleAddsLater")
        #expect(PushVerdict.of(status: 410, reason: novel, timestamp: 7) == .deadToken(invalidSince: 7))
        #expect(PushVerdict.of(status: 429, reason: novel, retryAfter: .seconds(30)) == .retry(after: .seconds(30)))
        #expect(PushVerdict.of(status: 502, reason: nil) == .retry(after: nil))
        #expect(PushVerdict.of(status: 400, reason: novel) == .giveUp)
        #expect(PushVerdict.of(status: 404, reason: .channelNotRegistered) == .giveUp, "a channel reason decides by status too")
    }

    @Test func theAnswerDetailsTravelWithTheVerdict() {
        #expect(PushVerdict.of(status: 410, reason: .unregistered, timestamp: 1_700_000_000_000) == .deadToken(invalidSince: 1_700_000_000_000))
        #expect(PushVerdict.of(status: 503, reason: .serviceUnavailable, retryAfter: .seconds(120)) == .retry(after: .seconds(120)))
        #expect(PushVerdict.of(status: 200, reason: nil) == .delivered)
    }

    @Test func noAnswerIsUnconfirmedUnlessProvablyNotSent() {
        #expect(PushVerdict.of(status: 0, reason: nil, fate: .unknown) == .unconfirmed, "it may be on the phone")
        #expect(PushVerdict.of(status: 0, reason: nil, fate: .notSent) == .retry(after: nil), "never processed: safe to send again")
        #expect(PushVerdict.unconfirmed.isRetryable && PushVerdict.refreshProviderToken.isRetryable)
        #expect(!PushVerdict.giveUp.isRetryable && !PushVerdict.deadToken(invalidSince: nil).isRetryable && !PushVerdict.invalidProviderToken.isRetryable)
    }

    @Test func pushTypesSpellTheirHeaderAndTopic() {
        #expect(PushType.liveActivity.rawValue == "liveactivity" && PushType.alert.rawValue == "alert")
        #expect(PushType.liveActivity.topic(bundleID: "com.example.food") == "com.example.food.push-type.liveactivity")
        #expect(PushType.alert.topic(bundleID: "com.example.food") == "com.example.food")
        #expect(PushType(rawValue: "LiveActivity") == nil, "header values are case-sensitive")
        #expect(PushType.apple.count == 9 && PushType.all.count == 11, "Apple's nine, and Islet's two FCM kinds")
        #expect(PushType.apple.allSatisfy { !$0.isFCM } && PushType.liveUpdate.isFCM && PushType.androidNotification.isFCM)
    }
}
