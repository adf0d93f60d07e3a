import Foundation
import Testing
import IsletAPI
import IsletApp
import IsletCore
import IsletCrypto
import IsletDelivery
import IsletHTTP2
import IsletStore
import IsletTestPeers

/// Issue 46: one startLiveActivity, updateLiveActivity and end reach iPhones through an APNs stand-in and Android phones
/// through an FCM stand-in (`Tests/Peers/fcm_peer.py`, on h2 and PyJWT: it checks the service account's assertion and
/// each message against the Pushwoosh Android SDK's rules), the whole server in between.
@Suite("Android Live Updates through FCM, beside iPhones (issue 46)")
struct AndroidDeliveryTests {
    /// FCM registration tokens of the Android phones: `pixel` runs Android 16, `older` Android 14.
    static let pixelToken = "fcm-pixel-" + String(repeating: "p", count: 40)
    static let olderToken = "fcm-older-" + String(repeating: "o", count: 40)

    final class World {
        let directory: URL
        let apns: PythonH2Peer
        let fcm: PythonFCMPeer
        let clock = TestClock()
        let running: RunningServer
        let accountJSON: String
        let certificate: String
        var application = ApplicationCode("XXXXX-XXXXX")!, auth = ""

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-android-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let certificate = directory.appendingPathComponent("peer.crt").path, key = directory.appendingPathComponent("peer.key").path
            try TLSContext.writeSelfSigned(certificate: certificate, key: key)
            apns = try PythonH2Peer(certificate: certificate, key: key)
            let accountKey = RSASigningKey.generatePEM()
            let accountKeyFile = directory.appendingPathComponent("account.pem").path
            try accountKey.write(toFile: accountKeyFile, atomically: true, encoding: .utf8)
            fcm = try PythonFCMPeer(certificate: certificate, key: key, accountKey: accountKeyFile, project: "islet-demo")
            let account: JSONValue = [
                "type": "service_account", "project_id": "islet-demo", "private_key_id": "kid-1", "private_key": .string(accountKey),
                "client_email": "islet@islet-demo.iam.gserviceaccount.com", "token_uri": .string("https://127.0.0.1:\(fcm.port)/token"),
            ]
            accountJSON = account.jsonText
            self.certificate = certificate
            running = try RunningServer(demo: false, clock: clock, directory: directory.appendingPathComponent("server"),
                                        apns: (apns.url.absoluteString, certificate)) { [port = fcm.port] in
                $0.fcmURL = "https://127.0.0.1:\(port)"
                $0.fcmCA = certificate
            }
            let created = try running.serverAdmin().create(
                name: "Both", bundleID: "com.example.both",
                apnsKey: APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both), pem: Crypto.generateAPNsSigningKey()))
            application = created.application.code
            auth = created.apiToken.secret
            try register("phone", ["push_token": .string(String(repeating: "ab", count: 32)), "os_version": "18.2"])
            #expect(try call("setActivityPushToStartToken", ["hwid": "phone", "activity_push_to_start_token": .string(String(repeating: "5a", count: 40))]).status == 200)
            try register("pixel", ["device_type": 3, "push_token": .string(AndroidDeliveryTests.pixelToken), "os_version": "16"])
            try register("older", ["device_type": 3, "push_token": .string(AndroidDeliveryTests.olderToken), "os_version": "14"])
        }

        deinit {
            running.stop()
            try? FileManager.default.removeItem(at: directory)
        }

        /// Another server on the same database, as after a restart (the first one stopped, its handle kept).
        func restarted() throws -> RunningServer {
            running.stop()
            return try RunningServer(demo: false, clock: clock, directory: directory.appendingPathComponent("server"),
                                     apns: (apns.url.absoluteString, certificate)) { [port = fcm.port, certificate] in
                $0.fcmURL = "https://127.0.0.1:\(port)"
                $0.fcmCA = certificate
            }
        }

        func setFCMAccount() throws {
            try running.serverAdmin().setFCMAccount(for: application, info: FCMAccountInfo(projectID: "islet-demo", clientEmail: "islet@islet-demo.iam.gserviceaccount.com"),
                                                    keyJSON: accountJSON)
        }

        func register(_ hwid: String, _ fields: JSONObject) throws {
            #expect(try call("registerDevice", (["hwid": .string(hwid)] as JSONObject).merging(fields)).status == 200)
        }

        func call(_ method: String, _ fields: JSONObject) throws -> RawHTTPResponse {
            try IsletIntegrationTests.call(running.port, method, (["application": .string(application.rawValue)] as JSONObject).merging(fields), token: auth)
        }

        /// The codes of a start or update call's messages.
        func send(_ method: String, _ notification: JSONObject) throws -> String {
            let answer = try call(method, ["auth": .string(auth), "notifications": [.object(notification)]])
            #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
            return try #require(answer.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue)
        }

        func details(_ code: String) throws -> MessageDetails? { try running.server.messages.messageDetails(code: code, in: application) }

        /// FCM's sends so far, once there are `count`.
        func sends(atLeast count: Int) -> [JSONObject] { fcm.events("send", atLeast: count) }
    }

    static func live(_ send: JSONObject) -> JSONObject { send["live"]?.objectValue ?? [:] }
    static func data(_ send: JSONObject) -> JSONObject { send["data"]?.objectValue ?? [:] }

    @Test func aStartUpdateAndEndReachBothPlatformsAndAndroidKeepsItsTitleAndText() throws {
        let world = try World()
        try world.setFCMAccount()
        // A filter that picks both platforms: every device of the application, iPhone or Android.
        #expect(try world.call("createFilter", ["auth": .string(world.auth), "name": "EVERYONE",
                                                "conditions": [["Platform", "IN", ["ios", "android"]]]]).status == 200)
        let start = try world.send("startLiveActivity", startNotification(["devices": nil, "filter": "EVERYONE"]))
        #expect(try eventually { try world.details(start)?.state == .done }, "\(String(describing: try? world.details(start)))")
        let started = world.sends(atLeast: 2)
        #expect(started.count == 2, "\(started)")
        let pixel = try #require(started.first { $0["token"]?.stringValue == Self.pixelToken })
        #expect(Self.live(pixel)["op"] == "OPERATION_START" && Self.live(pixel)["id"] == "ORDER_1", "\(pixel)")
        #expect(Self.data(pixel)["header"] == "Food Delivery" && Self.data(pixel)["title"] == "Your order is being prepared", "\(pixel)")
        #expect(Self.data(pixel)["p"] == .string(start), "the SDK reports the delivery with the message's code")
        #expect(Self.live(pixel)["progress_bar"] == false, "no progress asked, so no empty bar: \(pixel)")
        #expect(pixel["android"]?.objectValue?["priority"] == "HIGH" && pixel["android"]?.objectValue?["collapse_key"] == "ORDER_1",
                "a phone that was offline gets the activity's latest state: \(pixel)")
        let older = try #require(started.first { $0["token"]?.stringValue == Self.olderToken })
        #expect(older["op"] == "NOTIFICATION" && Self.data(older)["pw_live"] == nil && Self.data(older)["header"] == "Food Delivery",
                "Android 14 drops Live Updates: it gets the start's title and content as a notification: \(older)")
        #expect(try world.apns.requests(atLeast: 1).count == 1, "the iPhone's start went to APNs")
        let details = try #require(try world.details(start))
        #expect(details.sent == 3 && details.failed == 0, "\(details)")

        // A silent update with progress: the Live Update keeps the start's title and text (the SDK draws each push anew).
        let update = try world.send("updateLiveActivity", updateNotification(["android": ["progress": 3, "segments": [["color": "#705289", "length": 8]]]]))
        #expect(try eventually { try world.details(update)?.state == .done })
        let updated = try #require(world.sends(atLeast: 3).last)
        #expect(updated["token"]?.stringValue == Self.pixelToken && Self.live(updated)["op"] == "OPERATION_UPDATE", "only the phone that runs it: \(updated)")
        #expect(Self.live(updated)["progress"] == 3 && Self.live(updated)["segments"] == [["color": "#705289", "length": 8]], "\(updated)")
        #expect(Self.data(updated)["header"] == "Food Delivery" && Self.data(updated)["title"] == "Your order is being prepared", "\(updated)")
        #expect(try world.details(update)?.skipped[SkipReason.noUpdateToken] == 1, "the iPhone reported no update token")

        // A new text replaces the old one, and the title carries on (the update waits its turn, A9).
        let text = try world.send("updateLiveActivity", updateNotification(["android": ["text": "At your door"]]))
        #expect(try world.running.advanceUntil(world.clock, step: 1) { try world.details(text)?.state == .done })
        let texted = try #require(world.sends(atLeast: 4).last)
        #expect(Self.data(texted)["header"] == "Food Delivery" && Self.data(texted)["title"] == "At your door", "\(texted)")

        let end = try world.send("updateLiveActivity", updateNotification(id: "ORDER_1", event: "end"))
        #expect(try eventually { try world.details(end)?.state == .done })
        let ended = try #require(world.sends(atLeast: 5).last)
        #expect(Self.live(ended)["op"] == "OPERATION_END" && Self.live(ended)["id"] == "ORDER_1", "\(ended)")
        #expect(world.sends(atLeast: 5).count == 5, "nothing else went to FCM")
    }

    /// Pushwoosh's own server call for Android Live Updates (`POST /messaging/v2/notify`, as its Android SDK's
    /// documentation sends it) starts, updates and ends the Live Update on the application's Android 16 phones only.
    @Test func pushwooshsNotifyCallDrivesTheLiveUpdateOnAndroidOnly() throws {
        let world = try World()
        func notify(_ liveUpdate: String, title: String? = nil, token: String? = nil) throws -> RawHTTPResponse {
            let texts = title.map { #""title":"\#($0)","body":"Courier on the way","# } ?? ""
            let body = #"{"segment":{"application":"\#(world.application)","platforms":["ANDROID"],"expression":"A(\"\#(world.application)\")","schedule":{"at":"\#(world.clock.now.formatted(.iso8601))"},"payload":{"content":{"localized_content":{"default":{"android":{\#(texts)"live_update":\#(liveUpdate)}}}}}}}"#
            return try request(world.running.port, "/messaging/v2/notify", body: body, headers: ["Authorization": "Token \(token ?? world.auth)"])
        }
        let noAccount = try notify(#"{"op":"OPERATION_START","id":"pizza_4521"}"#, title: "Pizza")
        #expect(noAccount.status == 400 && noAccount.json?.objectValue?["code"] == 3, "\(String(decoding: noAccount.body, as: UTF8.self))")
        try world.setFCMAccount()
        let start = try notify(##"{"op":"OPERATION_START","id":"pizza_4521","progress":"4","segments":[{"color":"#705289","length":"8"}],"when":"1767225600000"}"##,
                               title: "Pizza Margherita")
        #expect(start.status == 200, "\(String(decoding: start.body, as: UTF8.self))")
        let code = try #require(start.json?.objectValue?["message_code"]?.stringValue)
        #expect(try eventually { try world.details(code)?.state == .done })
        let details = try #require(try world.details(code))
        #expect(details.sent == 1 && details.skipped[SkipReason.belowLiveUpdates] == 1 && details.targeted == 2,
                "the two Android phones: Android 16 gets it, Android 14 drops Live Updates; the iPhone is not among them: \(details)")
        let started = try #require(world.sends(atLeast: 1).last)
        #expect(started["token"]?.stringValue == Self.pixelToken && Self.live(started)["op"] == "OPERATION_START" && Self.live(started)["id"] == "pizza_4521")
        #expect(Self.live(started)["progress"] == 4 && Self.live(started)["segments"] == [["color": "#705289", "length": 8]]
                && Self.live(started)["when"] == 1_767_225_600_000, "Pushwoosh's string integers and milliseconds, as the SDK reads them: \(started)")
        #expect(Self.data(started)["header"] == "Pizza Margherita" && Self.data(started)["title"] == "Courier on the way")

        let update = try notify(#"{"op":"OPERATION_UPDATE","id":"pizza_4521","progress":6}"#)
        let updateCode = try #require(update.json?.objectValue?["message_code"]?.stringValue, "\(String(decoding: update.body, as: UTF8.self))")
        #expect(try world.running.advanceUntil(world.clock, step: 1) { try world.details(updateCode)?.state == .done })
        let updated = try #require(world.sends(atLeast: 2).last)
        #expect(Self.live(updated)["op"] == "OPERATION_UPDATE" && Self.live(updated)["progress"] == 6 && Self.data(updated)["header"] == "Pizza Margherita")

        let end = try notify(#"{"op":"OPERATION_END","id":"pizza_4521"}"#)
        let endCode = try #require(end.json?.objectValue?["message_code"]?.stringValue)
        #expect(try eventually { try world.details(endCode)?.state == .done })
        #expect(Self.live(world.sends(atLeast: 3).last ?? [:])["op"] == "OPERATION_END")
        #expect(try world.apns.requests().isEmpty, "nothing went to APNs")

        // Errors are gRPC-Gateway's, naming the field.
        let badOp = try notify(#"{"op":"start","id":"x"}"#)
        #expect(badOp.status == 400 && badOp.json?.objectValue?["message"]?.stringValue
                == "segment.payload.content.localized_content.default.android.live_update.op: must be OPERATION_START, OPERATION_UPDATE or OPERATION_END, got 'start'")
        let unknownActivity = try notify(#"{"op":"OPERATION_UPDATE","id":"nope"}"#)
        #expect(unknownActivity.status == 400 && unknownActivity.json?.objectValue?["message"]?.stringValue?
            .hasPrefix("segment.payload.content.localized_content.default.android.live_update.id: no activity 'nope'") == true,
                "\(String(decoding: unknownActivity.body, as: UTF8.self))")
        let wrongToken = try notify(#"{"op":"OPERATION_END","id":"x"}"#, token: "nope")
        #expect(wrongToken.status == 401 && wrongToken.json?.objectValue?["code"] == 16)
        // An activity of startLiveActivity's (iPhones too) takes updateLiveActivity, not an Android-only update.
        _ = try world.send("startLiveActivity", startNotification(["devices": ["pixel"]], id: "ORDER_9"))
        let mixed = try notify(#"{"op":"OPERATION_UPDATE","id":"ORDER_9","progress":1}"#)
        #expect(mixed.status == 400 && mixed.json?.objectValue?["message"]?.stringValue?.hasSuffix(
            "'ORDER_9' was started by startLiveActivity: update or end it with updateLiveActivity, whose android object reaches its Android phones") == true,
                "\(String(decoding: mixed.body, as: UTF8.self))")
        let transactional = try request(world.running.port, "/messaging/v2/notify", body: #"{"transactional":{}}"#, headers: ["Authorization": "Token \(world.auth)"])
        #expect(transactional.status == 400 && transactional.json?.objectValue?["message"]?.stringValue?.hasPrefix("transactional: ") == true)
    }

    @Test func withoutAServiceAccountAndroidPhonesAreSkippedWithTheReason() throws {
        let world = try World()
        let start = try world.send("startLiveActivity", startNotification(["devices": ["phone", "pixel"]]))
        #expect(try eventually { try world.details(start)?.state == .done })
        let details = try #require(try world.details(start))
        #expect(details.sent == 1 && details.skipped[SkipReason.android] == 1, "\(details)")
        #expect(world.fcm.events("send").isEmpty)
    }

    /// FCM down (503 UNAVAILABLE, then 500 INTERNAL, without retry-after): the pushes wait with the backoff and go
    /// once FCM is back; an update accepted meanwhile goes after the start, and only its latest state.
    @Test func anOutageIsRiddenOutAndTheLatestStateGoesOnceFCMIsBack() throws {
        let world = try World()
        try world.setFCMAccount()
        try world.fcm.command("fail \(Self.pixelToken) UNAVAILABLE")
        let start = try world.send("startLiveActivity", startNotification(["devices": ["pixel"]]))
        #expect(try eventually { try world.details(start)?.pending[.retrying] == 1 }, "\(String(describing: try? world.details(start)))")
        try world.fcm.command("fail \(Self.pixelToken) INTERNAL")
        #expect(world.running.advanceUntil(world.clock, step: 2, seconds: 20) { world.fcm.events("send").count >= 3 }, "retried while FCM is down")
        try world.fcm.command("heal \(Self.pixelToken)")
        #expect(try world.running.advanceUntil(world.clock, step: 2, seconds: 20) { try world.details(start)?.sent == 1 },
                "\(String(describing: try? world.details(start)))")
        let sends = world.fcm.events("send")
        #expect(sends.last?["status"] == 200 && Self.live(sends.last ?? [:])["op"] == "OPERATION_START", "\(sends)")
        #expect(sends.dropLast().allSatisfy { $0["status"] != 200 }, "one start taken, however many tries: \(sends)")
        let update = try world.send("updateLiveActivity", updateNotification(["android": ["progress": 5]]))
        #expect(try world.running.advanceUntil(world.clock, step: 1) { try world.details(update)?.sent == 1 })
        #expect(Self.live(world.sends(atLeast: sends.count + 1).last ?? [:])["progress"] == 5)
    }

    /// SIGTERM's path with FCM stalled (a Live Update on the wire, never answered): the server stops within its grace,
    /// not when FCM answers, and the push is owed after the restart.
    @Test func aShutdownWithFCMStalledEndsInItsGrace() throws {
        let world = try World()
        try world.setFCMAccount()
        try world.fcm.command("latency 600")
        let start = try world.send("startLiveActivity", startNotification(["devices": ["pixel"]]))
        #expect(world.fcm.events("token", atLeast: 1).count == 1, "the client got its access token")
        Thread.sleep(forTimeInterval: 0.3)   // the send is on the wire
        let stopping = ContinuousClock.now
        world.running.stop()
        let stopped = ContinuousClock.now - stopping
        #expect(stopped < .seconds(5), "stopped after \(stopped) with FCM stalled")
        try world.fcm.command("latency 0")
        let second = try RunningServer(demo: false, clock: world.clock, directory: world.directory.appendingPathComponent("server"),
                                       apns: (world.apns.url.absoluteString, world.certificate)) { [port = world.fcm.port, certificate = world.certificate] in
            $0.fcmURL = "https://127.0.0.1:\(port)"
            $0.fcmCA = certificate
        }
        let details = { try second.server.messages.messageDetails(code: start, in: world.application) }
        #expect(try second.advanceUntil(world.clock, step: 2, seconds: 20) { try details()?.sent == 1 }, "\(String(describing: try? details()))")
    }

    /// An iOS renewal (A8) ends the iPhones' card and starts it again; the Android phone's Live Update runs on, and it
    /// stays one of the activity's devices: the updates after the renewal reach it.
    @Test func anIOSRenewalLeavesTheAndroidPhoneInTheActivity() throws {
        let world = try World()
        try world.setFCMAccount()
        let start = try world.send("startLiveActivity", startNotification(["devices": ["phone", "pixel"], "renew": true]))
        #expect(try eventually { try world.details(start)?.sent == 2 })
        #expect(world.running.advanceUntil(world.clock, step: 300, seconds: 30) { ((try? world.apns.requests()) ?? []).count >= 3 },
                "the iPhone got the renewal's end and its new start")
        let update = try world.send("updateLiveActivity", updateNotification(["android": ["progress": 7]]))
        #expect(try world.running.advanceUntil(world.clock, step: 1) { try world.details(update)?.state == .done })
        let last = try #require(world.sends(atLeast: 2).last)
        #expect(Self.live(last)["op"] == "OPERATION_UPDATE" && Self.live(last)["progress"] == 7, "\(last)")
        #expect(world.fcm.events("send").count == 2, "the renewal sent Android nothing")
    }

    /// A push FCM did not take before a restart is still owed after it, and goes once FCM takes it: nothing accepted is lost.
    @Test func aRestartKeepsTheAndroidPushesStillOwed() throws {
        let world = try World()
        try world.setFCMAccount()
        try world.fcm.command("fail \(Self.pixelToken) UNAVAILABLE")
        let start = try world.send("startLiveActivity", startNotification(["devices": ["pixel"]]))
        #expect(try eventually { try world.details(start)?.pending[.retrying] == 1 })
        try world.fcm.command("heal \(Self.pixelToken)")
        let second = try world.restarted()
        let details = { try second.server.messages.messageDetails(code: start, in: world.application) }
        #expect(try second.advanceUntil(world.clock, step: 2, seconds: 20) { try details()?.sent == 1 }, "\(String(describing: try? details()))")
        let sends = world.fcm.events("send")
        #expect(sends.filter { $0["status"] == 200 }.count == 1, "taken once, after the restart: \(sends)")
    }

    @Test func aDeadTokenIsRetiredAndAQuotaIsWaitedOut() throws {
        let world = try World()
        try world.setFCMAccount()
        try world.fcm.command("fail \(Self.pixelToken) UNREGISTERED")
        try world.fcm.command("fail \(Self.olderToken) QUOTA_EXCEEDED 30")
        try world.register("older", ["device_type": 3, "push_token": .string(Self.olderToken), "os_version": "16"])
        let start = try world.send("startLiveActivity", startNotification(["devices": ["pixel", "older"]]))
        #expect(try eventually { try world.details(start)?.pending[.retrying] == 1 }, "\(String(describing: try? world.details(start)))")
        let details = try #require(try world.details(start))
        #expect(details.failed == 1 && details.reasons["UNREGISTERED"] == 1, "\(details)")
        let pixel = try #require(try world.running.server.devices.device(hwid: "pixel", in: world.application))
        #expect(pixel.pushToken == nil, "FCM no longer knows the token: it is retired")
        let retry = try #require(details.nextAttemptAt)
        #expect(retry.timeIntervalSince(world.clock.now) >= 29, "FCM's retry-after (30 s) is waited out, not the first backoff: \(retry)")

        try world.fcm.command("heal \(Self.olderToken)")
        // Past the retry-after once, then waited for in real time: a clock moved on and on while a loaded machine is slow
        // would carry the push past its lifetime (an hour) and expire it.
        world.clock.advance(retry.timeIntervalSince(world.clock.now) + 1)
        world.running.server.delivery?.kick()
        // Sent, not merely no longer retrying: a push being sent is neither (it was seen so on a loaded machine).
        #expect(try eventually(20) { try world.details(start)?.sent == 1 }, "\(String(describing: try? world.details(start)))")
        #expect(try world.details(start)?.pending[.retrying] == nil)
        #expect(world.sends(atLeast: 3).last?["token"]?.stringValue == Self.olderToken)

        // The dead token's phone is skipped from now on, until the app registers a new token.
        let again = try world.send("startLiveActivity", startNotification(["devices": ["pixel"]], id: "ORDER_2"))
        #expect(try eventually { try world.details(again)?.state == .done })
        #expect(try world.details(again)?.skipped[SkipReason.unregistered] == 1, "\(String(describing: try? world.details(again)))")
    }
}

