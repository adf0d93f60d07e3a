import IsletCore
import IsletStore

/// Simulated devices in SQLite, one JSON document each.
public struct SQLiteSimulatorStore: SimulatorStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    public func simulatedDevices() throws(StoreError) -> [(application: ApplicationCode, hwid: String, state: String)] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT application, hwid, state FROM simulated_devices ORDER BY application, hwid").compactMap { row in
                ApplicationCode(row[0].text ?? "").map { ($0, row[1].text ?? "", row[2].text ?? "") }
            }
        }
    }

    public func simulatedDevice(application: ApplicationCode, hwid: String) throws(StoreError) -> String? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT state FROM simulated_devices WHERE application = ? AND hwid = ?",
                        [.text(application.rawValue), .text(hwid)]).first?[0].text
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
