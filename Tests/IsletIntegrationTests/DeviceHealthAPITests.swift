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

    /// The flags getLiveActivity shows for each device of the activity, by HWID.
    func activityFlags(_ world: LiveActivityWorld, _ activity: String) throws -> [String: [String]] {
        let answer = try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": .string(activity)]))
        let devices = (answer["live_activity"]?.objectValue?["devices"]?.arrayValue ?? []).compactMap(\.objectValue)
        return Dictionary(uniqueKeysWithValues: devices.map { ($0["hwid"]?.stringValue ?? "", codes($0)) })
    }

    @Test func aStartThePhoneNeverConfirmedIsFlaggedAfterFiveMinutes() throws {
        let world = try LiveActivityWorld()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        #expect(codes(try health(world, "second_device")).isEmpty, "within the window: no flag yet")
        #expect(try activityFlags(world, "ORDER_1") == ["first_third": [], "second_device": []])
        world.clock.advance(DeviceHealth.confirmationWindow + 1)
        let unconfirmed = try health(world, "second_device")
        #expect(codes(unconfirmed) == ["start_not_confirmed"])
        #expect(try activityFlags(world, "ORDER_1") == ["first_third": [], "second_device": ["start_not_confirmed"]], "getLiveActivity flags it too")
        #expect(unconfirmed["flags"]?.arrayValue?.first?.objectValue?["live_activity_id"] == "ORDER_1")
        #expect(codes(try health(world, "first_third")).isEmpty, "its app reported the update token")
        // Once the activity ends there (its token reported gone), its start is still a confirmed one.
        try world.expectOK(call(world.running.port, "setActivityToken", ["application": .string(world.code), "hwid": "first_third",
                                                                         "activity_id": "ORDER_1", "activity_token": ""], token: world.auth))
        #expect(codes(try health(world, "first_third")).isEmpty, "ended on the phone is not unconfirmed")
        let refused = try world.server("getDeviceHealth", ["hwid": "nobody"])
        #expect(refused.status == 400 && refused.message == "hwid: no device 'nobody' is registered in application \(world.code); call registerDevice first")
    }

    /// X5: a start on a broadcast channel never brings an update token, so it is not flagged unconfirmed;
    /// the same start's plain copy to an older phone still is.
    @Test func aStartOnAChannelIsNotFlaggedForItsMissingToken() throws {
        let world = try LiveActivityWorld(transport: .withChannels())
        try world.expectOK(try world.server("createLiveActivityChannel", ["name": "match", "environment": "production"]))
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["channel": "match"]))]])))
        let sent = world.transport.pushes.filter { $0.route == .device }
        #expect(sent.first { $0.deviceToken == LiveActivityWorld.hex("53", 80) }.map { String(decoding: $0.payload, as: UTF8.self).contains("input-push-channel") } == true,
                "second_device (iOS 18.0) starts on the channel")
        world.clock.advance(DeviceHealth.confirmationWindow + 1)
        #expect(codes(try health(world, "second_device")).isEmpty)
        #expect(codes(try health(world, "first_third")) == ["start_not_confirmed"], "iOS 17.4: the plain start, still expected to report a token")
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

    /// getLiveActivity shows each device's flags about the activity: an update token APNs refuses as foreign
    /// to its environment, until the device registers again with the other gateway.
    @Test func getLiveActivityFlagsAnUpdateTokenOfTheOtherEnvironment() throws {
        let developmentToken = LiveActivityWorld.hex("d7", 40)
        let transport = RecordingTransport { push, _ in
            push.deviceToken == developmentToken ? PushOutcome(status: 400, reason: "BadDeviceToken") : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: Self.firstUpdate)
        try world.reportUpdateToken("second_device", activity: "ORDER_1", token: developmentToken)
        #expect(try activityFlags(world, "ORDER_1") == ["first_third": [], "second_device": []])
        world.nextUpdateTurn()
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification())]])))
        #expect(try activityFlags(world, "ORDER_1") == ["first_third": [], "second_device": ["environment_mismatch"]])
        world.clock.advance(1)
        try world.expectOK(call(world.running.port, "registerDevice", ["application": .string(world.code), "hwid": "second_device",
                                                                        "push_token": .string(LiveActivityWorld.hex("a2", 32)), "gateway": "sandbox"], token: world.auth))
        #expect(try activityFlags(world, "ORDER_1") == ["first_third": [], "second_device": []], "registered for sandbox: mended")
    }
}
