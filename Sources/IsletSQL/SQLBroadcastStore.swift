import Foundation
import IsletCore
import IsletStore

/// Broadcasts (X5), one row per environment of their channel, in either engine: accepted durably, claimed
/// when due, recorded with Apple's answer, retried until they expire.
public struct SQLBroadcastStore: BroadcastStore {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    public func acceptBroadcasts(_ broadcasts: [NewBroadcast], in application: ApplicationCode, at date: Date) throws {
        try database.write(rethrowing: { c in
            for (index, broadcast) in broadcasts.enumerated() {
                let rows = try c.query("SELECT gateway, apns_channel_id, storage_policy FROM channels WHERE application = ? AND name = ? ORDER BY gateway",
                                       [.text(application.rawValue), .text(broadcast.channel)])
                guard !rows.isEmpty else {
                    throw AcceptRefusal(index: index, field: "channel", message: BroadcastChannels.unknown(broadcast.channel))
                }
                try SQLChannelStore.markUsed(broadcast.channel, in: application, at: date, c)
                for row in rows {
                    let policy = BroadcastChannels.StoragePolicy(rawValue: row["storage_policy"].text ?? "") ?? .none
                    if let asked = broadcast.expiration,
                       let refusal = BroadcastChannels.expirationRefusal(asked, channel: broadcast.channel, policy: policy, now: date) {
                        throw AcceptRefusal(index: index, field: "apns_expiration", message: refusal)
                    }
                    try Self.insert(code: broadcast.code, application: application, channel: broadcast.channel, gateway: row["gateway"].text ?? "",
                                    channelID: row["apns_channel_id"].text ?? "", payload: broadcast.payload, priority: broadcast.priority,
                                    expiration: BroadcastChannels.expiration(policy, expiresAt: broadcast.expiresAt, asked: broadcast.expiration),
                                    expiresAt: broadcast.expiresAt, at: date, c)
                }
            }
            if let notify = database.dialect.notifyWork { try c.run(notify) }
        })
    }

    public func claimDueBroadcasts(at date: Date, limit: Int, claimFor: TimeInterval) throws(StoreError) -> [DueBroadcast] {
        let now = Self.milliseconds(date)
        // A read first: idle workers look often, and most looks find nothing.
        guard try database.withConnection({ (c) throws(StoreError) in
            try !c.query("SELECT 1 FROM broadcasts WHERE state IN \([DeliveryState.pending, .sending, .retrying].sqlList) AND next_at <= ? LIMIT 1", [now],
                         planning: .fresh).isEmpty
        }) else { return [] }
        return try database.inClaimTransaction { (c) throws(StoreError) -> [DueBroadcast] in
            let rows = try c.query("""
                SELECT id, code, application, gateway, apns_channel_id, payload, priority, expiration, expires_at, attempts,
                       EXISTS (SELECT 1 FROM broadcasts n WHERE n.application = b.application AND n.channel = b.channel AND n.gateway = b.gateway
                               AND n.id > b.id AND n.apns_channel_id = b.apns_channel_id AND n.state NOT IN \([DeliveryState.failed, .expired].sqlList)) AS newer
                FROM broadcasts b
                WHERE state IN \([DeliveryState.pending, .sending, .retrying].sqlList) AND next_at <= ? ORDER BY next_at, id LIMIT ? \(database.dialect.skipLocked(of: "b"))
                """, [now, .int(Int64(limit))], planning: .fresh)
            var due: [DueBroadcast] = []
            for row in rows {
                guard let id = row["id"].int, let application = ApplicationCode(row["application"].text ?? "") else { continue }
                // As for pushes: past its expiry it is not sent; a newer broadcast on the channel went or goes instead
                // (on a most_recent channel an older one sent late would be what Apple keeps for phones joining later).
                // An end is never superseded: a later update would not end the cards (a renewal's old card, A8).
                let payload = row["payload"].blob ?? []
                let settled: (state: DeliveryState, reason: String)? = (row["expires_at"].int ?? 0) <= (now.int ?? 0)
                    ? (.expired, "expired before it could be delivered")
                    : row["newer"].bool && !BroadcastChannels.isEnd(payload) ? (.superseded, "a newer broadcast on the channel went instead") : nil
                if let settled {
                    try c.run("UPDATE broadcasts SET state = ?, reason = ?, next_at = NULL WHERE id = ?", [.text(settled.state.rawValue), .text(settled.reason), .int(id)])
                    continue
                }
                try c.run("UPDATE broadcasts SET state = \(DeliveryState.sending.sql), next_at = ? WHERE id = ?",
                          [Self.milliseconds(date.addingTimeInterval(claimFor)), .int(id)])
                due.append(DueBroadcast(id: id, code: row["code"].text ?? "", application: application,
                                        gateway: Gateway(rawValue: row["gateway"].text ?? "") ?? .production, channelID: row["apns_channel_id"].text ?? "",
                                        payload: payload, priority: Int(row["priority"].int ?? 10), expiration: row["expiration"].int ?? 0,
                                        expiresAt: Self.date(milliseconds: row["expires_at"].int ?? 0), attempts: Int(row["attempts"].int ?? 0)))
            }
            return due
        }
    }

    public func recordBroadcasts(_ results: [BroadcastResult], at date: Date) throws(StoreError) {
        guard !results.isEmpty else { return }
        try database.write { (c) throws(StoreError) in
            for result in results {
                try c.run("""
                    UPDATE broadcasts SET state = ?, status = ?, reason = ?, unique_id = COALESCE(?, unique_id), attempts = attempts + 1, next_at = ?
                    WHERE id = ? AND state = \(DeliveryState.sending.sql)
                    """, [.text(result.state.rawValue), .int(Int64(result.status)), result.reason.map { .text($0) } ?? .null,
                          result.uniqueID.map { .text($0) } ?? .null, result.nextAt.map { Self.milliseconds($0) } ?? .null, .int(result.id)])
            }
        }
    }

    public func nextBroadcastDue() throws(StoreError) -> Date? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT MIN(next_at) AS due FROM broadcasts WHERE state IN \([DeliveryState.pending, .sending, .retrying].sqlList)", [],
                        planning: .fresh)[0]["due"].int.map { Self.date(milliseconds: $0) }
        }
    }

    public func broadcastDetails(code: String, in application: ApplicationCode) throws(StoreError) -> BroadcastDetails? {
        try database.withConnection { (c) throws(StoreError) -> BroadcastDetails? in
            let rows = try c.query("""
                SELECT channel, gateway, state, status, reason, unique_id, attempts, next_at, created_at, payload FROM broadcasts
                WHERE application = ? AND code = ? ORDER BY gateway
                """, [.text(application.rawValue), .text(code)])
            guard let first = rows.first else { return nil }
            return BroadcastDetails(code: code, channel: first["channel"].text ?? "", createdAt: first["created_at"].date ?? .distantPast, requests: rows.map { row in
                let state = row["state"].text ?? ""
                return BroadcastDetails.Request(
                    gateway: Gateway(rawValue: row["gateway"].text ?? "") ?? .production, state: state,
                    status: row["status"].int.map { Int($0) }, reason: row["reason"].text, uniqueID: row["unique_id"].text,
                    attempts: Int(row["attempts"].int ?? 0),
                    nextAttemptAt: state == "retrying" ? row["next_at"].int.map { Self.date(milliseconds: $0) } : nil,
                    bytes: row["payload"].blob?.count ?? 0)
            })
        }
    }

    /// One environment of a broadcast into the queue, due at once; or, with `failure`, settled as failed for that
    /// reason and never sent. A code keeps one row per environment, whichever path writes it and how often.
    static func insert(code: String, application: ApplicationCode, channel: String, gateway: String, channelID: String, payload: [UInt8],
                       priority: Int, expiration: Int64, expiresAt: Date, failure: String? = nil, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        try c.run("""
            INSERT INTO broadcasts (code, application, channel, gateway, apns_channel_id, payload, priority, expiration, expires_at,
                                    state, reason, attempts, created_at, next_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT (application, code, gateway) DO NOTHING
            """, [.text(code), .text(application.rawValue), .text(channel), .text(gateway), .text(channelID), .blob(payload), .int(Int64(priority)),
                  .int(expiration), milliseconds(expiresAt), .text(failure == nil ? "pending" : DeliveryState.failed.rawValue),
                  failure.map { .text($0) } ?? .null, SQLValue.seconds(date), failure == nil ? milliseconds(date) : .null])
    }

    static func milliseconds(_ date: Date) -> SQLValue { SQLMessageStore.milliseconds(date) }
    static func date(milliseconds: Int64) -> Date { SQLMessageStore.date(milliseconds: milliseconds) }
}
