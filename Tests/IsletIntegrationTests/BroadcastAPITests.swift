import Foundation
import Testing
import IsletApp
import IsletCore
import IsletDelivery
import IsletStore
import Synchronization

/// X5, broadcasts through the API: one updateLiveActivity to a channel is one request per environment, which
/// reaches every phone subscribed to the channel; durable and retried like pushes; bad requests refused by name.
@Suite("Broadcasts to channels through the API (X5)")
struct BroadcastAPITests {
    func server(_ port: Int, _ method: String, _ fields: JSONObject) throws -> RawHTTPResponse {
        try call(port, method, (["auth": "SECRET_API_TOKEN"] as JSONObject).merging(fields))
    }

    func ok(_ response: RawHTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        #expect(response.status == 200, "\(response.message ?? "")", sourceLocation: sourceLocation)
        return try #require(response.json?.objectValue?["response"]?.objectValue, sourceLocation: sourceLocation)
    }

    static let simulatorAuth = ["Authorization": "Token SECRET_API_TOKEN"]

    /// A production channel created through the API: Apple's id for it.
    func createChannel(_ port: Int, _ name: String) throws -> String {
        try #require(try ok(try server(port, "createLiveActivityChannel", ["name": .string(name), "environment": "production"]))["channel"]?
            .objectValue?["apns_channel_ids"]?.objectValue?["production"]?.stringValue)
    }

    /// `count` simulated iOS 18 phones, `fan-0`…
    func addPhones(_ port: Int, _ count: Int) throws -> [String] {
        let phones = (0..<count).map { "fan-\($0)" }
        for hwid in phones {
            #expect(try request(port, "/simulator/devices", body: #"{"hwid":"\#(hwid)","ios_version":"18.1"}"#, headers: Self.simulatorAuth).status == 200)
        }
        return phones
    }

    /// Each phone's card shows 1–0 on the channel, and the last push it got is the broadcast `uniqueID`.
    func expectEveryPhoneShowsTheGoal(_ port: Int, _ phones: [String], channel: String, from uniqueID: String,
                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        for hwid in phones {
            let phone = try #require(try request(port, method: "GET", "/simulator/devices/\(hwid)", headers: Self.simulatorAuth).json?.objectValue,
                                     sourceLocation: sourceLocation)
            let card = phone["lock_screen"]?.arrayValue?.first?.objectValue
            #expect(card?["content_state"] == ["home": 1, "away": 0] && card?["channel_id"] == .string(channel), "\(hwid)", sourceLocation: sourceLocation)
            #expect(phone["log"]?.arrayValue?.last?.objectValue?["apns_id"] == .string(uniqueID), "\(hwid)", sourceLocation: sourceLocation)
        }
    }

    static func score(_ home: Int64, _ away: Int64, channel: String = "match-42") -> JSONObject {
        ["channel": .string(channel), "live_activity": ["event": "update", "content-state": ["home": .int(home), "away": .int(away)]]]
    }

    /// The simulator plays Apple: 1,000 phones started the match's activity on the channel themselves; one update reaches them all.
    @Test func oneBroadcastReachesEveryPhoneOnTheChannel() throws {
        let running = try RunningServer()
        let port = running.port
        let channel = try createChannel(port, "match-42")
        let auth = Self.simulatorAuth
        let phones = try addPhones(port, 1000)
        for hwid in phones {
            let started = try request(port, "/simulator/devices/\(hwid)/activities", body: JSONValue.object([
                "activity_id": "MATCH_42", "attributes_type": "ScoreAttributes", "content_state": ["home": 0, "away": 0], "channel_id": .string(channel),
            ]).jsonText, headers: auth)
            #expect(started.status == 200, "\(started.message ?? "")")
        }
        // iOS does not start an activity on a channel APNs does not have; the route takes POST only (found by schemathesis).
        let unknown = try request(port, "/simulator/devices/fan-0/activities", body: #"{"activity_id":"X","attributes_type":"T","content_state":{},"channel_id":"dW5rbm93bg=="}"#,
                                  headers: auth)
        #expect(unknown.status == 400 && unknown.message == "channel_id: APNs has no such channel for this application, so iOS would not start the activity (X5)")
        let wrongMethod = try request(port, method: "GET", "/simulator/devices/fan-0/activities", headers: auth)
        #expect(wrongMethod.status == 405 && wrongMethod.headers["allow"] == "POST")
        let code = try #require(try ok(try server(port, "updateLiveActivity", ["notifications": [.object(Self.score(1, 0))]]))["Messages"]?
            .arrayValue?.first?.stringValue)
        var details: JSONObject = [:]
        #expect(try eventually(20) {
            details = try ok(try server(port, "getMessageDetails", ["message": .string(code)]))["message"]?.objectValue ?? [:]
            return details["status"] == "done"
        })
        #expect(details["channel"] == "match-42")
        let sent = (details["broadcasts"]?.arrayValue ?? []).compactMap { $0.objectValue }
        #expect(sent.count == 1 && sent[0]["environment"] == "production" && sent[0]["state"] == "sent" && sent[0]["attempts"] == 1)
        let uniqueID = try #require(sent[0]["apns_unique_id"]?.stringValue)
        // Every phone shows the score, from that one request.
        try expectEveryPhoneShowsTheGoal(port, phones, channel: channel, from: uniqueID)
    }

    /// Islet starts an activity on a channel on 1,000 simulated phones, then ONE update by the activity's id reaches
    /// them all through one broadcast request, and no push of their own.
    @Test func aStartOnAChannelThenOneUpdateByIDReachesEveryPhoneInOneRequest() throws {
        let running = try RunningServer()
        let port = running.port
        let channel = try createChannel(port, "final")
        let phones = try addPhones(port, 1000)
        let start = try #require(try ok(try server(port, "startLiveActivity", ["notifications": [.object(startNotification(
            ["devices": .array(phones.map { .string($0) }), "channel": "final"], activity: ["content-state": ["home": 0, "away": 0]], id: "FINAL"))]]))["Messages"]?
            .arrayValue?.first?.stringValue)
        func details(_ code: String) throws -> JSONObject { try ok(try server(port, "getMessageDetails", ["message": .string(code)]))["message"]?.objectValue ?? [:] }
        // 1,000 pushes in batches of 3 take about 16 s on PostgreSQL in a debug build; the deadline leaves room for a busy machine.
        #expect(try eventually(90) { try details(start)["status"] == "done" })
        let started = try details(start)
        #expect(started["counts"]?.objectValue?["sent"] == 1000, "\(started)")
        let update = try #require(try ok(try server(port, "updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["home": 1, "away": 0]], id: "FINAL"))]]))["Messages"]?.arrayValue?.first?.stringValue)
        #expect(try eventually(30) { try details(update)["status"] == "done" })
        let done = try details(update)
        #expect(done["counts"]?.objectValue?["sent"] == 0 && done["counts"]?.objectValue?["skipped"] == ["gets the channel's broadcast": 1000])
        let requests = (done["broadcasts"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(requests.count == 1 && requests.first?["state"] == "sent" && requests.first?["attempts"] == 1, "one request, once: \(done)")
        let uniqueID = try #require(requests.first?["apns_unique_id"]?.stringValue)
        // Every phone shows it from the broadcast, not from a push of its own.
        try expectEveryPhoneShowsTheGoal(port, phones, channel: channel, from: uniqueID)
    }

    /// A start with `channel`: phones on iOS 18 start the activity on the channel (`input-push-channel`) and get its
    /// broadcasts; an older phone gets the plain start, reports its update token and gets the activity's updates. An
    /// update or end by live_activity_id reaches both: a broadcast to the channel and a push to the update token, each phone once.
    @Test func aStartOnAChannelSubscribesThePhonesThatCan() throws {
        let running = try RunningServer()
        let port = running.port
        let auth = ["Authorization": "Token SECRET_API_TOKEN"]
        let channel = try #require(try ok(try server(port, "createLiveActivityChannel", ["name": "match-7", "environment": "production"]))["channel"]?
            .objectValue?["apns_channel_ids"]?.objectValue?["production"]?.stringValue)
        for (hwid, ios) in [("new18", "18.1"), ("old17", "17.4")] {
            #expect(try request(port, "/simulator/devices", body: #"{"hwid":"\#(hwid)","ios_version":"\#(ios)"}"#, headers: auth).status == 200)
        }
        func card(_ hwid: String) throws -> JSONObject? {
            try request(port, method: "GET", "/simulator/devices/\(hwid)", headers: auth).json?.objectValue?["lock_screen"]?.arrayValue?.first?.objectValue
        }
        let unknown = try server(port, "startLiveActivity", ["notifications": [.object(startNotification(["devices": ["new18"], "channel": "nope"], id: "MATCH_7"))]])
        #expect(unknown.status == 400 && unknown.message == "notifications[0].channel: no channel named 'nope' in this application (create it with createLiveActivityChannel)")
        let start = try #require(try ok(try server(port, "startLiveActivity", ["notifications": [.object(startNotification(
            ["devices": ["new18", "old17"], "channel": "match-7"], activity: ["content-state": ["home": 0, "away": 0]], id: "MATCH_7"))]]))["Messages"]?
            .arrayValue?.first?.stringValue)
        #expect(try eventually { try ok(try server(port, "getMessageDetails", ["message": .string(start)]))["message"]?.objectValue?["status"] == "done" })
        #expect(try eventually { try card("new18") != nil && card("old17") != nil })
        #expect(try card("new18")?["channel_id"] == .string(channel))
        #expect(try card("old17")?["channel_id"] == .null, "iOS 17 cannot start on a channel: the plain start")
        // Both took the start; only the iOS 17 phone has an update token (the other listens to the channel).
        let health = try ok(try server(port, "getDeviceHealth", ["hwid": "new18"]))["device"]?.objectValue
        #expect(health?["activity_tokens"] == [], "a start on a channel has no update token to report")
        #expect(try ok(try server(port, "getDeviceHealth", ["hwid": "old17"]))["device"]?.objectValue?["activity_tokens"]?.arrayValue?.count == 1)

        _ = try ok(try server(port, "updateLiveActivity", ["notifications": [.object(Self.score(1, 0, channel: "match-7"))]]))
        #expect(try eventually { try card("new18")?["content_state"] == ["home": 1, "away": 0] }, "the broadcast reached the phone on the channel")
        #expect(try card("old17")?["content_state"] == ["home": 0, "away": 0])
        // By the activity's id: the dry run shows both the push to the token and the broadcast to the channel.
        let byID = updateNotification(activity: ["content-state": ["home": 2, "away": 0]], id: "MATCH_7")
        let dry = try #require(try ok(try server(port, "updateLiveActivity", ["dry_run": true, "notifications": [.object(byID)]]))["dry_run"]?
            .arrayValue?.first?.objectValue)
        let planned = (dry["pushes"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(planned.first { $0["hwid"] == "new18" }?["skipped"] == "gets the channel's broadcast")
        #expect(planned.first { $0["hwid"] == "old17" }?["path"]?.stringValue?.hasPrefix("/3/device/") == true)
        let dryBroadcasts = (dry["broadcasts"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(dryBroadcasts.count == 1 && dryBroadcasts.first?["headers"]?.objectValue?["apns-channel-id"] == .string(channel)
                && dryBroadcasts.first?["payload"]?.objectValue?["aps"]?.objectValue?["content-state"] == ["home": 2, "away": 0], "\(dry)")
        let update = try #require(try ok(try server(port, "updateLiveActivity", ["notifications": [.object(byID)]]))["Messages"]?.arrayValue?.first?.stringValue)
        func details(_ code: String) throws -> JSONObject { try ok(try server(port, "getMessageDetails", ["message": .string(code)]))["message"]?.objectValue ?? [:] }
        #expect(try eventually { try details(update)["status"] == "done" })
        let done = try details(update)
        #expect(done["counts"]?.objectValue?["sent"] == 1, "to the update token")
        #expect(done["counts"]?.objectValue?["skipped"] == ["gets the channel's broadcast": 1], "the phone on the channel gets no push of its own")
        #expect(done["channel"] == "match-7")
        let sent = (done["broadcasts"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(sent.count == 1 && sent.first?["environment"] == "production" && sent.first?["state"] == "sent", "\(done)")
        #expect(try eventually { try card("new18")?["content_state"] == ["home": 2, "away": 0] }, "the broadcast reached the phone on the channel")
        #expect(try card("old17")?["content_state"] == ["home": 2, "away": 0], "the update token reached the other")
        // Each phone got the update once.
        for hwid in ["new18", "old17"] {
            let log = try request(port, method: "GET", "/simulator/devices/\(hwid)", headers: auth).json?.objectValue?["log"]?.arrayValue ?? []
            let received = log.filter { $0.objectValue?["payload"]?.objectValue?["aps"]?.objectValue?["content-state"] == ["home": 2, "away": 0] }
            #expect(received.count == 1, "\(hwid): \(log)")
        }
        // An end by id ends both cards.
        let end = try #require(try ok(try server(port, "updateLiveActivity", ["notifications": [.object(updateNotification(
            activity: ["content-state": ["home": 3, "away": 0]], id: "MATCH_7", event: "end"))]]))["Messages"]?.arrayValue?.first?.stringValue)
        #expect(try eventually { try details(end)["status"] == "done" })
        #expect(try eventually { try card("new18")?["ended"] == true && card("old17")?["ended"] == true })
        #expect(try card("new18")?["content_state"] == ["home": 3, "away": 0])
    }

    /// A `most_recent` channel keeps its latest message for a phone that joins later; a `none` channel keeps nothing.
    @Test func aPhoneThatJoinsLaterGetsTheLatestMessageOnlyWhereAppleStoresIt() throws {
        let running = try RunningServer()
        let port = running.port
        let auth = ["Authorization": "Token SECRET_API_TOKEN"]
        var ids: [String: String] = [:]
        for (name, policy) in [("kept", "most_recent"), ("none", "none")] {
            ids[name] = try #require(try ok(try server(port, "createLiveActivityChannel", ["name": .string(name), "storage_policy": .string(policy),
                                                                                           "environment": "production"]))["channel"]?
                .objectValue?["apns_channel_ids"]?.objectValue?["production"]?.stringValue)
            let code = try #require(try ok(try server(port, "updateLiveActivity", ["notifications": [.object(Self.score(3, 1, channel: name))]]))["Messages"]?
                .arrayValue?.first?.stringValue)
            #expect(try eventually { try ok(try server(port, "getMessageDetails", ["message": .string(code)]))["message"]?.objectValue?["status"] == "done" })
        }
        for name in ["kept", "none"] {
            #expect(try request(port, "/simulator/devices", body: #"{"hwid":"late-\#(name)","ios_version":"18.1"}"#, headers: auth).status == 200)
            let joined = try request(port, "/simulator/devices/late-\(name)/activities", body: JSONValue.object([
                "activity_id": "MATCH", "attributes_type": "ScoreAttributes", "content_state": ["home": 0, "away": 0], "channel_id": .string(ids[name]!),
            ]).jsonText, headers: auth)
            let card = joined.json?.objectValue?["lock_screen"]?.arrayValue?.first?.objectValue
            #expect(card?["content_state"] == (name == "kept" ? ["home": 3, "away": 1] : ["home": 0, "away": 0]), "\(name)")
        }
    }

    /// Apple unavailable for the first send: the broadcast is retried at its time and goes, with the headers
    /// Apple asks for (no topic; apns-expiration 0 on a channel that stores nothing).
    @Test func aBroadcastDuringAnOutageIsRetried() throws {
        let refusals = Mutex(1)
        let transport = RecordingTransport.withChannels { push, _ in
            guard case .broadcast = push.route else { return .delivered }
            if refusals.withLock({ left in defer { left -= 1 }; return left > 0 }) { return PushOutcome(status: 503, reason: "ServiceUnavailable") }
            var taken = PushOutcome.delivered
            taken.management = ManagementResponse(channelID: nil, uniqueID: "u-1", body: [])
            return taken
        }
        let world = try LiveActivityWorld(transport: transport)
        let port = world.running.port
        _ = try ok(try server(port, "createLiveActivityChannel", ["name": "match-42", "environment": "production"]))
        let code = try #require(try ok(try server(port, "updateLiveActivity", ["notifications": [.object(Self.score(2, 1))]]))["Messages"]?
            .arrayValue?.first?.stringValue)
        func details() throws -> JSONObject { try ok(try server(port, "getMessageDetails", ["message": .string(code)]))["message"]?.objectValue ?? [:] }
        #expect(try eventually { try details()["status"] == "retrying" })
        let waiting = try #require(try details()["broadcasts"]?.arrayValue?.first?.objectValue)
        #expect(waiting["apns_status"] == 503 && waiting["apns_reason"] == "ServiceUnavailable" && waiting["next_attempt_at"] != .null)
        #expect(try eventually {
            world.clock.advance(1)
            world.running.server.delivery?.kick()
            return try details()["status"] == "done"
        })
        let done = try #require(try details()["broadcasts"]?.arrayValue?.first?.objectValue)
        #expect(done["state"] == "sent" && done["attempts"] == 2 && done["apns_unique_id"] == "u-1")
        let requests = transport.pushes.filter { if case .broadcast = $0.route { true } else { false } }
        #expect(requests.count == 2 && requests[0].path == "/4/broadcasts/apps/\(LiveActivityWorld.bundle)")
        let headers = Dictionary(requests[0].headers.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(headers == ["apns-channel-id": "Y2hhbm5lbC0x", "apns-push-type": "liveactivity", "apns-priority": "5", "apns-expiration": "0"])
        #expect(requests[0].payload == requests[1].payload, "the same request again")
    }

    /// X5: a channel deleted after an activity was started on it reaches no phone any more; an update of the
    /// activity says so (in its dry run and its details) rather than sending to a channel Apple no longer has.
    @Test func anUpdateAfterItsChannelWasDeletedSaysSo() throws {
        let world = try LiveActivityWorld(transport: RecordingTransport.withChannels())
        let port = world.running.port
        _ = try ok(try server(port, "createLiveActivityChannel", ["name": "match-42", "environment": "production"]))
        _ = try world.waitUntilSent(try world.messageCodes(try server(port, "startLiveActivity", ["notifications": [
            .object(startNotification(["devices": ["second_device"], "channel": "match-42"]))]])))
        _ = try ok(try server(port, "deleteLiveActivityChannel", ["name": "match-42"]))
        let dry = try ok(try server(port, "updateLiveActivity", ["dry_run": true, "notifications": [.object(updateNotification())]]))
        let planned = dry["dry_run"]?.arrayValue?.first?.objectValue
        #expect(planned?["broadcasts"] == [["gateway": "production", "skipped": .string(BroadcastChannels.channelGone)]], "\(dry)")
        let code = try world.messageCodes(try server(port, "updateLiveActivity", ["notifications": [.object(updateNotification())]]))[0]
        var details: JSONObject = [:]
        #expect(try eventually {
            details = try ok(try server(port, "getMessageDetails", ["message": .string(code)]))["message"]?.objectValue ?? [:]
            return details["status"] == "done"
        })
        #expect(details["counts"]?.objectValue?["skipped"] == ["gets the channel's broadcast": 1])
        let request = details["broadcasts"]?.arrayValue?.first?.objectValue
        #expect(request?["state"] == "failed" && request?["apns_reason"] == .string(BroadcastChannels.channelGone) && request?["attempts"] == 0)
        #expect(!world.transport.pushes.contains { if case .broadcast = $0.route { true } else { false } }, "nothing sent to a deleted channel")
    }

    @Test func badBroadcastsAreRefusedByName() throws {
        let transport = RecordingTransport.withChannels()
        let world = try LiveActivityWorld(transport: transport)
        let port = world.running.port
        _ = try ok(try server(port, "createLiveActivityChannel", ["name": "match-42"]))
        func refused(_ fields: JSONObject) throws -> String { try server(port, "updateLiveActivity", fields).message ?? "" }
        #expect(try refused(["notifications": [.object(Self.score(0, 0, channel: "nope"))]])
                == "notifications[0].channel: no channel named 'nope' in this application (create it with createLiveActivityChannel)")
        #expect(try refused(["notifications": [.object(Self.score(0, 0).merging(["live_activity_id": "ORDER_1"]))]])
                == "notifications[0].live_activity_id: give live_activity_id or channel, not both: a channel reaches the phones subscribed to it (X5)")
        let tomorrow = world.clock.now.addingTimeInterval(86_400).formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day()
            .dateSeparator(.dash).time(includingFractionalSeconds: false).timeSeparator(.colon)).replacingOccurrences(of: "T", with: " ").prefix(16)
        #expect(try refused(["notifications": [.object(Self.score(0, 0).merging(["send_date": .string(String(tomorrow))]))]])
                == "notifications[0].send_date: a broadcast goes at once; leave send_date out with channel (X5)")
        #expect(try refused(["notifications": [.object(Self.score(0, 0)), .object(updateNotification())]])
                == "notifications: a request holds broadcasts to channels or updates of activities, not both: send them apart (X5)")
        // apns_expiration: 0 only on a channel that stores nothing (Apple's BadExpirationDate, refused before Apple is asked);
        // on a most_recent channel 0 or a time within Apple's 8 hours; broadcasts only.
        let now = Int64(world.clock.now.timeIntervalSince1970)
        #expect(try refused(["notifications": [.object(Self.score(0, 0).merging(["apns_expiration": .int(now + 600)]))]])
                == "notifications[0].apns_expiration: channel 'match-42' stores nothing (storage_policy none), where Apple takes apns_expiration 0 only (X5)")
        #expect(try refused(["dry_run": true, "notifications": [.object(Self.score(0, 0).merging(["apns_expiration": .int(now + 600)]))]])
                .hasPrefix("notifications[0].apns_expiration: channel 'match-42' stores nothing"), "a dry run checks it too")
        #expect(try refused(["notifications": [.object(Self.score(0, 0).merging(["apns_expiration": -5]))]])
                == "notifications[0].apns_expiration: must be 0 or a time in Unix seconds, got -5")
        #expect(try refused(["notifications": [.object(updateNotification(["apns_expiration": 0]))]])
                == "notifications[0].apns_expiration: is for broadcasts to a channel (X5); an activity's pushes expire when Islet stops retrying them")
        _ = try ok(try server(port, "createLiveActivityChannel", ["name": "kept", "storage_policy": "most_recent", "environment": "production"]))
        #expect(try refused(["notifications": [.object(Self.score(0, 0, channel: "kept").merging(["apns_expiration": .int(now + 9 * 3600)]))]])
                == "notifications[0].apns_expiration: must be 0 or a time (Unix seconds) from a minute to 8 hours ahead, the longest Apple keeps a channel's message (X5)")
        #expect(try refused(["notifications": [.object(Self.score(0, 0, channel: "kept").merging(["apns_expiration": .int(now + 30)]))]]).hasSuffix(
            "from a minute to 8 hours ahead, the longest Apple keeps a channel's message (X5)"), "too soon for a try")
        let keptDry = try ok(try server(port, "updateLiveActivity", ["dry_run": true, "notifications": [
            .object(Self.score(0, 0, channel: "kept").merging(["apns_expiration": .int(now + 600)]))]]))
        #expect(keptDry["dry_run"]?.arrayValue?.first?.objectValue?["requests"]?.arrayValue?.first?.objectValue?["headers"]?.objectValue?["apns-expiration"]
                == .string(String(now + 600)))
        // A dry run shows the exact requests, one per environment, and stores nothing.
        let dry = try ok(try server(port, "updateLiveActivity", ["dry_run": true, "notifications": [.object(Self.score(3, 2))]]))
        #expect(dry["Messages"] == [])
        let requests = (dry["dry_run"]?.arrayValue?.first?.objectValue?["requests"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(requests.map { $0["gateway"]?.stringValue ?? "" } == ["production", "sandbox"])
        #expect(requests.first?["path"] == .string("/4/broadcasts/apps/\(LiveActivityWorld.bundle)")
                && requests.first?["headers"]?.objectValue?["apns-channel-id"] == "Y2hhbm5lbC0x"
                && requests.first?["payload"]?.objectValue?["aps"]?.objectValue?["content-state"] == ["home": 3, "away": 2])
        #expect(try refused(["dry_run": true, "notifications": [.object(Self.score(0, 0, channel: "nope"))]])
                == "notifications[0].channel: no channel named 'nope' in this application (create it with createLiveActivityChannel)")
        #expect(try Storage(StorageLocation(world.running.database)).broadcasts.nextBroadcastDue() == nil, "a dry run stores nothing")
        let big: JSONObject = ["channel": "match-42", "live_activity": ["event": "update", "content-state": ["text": .string(String(repeating: "x", count: 5200))]]]
        #expect(try refused(["notifications": [.object(big)]]).hasPrefix("notifications[0]: the APNs payload would be"))
        let fits: JSONObject = ["channel": "match-42", "live_activity": ["event": "update", "content-state": ["text": .string(String(repeating: "x", count: 4500))]]]
        #expect(try server(port, "updateLiveActivity", ["notifications": [.object(fits)]]).status == 200, "a broadcast may be up to 5 KB")
        #expect(eventually { transport.pushes.filter { if case .broadcast = $0.route { true } else { false } }.count == 2 },
                "only the one that fits, once per environment")
    }
}
