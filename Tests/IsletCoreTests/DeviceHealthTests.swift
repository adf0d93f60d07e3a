import Foundation
import Testing
import IsletCore

/// A10: flags decided from a device's facts, without storage.
@Suite("Device health flags (A10)")
struct DeviceHealthTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aStartAPNsAcceptedButNeverConfirmedIsFlaggedOnceItsWindowPassed() {
        let recent = DeviceHealth.Start(activityID: "NEW", acceptedAt: now.addingTimeInterval(-10), tokenReportedAt: nil)
        let dropped = DeviceHealth.Start(activityID: "DROPPED", acceptedAt: now.addingTimeInterval(-600), tokenReportedAt: nil)
        let confirmed = DeviceHealth.Start(activityID: "SHOWN", acceptedAt: now.addingTimeInterval(-600), tokenReportedAt: now.addingTimeInterval(-590))
        let flags = DeviceHealth.flags(DeviceHealth.Facts(gateway: .production, starts: [recent, dropped, confirmed]), now: now)
        #expect(flags.map(\.code) == [.startNotConfirmed])
        #expect(flags.map(\.activityID) == ["DROPPED"])
        #expect(flags[0].message.hasPrefix("APNs accepted the start of 'DROPPED' at 2027-01-15T07:50:00Z, but the app never reported its update token"))
    }

    @Test func aPushToStartTokenNotReportedForThirtyDaysIsFlagged() {
        let facts = DeviceHealth.Facts(gateway: .production, pushToStartTokens: [("Order", now.addingTimeInterval(-31 * 86_400)),
                                                                               ("", now.addingTimeInterval(-86_400))])
        let flags = DeviceHealth.flags(facts, now: now)
        #expect(flags.count == 1 && flags[0].code == .stalePushToStartToken)
        #expect(flags[0].message.hasPrefix("the push-to-start token for 'Order' was last reported 31 days ago"))
    }

    @Test func badDeviceTokenNamesTheEnvironmentMixUp() {
        let facts = DeviceHealth.Facts(gateway: .production, rejections: [DeviceHealth.Rejection(reason: "BadDeviceToken", at: now)])
        let flags = DeviceHealth.flags(facts, now: now)
        #expect(flags.map(\.code) == [.environmentMismatch])
        #expect(flags[0].message.contains("APNs production answered BadDeviceToken") && flags[0].message.contains("register it with gateway \"sandbox\""))
        #expect(DeviceHealth.flags(DeviceHealth.Facts(gateway: .sandbox), now: now).isEmpty, "nothing to say of a healthy device")
    }
}
