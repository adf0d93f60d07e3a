import Foundation
import Testing
import IsletCore

/// A8, `renew`: when a session is renewed, and the two payloads that renew it.
@Suite("Activity renewal (A8)")
struct ActivityRenewalTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aSessionIsRenewedAQuarterOfAnHourBeforeIOSEndsIt() {
        #expect(ActivityRenewal.dueAt(startedAt: start) == start.addingTimeInterval(7 * 3600 + 45 * 60))
        #expect(ActivityRenewal.dueAt(startedAt: start) < ActivityLifetime.endsBy(startedAt: start))
    }

    @Test func theOldCardEndsWithItsLatestStateAndIsDismissedAtOnce() throws {
        let end = ActivityRenewal.endPayload(contentState: ["status": "On its way"], timestamp: 1_800_028_000)
        #expect(end.jsonText == #"{"aps":{"timestamp":1800028000,"event":"end","content-state":{"status":"On its way"},"dismissal-date":1800028000}}"#)
    }

    @Test func theNewCardIsTheSessionsStartWithTheLatestStateNow() throws {
        let original: JSONValue = ["aps": ["timestamp": 1_800_000_000, "event": "start", "content-state": ["status": "Preparing"],
                                           "attributes-type": "FoodDeliveryAttributes", "attributes": ["pushwoosh": ["activityId": "ORDER_1"]],
                                           "alert": ["title": "Food Delivery", "body": "Your order"], "relevance-score": 50,
                                           "stale-date": 1_800_030_000]]
        let renewed = try #require(ActivityRenewal.startPayload(original: original.jsonBytes, contentState: ["status": "On its way"],
                                                                timestamp: 1_800_028_000))
        #expect(String(decoding: renewed, as: UTF8.self) == #"{"aps":{"timestamp":1800028000,"event":"start","content-state":{"status":"On its way"},"#
                + #""attributes-type":"FoodDeliveryAttributes","attributes":{"pushwoosh":{"activityId":"ORDER_1"}},"#
                + #""alert":{"title":"Food Delivery","body":"Your order"},"relevance-score":50,"stale-date":1800030000}}"#,
                "a stale-date still ahead is kept")
        let later = try #require(ActivityRenewal.startPayload(original: original.jsonBytes, contentState: [:], timestamp: 1_800_030_000))
        #expect(try JSONParser.parse(later).objectValue?["aps"]?.objectValue?["stale-date"] == nil, "one already reached is left out")
        #expect(ActivityRenewal.startPayload(original: Array(#"{"aps":{"event":"update"}}"#.utf8), contentState: [:], timestamp: 1) == nil)
        #expect(ActivityRenewal.startPayload(original: Array("not json".utf8), contentState: [:], timestamp: 1) == nil)
    }
}
