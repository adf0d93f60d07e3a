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

    public func saveSimulatedDevice(application: ApplicationCode, hwid: String, state: String) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            try c.run("""
                INSERT INTO simulated_devices (application, hwid, state) VALUES (?, ?, ?)
                ON CONFLICT (application, hwid) DO UPDATE SET state = excluded.state
                """, [.text(application.rawValue), .text(hwid), .text(state)])
        }
    }
}
