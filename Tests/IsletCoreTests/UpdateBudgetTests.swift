import Foundation
import Testing
import IsletCore

/// A7: the hourly budget of priority-10 updates per activity, decided without storage or sockets.
@Suite("Update budget (A7)")
struct UpdateBudgetTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Admits `count` updates asked at `requested`, a second apart; the priorities they get and the log after.
    func admit(_ budget: UpdateBudget, _ count: Int, requested: Int = 10, from log: PriorityTenLog = PriorityTenLog(),
               at first: Date? = nil) -> (priorities: [BudgetedPriority], log: PriorityTenLog) {
        var log = log, priorities: [BudgetedPriority] = []
        for n in 0..<count {
            let admitted = budget.admit(requested: requested, log: log, now: (first ?? start).addingTimeInterval(Double(n)))
            priorities.append(admitted.priorities)
            log = admitted.log
        }
        return (priorities, log)
    }

    @Test func theFirstUpdatesOfTheHourGoAtTenThenEachKindOfDeviceDropsToFiveAtItsOwnBudget() {
        let (priorities, log) = admit(UpdateBudget(perHour: 3, frequentPerHour: 5), 7)
        #expect(priorities.map(\.standard) == [10, 10, 10, 5, 5, 5, 5])
        #expect(priorities.map(\.frequent) == [10, 10, 10, 10, 10, 5, 5])
        #expect(log.standard.count == 3 && log.frequent.count == 5, "only the pushes that went at 10 count")
        #expect(priorities[4].forDevice(frequentUpdates: true) == 10 && priorities[4].forDevice(frequentUpdates: false) == 5)
        #expect(priorities[4].forDevice(frequentUpdates: nil) == 5, "a device that never said has the standard budget")
    }

    @Test func theWindowSlidesSoAnHourLaterTheBudgetIsBack() {
        let budget = UpdateBudget(perHour: 2, frequentPerHour: 2)
        let spent = admit(budget, 3).log
        let before = admit(budget, 1, from: spent, at: start.addingTimeInterval(3599)).priorities[0]
        #expect(before.standard == 5, "the first update is still within the hour")
        let after = admit(budget, 1, from: spent, at: start.addingTimeInterval(3601)).priorities[0]
        #expect(after.standard == 10, "one hour on, the first one no longer counts")
    }

    @Test func anUpdateAskedAtFiveIsNeitherCountedNorChanged() {
        let (priorities, log) = admit(UpdateBudget(perHour: 1, frequentPerHour: 1), 4, requested: 5)
        #expect(priorities.allSatisfy { $0 == BudgetedPriority(requested: 5) })
        #expect(log == PriorityTenLog())
    }

    @Test func aBudgetOfZeroSendsEveryUpdateAtFive() {
        #expect(admit(UpdateBudget(perHour: 0, frequentPerHour: 0), 2).priorities.allSatisfy { $0 == BudgetedPriority(standard: 5, frequent: 5) })
    }

    @Test func theWarningNamesTheFieldTheActivityAndWhoStillGetsTen() {
        let budget = UpdateBudget(perHour: 10, frequentPerHour: 60)
        #expect(budget.warning(path: "notifications[0]", activityID: "ORDER_1", requested: 10, priorities: BudgetedPriority(requested: 10)) == nil)
        #expect(budget.warning(path: "notifications[0]", activityID: "ORDER_1", requested: 5, priorities: BudgetedPriority(requested: 5)) == nil, "5 was asked")
        #expect(budget.warning(path: "notifications[2]", activityID: "ORDER_1", requested: 10, priorities: BudgetedPriority(standard: 5, frequent: 10))
                == "notifications[2].apns_priority: activity 'ORDER_1' has used its hourly budget of priority-10 updates, so this one goes at priority 5 to devices without frequent updates on (budget 10 an hour; those with them on, 60, still get 10) (A7)")
        #expect(budget.warning(path: "notifications[0]", activityID: "ORDER_1", requested: 10, priorities: BudgetedPriority(standard: 5, frequent: 5))
                == "notifications[0].apns_priority: activity 'ORDER_1' has used its hourly budget of priority-10 updates, so this one goes at priority 5 to every device (the budget is 10 an hour, 60 with frequent updates on) (A7)")
    }

    @Test func theLogIsStoredAsJSONAndReadBack() {
        let log = PriorityTenLog(standard: [1, 2], frequent: [1, 2, 3])
        #expect(PriorityTenLog(json: log.json.jsonText) == log)
        #expect(PriorityTenLog(json: nil) == PriorityTenLog() && PriorityTenLog(json: "not json") == PriorityTenLog())
    }
}
