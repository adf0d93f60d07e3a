import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

@Suite("Durable delivery, retries, statistics and schedules (A5, S5, X4)")
struct DeliveryTests {
    @Test func retryableAnswersAreRetriedUntilTheyAreDeliveredOrFail() throws {
        // 429 twice, then 200, for first_third's push-to-start token; 500 until the push expires for second_device's.
        let transport = RecordingTransport { push, earlier in
            if push.deviceToken == LiveActivityWorld.hex("51", 80) { return earlier < 2 ? PushOutcome(status: 429, reason: "TooManyRequests") : .delivered }
            if push.deviceToken == LiveActivityWorld.hex("53", 80) { return PushOutcome(status: 500, reason: "InternalServerError") }
            return .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        let acceptedAt = world.clock.now
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]]))
        let appCode = ApplicationCode(world.code)!
        // Retries are due on the server's clock: move it a few seconds at a time until the 429s are past.
        let sent = try eventually {
            world.clock.advance(5)
            world.running.server.delivery?.kick()
            return try world.running.server.messages.messageDetails(code: codes[0], in: appCode)?.sent == 1
        }
        #expect(sent)
        #expect(world.pushes(to: LiveActivityWorld.hex("51", 80)).count == 3, "two 429s, then delivered")
        // With the clock still, second_device's push settles waiting for its next attempt, and says when.
        let waiting = try eventually {
            let retrying = try world.expectOK(try world.server("getMessageDetails", ["message": .string(codes[0])]))["message"]?.objectValue
            return retrying?["status"] == "retrying" && retrying?["counts"]?.objectValue?["retrying"] == 1 && retrying?["next_attempt_at"]?.stringValue != nil
        }
        #expect(waiting)

        // Past the push's expiry (1 hour after its send time) the 500s stop and the record says expired.
        world.clock.advance(3700)
        world.running.server.delivery?.kick()
        let expired = try eventually { try world.running.server.messages.messageDetails(code: codes[0], in: appCode)?.pending[.expired] == 1 }
        #expect(expired)
        let stats = try world.expectOK(try world.server("getMessageDetails", ["message": .string(codes[0])]))["message"]?.objectValue
        #expect(stats?["status"] == "done")
        #expect(stats?["counts"] == ["targeted": 2, "sent": 1, "failed": 0, "skipped": [:], "expired": 1])
        #expect(world.pushes(to: LiveActivityWorld.hex("53", 80)).count >= 2)
        // (Times are stored to the millisecond; the header is whole seconds.)
        let expirations = Set(world.transport.pushes.compactMap(\.expiration))
        #expect(expirations.count == 1 && world.transport.pushes.allSatisfy { $0.expiration != nil },
                "the same apns-expiration on every attempt: \(expirations)")
        #expect(expirations.allSatisfy { abs($0 - (Int64(acceptedAt.timeIntervalSince1970) + 3600)) <= 1 }, "the send time plus the push lifetime")

        let activity = try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue
        #expect(activity?["state"] == "active")
        #expect(activity?["devices"]?.arrayValue?.map { $0.objectValue?["hwid"] } == ["first_third"], "only where the start reached APNs")
    }

    @Test func getMessageDetailsWorksWithTheTokenAlone() throws {
        let world = try LiveActivityWorld()
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]]))
        _ = try world.waitUntilSent(codes)
        // As Pushwoosh's getMessageDetails {auth, message}: the token names the application (E2, X4).
        let response = try call(world.running.port, "getMessageDetails", ["auth": .string(world.auth), "message": .string(codes[0])])
        #expect(try world.expectOK(response)["message"]?.objectValue?["counts"]?.objectValue?["sent"] == 2)
        let unknown = try world.server("getMessageDetails", ["message": "AAAAA-AAAAAAAA-AAAAAAAA"])
        #expect(unknown.message == "message: no message 'AAAAA-AAAAAAAA-AAAAAAAA' in this application")
    }

    @Test func aTokenRegisteredAgainAfterAPNsFoundItInvalidIsKept() throws {
        // The 410 says the token was invalid in 1970; the device registered it since: it is alive (issue 5).
        let transport = RecordingTransport { push, _ in
            push.deviceToken == LiveActivityWorld.hex("51", 80) ? PushOutcome(status: 410, reason: "Unregistered", timestamp: 1) : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "A"))]])))
        let next = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "B"))]])))
        #expect(next.first?.skipped == [:], "still has its push-to-start token")
        #expect(next.first?.reasons == ["Unregistered": 1])
    }

    @Test func deadTokensAreDroppedAndSkippedAfterwards() throws {
        let invalidSince = Int64(Date().timeIntervalSince1970 * 1000) + 60_000   // after every registration of this test
        let transport = RecordingTransport { push, _ in
            [LiveActivityWorld.hex("51", 80), LiveActivityWorld.hex("f2", 40)].contains(push.deviceToken)
                ? PushOutcome(status: 410, reason: "Unregistered", timestamp: invalidSince) : .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "A"))]])))
        // first_third's push-to-start token is gone: the next start skips it with the reason.
        let next = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "B"))]])))
        #expect(next.first?.skipped == ["no push-to-start token": 1])

        try world.reportUpdateToken("second_device", activity: "B", token: LiveActivityWorld.hex("f2", 40))
        let update = { try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "B"))]])) }
        #expect(try world.waitUntilSent(try update()).first?.reasons == ["Unregistered": 1])
        world.nextUpdateTurn()
        #expect(try world.waitUntilSent(try update()).first?.skipped == ["update token unregistered": 1], "U2: a 410 token is skipped and counted")
    }

    @Test func aScheduledStartSurvivesARestartAndFiresOnce() throws {
        let clock = TestClock(Date(timeIntervalSince1970: 1_800_000_000))
        let first = RecordingTransport()
        let world = try LiveActivityWorld(transport: first, clock: clock)
        let sendDate = "2027-01-15 09:00"   // 1_800_000_000 is 2027-01-15 08:00 UTC
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["send_date": .string(sendDate), "timezone": "Europe/Lisbon"])),
        ]]))
        world.running.stop()
        #expect(first.pushes.isEmpty)

        clock.advance(3600)
        let second = RecordingTransport()
        let restarted = try world.restarted(transport: second)
        let messages = restarted.server.messages
        #expect(try eventually { try messages.messageDetails(code: codes[0], in: ApplicationCode(world.code)!)?.state == .done })
        #expect(second.pushes.count == 2)
        // Nothing more to send: a look made after the start went out finds no work, and nothing more arrived.
        #expect(restarted.lookFindsNothing(), "a look after the start finds no work")
        #expect(second.pushes.count == 2, "fires once")
        let timestamps = Set(second.pushes.compactMap { try? JSONParser.parse($0.payload).objectValue?["aps"]?.objectValue?["timestamp"] })
        #expect(timestamps == [.int(1_800_003_600)], "the timestamp is the scheduled time, in Europe/Lisbon (UTC+0 in January)")
    }

    @Test func namedDevicesThatUnregisteredAreCountedNotDropped() throws {
        let world = try LiveActivityWorld()
        try world.expectOK(call(world.running.port, "unregisterDevice", ["application": .string(world.code), "hwid": "first_third"], token: world.auth))
        let details = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        #expect(details.first?.targeted == 2)
        #expect(details.first?.skipped == ["token unregistered": 1], "S7: counted with its reason")
    }

    @Test func aRestartWaitsUntilThePreviousEndHasGoneOut() throws {
        // The end is slow to send; a new session of the same id must not take its devices from it.
        let transport = RecordingTransport { push, _ in
            if push.payload.count > 0, String(decoding: push.payload, as: UTF8.self).contains("\"end\"") { Thread.sleep(forTimeInterval: 0.3) }
            return .delivered
        }
        let world = try LiveActivityWorld(transport: transport)
        _ = try world.waitUntilSent(try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])))
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: LiveActivityWorld.hex("e1", 40))
        let end = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(event: "end"))]]))
        let early = try world.server("startLiveActivity", ["notifications": [.object(startNotification())]])
        #expect(early.message == "notifications[0].live_activity_id: 'ORDER_1' has ended but its end is still being sent; start it again once it has gone out (S3)")
        #expect(try world.waitUntilSent(end).first?.sent == 1, "the end reached the device")
        #expect(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]]).status == 200)
    }

    @Test func anActivityOnlyADeviceReportedDoesNotBlockAStart() throws {
        let world = try LiveActivityWorld()
        try world.reportUpdateToken("first_third", activity: "ORDER_1", token: LiveActivityWorld.hex("e1", 40))
        #expect(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]]).status == 200)
    }

    @Test func scheduleBoundsAreOneDayBackAndThirtyDaysAhead() throws {
        let world = try LiveActivityWorld(clock: TestClock(Schedule.parse("2026-11-29 12:00", in: TimeZone(identifier: "UTC")!)!))
        func start(_ date: String, zone: String = "UTC", id: String) throws -> RawHTTPResponse {
            try world.server("startLiveActivity", ["notifications": [.object(startNotification(["send_date": .string(date), "timezone": .string(zone)], id: id))]])
        }
        #expect(try start("2026-11-28 12:30", id: "a").status == 200, "less than a day ago: sent now")
        #expect(try start("2026-11-28 11:59", id: "b").message == "notifications[0].send_date: 2026-11-28 11:59 (UTC) is more than 1 day in the past (S5)")
        #expect(try start("2026-12-29 11:59", id: "c").status == 200)
        #expect(try start("2026-12-29 12:01", id: "d").message == "notifications[0].send_date: 2026-12-29 12:01 (UTC) is more than 30 days in the future (S5)")
        #expect(try start("2026-12-29 12:30", zone: "Europe/Berlin", id: "e").status == 200, "12:30 in Berlin is 11:30 UTC")
        #expect(try start("2026-12-29 12:30", id: "f").status == 400, "the same wall time in UTC is past the bound")
    }

    @Test func deleteMessageCancelsAScheduledStartOnly() throws {
        let world = try LiveActivityWorld()
        let later = Date().addingTimeInterval(3 * 86_400).formatted(.iso8601.year().month().day().dateSeparator(.dash))
        let codes = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [
            .object(startNotification(["send_date": .string("\(later) 10:00")])),
        ]]))
        #expect(try world.server("deleteMessage", ["message": .string(codes[0])]).status == 200)
        let details = try world.expectOK(try world.server("getMessageDetails", ["message": .string(codes[0])]))["message"]?.objectValue
        #expect(details?["status"] == "cancelled")
        #expect(try world.server("startLiveActivity", ["notifications": [.object(startNotification())]]).status == 200,
                "the cancelled start frees its id")
        let sent = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "NOW"))]]))
        _ = try world.waitUntilSent(sent)
        let late = try world.server("deleteMessage", ["message": .string(sent[0])])
        #expect(late.message == "message: '\(sent[0])' is done; only a start that has not fired can be deleted")
        let update = try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(id: "NOW"))]]))
        #expect(try world.server("deleteMessage", ["message": .string(update[0])]).message?.hasPrefix("message: '\(update[0])' is an update") == true,
                "an accepted update already changed the activity: it cannot be taken back")
    }
}
