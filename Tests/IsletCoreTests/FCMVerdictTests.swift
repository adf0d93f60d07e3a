import Foundation
import Testing
import IsletCore

/// Issue 46: what each FCM HTTP v1 answer means, as one table (FCM's documented error codes with the status each
/// comes with, then what falls back on the status class, then the answers that never came).
@Suite("FCM answers and their verdicts")
struct FCMVerdictTests {
    /// FCM's `errorCode` values and the canonical statuses it answers with, by wire spelling, status and verdict.
    static let table: [(code: String, status: Int, verdict: PushVerdict)] = [
        ("UNREGISTERED", 404, .deadToken(invalidSince: nil)), ("SENDER_ID_MISMATCH", 403, .invalidProviderToken),
        ("INVALID_ARGUMENT", 400, .giveUp), ("QUOTA_EXCEEDED", 429, .retry(after: nil)), ("UNAVAILABLE", 503, .retry(after: nil)),
        ("INTERNAL", 500, .retry(after: nil)), ("THIRD_PARTY_AUTH_ERROR", 401, .invalidProviderToken),
        ("UNAUTHENTICATED", 401, .refreshProviderToken), ("PERMISSION_DENIED", 403, .invalidProviderToken),
        ("NOT_FOUND", 404, .giveUp), ("RESOURCE_EXHAUSTED", 429, .retry(after: nil)),
    ]

    @Test func everyDocumentedCodeHasItsVerdict() {
        for row in Self.table {
            let error = FCMError(row.code)
            if case .unknown = error { Issue.record("\(row.code) is known by name") }
            #expect(PushVerdict.of(fcmStatus: row.status, error: error) == row.verdict, "\(row.code)")
        }
        #expect(FCMError("UNREGISTERED").rawValue == "UNREGISTERED" && FCMError("RESOURCE_EXHAUSTED") == .quotaExceeded)
    }

    /// FCM's own code wins over the canonical status it comes with (an unregistered token is a 404 NOT_FOUND whose
    /// detail says UNREGISTERED); without a detail, the status names it.
    @Test func theErrorIsReadFromTheAnswersBody() {
        let unregistered = #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
        #expect(FCMError.of(body: Array(unregistered.utf8)) == .unregistered)
        let quota = #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"}]}}"#
        #expect(FCMError.of(body: Array(quota.utf8)) == .quotaExceeded)
        let expired = #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#
        #expect(FCMError.of(body: Array(expired.utf8)) == .unauthenticated)
        let novel = #"{"error":{"code":400,"status":"FAILED_PRECONDITION","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"SOMETHING_NEW"}]}}"#
        #expect(FCMError.of(body: Array(novel.utf8)) == .unknown("SOMETHING_NEW"))
        #expect(FCMError.of(body: Array("<html>Bad Gateway</html>".utf8)) == nil)
        #expect(FCMError.of(body: Array(#"{"name":"projects/p/messages/1"}"#.utf8)) == nil)
    }

    @Test func whatTheStatusClassDecidesAndAnswersThatNeverCame() {
        #expect(PushVerdict.of(fcmStatus: 200, error: nil) == .delivered)
        #expect(PushVerdict.of(fcmStatus: 429, error: nil, retryAfter: .seconds(30)) == .retry(after: .seconds(30)), "a 429 without a code is a quota")
        #expect(PushVerdict.of(fcmStatus: 502, error: nil) == .retry(after: nil))
        #expect(PushVerdict.of(fcmStatus: 401, error: .unknown("NEW_AUTH_THING")) == .refreshProviderToken)
        #expect(PushVerdict.of(fcmStatus: 400, error: .unknown("SOMETHING_NEW")) == .giveUp)
        #expect(PushVerdict.of(fcmStatus: 404, error: nil) == .giveUp, "a bare 404 does not kill a token")
        #expect(PushVerdict.of(fcmStatus: 503, error: .unavailable, retryAfter: .seconds(120)) == .retry(after: .seconds(120)))
        #expect(PushVerdict.of(fcmStatus: 0, error: nil, fate: .unknown) == .unconfirmed, "it may be on the phone")
        #expect(PushVerdict.of(fcmStatus: 0, error: nil, fate: .notSent) == .retry(after: nil), "never processed: send again")
    }

    @Test func retryAfterIsSecondsOrADate() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)   // Fri, 15 Jan 2027 08:00:00 GMT
        #expect(retryAfterDuration("120", now: now) == .seconds(120))
        #expect(retryAfterDuration(" 0 ", now: now) == .seconds(0))
        #expect(retryAfterDuration("Fri, 15 Jan 2027 08:00:30 GMT", now: now) == .seconds(30))
        #expect(retryAfterDuration("Fri, 15 Jan 2027 07:59:00 GMT", now: now) == .zero, "a date already past")
        #expect(retryAfterDuration("-5", now: now) == nil)
        #expect(retryAfterDuration("soon", now: now) == nil)
    }
}
