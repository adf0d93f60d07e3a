import Foundation
import IsletCore
import IsletStore

/// The console's sessions and reads (issue 17), in either engine.
public struct SQLConsoleStore: ConsoleStore {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    // MARK: - Sessions and the console password

    public func createConsoleSession(_ session: ConsoleSession) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("""
                INSERT INTO console_sessions (id_hash, application, token_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
                """, [.blob(session.idHash), session.application.map { .text($0.rawValue) } ?? .null, session.tokenID.map { .text($0) } ?? .null,
                      .text(session.csrfToken), SQLValue.seconds(session.createdAt), SQLValue.seconds(session.expiresAt)])
        }
    }

    public func consoleSession(idHash: [UInt8], at date: Date) throws(StoreError) -> ConsoleSession? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT id_hash, application, token_id, csrf_token, created_at, expires_at FROM console_sessions WHERE id_hash = ? AND expires_at > ?
                """, [.blob(idHash), SQLValue.seconds(date)]).first.map { row in
                ConsoleSession(idHash: row["id_hash"].blob ?? [], application: row["application"].text.flatMap(ApplicationCode.init),
                               tokenID: row["token_id"].text, csrfToken: row["csrf_token"].text ?? "",
                               createdAt: row["created_at"].date ?? .distantPast, expiresAt: row["expires_at"].date ?? .distantPast)
            }
        }
    }

    public func deleteConsoleSession(idHash: [UInt8]) throws(StoreError) {
        try database.write { (c) throws(StoreError) in _ = try c.run("DELETE FROM console_sessions WHERE id_hash = ?", [.blob(idHash)]) }
    }

    public func deleteExpiredConsoleSessions(before date: Date) throws(StoreError) -> Int {
        try database.write { (c) throws(StoreError) -> Int in try c.run("DELETE FROM console_sessions WHERE expires_at <= ?", [SQLValue.seconds(date)]) }
    }

    public func consolePassword() throws(StoreError) -> String? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT record FROM console_password WHERE singleton = 1").first?["record"].text
        }
    }

    public func setConsolePassword(_ record: String, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("""
                INSERT INTO console_password (singleton, record, updated_at) VALUES (1, ?1, ?2)
                ON CONFLICT (singleton) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at
                """, [.text(record), SQLValue.seconds(date)])
            // A new password signs out whoever signed in with the old one.
            try c.run("DELETE FROM console_sessions WHERE token_id IS NULL")
        }
    }

    // MARK: - Reads

    public func consoleOverview(of application: ApplicationCode, pushesSince: Date) throws(StoreError) -> ConsoleOverview {
        try database.withConnection { (c) throws(StoreError) -> ConsoleOverview in
            let code = SQLValue.text(application.rawValue)
            var overview = ConsoleOverview()
            overview.devices = Int(try c.query("SELECT COUNT(*) AS count FROM devices WHERE application = ?", [code])[0]["count"].int ?? 0)
            overview.pushToStartTokens = Int(try c.query("""
                SELECT COUNT(*) AS count FROM push_to_start_tokens p JOIN devices d ON d.id = p.device WHERE d.application = ?
                """, [code])[0]["count"].int ?? 0)
            for row in try c.query("SELECT state, COUNT(*) AS count FROM activities WHERE application = ? GROUP BY state", [code]) {
                guard let state = row["state"].text.flatMap(ActivityState.init(rawValue:)) else { continue }
                overview.activities[state] = Int(row["count"].int ?? 0)
            }
            // Only messages created within the window or still queued are read (messages_by_creation, the queue), then
            // their pushes by the message's key: the cost follows the hour's traffic, not the history kept. A message
            // from before the window that has finished since (a retry late in its life) is not counted.
            overview.pushes = try c.query("""
                SELECT (d.at / 60) * 60 AS minute, d.state, d.reason, COUNT(*) AS count
                FROM deliveries d JOIN messages m ON m.id = d.message
                WHERE m.id IN (SELECT id FROM messages WHERE application = ?1 AND created_at >= ?2 UNION ALL SELECT message FROM message_queue)
                  AND m.application = ?1 AND d.at >= ?2
                GROUP BY (d.at / 60) * 60, d.state, d.reason ORDER BY 1
                """, [code, SQLValue.seconds(pushesSince)]).compactMap { row in
                guard let state = row["state"].text.flatMap(DeliveryState.init(rawValue:)) else { return nil }
                return PushMinute(minute: row["minute"].int ?? 0, state: state, reason: row["reason"].text, count: Int(row["count"].int ?? 0))
            }
            return overview
        }
    }

    public func activities(in application: ApplicationCode, state: ActivityState?, attributesType: String?, before: Int64,
                           limit: Int) throws(StoreError) -> [ActivitySummary] {
        var conditions = ["a.application = ?"]
        var parameters: [SQLValue] = [.text(application.rawValue)]
        if before > 0 { conditions.append("a.id < ?"); parameters.append(.int(before)) }
        if let state { conditions.append("a.state = ?"); parameters.append(.text(state.rawValue)) }
        if let attributesType { conditions.append("a.attributes_type = ?"); parameters.append(.text(attributesType)) }
        parameters.append(.int(Int64(limit)))
        return try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT a.id, a.activity_id, a.state, a.attributes_type, a.name, a.updated_at,
                       (SELECT COUNT(*) FROM (SELECT 1 FROM activity_devices ad WHERE ad.activity = a.id LIMIT \(ConsoleOverview.deviceCountCap)) capped) AS devices
                FROM activities a WHERE \(conditions.joined(separator: " AND ")) ORDER BY a.id DESC LIMIT ?
                """, parameters).map { row in
                ActivitySummary(id: row["id"].int ?? 0, activityID: row["activity_id"].text ?? "",
                                state: row["state"].text.flatMap(ActivityState.init(rawValue:)) ?? .ended, attributesType: row["attributes_type"].text,
                                name: row["name"].text, updatedAt: row["updated_at"].date ?? .distantPast, deviceCount: Int(row["devices"].int ?? 0))
            }
        }
    }

    public func messages(ofActivity activity: Int64, before: Int64, limit: Int) throws(StoreError) -> [MessageSummary] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT id, code, event, state, created_at, due_at, finished_at, payload, android_payload FROM messages
                WHERE activity = ?1 AND (?2 = 0 OR id < ?2) ORDER BY id DESC LIMIT ?3
                """, [.int(activity), .int(before), .int(Int64(limit))]).map { row in
                var summary = MessageSummary(id: row["id"].int ?? 0, code: row["code"].text ?? "",
                                             event: row["event"].text.flatMap(LiveActivityEvent.init(rawValue:)) ?? .update,
                                             state: row["state"].text.flatMap(MessageState.init(rawValue:)) ?? .done,
                                             createdAt: row["created_at"].date ?? .distantPast,
                                             dueAt: SQLMessageStore.date(milliseconds: row["due_at"].int ?? 0), finishedAt: row["finished_at"].date,
                                             payload: row["payload"].blob ?? [])
                summary.androidPayload = row["android_payload"].blob
                return summary
            }
        }
    }

    public func devices(in application: ApplicationCode, hwidPrefix prefix: String, after: String, limit: Int) throws(StoreError) -> [DeviceSummary] {
        // A range of the (application, hwid) key: U+10FFFF sorts after any character that can follow the prefix.
        var parameters: [SQLValue] = [.text(application.rawValue), .text(after)]
        var range = ""
        if !prefix.isEmpty {
            range = " AND hwid >= ? AND hwid < ?"
            parameters += [.text(prefix), .text(prefix + "\u{10FFFF}")]
        }
        parameters.append(.int(Int64(limit)))
        return try database.withConnection { (c) throws(StoreError) in
            Self.devices(try c.query(Self.selectDevices + " WHERE application = ? AND hwid > ?\(range) ORDER BY hwid LIMIT ?", parameters))
        }
    }

    public func devices(in application: ApplicationCode, userID: String, limit: Int) throws(StoreError) -> [DeviceSummary] {
        try database.withConnection { (c) throws(StoreError) in
            Self.devices(try c.query(Self.selectDevices + " WHERE user_id = ? AND application = ? ORDER BY hwid LIMIT ?",
                                     [.text(userID), .text(application.rawValue), .int(Int64(limit))]))
        }
    }

    static let selectDevices = "SELECT id, hwid, user_id, os_version, push_token IS NOT NULL AS has_push_token, sandbox, updated_at FROM devices"

    static func devices(_ rows: [SQLRow]) -> [DeviceSummary] {
        rows.map { row in
            DeviceSummary(id: row["id"].int ?? 0, hwid: row["hwid"].text ?? "", userID: row["user_id"].text, osVersion: row["os_version"].text,
                          hasPushToken: row["has_push_token"].bool, sandbox: row["sandbox"].bool, updatedAt: row["updated_at"].date ?? .distantPast)
        }
    }

    /// Unfinished messages watched at most: the newest.
    static let watchedAtMost = 2_000

    public func consoleChanges(afterMessage: Int64, open: [Int64]?) throws(StoreError) -> ConsoleChanges {
        try database.withConnection { (c) throws(StoreError) in
            // New messages by their key range; whether a message is finished by its job in the queue, or its activity's
            // naming it as its waiting update (not queued yet).
            let queued = """
                (EXISTS (SELECT 1 FROM message_queue q WHERE q.message = m.id)
                 OR EXISTS (SELECT 1 FROM activities a WHERE a.id = m.activity AND a.waiting_update = m.id)) AS queued
                """
            let created = try c.query("SELECT m.id, m.application, \(queued) FROM messages m WHERE m.id > ? ORDER BY m.id", [.int(afterMessage)])
            let watched: [SQLRow]
            if let open {
                watched = open.isEmpty ? [] : try c.query("""
                    SELECT m.id, m.application, \(queued) FROM messages m WHERE m.id \(database.dialect.isIn("CAST(value AS BIGINT)", of: "?"))
                    """, [.text(JSONValue.array(open.map { .int($0) }).jsonText)])
            } else {
                watched = try c.query("""
                    SELECT m.id, m.application, 1 AS queued FROM messages m
                    WHERE m.id IN (SELECT message FROM message_queue UNION ALL SELECT waiting_update FROM activities WHERE waiting_update IS NOT NULL)
                    ORDER BY m.id DESC LIMIT ?
                    """, [.int(Int64(Self.watchedAtMost))])
            }
            var changes = ConsoleChanges(created: [], finished: [], open: [])
            for (index, row) in (created + watched).enumerated() {
                guard let application = row["application"].text.flatMap(ApplicationCode.init), let id = row["id"].int else { continue }
                if index < created.count { changes.created.append((id, application)) }
                if row["queued"].bool { changes.open.append(id) } else { changes.finished.append((id, application)) }
            }
            changes.open = Array(Set(changes.open).sorted().suffix(Self.watchedAtMost))
            return changes
        }
    }

    public func lastMessageID() throws(StoreError) -> Int64 {
        try database.withConnection { (c) throws(StoreError) -> Int64 in
            try c.query("SELECT COALESCE(MAX(id), 0) AS last FROM messages")[0]["last"].int ?? 0
        }
    }
}
