import Foundation
import Testing
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletSimulator
@testable import IsletSQL
import IsletStore

/// X5: the simulator answers Apple's channel management API over real HTTP/2, with Apple's codes and
/// reasons, one registry per application and environment, and Apple's limit in each.
@Suite("APNs simulator: channel management (X5)")
struct SimulatedChannelTests {
    let world: SimulatorWorld

    init() throws { world = try SimulatorWorld() }

    func manage(_ method: String, _ path: String, channel: String? = nil, body: JSONValue? = nil, application: ApplicationCode? = nil,
                bundle: String = "com.example.food", gateway: Gateway = .production) -> PushOutcome {
        world.client.send([.manageChannels(application: application ?? world.app, gateway: gateway, bundleID: bundle, method: method,
                                           path: path, channelID: channel, body: body?.jsonBytes ?? [])]).first ?? .unknown("none")
    }

    @Test func aChannelIsCreatedReadListedAndDeletedAsAppleDoes() throws {
        let created = manage("POST", "channels", body: BroadcastChannels.createBody(.none))
        let id = try #require(created.management?.channelID)
        #expect(created.status == 201 && Data(base64Encoded: id)?.count == 16)
        let read = manage("GET", "channels", channel: id)
        #expect(read.status == 200 && read.management.map { String(decoding: $0.body, as: UTF8.self) } == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        let all = manage("GET", "all-channels")
        #expect(all.status == 200 && all.management.map { String(decoding: $0.body, as: UTF8.self) } == #"{"channels":["\#(id)"]}"#)
        #expect(manage("GET", "all-channels", application: world.other, bundle: "com.example.other").management?.body == Array(#"{"channels":[]}"#.utf8),
                "another application has its own")
        #expect(manage("DELETE", "channels", channel: id).status == 204)
        let again = manage("DELETE", "channels", channel: id)
        #expect(again.status == 400 && again.reason == "ChannelNotRegistered", "Apple's status for a channel it does not have")
    }

    @Test func badRequestsGetApplesReasons() throws {
        let good = BroadcastChannels.createBody(.mostRecent)
        let mismatch = manage("POST", "channels", body: good, bundle: "com.example.other")
        #expect(mismatch.status == 403 && mismatch.reason == "TopicMismatch", "the bundle id is the key's")
        #expect(manage("POST", "channels", body: good, bundle: "com.example.food.push-type.liveactivity").reason == "TopicDisallowed")
        let unparsable = Push.manageChannels(application: world.app, gateway: .production, bundleID: "com.example.food", method: "POST", path: "channels",
                                         body: Array("{not json".utf8))
        #expect(world.client.send([unparsable]).first?.reason == "BadRequestPayload")
        #expect(manage("POST", "channels", body: ["message-storage-policy": 0, "push-type": "LiveActivity", "colour": "red"]).reason == "BadRequestParams")
        #expect(manage("POST", "channels", body: ["message-storage-policy": 0]).reason == "MissingPushType")
        #expect(manage("POST", "channels", body: ["message-storage-policy": 0, "push-type": "Alert"]).reason == "InvalidPushType")
        #expect(manage("POST", "channels", body: ["message-storage-policy": 2, "push-type": "LiveActivity"]).reason == "BadMessageStoragePolicy")
        #expect(manage("GET", "channels").reason == "MissingChannelId")
        #expect(manage("GET", "channels", channel: "not base64!").reason == "BadChannelId")
        #expect(manage("GET", "channels", channel: "dW5rbm93bg==").reason == "ChannelNotRegistered")
        #expect(manage("PUT", "channels", body: good).status == 405)
        #expect(manage("GET", "nothing-here").status == 404)
    }

    func broadcast(_ channel: String, expiration: Int64 = 0, bundle: String = "com.example.food", pushType: PushType = .liveActivity,
                   payload: [UInt8] = Array(#"{"aps":{"timestamp":\#(Int64(Date().timeIntervalSince1970) + 60),"event":"update","content-state":{"home":1}}}"#.utf8)) -> PushOutcome {
        var push = Push.broadcast(application: world.app, gateway: .production, bundleID: bundle, channelID: channel, priority: 10,
                                  expiration: expiration, payload: payload)
        if pushType != .liveActivity {
            push = Push(application: world.app, deviceToken: "", gateway: .production, pushType: pushType, topic: "", priority: 10, apnsID: "",
                        payload: payload, expiration: expiration)
            push.route = .broadcast(channelID: channel, bundleID: bundle)
        }
        return world.client.send([push]).first ?? .unknown("none")
    }

    /// Apple's broadcast endpoint: its checks, then every phone on the channel, and only those.
    @Test func aBroadcastReachesThePhonesOnItsChannelUnderApplesRules() throws {
        let none = try #require(manage("POST", "channels", body: BroadcastChannels.createBody(.none)).management?.channelID)
        let kept = try #require(manage("POST", "channels", body: BroadcastChannels.createBody(.mostRecent)).management?.channelID)
        try world.addDevice("on")
        try world.addDevice("off")
        _ = try APNsSimulator.withDevice(world.store, world.app, "on") { device in
            device.startOnChannel(activityID: "M", attributesType: "Score", attributes: [:], contentState: ["home": 0], channelID: none, now: Date())
        }
        let taken = broadcast(none)
        #expect(taken.status == 200 && taken.management?.uniqueID != nil)
        #expect(try world.device("on").activities.first?.contentState == #"{"home":1}"#)
        #expect(try world.device("off").log.isEmpty, "a phone not on the channel gets nothing")
        #expect(broadcast(none, expiration: 1_900_000_000).reason == "BadExpirationDate", "a channel that stores nothing takes expiration 0 only")
        #expect(broadcast(kept, expiration: 1_900_000_000).status == 200)
        #expect(broadcast("dW5rbm93bg==").reason == "ChannelNotRegistered")
        #expect(broadcast("").reason == "MissingChannelId")
        #expect(broadcast("not base64!").reason == "BadChannelId")
        let mismatch = broadcast(none, bundle: "com.example.other")
        #expect(mismatch.status == 403 && mismatch.reason == "TopicMismatch")
        #expect(broadcast(none, pushType: .alert).reason == "InvalidPushType")
        #expect(broadcast(none, bundle: "com.example.food.push-type.liveactivity").reason == "TopicDisallowed")
        // A channel that stores its latest message keeps it until its apns-expiration (at most 8 hours); 0 keeps nothing.
        let soon = Int64(Date().timeIntervalSince1970) + 60
        #expect(broadcast(kept, expiration: soon).status == 200)
        #expect(try world.store.simulatedChannelMessage(application: world.app, id: kept)?.keptUntil == Date(timeIntervalSince1970: Double(soon)))
        #expect(broadcast(kept, expiration: 0).status == 200)
        #expect(try world.store.simulatedChannelMessage(application: world.app, id: kept) == nil)
        let large = broadcast(none, payload: Array(repeating: UInt8(ascii: "x"), count: 5121))
        #expect(large.status == 413 && large.reason == "PayloadTooLarge")
        #expect(broadcast(none, payload: Array(#"{"aps":{"timestamp":1,"event":"update","content-state":{"home":"#.utf8) + Array(repeating: UInt8(ascii: "1"), count: 5000) + Array("}}}".utf8)).status == 200,
                "5 KB is allowed, more than a device push's 4 KB")
    }

    @Test func theTenThousandAndFirstChannelIsRefused() throws {
        try world.store.database.write { c in
            try c.run("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
                INSERT INTO simulated_channels (application, channel_id, storage_policy, created_at) SELECT ?, 'id' || i, 0, 0 FROM n
                """, [.text(world.app.rawValue)])
        }
        #expect(manage("POST", "channels", body: BroadcastChannels.createBody(.none)).status == 201, "the 10,000th")
        let refused = manage("POST", "channels", body: BroadcastChannels.createBody(.none))
        #expect(refused.status == 400 && refused.reason == "CannotCreateChannelConfig")
        // The sandbox has a limit of its own, and its own list; a production channel is not there.
        let sandbox = manage("POST", "channels", body: BroadcastChannels.createBody(.none), gateway: .sandbox)
        let id = try #require(sandbox.management?.channelID)
        #expect(sandbox.status == 201)
        #expect(manage("GET", "all-channels", gateway: .sandbox).management?.body == Array(#"{"channels":["\#(id)"]}"#.utf8))
        #expect(manage("GET", "channels", channel: id).reason == "ChannelNotRegistered", "not a production channel")
        #expect(manage("GET", "channels", channel: id, gateway: .sandbox).status == 200)
    }
}
