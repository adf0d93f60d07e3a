import Foundation
import Testing
import IsletCore
import IsletStore

/// A7 through the HTTP API with the simulated phones, whose ActivityKit throttles priority-10 updates past
/// their hourly budget silently, as a real phone does.
@Suite("Update budget through the API and the simulator (A7)")
struct UpdateBudgetAPITests {
    static let app = ApplicationCode("XXXXX-XXXXX")!
    let running: RunningServer
    /// Pacing off (A9): each update goes at once, so the budget alone decides its priority.
    init() throws { running = try RunningServer(demo: true, configure: { $0.updatePacing = .off }) }

    func post(_ method: String, _ request: JSONObject) throws -> RawHTTPResponse {
        try call(running.port, method, request.merging(["application": "XXXXX-XXXXX", "auth": "SECRET_API_TOKEN"]))
    }

    func phone(_ hwid: String) throws -> JSONObject {
        try #require(try request(running.port, method: "GET", "/simulator/devices/\(hwid)", headers: ["Authorization": "Token SECRET_API_TOKEN"]).json?.objectValue)
    }

    /// Sends one notification and waits until it is delivered; its code and warnings.
    func sendAndWait(_ method: String, _ notification: JSONObject) throws -> (code: String, warnings: [String]) {
        let answer = try post(method, ["notifications": [.object(notification)]])
        let response = try #require(answer.json?.objectValue?["response"]?.objectValue, "\(answer.message ?? "")")
        let code = try #require(response["Messages"]?.arrayValue?.first?.stringValue)
        #expect(try eventually { try running.server.messages.messageDetails(code: code, in: Self.app)?.state == .done })
        return (code, (response["warnings"]?.arrayValue ?? []).compactMap(\.stringValue))
    }

    /// A phone with frequent updates on beside the demo's first_third, both running ORDER_7.
    func startOnTwoPhones() throws {
        let added = try request(running.port, method: "POST", "/simulator/devices", body: #"{"hwid": "frequent_phone", "frequent_updates": true}"#,
                                headers: ["Authorization": "Token SECRET_API_TOKEN"])
        #expect(added.status == 200 && added.json?.objectValue?["frequent_updates"] == true)
        #expect(try running.server.devices.device(hwid: "frequent_phone", in: Self.app)?.frequentUpdates == true, "registered with it")
        _ = try sendAndWait("startLiveActivity", startNotification(["devices": ["first_third", "frequent_phone"], "apns_priority": 10], id: "ORDER_7"))
        #expect(try eventually { try ["first_third", "frequent_phone"].allSatisfy { hwid in
            try running.server.devices.activityTokens(hwid: hwid, in: Self.app).first?.token != nil
        } }, "both phones reported their update tokens")
    }

    func update(_ n: Int, priority: Int = 10) -> JSONObject {
        updateNotification(["apns_priority": .int(Int64(priority))], activity: ["content-state": ["status": .string("step \(n)"), "estimatedTime": "1 min"]], id: "ORDER_7")
    }

    func log(_ hwid: String) throws -> [JSONObject] {
        (try phone(hwid)["log"]?.arrayValue ?? []).compactMap(\.objectValue).filter { $0["event"] == "update" }
    }

    @Test func pastTheBudgetUpdatesGoAtFiveWithAWarningAndThePhoneShowsEveryOne() throws {
        try startOnTwoPhones()
        var warned: [Int] = [], overBudget: [Int] = []
        for n in 1...30 {
            let (code, warnings) = try sendAndWait("updateLiveActivity", update(n))
            if !warnings.isEmpty { warned.append(n) }
            overBudget.append(try running.server.messages.messageDetails(code: code, in: Self.app)?.overBudget ?? -1)
            if n == 11 {
                #expect(warnings == ["notifications[0].apns_priority: activity 'ORDER_7' has used its hourly budget of priority-10 updates, so this one goes at priority 5 to devices without frequent updates on (budget 10 an hour; those with them on, 60, still get 10) (A7)"])
                let details = try post("getMessageDetails", ["message": .string(code)]).json?.objectValue?["response"]?.objectValue?["message"]?.objectValue
                #expect(details?["counts"]?.objectValue?["over_budget"] == 1)
            }
            // Every state reaches both lock screens: nothing throttled on the phone.
            for hwid in ["first_third", "frequent_phone"] {
                #expect(try phone(hwid)["lock_screen"]?.arrayValue?.first?.objectValue?["content_state"]?.objectValue?["status"] == .string("step \(n)"), "\(hwid), update \(n)")
            }
        }
        #expect(warned == Array(11...30), "the first 10 priority-10 updates of the hour go at 10")
        #expect(overBudget == Array(repeating: 0, count: 10) + Array(repeating: 1, count: 20), "one device (first_third) each past the budget")
        let standard = try log("first_third"), frequent = try log("frequent_phone")
        #expect(standard.count == 30 && frequent.count == 30)
        #expect(standard.map { $0["priority"]?.intValue ?? 0 } == Array(repeating: 10, count: 10) + Array(repeating: 5, count: 20))
        #expect(frequent.allSatisfy { $0["priority"] == 10 }, "frequent updates on: a budget of 60")
        #expect((standard + frequent).allSatisfy { $0["dropped"] == .null }, "the phones dropped none")
        // An update asked at 5 is neither warned about nor counted.
        let low = try sendAndWait("updateLiveActivity", update(31, priority: 5)).warnings
        #expect(low.isEmpty, "\(low)")
    }

    @Test func aBudgetAbovePhonesIsThrottledByTheSimulatedPhoneAsItWouldBeInTheField() throws {
        _ = try running.serverAdmin().setUpdateBudget(for: Self.app, perHour: 12, frequentPerHour: nil)
        let shown = try post("getApplication", [:]).json?.objectValue?["response"]?.objectValue?["application"]?.objectValue
        #expect(shown?["update_budget"] == ["per_hour": 12, "frequent_per_hour": 60])
        try startOnTwoPhones()
        for n in 1...12 { #expect(try sendAndWait("updateLiveActivity", update(n)).warnings.isEmpty, "update \(n) is within the budget of 12") }
        let standard = try log("first_third")
        #expect(standard.count == 12 && standard.allSatisfy { $0["priority"] == 10 })
        #expect(standard.prefix(10).allSatisfy { $0["dropped"] == .null })
        #expect(standard.suffix(2).allSatisfy { $0["dropped"] == "throttled: the activity had its 10 priority-10 updates of the last hour (A7)" },
                "\(standard.suffix(2).map { $0["dropped"] ?? .null })")
        #expect(try phone("first_third")["lock_screen"]?.arrayValue?.first?.objectValue?["content_state"]?.objectValue?["status"] == "step 10",
                "the phone shows the last update it did not throttle")
        #expect(try log("frequent_phone").allSatisfy { $0["dropped"] == .null })
    }

    @Test func aNewSessionOfAnEndedActivityStartsWithAFreshBudget() throws {
        _ = try running.serverAdmin().setUpdateBudget(for: Self.app, perHour: 1, frequentPerHour: 1)
        try startOnTwoPhones()
        #expect(try sendAndWait("updateLiveActivity", update(1)).warnings.isEmpty)
        #expect(try sendAndWait("updateLiveActivity", update(2)).warnings.count == 1, "the budget of 1 is used")
        _ = try sendAndWait("updateLiveActivity", updateNotification(activity: ["content-state": ["status": "done", "estimatedTime": "0 min"]],
                                                                      id: "ORDER_7", event: "end"))
        _ = try sendAndWait("startLiveActivity", startNotification(["devices": ["first_third"]], id: "ORDER_7"))
        #expect(try sendAndWait("updateLiveActivity", update(3)).warnings.isEmpty, "a new card on the phone, a new budget")
    }

    @Test func theBudgetIsAnApplicationSettingWithinItsBounds() throws {
        let admin = try running.admin()
        #expect(throws: APIError.self) { try admin.setUpdateBudget(for: Self.app, perHour: 3601, frequentPerHour: nil) }
        #expect(throws: APIError.self) { try admin.setUpdateBudget(for: Self.app, perHour: -1, frequentPerHour: nil) }
        #expect(throws: APIError.self) { try admin.setUpdateBudget(for: Self.app, perHour: 61, frequentPerHour: nil) }   // above the 60 kept
        #expect(try admin.setUpdateBudget(for: Self.app, perHour: nil, frequentPerHour: 100) == UpdateBudget(perHour: 10, frequentPerHour: 100))
        #expect(try running.admin().setUpdateBudget(for: Self.app, perHour: 0, frequentPerHour: nil) == UpdateBudget(perHour: 0, frequentPerHour: 100))
        let device = try admin.issueToken(for: Self.app, kind: .device, label: "app").secret
        let refused = try call(running.port, "registerDevice", ["application": "XXXXX-XXXXX", "hwid": "p", "push_token": .string(String(repeating: "ab", count: 32)),
                                                                 "frequent_updates": "yes"], token: device)
        #expect(refused.status == 400 && refused.message == "frequent_updates: must be a boolean, got string")
    }
}
