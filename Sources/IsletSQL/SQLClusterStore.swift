import Foundation
import IsletCore
import IsletCrypto
import IsletStore

/// The nodes sharing a database, the leases of their claims, and shared provider tokens, in either engine.
/// SQLite has one server per file (its server lock), so a node joining frees every claim; PostgreSQL tells a
/// live node by its advisory lock (`SQLDialect.nodeIsAlive`), and a lease by its expiry on the database's clock.
public struct SQLClusterStore: ClusterStore {
    let database: any SQLDatabase
    /// Seals the provider tokens it stores (a copy of the database cannot push without it); nil: they are kept
    /// plain, as the APNs keys are then.
    let masterKey: MasterKey?

    public init(database: any SQLDatabase, masterKey: MasterKey? = nil) {
        self.database = database
        self.masterKey = masterKey
    }

    /// Nodes not seen for this long, holding no lease, are forgotten.
    static let forgetAfter: TimeInterval = 24 * 3600

    public func register(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int {
        try database.write { (c) throws(StoreError) -> Int in
            if let number = try c.query("SELECT number FROM nodes WHERE id = ?", [.text(node.id.rawValue)]).first?["number"].int { return Int(number) }
            // Nodes starting at once take turns for their numbers.
            try database.dialect.takeTurn(on: "nodes", c)
            let number = try c.query("SELECT COALESCE(MAX(number), 0) + 1 AS next FROM nodes")[0]["next"].int ?? 1
            try c.run("""
                INSERT INTO nodes (id, number, host, pid, version, started_at, heartbeat_at, stopped_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, NULL)
                """, [.text(node.id.rawValue), .int(number), .text(node.host), .int(Int64(node.pid)), .text(node.version), SQLValue.seconds(date)])
            return Int(number)
        }
    }

    public func join(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int {
        let assigned = try register(node, at: date)
        return try database.write { (c) throws(StoreError) -> Int in
            try c.run("""
                UPDATE nodes SET host = ?2, pid = ?3, version = ?4, started_at = ?5, heartbeat_at = ?5, stopped_at = NULL WHERE id = ?1
                """, [.text(node.id.rawValue), .text(node.host), .int(Int64(node.pid)), .text(node.version), SQLValue.seconds(date)])
            // What a previous run left claimed: every lease on SQLite (this is its only server), this node id's on PostgreSQL.
            if database.dialect.nodeIsAlive == nil {
                try c.run("DELETE FROM leases")
            } else {
                try c.run("DELETE FROM leases WHERE owner = ?", [.text(node.id.rawValue)])
            }
            _ = try Self.freeUnleased(c)
            try c.run("""
                DELETE FROM nodes WHERE heartbeat_at < ? AND id != ? AND NOT EXISTS (SELECT 1 FROM leases WHERE owner = nodes.id)
                """, [SQLValue.seconds(date.addingTimeInterval(-Self.forgetAfter)), .text(node.id.rawValue)])
            return Int(assigned)
        }
    }

    public func renew(_ leases: Set<Int64>, of owner: NodeID, for duration: TimeInterval) throws(StoreError) -> LeaseRenewal {
        guard !leases.isEmpty else { return LeaseRenewal(renewed: [], gone: []) }
        let list = SQLValue.text(JSONValue.array(leases.sorted().map { .int($0) }).jsonText)
        let mine = "owner = ?2 AND id \(database.dialect.isIn("CAST(value AS BIGINT)", of: "?1"))"
        return try database.inClaimTransaction { (c) throws(StoreError) -> LeaseRenewal in
            // Rows a write is deleting at this moment (a lease ending) are skipped: renewing them would wait for it.
            let renewed = Set(try c.query("""
                UPDATE leases SET until_ms = \(database.dialect.nowMilliseconds) + ?3
                WHERE id IN (SELECT id FROM leases WHERE \(mine) \(database.dialect.skipLocked(of: "leases", updatingKey: false)))
                RETURNING id
                """, [list, .text(owner.rawValue), .int(Int64((duration * 1000).rounded()))]).compactMap { $0["id"].int })
            let present = Set(try c.query("SELECT id FROM leases WHERE \(mine)", [list, .text(owner.rawValue)]).compactMap { $0["id"].int })
            return LeaseRenewal(renewed: renewed, gone: leases.subtracting(present))
        }
    }

    public func heartbeat(_ node: NodeID, at date: Date) throws(StoreError) {
        _ = try database.inClaimTransaction { (c) throws(StoreError) in
            try c.run("UPDATE nodes SET heartbeat_at = ?, stopped_at = NULL WHERE id = ?", [SQLValue.seconds(date), .text(node.rawValue)])
        }
    }

    /// A lease is dead when it expired, or (PostgreSQL) when its node's liveness lock is not held.
    private var deadLease: String {
        let expired = "l.until_ms < \(database.dialect.nowMilliseconds)"
        guard let alive = database.dialect.nodeIsAlive else { return expired }
        return "(\(expired) OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = l.owner AND \(alive)))"
    }

    public func rescue(at date: Date) throws(StoreError) -> RescueReport {
        // A read first: the write (and its lock) only when there is something to rescue, which is rare.
        let needed = try database.withConnection { (c) throws(StoreError) -> Bool in
            try c.query("""
                SELECT EXISTS (SELECT 1 FROM leases l WHERE \(deadLease)) OR \(Self.unleased("message_queue", claimed: "lease IS NOT NULL"))
                    OR \(Self.unleased("message_shards", claimed: "claimed = 1")) OR \(Self.unleased("deliveries", claimed: "state = \(DeliveryState.sending.sql)")) AS needed
                """, [], planning: .fresh)[0]["needed"].bool
        }
        guard needed else { return RescueReport() }
        return try database.write { (c) throws(StoreError) -> RescueReport in
            let leases = try c.run("DELETE FROM leases WHERE id IN (SELECT l.id FROM leases l WHERE \(deadLease))")
            var report = try Self.freeUnleased(c)
            report.leases = leases
            return report
        }
    }

    /// A row of `table` names a lease that is gone (or none).
    private static func leaseGone(_ table: String) -> String {
        "(\(table).lease IS NULL OR NOT EXISTS (SELECT 1 FROM leases l WHERE l.id = \(table).lease))"
    }

    /// `EXISTS` a row of `table` claimed (`claimed`) under a lease that is gone.
    static func unleased(_ table: String, claimed: String) -> String {
        "EXISTS (SELECT 1 FROM \(table) WHERE \(claimed) AND \(leaseGone(table)))"
    }

    /// Frees what was claimed under leases that are gone: jobs and shards resume at their cursor; a retry in
    /// flight is due again now, and a start among them keeps the copy it counted and waits (a minute) for its
    /// device's token like any start whose answer was lost.
    private static func freeUnleased(_ c: any SQLConnection) throws(StoreError) -> RescueReport {
        var report = RescueReport()
        report.jobs = try c.run("UPDATE message_queue SET lease = NULL WHERE lease IS NOT NULL AND \(leaseGone("message_queue"))")
        report.jobs += try c.run("""
            UPDATE message_shards SET claimed = 0, lease = NULL WHERE claimed = 1 AND \(leaseGone("message_shards"))
            """)
        let inAMinute = Int64((Date().timeIntervalSince1970 + 60) * 1000)
        report.deliveries = try c.run("""
            UPDATE deliveries SET state = \(SQLMessageStore.backToWaiting), next_at = CASE WHEN copies > 0 THEN ? ELSE 0 END, lease = NULL
            WHERE state = \(DeliveryState.sending.sql) AND \(leaseGone("deliveries"))
            """, [.int(inAMinute)])
        return report
    }

    public func leave(_ node: NodeID, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("DELETE FROM leases WHERE owner = ?", [.text(node.rawValue)])
            _ = try Self.freeUnleased(c)
            try c.run("UPDATE nodes SET stopped_at = ?, heartbeat_at = ? WHERE id = ?", [SQLValue.seconds(date), SQLValue.seconds(date), .text(node.rawValue)])
        }
    }

    public func nodes(since: Date) throws(StoreError) -> [NodeStatus] {
        try database.withConnection { (c) throws(StoreError) -> [NodeStatus] in
            let owned = "SELECT id FROM leases WHERE owner = n.id"
            return try c.query("""
                SELECT n.id, n.number, n.host, n.pid, n.version, n.started_at, n.heartbeat_at, n.stopped_at,
                       \(database.dialect.nodeIsAlive ?? "NULL") AS alive,
                       (SELECT COUNT(*) FROM leases WHERE owner = n.id) AS leases,
                       (SELECT MIN(until_ms) FROM leases WHERE owner = n.id) AS lease_until,
                       (SELECT COUNT(*) FROM message_queue WHERE lease IN (\(owned)))
                       + (SELECT COUNT(*) FROM message_shards WHERE claimed = 1 AND lease IN (\(owned)))
                       + (SELECT COUNT(*) FROM deliveries WHERE state = \(DeliveryState.sending.sql) AND lease IN (\(owned))) AS claimed
                FROM nodes n
                WHERE n.heartbeat_at >= ? OR EXISTS (SELECT 1 FROM leases WHERE owner = n.id)
                ORDER BY n.number
                """, [SQLValue.seconds(since)]).compactMap { row -> NodeStatus? in
                guard let id = NodeID(row["id"].text ?? "") else { return nil }
                return NodeStatus(
                    info: NodeInfo(id: id, host: row["host"].text ?? "", pid: Int(row["pid"].int ?? 0), version: row["version"].text ?? ""),
                    number: Int(row["number"].int ?? 0), startedAt: Self.date(row["started_at"].int), heartbeatAt: Self.date(row["heartbeat_at"].int),
                    stoppedAt: row["stopped_at"].int.map { Self.date($0) }, alive: row["alive"] == .null ? nil : row["alive"].bool,
                    leases: Int(row["leases"].int ?? 0), claimed: Int(row["claimed"].int ?? 0),
                    leaseUntil: row["lease_until"].int.map { Date(timeIntervalSince1970: Double($0) / 1000) })
            }
        }
    }

    // MARK: - Provider tokens

    public func providerToken(named name: String, issuedAfter: Date, at date: Date, sign: (Date) -> String?) throws(StoreError)
        -> (token: String, issuedAt: Date)? {
        // Nodes asking at once take turns on the name, so only the first signs and the others read its token.
        try database.write { (c) throws(StoreError) -> (token: String, issuedAt: Date)? in
            try database.dialect.takeTurn(on: "provider-token/" + name, c)
            if let row = try c.query("SELECT token, issued_at, expired FROM provider_tokens WHERE name = ?", [.text(name)]).first,
               !row["expired"].bool, let token = row["token"].text.flatMap({ opened($0, name: name) }), let issued = row["issued_at"].int,
               Double(issued) > issuedAfter.timeIntervalSince1970 {
                return (token, Self.date(issued))
            }
            let issuedAt = Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
            guard let token = sign(issuedAt) else { return nil }
            try c.run("""
                INSERT INTO provider_tokens (name, token, issued_at, expired) VALUES (?, ?, ?, 0)
                ON CONFLICT (name) DO UPDATE SET token = excluded.token, issued_at = excluded.issued_at, expired = 0
                """, [.text(name), .text(masterKey?.seal(token, boundTo: Self.binding(providerToken: name)) ?? token), SQLValue.seconds(issuedAt)])
            return (token, issuedAt)
        }
    }

    public func expireProviderToken(named name: String, token: String, renewableBefore: Date) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) -> Bool in
            guard let row = try c.query("SELECT token, issued_at FROM provider_tokens WHERE name = ? \(database.dialect.forUpdate)", [.text(name)]).first,
                  row["token"].text.flatMap({ opened($0, name: name) }) == token else { return true }   // none stored, or already replaced
            guard Double(row["issued_at"].int ?? 0) < renewableBefore.timeIntervalSince1970 else { return false }
            try c.run("UPDATE provider_tokens SET expired = 1 WHERE name = ?", [.text(name)])
            return true
        }
    }

    static func date(_ seconds: Int64?) -> Date { Date(timeIntervalSince1970: Double(seconds ?? 0)) }

    /// A stored provider token as nodes use it: opened with the master key. One sealed with another key (or none
    /// given) is no token: a new one is signed. One stored plain before a master key was set is used until it is
    /// replaced (within the hour), as signing a new one sooner could earn TooManyProviderTokenUpdates (A3).
    func opened(_ stored: String, name: String) -> String? {
        guard MasterKey.isSealed(stored) else { return stored }
        return masterKey?.open(stored, boundTo: Self.binding(providerToken: name))
    }

    /// What a sealed provider token is bound to: its key's name.
    static func binding(providerToken name: String) -> String { "provider-token/\(name)" }
}
