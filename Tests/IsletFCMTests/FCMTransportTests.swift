import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletFCM
import IsletStore

/// Issue 46: what the FCM transport answers before any message goes out, when an application's account is missing or
/// cannot be read.
@Suite("The FCM transport's accounts")
struct FCMTransportTests {
    static let application = ApplicationCode("APPAA-00001")!
    static let push = Push(application: application, deviceToken: "fcm-token", gateway: .production, pushType: .liveUpdate, topic: "",
                           priority: 10, apnsID: "id", payload: Array(#"{"pw_msg":"1"}"#.utf8), expiration: nil)

    @Test func noAccountFailsThePushButAnUnreadableOneLeavesItOwed() {
        let none = FCMTransport(configuration: FCMTransportConfiguration(), accounts: { _ in nil }, logger: .discard)
        let failed = none.send([Self.push], deadline: .now + .seconds(5))
        #expect(failed.map(\.verdict) == [.giveUp] && failed.first?.recordedReason == "NoFCMServiceAccount")
        // The database away, or the key sealed with another master key: not sent, so retried once it can be read.
        let away = FCMTransport(configuration: FCMTransportConfiguration(), accounts: { _ in throw StoreError(.io, "database away") },
                                logger: .discard)
        let owed = away.send([Self.push], deadline: .now + .seconds(5))
        #expect(owed.map(\.verdict) == [.retry(after: nil)] && owed.first?.fate == .notSent, "\(owed)")
        let broken = FCMTransport(configuration: FCMTransportConfiguration(), accounts: { _ in "{}" }, logger: .discard)
        #expect(broken.send([Self.push], deadline: .now + .seconds(5)).first?.recordedReason == "FCMServiceAccountInvalid")
    }
}
