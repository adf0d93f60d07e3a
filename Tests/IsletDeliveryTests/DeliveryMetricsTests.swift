import Foundation
import Testing
import IsletCore
import IsletStore
@testable import IsletDelivery

/// The labels pushes are counted under stay within known sets, whatever text a record carries.
@Suite("Delivery metrics labels")
struct DeliveryMetricsTests {
    func record(_ state: DeliveryState, status: Int, reason: String?) -> DeliveryRecord {
        DeliveryRecord(device: 1, pushType: state == .skipped ? nil : .liveActivity, status: status, reason: reason, apnsID: nil, attempts: 1, state: state)
    }

    static func key(_ result: DeliveryState, _ reason: String, _ service: String = "apns") -> DeliveryMetrics.Key {
        var key = DeliveryMetrics.Key(result: result, reason: reason)
        key.service = service
        return key
    }

    @Test func labelsAreApplesReasonsSkipReasonsOrAFixedWord() {
        #expect(DeliveryMetrics.key(record(.sent, status: 200, reason: nil)) == Self.key(.sent, ""))
        #expect(DeliveryMetrics.key(record(.failed, status: 410, reason: "Unregistered")) == Self.key(.failed, "Unregistered"))
        #expect(DeliveryMetrics.key(record(.retrying, status: 503, reason: "ServiceUnavailable")) == Self.key(.retrying, "ServiceUnavailable"))
        #expect(DeliveryMetrics.key(record(.skipped, status: 0, reason: SkipReason.noPushToStartToken))
                == Self.key(.skipped, "no push-to-start token", ""))
        // Free text (a connection error, a message of ours) never becomes a label value.
        #expect(DeliveryMetrics.key(record(.retrying, status: 0, reason: "connection reset by peer 10.1.2.3")) == Self.key(.retrying, "no answer"))
        #expect(DeliveryMetrics.key(record(.unconfirmed, status: 0, reason: nil)) == Self.key(.unconfirmed, "no answer"))
        #expect(DeliveryMetrics.key(record(.failed, status: 400, reason: "SomethingNew")) == Self.key(.failed, "other"))
        // A push-to-start held for its slot (A12): one fixed word, not its text with a time in it.
        let held = PushToStartPacing.standard.reason(until: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(DeliveryMetrics.key(record(.retrying, status: 0, reason: held)) == Self.key(.retrying, "paced"))
    }

    @Test func countsAddUp() {
        let metrics = DeliveryMetrics()
        metrics.count([record(.sent, status: 200, reason: nil), record(.sent, status: 200, reason: nil), record(.failed, status: 410, reason: "Unregistered")])
        #expect(metrics.snapshot() == [Self.key(.sent, ""): 2, Self.key(.failed, "Unregistered"): 1])
    }
}
