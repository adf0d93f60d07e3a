import Foundation
import Testing
import IsletCore
@testable import IsletSQL
import IsletStore

private let shop = ApplicationCode("SHOPT-00001")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)

/// Updates written together (`UpdatesTogether`, PostgreSQL) must leave what the same updates leave when each request is
/// written alone, the reference path: the same answers, activities, messages, jobs and superseded messages.
@Suite("Updates written together agree with updates written alone")
struct UpdatesTogetherTests {
    /// Two sets of the same activities in the same states (names prefixed A and B). Set A's requests go through
    /// `acceptUpdates` one by one; set B's are offered to one write together, and those it does not make then go
    /// through `acceptUpdates`, as `GroupCommit` runs them. Plain updates (a first one, one superseding a waiting
    /// update, one after two others, one waiting for its turn, A9, all over their priority-10 budget, A7, and a request of two) are made together; a refusal, an end,
    /// one sent later, one checked against a schema its activity did not start with (X2) and a request of two with a
    /// refusal in it are not.
    @Test func updatesWrittenTogetherLeaveWhatUpdatesWrittenAloneLeave() throws {
        let db = try Engine.postgresql.open()
        try db.applications().createApplication(Application(code: shop, name: "x", bundleID: "com.example.x", createdAt: now),
                                                tokens: [], apnsKey: nil)
        let store = db.messages
        // No priority-10 update an hour for standard phones (A7): every one is lowered for them.
        let budget = UpdateBudget(perHour: 0, frequentPerHour: 3), pacing = UpdatePacing(interval: 5)
        let names = ["PLAIN", "WAITING", "BUDGET", "PACED", "PAIR_1", "PAIR_2", "MIXED_1", "MIXED_2", "ENDED", "END", "LATER", "CHECKED"]
        var serial = 0
        func message(_ set: String, _ name: String, _ event: LiveActivityEvent, step: Int64, at date: Date = now, priority: Int = 10) -> NewMessage {
            serial += 1
            return NewMessage(code: "\(set)-\(serial)", event: event, activityID: "\(set)_\(name)",
                              target: event == .start ? .devices(["h1"]) : nil, attributesType: event == .start ? "OrderAttributes" : nil,
                              name: nil, contentState: ["step": .int(step)], payload: Array(#"{"aps":{"step":\#(step)}}"#.utf8),
                              fallbackPayload: nil, priority: priority, dueAt: date)
        }
        // The same history in both sets.
        for set in ["A", "B"] {
            for name in names {
                try store.acceptStarts([message(set, name, .start, step: 0)], in: shop, at: now, validateOnly: false)
            }
            let earlier = now.addingTimeInterval(-1)
            try store.acceptUpdates([message(set, "WAITING", .update, step: 1, at: earlier)], in: shop, budget: budget, pacing: pacing,
                                    at: earlier, validateOnly: false)
            for step in 1...2 {
                try store.acceptUpdates([message(set, "BUDGET", .update, step: Int64(step), at: earlier)], in: shop, budget: budget,
                                        at: earlier, validateOnly: false)
            }
            // PACED's last update went out a second ago: the next one waits for its turn (A9), and at priority 5 spends
            // nothing, so the activity keeps its log of priority-10 updates (A7).
            try store.acceptUpdates([message(set, "PACED", .update, step: 1, at: earlier)], in: shop, at: earlier, validateOnly: false)
            try db.database.write { (c) throws(StoreError) in
                let sent = "SELECT m.id FROM messages m JOIN activities a ON a.id = m.activity WHERE a.activity_id = ? AND m.event = 'update'"
                try c.run("DELETE FROM message_queue WHERE message IN (\(sent))", [.text("\(set)_PACED")])
                try c.run("UPDATE messages SET state = 'done', finished_at = ? WHERE id IN (\(sent))", [SQLValue.seconds(earlier), .text("\(set)_PACED")])
            }
            for name in ["ENDED", "MIXED_2"] {
                try store.acceptUpdates([message(set, name, .end, step: 9, at: earlier)], in: shop, at: earlier, validateOnly: false)
            }
        }
        // Checked against a schema its activity did not start with (X2): refused, nothing written.
        func checked(_ message: NewMessage) -> NewMessage {
            var checked = message
            checked.checkedSchema = .against(ActivitySchema(attributesType: "OrderAttributes", version: 1))
            return checked
        }
        func requests(_ set: String) -> [[NewMessage]] {
            [[message(set, "PLAIN", .update, step: 5)], [message(set, "WAITING", .update, step: 5)], [message(set, "BUDGET", .update, step: 5)],
             [message(set, "PACED", .update, step: 5, priority: 5)],
             [message(set, "PAIR_1", .update, step: 5), message(set, "PAIR_2", .update, step: 5)],
             [message(set, "MIXED_1", .update, step: 5), message(set, "MIXED_2", .update, step: 5)],
             [message(set, "ENDED", .update, step: 5)], [message(set, "END", .end, step: 5)],
             [message(set, "LATER", .update, step: 5, at: now.addingTimeInterval(60))], [checked(message(set, "CHECKED", .update, step: 5))]]
        }
        func alone(_ request: [NewMessage]) -> String {
            do {
                return "\(try store.acceptUpdates(request, in: shop, budget: budget, pacing: pacing, at: now, validateOnly: false))"
            } catch {
                return "\(error)".replacingOccurrences(of: "B_", with: "A_")
            }
        }
        let answersAlone = requests("A").map(alone)
        let together = requests("B").map {
            UpdatesTogether(store: store, messages: $0, application: shop, budget: budget, pacing: pacing, at: now)
        }
        let made = try db.database.inWriteTransaction { c in try together[0].write(together: together, c) }
        #expect(made == [true, true, true, true, true, false, false, false, false, false])
        let answersTogether = zip(together, made).map { request, made in
            made ? "\(request.accepted ?? [])" : alone(request.messages)
        }
        #expect(answersTogether == answersAlone)
        #expect(answersAlone[2].contains("standard: 5, frequent: 10"), "the budget lowered the update for standard phones: \(answersAlone[2])")
        #expect(answersAlone[3].contains("dueAt: \(now.addingTimeInterval(4))"), "the paced update waits for its turn: \(answersAlone[3])")
        #expect(answersAlone[5].contains("A_MIXED_2"), "the request with a refusal is refused whole: \(answersAlone[5])")
        #expect(answersAlone[9] == "\(SchemaCheckOutdated(index: 0))")
        #expect(try Self.state(of: "A", db.database) == Self.state(of: "B", db.database))
        let waiting = try Self.state(of: "A", db.database).filter { $0.hasPrefix("WAITING message") }
        #expect(waiting.contains { $0.contains("superseded") }, "the waiting update was superseded: \(waiting)")
    }

    /// What a set's activities, messages and jobs hold, by name, without ids, codes or the set's prefix.
    static func state(of set: String, _ database: any SQLDatabase) throws -> [String] {
        try database.withConnection { (c) throws(StoreError) in
            let prefix = SQLValue.text("\(set)_%")
            var lines: [String] = []
            for row in try c.query("""
                SELECT activity_id, state, content_state, priority_ten_log, dismiss_at FROM activities
                WHERE activity_id LIKE ? ORDER BY activity_id
                """, [prefix]) {
                lines.append("\(row["activity_id"].text?.dropFirst(2) ?? "") activity \(row["state"]) \(row["content_state"]) "
                             + "\(row["priority_ten_log"]) \(row["dismiss_at"])")
            }
            for row in try c.query("""
                SELECT a.activity_id, m.event, m.state, m.priority, m.priority_standard, m.priority_frequent, m.due_at, m.expires_at,
                       m.created_at, m.channel_ids, m.payload, m.target, m.target_kind, m.attributes_type, m.unknown_targets,
                       CASE WHEN m.superseded_by IS NULL THEN '' ELSE 'superseded' END AS superseded,
                       (SELECT q.due_at FROM message_queue q WHERE q.message = m.id) AS job_due
                FROM messages m JOIN activities a ON a.id = m.activity WHERE a.activity_id LIKE ? ORDER BY a.activity_id, m.id
                """, [prefix]) {
                var fields = row.columns.names.filter { $0 != "activity_id" }.map { "\($0)=\(row[$0])" }
                fields.sort()
                lines.append("\(row["activity_id"].text?.dropFirst(2) ?? "") message \(fields.joined(separator: " "))")
            }
            lines.append("scheduled \(try c.query("SELECT COUNT(*) AS n FROM scheduled_updates s JOIN activities a ON a.id = s.activity WHERE a.activity_id LIKE ?", [prefix])[0]["n"])")
            return lines
        }
    }
}
