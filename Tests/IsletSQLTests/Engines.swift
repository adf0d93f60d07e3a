import Foundation
import IsletCrypto
import IsletPostgres
import IsletSQL
import IsletSQLite
import IsletStore
import IsletTestPeers
import Testing

/// The storage engines every behaviour test runs against: the same test, the same expectations.
enum Engine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgresql

    var testDescription: String { rawValue }

    /// A fresh, migrated database of this engine; `migrateUpTo` stops at an older schema version.
    func open(migrateUpTo: Int? = nil) throws -> EngineDatabase {
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-test-\(UUID().uuidString)")
            let path = directory.appendingPathComponent("islet.sqlite").path
            return EngineDatabase(engine: self, location: path, database: try SQLiteDatabase(path: path, migrateUpTo: migrateUpTo),
                                  cleanUp: { try? FileManager.default.removeItem(at: directory) })
        case .postgresql:
            let created = try TestPostgres.createDatabase()
            return EngineDatabase(engine: self, location: created.url, database: try PostgresDatabase(url: created.url, migrateUpTo: migrateUpTo),
                                  cleanUp: { created.drop() })
        }
    }
}

/// A test's own database, removed when the test lets go of it.
final class EngineDatabase: Sendable {
    let engine: Engine
    /// The SQLite path or PostgreSQL URL, to open a second handle on the same database.
    let location: String
    let database: any SQLDatabase
    private let cleanUp: @Sendable () -> Void

    init(engine: Engine, location: String, database: any SQLDatabase, cleanUp: @escaping @Sendable () -> Void) {
        self.engine = engine
        self.location = location
        self.database = database
        self.cleanUp = cleanUp
    }

    deinit { cleanUp() }

    /// Another handle on the same database, as a second process (the CLI beside a server) has.
    func reopen(migrateUpTo: Int? = nil) throws -> any SQLDatabase {
        switch engine {
        case .sqlite: try SQLiteDatabase(path: location, migrateUpTo: migrateUpTo)
        case .postgresql: try PostgresDatabase(url: location, migrateUpTo: migrateUpTo)
        }
    }

    func applications(masterKey: MasterKey? = nil) -> SQLApplicationStore { SQLApplicationStore(database: database, masterKey: masterKey) }
    var devices: SQLDeviceStore { SQLDeviceStore(database: database) }
    var messages: SQLMessageStore { SQLMessageStore(database: database) }
    var schemas: SQLSchemaStore { SQLSchemaStore(database: database) }
    var simulated: SQLSimulatorStore { SQLSimulatorStore(database: database) }
    var channels: SQLChannelStore { SQLChannelStore(database: database) }
    var broadcasts: SQLBroadcastStore { SQLBroadcastStore(database: database) }
    var console: SQLConsoleStore { SQLConsoleStore(database: database) }
}

/// Waits until `condition` holds, or `seconds` pass; whether it held. Tests wait on a condition with a deadline,
/// never on a fixed sleep.
@discardableResult
func waitUntil(seconds: TimeInterval, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        guard Date() < deadline else { return false }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return true
}
