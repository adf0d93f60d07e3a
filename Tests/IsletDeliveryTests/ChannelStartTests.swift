import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore

/// X5: which start a device gets when the start is on a broadcast channel, first send and retry alike; and
/// which devices an update of such an activity leaves to the channel's broadcast.
@Suite("Starts on a broadcast channel (X5)")
struct ChannelStartTests {
    let application = ApplicationCode("APPAA-00001")!
    let base = Array(#"{"aps":{"timestamp":1,"event":"start","content-state":{"home":0},"attributes-type":"Score","attributes":{}}}"#.utf8)

    func device(_ os: String?, gateway: Gateway = .production) -> Device {
        Device(id: 7, application: application, hwid: "p", pushToken: "aa", gateway: gateway, language: nil, timezone: nil, osVersion: os,
               userID: nil, pushToStartToken: "bb")
    }

    func aps(_ plan: PlannedDelivery) -> JSONObject? {
        guard case .push(let push) = plan else { return nil }
        return (try? JSONParser.parse(push.payload))?.objectValue?["aps"]?.objectValue
    }

    @Test func iOS18PhonesOfTheChannelsEnvironmentsStartOnItOthersGetThePlainStart() {
        var planner = PushPlanner(application: application, bundleID: "com.example", messageCode: "C", payload: base, fallbackPayload: nil,
                                  priority: BudgetedPriority(requested: 10))
        planner.startOnChannel([.production: "cHJvZA=="])
        #expect(aps(planner.start(device("18.1")))?["input-push-channel"] == "cHJvZA==")
        #expect(aps(planner.start(device("17.4")))?["input-push-channel"] == nil, "iOS 17 cannot: the plain start")
        #expect(aps(planner.start(device(nil)))?["input-push-channel"] == nil, "unknown iOS: the plain start")
        #expect(aps(planner.start(device("18.1", gateway: .sandbox)))?["input-push-channel"] == nil, "no sandbox channel")
    }

    @Test func anUpdateLeavesToTheBroadcastOnlyThePhonesTheStartSubscribed() {
        var planner = PushPlanner(application: application, bundleID: "com.example", messageCode: "U", payload: base, fallbackPayload: nil,
                                  priority: BudgetedPriority(requested: 10))
        planner.sessionChannelIDs = [.production: "cHJvZA=="]
        func target(_ os: String?, gateway: Gateway = .production, token: String? = nil, ended: Bool = false) -> UpdateTarget {
            UpdateTarget(device: device(os, gateway: gateway), updateToken: token, endedOnDevice: ended, tokenDead: false)
        }
        #expect(planner.update(target("18.1")) == .skip(reason: SkipReason.onChannel))
        #expect(planner.update(target("17.4")) == .skip(reason: SkipReason.noUpdateToken), "iOS 17 got the plain start: its token is awaited")
        #expect(planner.update(target("18.1", gateway: .sandbox)) == .skip(reason: SkipReason.noUpdateToken), "no sandbox channel")
        #expect(planner.update(target("18.1", ended: true)) == .skip(reason: SkipReason.activityEndedOnDevice))
        guard case .push(let push) = planner.update(target("18.1", token: "cc")) else {
            Issue.record("a phone that reported an update token gets its push")
            return
        }
        #expect(push.deviceToken == "cc")
        planner.sessionChannelIDs = nil
        #expect(planner.update(target("18.1")) == .skip(reason: SkipReason.noUpdateToken), "not started on a channel")
    }

    @Test func aRetriedStartKeepsItsChannel() {
        var due = DueDelivery(message: 1, code: "C", application: application, event: .start, activity: 1, device: 7, gateway: .production,
                              state: .retrying, pushType: .liveActivity, token: "bb", payload: base, priority: 10, expiresAt: .distantFuture,
                              attempts: 1, uncertainCopies: 0, catchUp: false, activityEnded: false, newerMessage: false, tokenReportedSince: false)
        due.channelIDs = [.production: "cHJvZA=="]
        due.osVersion = "18.0"
        let retried = (try? JSONParser.parse(PushPlanner.push(due, bundleID: "com.example").payload))?.objectValue?["aps"]?.objectValue
        #expect(retried?["input-push-channel"] == "cHJvZA==")
        due.osVersion = "17.2"
        #expect(!String(decoding: PushPlanner.push(due, bundleID: "com.example").payload, as: UTF8.self).contains("input-push-channel"))
    }
}
