import Foundation
import IsletCore
import IsletStore

/// Simulated devices, one JSON document each, in either engine.
public struct SQLSimulatorStore: SimulatorStore {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) { self.database = database }

    public func simulatedDevices() throws(StoreError) -> [(application: ApplicationCode, hwid: String, state: String)] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT application, hwid, state FROM simulated_devices ORDER BY application, hwid").compactMap { row in
                ApplicationCode(row["application"].text ?? "").map { ($0, row["hwid"].text ?? "", row["state"].text ?? "") }
            }
        }
    }

    public func simulatedDevice(application: ApplicationCode, hwid: String) throws(StoreError) -> String? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT state FROM simulated_devices WHERE application = ? AND hwid = ?",
                        [.text(application.rawValue), .text(hwid)]).first?["state"].text
        }
    }

    public func simulatedDevices(of application: ApplicationCode, after: String?, limit: Int) throws(StoreError) -> [(hwid: String, state: String)] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT hwid, state FROM simulated_devices WHERE application = ? AND hwid > ? ORDER BY hwid LIMIT ?",
                        [.text(application.rawValue), .text(after ?? ""), .int(Int64(limit))]).map { ($0["hwid"].text ?? "", $0["state"].text ?? "") }
        }
    }

    public func simulatedChannels(application: ApplicationCode, gateway: Gateway?) throws(StoreError) -> [(id: String, policy: Int)] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT channel_id, storage_policy FROM simulated_channels WHERE application = ? \(Self.inGateway(gateway)) ORDER BY created_at, channel_id
                """, [.text(application.rawValue)] + Self.gatewayParameter(gateway)).map { ($0["channel_id"].text ?? "", Int($0["storage_policy"].int ?? 0)) }
        }
    }

    public func simulatedChannelPolicy(application: ApplicationCode, id: String, gateway: Gateway?) throws(StoreError) -> Int? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT storage_policy FROM simulated_channels WHERE application = ? AND channel_id = ? \(Self.inGateway(gateway))",
                        [.text(application.rawValue), .text(id)] + Self.gatewayParameter(gateway)).first.map { Int($0["storage_policy"].int ?? 0) }
        }
    }

    public func saveSimulatedChannel(application: ApplicationCode, id: String, policy: Int, gateway: Gateway, at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("INSERT INTO simulated_channels (application, channel_id, storage_policy, gateway, created_at) VALUES (?, ?, ?, ?, ?)",
                      [.text(application.rawValue), .text(id), .int(Int64(policy)), .text(gateway.rawValue), SQLValue.seconds(date)])
        }
    }

    public func deleteSimulatedChannel(application: ApplicationCode, id: String, gateway: Gateway?) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) -> Bool in
            try c.run("DELETE FROM simulated_channels WHERE application = ? AND channel_id = ? \(Self.inGateway(gateway))",
                      [.text(application.rawValue), .text(id)] + Self.gatewayParameter(gateway)) == 1
        }
    }

    static func inGateway(_ gateway: Gateway?) -> String { gateway == nil ? "" : "AND gateway = ?" }
    static func gatewayParameter(_ gateway: Gateway?) -> [SQLValue] { gateway.map { [.text($0.rawValue)] } ?? [] }

    public func saveSimulatedChannelMessage(application: ApplicationCode, id: String, payload: [UInt8]?, keptUntil date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("UPDATE simulated_channels SET last_payload = ?, kept_until = ? WHERE application = ? AND channel_id = ?",
                      [payload.map { .blob($0) } ?? .null, SQLValue.seconds(date), .text(application.rawValue), .text(id)])
        }
    }

    public func simulatedChannelMessage(application: ApplicationCode, id: String) throws(StoreError) -> (payload: [UInt8], keptUntil: Date)? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT last_payload, kept_until FROM simulated_channels WHERE application = ? AND channel_id = ?",
                        [.text(application.rawValue), .text(id)]).first.flatMap { row in
                row["last_payload"].blob.map { ($0, row["kept_until"].date ?? .distantPast) }
            }
        }
    }

    public func saveSimulatedDevice(application: ApplicationCode, hwid: String, state: String, tokens: [String]) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("""
                INSERT INTO simulated_devices (application, hwid, state) VALUES (?, ?, ?)
                ON CONFLICT (application, hwid) DO UPDATE SET state = excluded.state
                """, [.text(application.rawValue), .text(hwid), .text(state)])
            try c.run("DELETE FROM simulated_tokens WHERE application = ? AND hwid = ?", [.text(application.rawValue), .text(hwid)])
            for token in Set(tokens) where !token.isEmpty {
                try c.run("""
                    INSERT INTO simulated_tokens (token, application, hwid) VALUES (?, ?, ?)
                    ON CONFLICT (token) DO UPDATE SET application = excluded.application, hwid = excluded.hwid
                    """, [.text(token), .text(application.rawValue), .text(hwid)])
            }
        }
    }

    public func simulatedDevice(token: String) throws(StoreError) -> (application: ApplicationCode, hwid: String, state: String)? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT d.application, d.hwid, d.state FROM simulated_tokens t JOIN simulated_devices d ON d.application = t.application AND d.hwid = t.hwid
                WHERE t.token = ?
                """, [.text(token)]).first.flatMap { row in
                ApplicationCode(row["application"].text ?? "").map { ($0, row["hwid"].text ?? "", row["state"].text ?? "") }
            }
        }
    }

    public func unindexedSimulatedDevices() throws(StoreError) -> [(application: ApplicationCode, hwid: String, state: String)] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT application, hwid, state FROM simulated_devices d
                WHERE NOT EXISTS (SELECT 1 FROM simulated_tokens t WHERE t.application = d.application AND t.hwid = d.hwid)
                """).compactMap { row in
                ApplicationCode(row["application"].text ?? "").map { ($0, row["hwid"].text ?? "", row["state"].text ?? "") }
            }
        }
    }
}
