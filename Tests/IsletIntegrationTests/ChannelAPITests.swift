import Foundation
import Testing
import IsletApp
import IsletCore
import IsletSQL
import IsletStore
import IsletDelivery
import Synchronization

/// X5 through the HTTP API, against the built-in simulator as Apple's channel management API: channels
/// created and deleted at Apple's side and recorded by Islet in step, Apple's limit, bad input by name.
@Suite("Broadcast channels through the API (X5)")
struct ChannelAPITests {
    func call(_ running: RunningServer, _ method: String, _ fields: JSONObject) throws -> RawHTTPResponse {
        try IsletIntegrationTests.call(running.port, method, (["auth": "SECRET_API_TOKEN"] as JSONObject).merging(fields))
    }

    @discardableResult
    func ok(_ response: RawHTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        #expect(response.status == 200, "\(response.message ?? "")", sourceLocation: sourceLocation)
        return try #require(response.json?.objectValue?["response"]?.objectValue, sourceLocation: sourceLocation)
    }

    /// The simulator's channels of the demo application: Apple's side, in one environment or both.
    func appleSide(_ running: RunningServer, _ gateway: Gateway? = nil) throws -> [String] {
        try Storage(StorageLocation(running.database)).simulated.simulatedChannels(application: ApplicationCode("XXXXX-XXXXX")!, gateway: gateway).map(\.id)
    }

    @Test func channelsAreCreatedListedAndDeletedAtApplesSideAndIslets() throws {
        let running = try RunningServer()
        let created = try #require(try ok(try call(running, "createLiveActivityChannel", ["name": "match-42", "storage_policy": "most_recent"]))["channel"]?.objectValue)
        #expect(created["name"] == "match-42" && created["storage_policy"] == "most_recent")
        let ids = try #require(created["apns_channel_ids"]?.objectValue)
        #expect(ids.keys == ["production", "sandbox"], "both environments by default")
        let production = try #require(ids["production"]?.stringValue), sandbox = try #require(ids["sandbox"]?.stringValue)
        #expect(Data(base64Encoded: production)?.count == 16 && production != sandbox, "Apple's ids: base64")
        #expect(Set(try appleSide(running)) == [production, sandbox])
        #expect(try appleSide(running, .production) == [production] && appleSide(running, .sandbox) == [sandbox], "Apple keeps the environments apart")

        let only = try #require(try ok(try call(running, "createLiveActivityChannel", ["name": "flight.BA117", "environment": "sandbox"]))["channel"]?.objectValue)
        #expect(only["apns_channel_ids"]?.objectValue?.keys == ["sandbox"] && only["storage_policy"] == "none")

        let duplicate = try call(running, "createLiveActivityChannel", ["name": "match-42"])
        #expect(duplicate.status == 400 && duplicate.message == "name: a channel named 'match-42' already exists")
        #expect(try appleSide(running).count == 3, "a refused request creates nothing at Apple's")

        let page = try ok(try call(running, "listLiveActivityChannels", ["limit": 1]))
        #expect(page["channels"]?.arrayValue?.first?.objectValue?["name"] == "flight.BA117" && page["next_cursor"] == "flight.BA117")
        let rest = try ok(try call(running, "listLiveActivityChannels", ["limit": 1, "cursor": "flight.BA117"]))
        #expect(rest["channels"]?.arrayValue?.first?.objectValue == created && rest["next_cursor"] == .null)
        #expect(try ok(try call(running, "getLiveActivityChannel", ["name": "match-42"]))["channel"]?.objectValue == created)

        try ok(try call(running, "deleteLiveActivityChannel", ["name": "match-42"]))
        #expect(try appleSide(running).count == 1)
        let gone = try call(running, "getLiveActivityChannel", ["name": "match-42"])
        #expect(gone.status == 400 && gone.message == "name: no channel named 'match-42' in this application (create it with createLiveActivityChannel)")
        #expect(try call(running, "deleteLiveActivityChannel", ["name": "match-42"]).status == 400)
    }

    /// `--delete-idle-channels`: a channel no broadcast, update or start used for that long is deleted at Apple's
    /// and in Islet; a used one stays; a refusal leaves the application's channels for the next look; Apple
    /// unreachable ends a look.
    @Test func channelsLeftIdleAreDeletedAtApplesSideAndIslets() throws {
        struct Apple { var created = 0; var deletes: [String] = []; var refused: Set<String> = []; var unreachable = false }
        let apple = Mutex(Apple())
        let transport = RecordingTransport { push, _ in
            guard case .manageChannels(let method, _, let id) = push.route else { return .delivered }
            guard method == "DELETE" else {
                var created = PushOutcome(status: 201)
                created.management = ManagementResponse(channelID: apple.withLock { a in a.created += 1; return "aWQt\(a.created)" }, body: [])
                return created
            }
            return apple.withLock { a in
                a.deletes.append(id ?? "")
                if a.unreachable { return PushOutcome(status: 503, reason: "ServiceUnavailable") }
                return a.refused.contains(id ?? "") ? PushOutcome(status: 400, reason: "BadChannelId") : PushOutcome(status: 204)
            }
        }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let world = try LiveActivityWorld(transport: transport, clock: TestClock(t0)) { $0.retention.idleChannels = .seconds(86_400) }
        func call(_ method: String, _ fields: JSONObject) throws -> RawHTTPResponse {
            try IsletIntegrationTests.call(world.running.port, method, (["auth": "SECRET_API_TOKEN"] as JSONObject).merging(fields))
        }
        for name in ["a-refused", "idle", "started", "used"] {
            try ok(try call("createLiveActivityChannel", ["name": .string(name), "environment": "production"]))
        }
        apple.withLock { $0.refused = ["aWQt1"] }
        world.clock.advance(12 * 3600)
        let usedAt = world.clock.now
        try ok(try call("updateLiveActivity", ["notifications": [["channel": "used", "live_activity": ["event": "update", "content-state": ["home": 1]]]]]))
        // A start scheduled three days out keeps its channel until it has gone.
        try ok(try call("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["second_device"], "channel": "started",
                                                                                           "send_date": "2027-01-18 08:00"]))]]))
        func names() throws -> [String] {
            try ok(try call("listLiveActivityChannels", [:]))["channels"]?.arrayValue?.compactMap { $0.objectValue?["name"]?.stringValue } ?? []
        }
        let used = try ok(try call("getLiveActivityChannel", ["name": "used"]))["channel"]?.objectValue
        #expect(used?["last_used_at"] == .string(usedAt.formatted(.iso8601)))
        #expect(try ok(try call("getLiveActivityChannel", ["name": "idle"]))["channel"]?.objectValue?["last_used_at"] == .null)

        world.clock.advance(13 * 3600)   // a day after the creations, 13 hours after the use
        #expect(world.running.server.retention.deleteIdleChannels() == 0)
        #expect(apple.withLock { $0.deletes } == ["aWQt1"], "a refusal leaves the application's channels for the next look")
        #expect(try names() == ["a-refused", "idle", "started", "used"])
        apple.withLock { $0.refused = [] }
        #expect(world.running.server.retention.deleteIdleChannels() == 2)
        #expect(apple.withLock { $0.deletes } == ["aWQt1", "aWQt1", "aWQt2"])
        #expect(try names() == ["started", "used"], "the channels used within the day stay")

        world.clock.advance(24 * 3600)
        apple.withLock { $0.unreachable = true }
        #expect(world.running.server.retention.deleteIdleChannels() == 0)
        #expect(apple.withLock { $0.deletes.count } == 4, "no answer: the look ends at the first")
        apple.withLock { $0.unreachable = false }
        #expect(world.running.server.retention.deleteIdleChannels() == 1)
        #expect(try names() == ["started"], "its start goes out in a day")
        world.clock.advance(48 * 3600)
        #expect(world.running.server.retention.deleteIdleChannels() == 1)
        #expect(try names() == [])
    }

    @Test func aChannelDeletedBehindIsletsBackIsDeletedAllTheSame() throws {
        let running = try RunningServer()
        let created = try ok(try call(running, "createLiveActivityChannel", ["name": "score", "environment": "production"]))
        let id = try #require(created["channel"]?.objectValue?["apns_channel_ids"]?.objectValue?["production"]?.stringValue)
        #expect(try Storage(StorageLocation(running.database)).simulated.deleteSimulatedChannel(application: ApplicationCode("XXXXX-XXXXX")!, id: id,
                                                                                                gateway: .production))
        try ok(try call(running, "deleteLiveActivityChannel", ["name": "score"]))
        #expect(try call(running, "listLiveActivityChannels", [:]).json?.objectValue?["response"]?.objectValue?["channels"] == [])
    }

    /// checkLiveActivityChannels names what differs between Islet's records and Apple's channels, and with
    /// `repair` drops the records Apple no longer has; Apple's channels Islet does not know are only named.
    @Test func recordsAreCheckedAgainstApplesListAndRepaired() throws {
        let running = try RunningServer()
        let created = try ok(try call(running, "createLiveActivityChannel", ["name": "score"]))
        let ids = try #require(created["channel"]?.objectValue?["apns_channel_ids"]?.objectValue)
        let production = try #require(ids["production"]?.stringValue)
        let application = ApplicationCode("XXXXX-XXXXX")!
        let simulated = try Storage(StorageLocation(running.database)).simulated
        let clean = try ok(try call(running, "checkLiveActivityChannels", [:]))
        #expect(clean["missing_at_apple"] == [] && clean["unknown_to_islet"] == [] && clean["repaired"] == false)
        // Behind Islet's back: Apple loses the production channel, and someone else creates one.
        #expect(try simulated.deleteSimulatedChannel(application: application, id: production, gateway: .production))
        try simulated.saveSimulatedChannel(application: application, id: "c29tZW9uZS1lbHNl", policy: 0, gateway: .production, at: Date())
        let found = try ok(try call(running, "checkLiveActivityChannels", [:]))
        #expect(found["missing_at_apple"] == [["name": "score", "environment": "production", "apns_channel_id": .string(production)]])
        #expect(found["unknown_to_islet"] == [["environment": "production", "apns_channel_id": "c29tZW9uZS1lbHNl"]],
                "each environment's list is its own, as Apple's")
        #expect(try ok(try call(running, "getLiveActivityChannel", ["name": "score"]))["channel"]?.objectValue?["apns_channel_ids"]?.objectValue?.count == 2,
                "checking changes nothing")
        let repaired = try ok(try call(running, "checkLiveActivityChannels", ["repair": true]))
        #expect(repaired["repaired"] == true)
        #expect(try ok(try call(running, "getLiveActivityChannel", ["name": "score"]))["channel"]?.objectValue?["apns_channel_ids"]?.objectValue?.keys == ["sandbox"])
        #expect(try appleSide(running).contains("c29tZW9uZS1lbHNl"), "Apple's channels are never deleted by a check")
        #expect(try ok(try call(running, "checkLiveActivityChannels", [:]))["missing_at_apple"] == [])
    }

    @Test func theTenThousandAndFirstChannelIsRefusedBeforeAppleIsAsked() throws {
        let running = try RunningServer()
        let storage = try Storage(StorageLocation(running.database))
        try storage.database.write { c in
            try c.run("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
                INSERT INTO channels (application, name, gateway, apns_channel_id, storage_policy, created_at)
                SELECT ?, 'c' || i, 'production', 'id' || i, 'none', 0 FROM n
                """, [.text("XXXXX-XXXXX")])
        }
        let refused = try call(running, "createLiveActivityChannel", ["name": "one-more"])
        #expect(refused.status == 400 && refused.message == "name: the application already has 10000 production channels, Apple's limit per application "
                + "and environment; delete channels that are no longer used (deleteLiveActivityChannel)")
        #expect(try appleSide(running).isEmpty)
        #expect(try ok(try call(running, "createLiveActivityChannel", ["name": "one-more", "environment": "sandbox"]))["channel"] != nil,
                "Apple counts each environment apart")
    }

    @Test func badFieldsAreRefusedByName() throws {
        let running = try RunningServer()
        for (fields, message) in [
            (["name": "two words"] as JSONObject, "name: must be 1 to 64 letters, digits, '-', '_' or '.'"),
            (["name": .string(String(repeating: "a", count: 65))], "name: must be 1 to 64 letters, digits, '-', '_' or '.'"),
            ([:], "name: is required"),
            (["name": "ok", "storage_policy": "sometimes"], "storage_policy: must be one of none, most_recent, got 'sometimes'"),
            (["name": "ok", "environment": "staging"], "environment: must be one of production, sandbox, both, got 'staging'"),
        ] {
            let refused = try call(running, "createLiveActivityChannel", fields)
            #expect(refused.status == 400 && refused.message == message, "\(fields.entries.map(\.key)): \(refused.message ?? "")")
        }
        #expect(try appleSide(running).isEmpty)
    }
}

/// Issue 44: a call that asks Apple holds a shared HTTP worker until Apple answers; an endpoint that accepts and never
/// answers must not take every worker. Two calls of one application wait at once at most (eight in all); the next is
/// refused at once with 429 and `Retry-After`, and the waiting ones finish when Apple answers.
@Suite("Channel management waits a few at a time (issue 44)")
struct ChannelManagementAtOnceTests {
    @Test func aThirdCallOfOneApplicationIsRefusedWhileTwoWaitForApple() throws {
        let answer = DispatchSemaphore(value: 0), asked = Atomic<Int>(0)
        let world = try LiveActivityWorld(transport: RecordingTransport { push, _ in
            guard case .manageChannels = push.route else { return .delivered }
            asked.add(1, ordering: .relaxed)
            answer.wait()   // Apple takes its time
            var created = PushOutcome(status: 201)
            created.management = ManagementResponse(channelID: Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString(), body: [])
            return created
        })
        let results = Mutex<[String: Int]>([:])
        let port = world.running.port, credentials: JSONObject = ["application": .string(world.code), "auth": .string(world.auth)]
        func create(_ name: String) {
            Thread {
                let response = try? call(port, "createLiveActivityChannel", credentials.merging(["name": .string(name), "environment": "production"]))
                results.withLock { $0[name] = response?.status ?? -1 }
            }.start()
        }
        create("first")
        create("second")
        #expect(eventually { asked.load(ordering: .relaxed) == 2 }, "two calls wait for Apple")
        let third = try world.server("createLiveActivityChannel", ["name": "third", "environment": "production"])
        #expect(third.status == 429)
        #expect(third.message == BroadcastChannels.managementBusy(atOnce: 8, perApplication: 2))
        #expect(third.headers["retry-after"] == "5")
        #expect(asked.load(ordering: .relaxed) == 2, "the third never asked Apple")
        answer.signal()
        answer.signal()
        #expect(eventually { results.withLock { $0 } == ["first": 200, "second": 200] }, "\(results.withLock { $0 })")
        answer.signal()
        let later = try world.server("createLiveActivityChannel", ["name": "third", "environment": "production"])
        #expect(later.status == 200, "once they are answered, the next call goes: \(later.message ?? "")")
    }
}
