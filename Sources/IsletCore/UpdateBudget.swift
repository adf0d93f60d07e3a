import Foundation

/// A7: ActivityKit gives each activity an hourly budget of priority-10 updates (Apple publishes no number;
/// apps with `NSSupportsLiveActivitiesFrequentUpdates` get more while the user leaves "More Frequent
/// Updates" on). Past it, the phone throttles them silently though APNs answers 200. Islet counts an
/// activity's priority-10 updates and ends over the last hour and sends those past the budget at priority 5,
/// which the phone does not throttle, and says so.
public struct UpdateBudget: Sendable, Equatable {
    /// Priority-10 updates an hour for a device that has not reported frequent updates on.
    public var perHour: Int
    /// The same for a device that reported them on (`frequent_updates` in registerDevice).
    public var frequentPerHour: Int

    public init(perHour: Int, frequentPerHour: Int) {
        self.perHour = perHour
        self.frequentPerHour = frequentPerHour
    }

    /// Conservative defaults, below what phones are seen to allow: Apple publishes no number.
    public static let standard = UpdateBudget(perHour: 10, frequentPerHour: 60)
    /// What a setting may be: 0 sends every update at priority 5; more than 3,600 an hour is no budget.
    public static let allowed = 0...3600
    /// The sliding window the budget counts over.
    public static let window: TimeInterval = 3600

    /// The budget of a device: frequent updates on raise it, off (or never reported) keep the standard one.
    public func perHour(frequentUpdates: Bool?) -> Int { frequentUpdates == true ? frequentPerHour : perHour }

    /// The priority each kind of device gets for an update asked at `requested`, given the activity's
    /// priority-10 pushes of the last hour (`log`); and the log with this update counted.
    public func admit(requested: Int, log: PriorityTenLog, now: Date) -> (priorities: BudgetedPriority, log: PriorityTenLog) {
        guard requested == 10 else { return (BudgetedPriority(requested: requested), log) }
        let since = Int64(now.timeIntervalSince1970 - Self.window), at = Int64(now.timeIntervalSince1970)
        var log = PriorityTenLog(standard: log.standard.filter { $0 > since }, frequent: log.frequent.filter { $0 > since })
        let standard = log.standard.count < perHour ? 10 : 5, frequent = log.frequent.count < frequentPerHour ? 10 : 5
        if standard == 10 { log.standard.append(at) }
        if frequent == 10 { log.frequent.append(at) }
        return (BudgetedPriority(standard: standard, frequent: frequent), log)
    }

    /// The answer's warning for an update sent below the priority it asked for; nil when none was lowered.
    public func warning(path: String, activityID: String, requested: Int, priorities: BudgetedPriority) -> String? {
        guard requested == 10, priorities.standard == 5 || priorities.frequent == 5 else { return nil }
        let whom = priorities.frequent == 5
            ? "every device (the budget is \(perHour) an hour, \(frequentPerHour) with frequent updates on)"
            : "devices without frequent updates on (budget \(perHour) an hour; those with them on, \(frequentPerHour), still get 10)"
        return "\(path).apns_priority: activity '\(activityID.prefix(256))' has used its hourly budget of priority-10 updates, "
            + "so this one goes at priority 5 to \(whom) (A7)"
    }
}

/// The priority an update goes at, by kind of device (A7).
public struct BudgetedPriority: Sendable, Equatable {
    public var standard: Int
    public var frequent: Int

    public init(standard: Int, frequent: Int) {
        self.standard = standard
        self.frequent = frequent
    }

    /// Every device at the priority asked: a start, or an update asked at 5.
    public init(requested: Int) { self.init(standard: requested, frequent: requested) }

    public func forDevice(frequentUpdates: Bool?) -> Int { frequentUpdates == true ? frequent : standard }
}

/// When an activity's priority-10 updates were accepted within the last hour (seconds since 1970), by the
/// budget they counted against; stored with the activity.
public struct PriorityTenLog: Sendable, Equatable {
    public var standard: [Int64]
    public var frequent: [Int64]

    public init(standard: [Int64] = [], frequent: [Int64] = []) {
        self.standard = standard
        self.frequent = frequent
    }

    /// The log without the latest update's entries, for an update superseded before it went out: its
    /// priority-10 slots (the last entries, of the kinds it went at 10 for) are free again.
    public func returning(_ priority: BudgetedPriority) -> PriorityTenLog {
        var log = self
        if priority.standard == 10, !log.standard.isEmpty { log.standard.removeLast() }
        if priority.frequent == 10, !log.frequent.isEmpty { log.frequent.removeLast() }
        return log
    }

    /// As stored: `{"standard": [...], "frequent": [...]}`.
    public var json: JSONValue { ["standard": .array(standard.map { .int($0) }), "frequent": .array(frequent.map { .int($0) })] }

    /// The stored text read back; nil or unreadable text is an empty log.
    public init(json text: String?) {
        let object = text.flatMap { try? JSONParser.parse($0).objectValue }
        self.init(standard: object?["standard"]?.arrayValue?.compactMap(\.intValue) ?? [],
                  frequent: object?["frequent"]?.arrayValue?.compactMap(\.intValue) ?? [])
    }
}
