import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

/// Issue 46: what an Android phone gets of a start, an update or an end, and what FCM's answers do to its records.
@Suite("Android phones' pushes")
struct AndroidPlanTests {
    let application = ApplicationCode("APPAA-00001")!
    let data = AndroidLiveUpdate(operation: .start, activityID: "A", messageCode: "S", title: "Match", text: "Kick-off", android: nil).dataBytes
    let apns = Array(#"{"aps":{"event":"start"}}"#.utf8)

    func phone(_ os: String?, token: String? = "fcm-token") -> Device {
        Device(id: 9, application: application, hwid: "a", pushToken: token, gateway: .production, language: nil, timezone: nil, osVersion: os,
               userID: nil, pushToStartToken: nil, platform: .android)
    }

    func planner(android: Bool = true, fallback: Bool = true) -> PushPlanner {
        var planner = PushPlanner(application: application, bundleID: "com.example", messageCode: "S", payload: apns,
                                  fallbackPayload: fallback ? apns : nil, priority: BudgetedPriority(requested: 5), expiration: 2_000_000_000)
        if android { planner.androidPayload = data }
        return planner
    }

    @Test func android16GetsTheLiveUpdateOnItsFCMTokenAtHighPriority() throws {
        guard case .push(let push) = planner().start(phone("16")) else { Issue.record("a push"); return }
        #expect(push.pushType == .liveUpdate && push.deviceToken == "fcm-token" && push.payload == data && push.priority == 10)
        #expect(push.expiration == 2_000_000_000 && push.topic.isEmpty)
    }

    @Test func olderAndroidGetsTheStartAsANotificationAndNothingOfAnUpdate() throws {
        guard case .push(let push) = planner().start(phone("14")) else { Issue.record("a push"); return }
        let data = try JSONParser.parse(push.payload).objectValue
        #expect(push.pushType == .androidNotification && data?["pw_live"] == nil && data?["header"] == "Match")
        #expect(planner(fallback: false).start(phone("14")) == .skip(reason: SkipReason.belowLiveUpdates), "fallback_alert false")
        let target = UpdateTarget(device: phone("14"), updateToken: nil, endedOnDevice: false, tokenDead: false)
        #expect(planner().update(target) == .skip(reason: SkipReason.belowLiveUpdates))
    }

    @Test func anUpdateGoesToTheFCMTokenWhateverTheActivitysAge() throws {
        var planner = planner()
        planner.lifetimeOver = true
        let target = UpdateTarget(device: phone("16"), updateToken: nil, endedOnDevice: false, tokenDead: false)
        guard case .push(let push) = planner.update(target) else { Issue.record("Android has no 8 hours"); return }
        #expect(push.pushType == .liveUpdate && push.deviceToken == "fcm-token")
    }

    @Test func withoutALiveUpdateOrATokenAndroidIsSkipped() {
        #expect(planner(android: false).start(phone("16")) == .skip(reason: SkipReason.android))
        #expect(planner().start(phone("16", token: nil)) == .skip(reason: SkipReason.unregistered))
    }

    @Test func fcmsAnswersDecideTheRecordAndTheEffects() throws {
        guard case .push(let push) = planner().start(phone("16")) else { Issue.record("a push"); return }
        let decisions = DeliveryDecisions(jitter: { 1 })
        let now = Date(timeIntervalSince1970: 1_000_000)
        func record(_ outcome: PushOutcome) -> DeliveryRecord {
            decisions.record(device: 9, push: push, outcome: outcome, isStart: true, attempts: 1, uncertainCopies: 0, expiresAt: now.addingTimeInterval(3600), now: now)
        }
        var effects = DeliveryEffects()
        effects.add(PushOutcome.fcm(status: 200, error: nil, retryAfter: nil, fate: .answered, detail: nil).verdict, pushType: push.pushType,
                    token: push.deviceToken, isStart: true, activity: 1, device: 9)
        #expect(effects.startedOn.count == 1, "a Live Update's start makes the phone one of the activity's")
        let dead = PushOutcome.fcm(status: 404, error: .unregistered, retryAfter: nil, fate: .answered, detail: nil)
        #expect(record(dead).state == .failed && record(dead).reason == "UNREGISTERED")
        let key = DeliveryMetrics.key(record(dead))
        #expect(key.reason == "UNREGISTERED" && key.service == "fcm", "metrics name FCM's error and the service: \(key)")
        #expect(DeliveryMetrics.key(record(PushOutcome.fcm(status: 404, error: .unknown("Unregistered"), retryAfter: nil, fate: .answered, detail: nil))).reason
                == "other", "an APNs reason's spelling from FCM is not one of FCM's")
        effects.add(dead.verdict, pushType: push.pushType, token: push.deviceToken, isStart: false, activity: 1, device: 9)
        #expect(effects.deadPushTokens.map(\.token) == ["fcm-token"] && effects.deadUpdateTokens.isEmpty, "the FCM token is the device's push token")
        let quota = PushOutcome.fcm(status: 429, error: .quotaExceeded, retryAfter: .seconds(30), fate: .answered, detail: nil)
        #expect(record(quota).state == .retrying && record(quota).nextAttemptAt == now.addingTimeInterval(30))
        let lost = PushOutcome.fcm(status: 0, error: nil, retryAfter: nil, fate: .unknown, detail: "connection lost")
        #expect(record(lost).state == .retrying, "a Live Update sent twice refreshes one notification: no wait for a token")
    }
}
