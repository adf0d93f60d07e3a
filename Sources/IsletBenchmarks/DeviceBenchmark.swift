import Foundation
import IsletApp
import Synchronization
import IsletCore
import IsletSQL
import IsletStore

/// Issue 3's benchmark: register N devices in SQLite (a path) or PostgreSQL (a URL), resolve a filter
/// matching about half of them, and measure the database size per device.
struct DeviceBenchmark {
    let count: Int
    let path: String
    /// Tokens that share their first 48 hex digits (sequential test tokens), instead of varying up front.
    var sharedPrefix = false
    /// Threads registering at once.
    var writers = 16
    /// Measure the filters (and size) of the devices a previous run registered, without registering again.
    var reuse = false

    func run() throws {
        let location = StorageLocation(path)
        if reuse {
            let storage = try Storage(location)
            return try measureFilters(storage, registration: nil)
        }
        if case .sqlite = location {
            try? FileManager.default.removeItem(atPath: path)
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let storage = try Storage(location)
        let database = storage.database
        if case .postgresql = location {
            guard try database.withConnection({ (c) throws(StoreError) in try c.query("SELECT 1 AS one FROM applications") }).isEmpty else {
                throw StoreError(.conflict, "\(location) already holds applications; give the benchmark an empty database")
            }
        }
        let applications = storage.applications(masterKey: nil)
        let code = ApplicationCode("BENCH-00001")!
        try applications.createApplication(Application(code: code, name: "bench", bundleID: "com.example.bench", createdAt: Date()),
                                           tokens: [], apnsKey: nil)
        let devices = storage.devices
        let versions = ["16.4", "17.2", "17.5", "18.1"]

        // 1. Registration: one registerDevice per device, each its own write, as the API does, from `writers`
        //    threads at once (as concurrent API requests are), so group commit shares the syncs.
        print("tokens:                    \(sharedPrefix ? "sharing their first 48 hex digits" : "varying in their first 16 hex digits")")
        let registered = Atomic<Int>(0), failed = Atomic<Int>(0)
        let registration = try measure {
            onThreads(writers) { writer in
                for n in stride(from: writer, to: count, by: writers) {
                    let registration = DeviceRegistration(
                        hwid: "device-\(n)",
                        pushToken: sharedPrefix ? Self.tokenTail + String(format: "%016llx", UInt64(n)) : String(format: "%016llx", UInt64(n)) + Self.tokenTail,
                        language: n % 2 == 0 ? "en" : "pt", timezone: "3600", osVersion: versions[n % versions.count], userID: "user-\(n)")
                    guard (try? devices.registerDevice(registration, tags: [("Level", .integer(Int64(n % 100)))], in: code, at: Date())) != nil else {
                        failed.add(1, ordering: .relaxed)
                        continue
                    }
                    let total = registered.add(1, ordering: .relaxed).newValue
                    if total % 100_000 == 0 { print("  registered \(total)") }
                }
            }
        }
        guard failed.load(ordering: .relaxed) == 0 else { throw StoreError(.io, "\(failed.load(ordering: .relaxed)) registrations failed") }
        try measureFilters(storage, registration: registration)
    }

    /// Filter resolution over the registered devices, a plain-SELECT baseline, and the size per device.
    func measureFilters(_ storage: Storage, registration: Double?) throws {
        let location = storage.location, database = storage.database, devices = storage.devices
        let code = ApplicationCode("BENCH-00001")!
        let count = try database.withConnection { (c) throws(StoreError) in
            Int(try c.query("SELECT COUNT(*) AS count FROM devices WHERE application = ?", [.text(code.rawValue)])[0]["count"].int ?? 0)
        }

        // 2. Filter resolution, paging through the whole audience 1,000 devices at a time.
        let types = try devices.tagTypes(in: code)
        let byLanguage = try FilterDefinition.parse(name: "en", join: .and, conditions: [["Language", "EQ", "en"]], tagTypes: types)
        let byTag = try FilterDefinition.parse(name: "level", join: .and, conditions: [["Level", "GTE", 50]], tagTypes: types)
        let byVersion = try FilterDefinition.parse(name: "os", join: .and, conditions: [["OS Version", "GTE", "17.5"]], tagTypes: types)
        var results: [(String, Int, Double)] = []
        for filter in [byLanguage, byTag, byVersion] {
            var matched = 0
            let seconds = try measure {
                var after: Int64 = 0
                while true {
                    let page = try devices.targets(.filter(filter), in: code, attributesType: "FoodDeliveryAttributes", afterID: after, limit: 1000)
                    guard let last = page.last else { break }
                    matched += page.count
                    after = last.id
                }
            }
            results.append(("\(filter.conditions[0].json.jsonText)", matched, seconds))
        }

        // Baseline in the same run: one plain statement reading every device of the application.
        var scanned = 0
        let baseline = try measure {
            scanned = try database.withConnection { (c) throws(StoreError) in
                try c.query("SELECT id, hwid, push_token FROM devices WHERE application = ?", [.text(code.rawValue)]).count
            }
        }

        // 3. Size: SQLite's file after a WAL checkpoint (page count × page size); PostgreSQL's database size.
        let bytes = try database.withConnection { (c) throws(StoreError) -> Double in
            if case .postgresql = location {
                return Double(try c.query("SELECT pg_database_size(current_database()) AS size")[0]["size"].int ?? 0)
            }
            try c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            let count = try c.query("PRAGMA page_count")[0]["page_count"].int ?? 0
            let size = try c.query("PRAGMA page_size")[0]["page_size"].int ?? 0
            return Double(count * size)
        }

        print("\ndevices registered:        \(count)")
        if let registration {
            print("registration:              \(String(format: "%.1f", registration)) s, \(Int(Double(count) / registration)) devices/s (a write each, \(writers) threads, group commit)")
        }
        for (name, matched, seconds) in results {
            print("filter \(name): \(matched) devices in \(String(format: "%.3f", seconds)) s (\(Int(Double(matched) / seconds)) devices/s, pages of 1000; \(String(format: "%.2f", seconds / baseline))x the baseline)")
        }
        print("baseline: one SELECT of all \(scanned) devices in \(String(format: "%.3f", baseline)) s")
        print("database size:             \(String(format: "%.1f", bytes / 1_048_576)) MiB, \(Int(bytes / Double(count))) bytes per device")
    }

    static let tokenTail = String(repeating: "ab", count: 24)

    func measure(_ body: () throws -> Void) throws -> Double {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
