import Foundation
import IsletCore
import IsletStore

/// What the API and the console read of messages and activities.
extension SQLMessageStore: MessageReads {
    public func messageDetails(code: String, in application: ApplicationCode) throws(StoreError) -> MessageDetails? {
        try database.withConnection { (c) throws(StoreError) -> MessageDetails? in
            if let held = try c.query("""
                SELECT s.event, a.activity_id, s.due_at, s.expires_at, s.created_at FROM scheduled_updates s JOIN activities a ON a.id = s.activity
                WHERE s.code = ? AND s.application = ?
                """, [.text(code), .text(application.rawValue)]).first {
                // A11: held until due, nothing sent yet.
                return MessageDetails(code: code, event: LiveActivityEvent(rawValue: held["event"].text ?? "") ?? .update,
                                      activityID: held["activity_id"].text ?? "", state: .pending,
                                      createdAt: held["created_at"].date ?? Date(timeIntervalSince1970: 0),
                                      dueAt: Self.date(milliseconds: held["due_at"].int ?? 0), finishedAt: nil, targeted: 0, sent: 0, failed: 0,
                                      skipped: [:], reasons: [:], expiresAt: Self.date(milliseconds: held["expires_at"].int ?? 0))
            }
            guard let row = try c.query("""
                SELECT m.id, m.event, a.activity_id, m.state, m.created_at, m.due_at, m.finished_at, m.expires_at, m.priority, m.unknown_targets,
                       (SELECT s.code FROM messages s WHERE s.id = \(Self.superseding("m"))) AS superseded_by
                FROM messages m JOIN activities a ON a.id = m.activity WHERE m.code = ? AND m.application = ?
                """, [.text(code), .text(application.rawValue)]).first else { return nil }
            let id = row["id"]
            var skipped: [String: Int] = [:], reasons: [String: Int] = [:], byState: [DeliveryState: Int] = [:]
            var targeted = 0, caughtUp: Int64 = 0, lowered: Int64 = 0, nextAt: Int64?, received: Int64 = 0, opened: Int64 = 0, alerts: Int64 = 0
            // One statement, so the counts and the next attempt come from one snapshot: read apart, a retry
            // claimed in between would be counted as waiting yet have no next attempt.
            for group in try c.query("""
                SELECT state, COALESCE(reason, '') AS reason, COUNT(*) AS count, MIN(next_at) AS next_at, COALESCE(SUM(catch_up), 0) AS caught_up,
                       COALESCE(SUM(CASE WHEN priority = 5 THEN 1 ELSE 0 END), 0) AS low, COUNT(received_at) AS received, COUNT(opened_at) AS opened,
                       COALESCE(SUM(CASE WHEN push_type = \(PushType.alert.sql) THEN 1 ELSE 0 END), 0) AS alerts
                FROM deliveries WHERE message = ? GROUP BY 1, 2
                """, [id]) {
                let state = DeliveryState(rawValue: group["state"].text ?? "") ?? .failed, count = Int(group["count"].int ?? 0)
                targeted += count
                byState[state, default: 0] += count
                caughtUp += group["caught_up"].int ?? 0
                lowered += group["low"].int ?? 0
                received += group["received"].int ?? 0
                opened += group["opened"].int ?? 0
                if state == .sent { alerts += group["alerts"].int ?? 0 }
                if state == .retrying || state == .unconfirmed, let next = group["next_at"].int { nextAt = min(nextAt ?? next, next) }
                if state == .skipped { skipped[group["reason"].text ?? "", default: 0] += count }
                if state == .failed { reasons[group["reason"].text ?? "", default: 0] += count }
            }
            var details = MessageDetails(
                code: code, event: LiveActivityEvent(rawValue: row["event"].text ?? "") ?? .update, activityID: row["activity_id"].text ?? "",
                state: MessageState(rawValue: row["state"].text ?? "") ?? .pending,
                createdAt: row["created_at"].date ?? Date(timeIntervalSince1970: 0),
                dueAt: Self.date(milliseconds: row["due_at"].int ?? 0),
                finishedAt: row["finished_at"].date,
                targeted: targeted, sent: byState[.sent] ?? 0, failed: byState[.failed] ?? 0, skipped: skipped, reasons: reasons,
                pending: byState.filter { ![.sent, .failed, .skipped].contains($0.key) }, nextAttemptAt: nextAt.map { Self.date(milliseconds: $0) },
                caughtUp: Int(caughtUp), supersededBy: row["superseded_by"].text,
                expiresAt: row["expires_at"].int.map { Self.date(milliseconds: $0) },
                overBudget: row["priority"].int == 10 ? Int(lowered) : 0)
            details.received = Int(received)
            details.opened = Int(opened)
            details.fallbackAlerts = Int(alerts)
            details.unknownTargets = Int(row["unknown_targets"].int ?? 0)
            return details
        }
    }

    public func activity(_ activityID: String, in application: ApplicationCode) throws(StoreError) -> ActivityRecord? {
        try database.withConnection { (c) throws(StoreError) in try activityRow(activityID, application, locking: false, c) }
    }

    public func activityDevices(activity: Int64, after: Int64, limit: Int) throws(StoreError) -> [ActivityDevice] {
        // Each device's latest delivery of this activity through deliveries_by_device: a page costs the same
        // however many devices and messages the activity has.
        try database.withConnection { (c) throws(StoreError) in
            // For the health flags (A10): when APNs accepted the device's start of the current session, the app's
            // first report of an update token since that start was accepted by Islet, and when the device's push
            // token or gateway last changed (a BadDeviceToken before that is no longer news).
            try c.query("""
                SELECT d.id, d.hwid, d.sandbox, d.os_version, sm.channel_ids, ad.state, dl.status, dl.reason, dl.at, m.code, dl.state AS delivery_state, dl.catch_up,
                       dl.attempts, dl.next_at, a.state AS activity_state, a.activity_id,
                       (SELECT t.updated_at FROM activity_tokens t WHERE t.device = ad.device AND t.activity_id = a.activity_id AND t.token IS NOT NULL) AS token_updated_at,
                       s.at AS start_accepted_at,
                       (SELECT MAX(h.at) FROM token_history h WHERE h.device = ad.device AND h.kind = \(DeviceTokenKind.push.sql)) AS push_token_changed_at,
                       (SELECT MIN(h.at) FROM token_history h WHERE h.device = ad.device AND h.kind = \(DeviceTokenKind.update.sql) AND h.slot = a.activity_id
                                                                AND h.token IS NOT NULL AND h.at >= sm.created_at) AS token_reported_at
                FROM activity_devices ad JOIN devices d ON d.id = ad.device JOIN activities a ON a.id = ad.activity
                LEFT JOIN deliveries dl ON dl.device = ad.device AND dl.message = (
                    SELECT MAX(x.message) FROM deliveries x JOIN messages y ON y.id = x.message WHERE x.device = ad.device AND y.activity = ?1)
                LEFT JOIN messages m ON m.id = dl.message
                LEFT JOIN messages sm ON sm.id = (SELECT MAX(y.id) FROM messages y WHERE y.activity = ?1 AND y.event = \(LiveActivityEvent.start.sql))
                LEFT JOIN deliveries s ON s.device = ad.device AND s.message = sm.id AND s.push_type = \(PushType.liveActivity.sql) AND s.state = \(DeliveryState.sent.sql)
                WHERE ad.activity = ?1 AND ad.device > ?2 ORDER BY ad.device LIMIT ?3
                """, [.int(activity), .int(after), .int(Int64(limit))]).map { row in
                // After the end, a device where it ran shows "ended", not "active".
                let joined = row["state"].text ?? ""
                let state = joined == "active" && row["activity_state"].text == ActivityState.ended.rawValue ? "ended" : joined
                var device = ActivityDevice(hwid: row["hwid"].text ?? "", state: state, lastStatus: row["status"].int.map { Int($0) },
                                            lastReason: row["reason"].text, lastMessage: row["code"].text,
                                            lastState: row["delivery_state"].text.flatMap(DeliveryState.init(rawValue:)), caughtUp: row["catch_up"].bool)
                device.id = row["id"].int ?? 0
                device.attempts = row["attempts"].int.map { Int($0) }
                // A retry's next attempt, or when an unconfirmed start is sent once more (`next_at` is kept only for those).
                if device.lastState == .retrying || device.lastState == .unconfirmed {
                    device.nextAttemptAt = row["next_at"].int.map { Self.date(milliseconds: $0) }
                }
                device.tokenUpdatedAt = row["token_updated_at"].date
                let gateway: Gateway = row["sandbox"].bool ? .sandbox : .production
                // A start that subscribed the device to a channel (X5) brings no update token to wait for.
                let onChannel = BroadcastChannels.startsOnChannel(ids: row["channel_ids"].text.map(Self.decode(channelIDs:)), gateway: gateway,
                                                                  osVersion: row["os_version"].text)
                device.health = DeviceHealth.Facts(
                    gateway: gateway,
                    starts: onChannel ? [] : row["start_accepted_at"].date.map {
                        [DeviceHealth.Start(activityID: row["activity_id"].text ?? "", acceptedAt: $0, tokenReportedAt: row["token_reported_at"].date)]
                    } ?? [],
                    rejections: row["reason"].text == "BadDeviceToken" && (row["at"].int ?? 0) >= (row["push_token_changed_at"].int ?? 0)
                        ? [DeviceHealth.Rejection(reason: "BadDeviceToken", at: row["at"].date ?? .distantPast)] : [])
                return device
            }
        }
    }

    public func activityDeviceCount(activity: Int64) throws(StoreError) -> Int {
        try database.withConnection { (c) throws(StoreError) -> Int in
            Int(try c.query("SELECT COUNT(*) AS count FROM activity_devices WHERE activity = ?", [.int(activity)])[0]["count"].int ?? 0)
        }
    }

    public func unconfirmedStarts(activity: Int64) throws(StoreError) -> UnconfirmedStarts {
        try database.withConnection { (c) throws(StoreError) -> UnconfirmedStarts in
            // Through deliveries_owed: only the owed pushes of the session's start are read, not its whole fan-out (SQLite
            // takes a partial index when named, and when the query repeats the index's condition).
            let row = try c.query("""
                SELECT COUNT(*) AS count, MIN(next_at) AS next_at FROM deliveries \(database.dialect.indexedBy("deliveries_owed"))
                WHERE message = (\(Self.currentStart(of: "?1"))) AND state IN \([DeliveryState.retrying, .unconfirmed].sqlList) AND state = \(DeliveryState.unconfirmed.sql)
                """, [.int(activity)])[0]
            return UnconfirmedStarts(count: Int(row["count"].int ?? 0), nextAttemptAt: row["next_at"].int.map { Self.date(milliseconds: $0) })
        }
    }
}
