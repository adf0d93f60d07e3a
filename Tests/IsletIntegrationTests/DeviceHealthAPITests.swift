import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

/// A10 through the API on the server's test clock: getDeviceHealth shows a device's tokens, their changes,
/// and flags for a start the phone never confirmed, an old push-to-start token, and an environment mix-up.
@Suite("Device health through the API (A10)")
struct DeviceHealthAPITests {
    static let firstUpdate = LiveActivityWorld.hex("e1", 40)

    func health(_ world: LiveActivityWorld, _ hwid: String) throws -> JSONObject {
        try #require(try world.expectOK(try world.server("getDeviceHealth", ["hwid": .string(hwid)]))["device"]?.objectValue)
    }

    func codes(_ device: JSONObject) -> [String] {
        (device["flags"]?.arrayValue ?? []).compactMap { $0.objectValue?["code"]?.stringValue }
    }

    @Test func aStartThePhoneNeverConfirmedIsFlaggedAfterFiveMinutes() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        #expect(codes(try health(world, "second_device")).isEmpty, "within the window: no flag yet")
        world.clock.advance(DeviceHealth.confirmationWindow + 1)
        let unconfirmed = try health(world, "second_device")
        #expect(codes(unconfirmed) == ["start_not_confirmed"])
        #expect(unconfirmed["flags"]?.arrayValue?.first?.objectValue?["live_activity_id"] == "ORDER_1")
        #expect(codes(try health(world, "first_third")).isEmpty, "its app reported the update token")
        // Once the activity ends there (its token reported gone), its start is still a confirmed one.
        try world.expectOK(call(world.running.port, "setActivityToken", ["application": .string(world.code), "hwid": "first_third",
                                                                         "activity_id": "ORDER_1", "activity_token": ""], token: world.auth))
        #expect(codes(try health(world, "first_third")).isEmpty, "ended on the phone is not unconfirmed")
        let refused = try world.server("getDeviceHealth", ["hwid": "nobody"])
        #expect(refused.status == 400 && refused.message == "hwid: no device 'nobody' is registered in application \(world.code); call registerDevice first")
    }

    @Test func theTokenHistoryKeepsChangesOnly() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        for token in [Self.firstUpdate, Self.firstUpdate, LiveActivityWorld.hex("e9", 40)] {
            try world.reportUpdateToken("first_third", activity: "ORDER_1", token: token)
            world.clock.advance(1)
        }
        let device = try health(world, "first_third")
        let history = (device["token_history"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(history.map { $0["kind"]?.stringValue ?? "" } == ["update", "update", "push-to-start", "push"], "newest first; a repeat adds nothing")
        #expect(history.first?["token_suffix"] == .string(String(LiveActivityWorld.hex("e9", 40).suffix(8))) && history.first?["slot"] == "ORDER_1")
        #expect(history.last?["slot"] == "production", "the push token's slot is its gateway")
        #expect(device["activity_tokens"]?.arrayValue?.first?.objectValue?["active"] == true)
        #expect(device["push_to_start_tokens"]?.arrayValue?.count == 1)

        // Thirty days on, the push-to-start token the app never reported again is flagged.
        world.clock.advance(DeviceHealth.pushToStartTokenAge)
        #expect(codes(try health(world, "first_third")).contains("stale_push_to_start_token"))
    }

    @Test func badDeviceTokenFromProductionFlagsTheEnvironmentMixUp() throws {
        let sandboxToken = LiveActivityWorld.hex("51", 80)   // first_third's push-to-start token, from a development build
        let transport = RecordingTransport { push, _ in
            push.deviceToken == sandboxToken ? PushOutcome(status: 400, reason: "BadDeviceToken") : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        let device = try health(world, "first_third")
        #expect(codes(device) == ["environment_mismatch"])
        let message = device["flags"]?.arrayValue?.first?.objectValue?["message"]?.stringValue ?? ""
        #expect(message.contains("APNs production answered BadDeviceToken") && message.contains("register it with gateway \"sandbox\""), "\(message)")
        #expect(codes(try health(world, "second_device")).isEmpty)

        // The same token registered again for production changes nothing: still flagged.
        world.clock.advance(1)
        try world.expectOK(call(world.running.port, "registerDevice", ["application": .string(world.code), "hwid": "first_third",
                                                                        "push_token": .string(LiveActivityWorld.hex("a1", 32))], token: world.auth))
        #expect(codes(try health(world, "first_third")) == ["environment_mismatch"], "a re-registration is no fix")
        // Registered again for sandbox: the mix-up is mended, the flag goes.
        world.clock.advance(1)
        try world.expectOK(call(world.running.port, "registerDevice", ["application": .string(world.code), "hwid": "first_third",
                                                                        "push_token": .string(LiveActivityWorld.hex("a1", 32)), "gateway": "sandbox"], token: world.auth))
        #expect(codes(try health(world, "first_third")).isEmpty)
    }
}
