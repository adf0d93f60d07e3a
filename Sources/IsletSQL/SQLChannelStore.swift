import Foundation
import IsletCore
import IsletStore

/// Broadcast channel records (X5), one row per name and environment, in either engine.
public struct SQLChannelStore: ChannelStore {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    public func channel(named name: String, in application: ApplicationCode) throws(StoreError) -> ChannelRecord? {
        try database.withConnection { (c) throws(StoreError) in
            Self.records(try c.query(Self.select + " WHERE application = ? AND name = ? ORDER BY gateway", [.text(application.rawValue), .text(name)])).first
        }
    }

    public func channels(in application: ApplicationCode, after: String?, limit: Int) throws(StoreError) -> [ChannelRecord] {
        try database.withConnection { (c) throws(StoreError) in
            Self.records(try c.query(Self.select + """
                 WHERE application = ?1 AND name IN (SELECT DISTINCT name FROM channels WHERE application = ?1 AND name > ?2 ORDER BY name LIMIT ?3)
                ORDER BY name, gateway
                """, [.text(application.rawValue), .text(after ?? ""), .int(Int64(limit))]))
        }
    }

    public func channelCount(in application: ApplicationCode, gateway: Gateway) throws(StoreError) -> Int {
        try database.withConnection { (c) throws(StoreError) -> Int in
            Int(try c.query("SELECT COUNT(*) AS count FROM channels WHERE application = ? AND gateway = ?",
                            [.text(application.rawValue), .text(gateway.rawValue)])[0]["count"].int ?? 0)
        }
    }

    public func saveChannel(_ record: ChannelRecord, in application: ApplicationCode) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            // Two saves of one name on two nodes take turns: the second finds the first's channel.
            try database.dialect.takeTurn(on: "channel/\(application.rawValue)/\(record.name)", c)
            guard try c.query("SELECT 1 FROM channels WHERE application = ? AND name = ?", [.text(application.rawValue), .text(record.name)]).isEmpty else {
                throw StoreError(.conflict, "a channel named '\(record.name)' already exists")
            }
            for gateway in Gateway.all {
                guard let id = record.ids[gateway] else { continue }
                try c.run("""
                    INSERT INTO channels (application, name, gateway, apns_channel_id, storage_policy, created_at) VALUES (?, ?, ?, ?, ?, ?)
                    """, [.text(application.rawValue), .text(record.name), .text(gateway.rawValue), .text(id), .text(record.policy.rawValue),
                          SQLValue.seconds(record.createdAt)])
            }
        }
    }

    public func deleteChannel(named name: String, gateway: Gateway, in application: ApplicationCode) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) -> Bool in
            try c.run("DELETE FROM channels WHERE application = ? AND name = ? AND gateway = ?",
                      [.text(application.rawValue), .text(name), .text(gateway.rawValue)]) > 0
        }
    }

    public func idleChannels(unusedSince date: Date, excluding: Set<ApplicationCode>, limit: Int) throws(StoreError)
        -> [(application: ApplicationCode, record: ChannelRecord)] {
        try database.withConnection { (c) throws(StoreError) in
            let names = try c.query("""
                SELECT DISTINCT application, name FROM channels WHERE COALESCE(last_used_at, created_at) < ? \(SQLMessageStore.notIn(excluding, column: "application"))
                ORDER BY application, name LIMIT ?
                """, [SQLValue.seconds(date), .int(Int64(limit))])
            var idle: [(application: ApplicationCode, record: ChannelRecord)] = []
            for row in names {
                guard let application = ApplicationCode(row["application"].text ?? ""),
                      let record = Self.records(try c.query(Self.select + " WHERE application = ? AND name = ? ORDER BY gateway",
                                                            [row["application"], row["name"]])).first else { continue }
                idle.append((application, record))
            }
            return idle
        }
    }

    /// X5: the channel `name` is used at `date` (a broadcast, an update broadcast along, a start on it). Written at
    /// most once an hour: idleness is counted in days, and each write locks the channel's rows to the commit.
    static func markUsed(_ name: String, in application: ApplicationCode, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        try c.run("""
            UPDATE channels SET last_used_at = ?1 WHERE application = ?2 AND name = ?3 AND (last_used_at IS NULL OR last_used_at < ?1 - 3600)
            """, [SQLValue.seconds(date), .text(application.rawValue), .text(name)])
    }

    static let select = "SELECT name, gateway, apns_channel_id, storage_policy, created_at, last_used_at FROM channels"

    /// Rows in name order, one record per name.
    static func records(_ rows: [SQLRow]) -> [ChannelRecord] {
        var records: [ChannelRecord] = []
        for row in rows {
            let name = row["name"].text ?? ""
            let gateway = Gateway(rawValue: row["gateway"].text ?? "") ?? .production
            let id = row["apns_channel_id"].text ?? ""
            if let last = records.last, last.name == name {
                var ids = last.ids
                ids[gateway] = id
                records[records.count - 1] = ChannelRecord(name: name, policy: last.policy, createdAt: last.createdAt, ids: ids, lastUsedAt: last.lastUsedAt)
            } else {
                records.append(ChannelRecord(name: name, policy: BroadcastChannels.StoragePolicy(rawValue: row["storage_policy"].text ?? "") ?? .none,
                                             createdAt: row["created_at"].date ?? .distantPast, ids: [gateway: id], lastUsedAt: row["last_used_at"].date))
            }
        }
        return records
    }
}
