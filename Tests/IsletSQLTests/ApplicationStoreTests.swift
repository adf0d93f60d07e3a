import Foundation
import Testing
import IsletCore
import IsletCrypto
import IsletStore
@testable import IsletSQL
@testable import IsletSQLite

private func application(_ code: String, name: String = "Shop") -> Application {
    Application(code: ApplicationCode(code)!, name: name, bundleID: "com.example.shop", createdAt: Date(timeIntervalSince1970: 1_700_000_000))
}

private func token(_ id: String, _ code: String, _ kind: TokenKind, secret: String) -> TokenRecord {
    TokenRecord(id: id, application: ApplicationCode(code)!, kind: kind, hash: Crypto.sha256(Array(secret.utf8)), label: "l",
                createdAt: Date(timeIntervalSince1970: 1_700_000_000))
}

@Suite("Application store, on both engines")
struct ApplicationStoreTests {
    @Test func theSQLiteFileHoldingKeysIsReadableByItsOwnerOnly() throws {
        let db = try Engine.sqlite.open()
        try db.applications().createApplication(application("APPAA-00001"), tokens: [], apnsKey: nil)
        for suffix in ["", "-wal"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: db.location + suffix)
            #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o077 } == 0, "\(db.location + suffix) is open to others")
        }
    }

    @Test(arguments: Engine.allCases) func createsAndReadsApplicationsWithTokensAndKey(_ engine: Engine) throws {
        let db = try engine.open()
        let store = db.applications()
        #expect(try store.hasNoApplications())
        let key = APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .sandbox), pem: "PEM")
        try store.createApplication(application("ABCDE-12345"), tokens: [
            token("tk_1", "ABCDE-12345", .api, secret: "a"), token("tk_2", "ABCDE-12345", .device, secret: "d"),
        ], apnsKey: key)
        #expect(try !store.hasNoApplications())
        let read = try #require(try store.application(ApplicationCode("ABCDE-12345")!))
        #expect(read.name == "Shop")
        #expect(read.apnsKey == key.info)
        #expect(try store.apnsKey(for: read.code) == key)
        let tokens = try store.tokens(of: read.code)
        #expect(tokens.map(\.id) == ["tk_1", "tk_2"])
        #expect(tokens[0].hash == Crypto.sha256(Array("a".utf8)))
        #expect(try store.application(ApplicationCode("ZZZZZ-99999")!) == nil)
    }

    @Test(arguments: Engine.allCases) func creationIsAllOrNothing(_ engine: Engine) throws {
        let db = try engine.open()
        let store = db.applications()
        try store.createApplication(application("ABCDE-12345"), tokens: [token("tk_1", "ABCDE-12345", .api, secret: "a")], apnsKey: nil)
        // The second application's token reuses the first one's secret: the unique hash fails the whole creation.
        #expect(throws: StoreError.self) {
            try store.createApplication(application("FGHIJ-67890"), tokens: [token("tk_9", "FGHIJ-67890", .api, secret: "a")], apnsKey: nil)
        }
        #expect(try store.application(ApplicationCode("FGHIJ-67890")!) == nil)
        #expect(try store.applications().count == 1)
        #expect(throws: StoreError(.conflict, "application ABCDE-12345 already exists")) {
            try store.createApplication(application("ABCDE-12345"), tokens: [], apnsKey: nil)
        }
    }

    @Test(arguments: Engine.allCases) func revokesOnceAndOnlyWithinTheApplication(_ engine: Engine) throws {
        let db = try engine.open()
        let store = db.applications()
        try store.createApplication(application("ABCDE-12345"), tokens: [token("tk_1", "ABCDE-12345", .api, secret: "a")], apnsKey: nil)
        try store.createApplication(application("FGHIJ-67890"), tokens: [], apnsKey: nil)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(try !store.revokeToken(application: ApplicationCode("FGHIJ-67890")!, id: "tk_1", at: now))
        #expect(try store.revokeToken(application: ApplicationCode("ABCDE-12345")!, id: "tk_1", at: now))
        #expect(try !store.revokeToken(application: ApplicationCode("ABCDE-12345")!, id: "tk_1", at: now))
        #expect(try store.tokens(of: ApplicationCode("ABCDE-12345")!).first?.revokedAt == now)
    }

    @Test(arguments: Engine.allCases) func refusesTokensAndKeysForUnknownApplications(_ engine: Engine) throws {
        let db = try engine.open()
        let store = db.applications()
        #expect(throws: StoreError(.notFound, "application ABCDE-12345 does not exist")) {
            try store.addToken(token("tk_1", "ABCDE-12345", .api, secret: "a"))
        }
        let key = APNsSigningKey(info: APNsKeyInfo(teamID: "T", keyID: "K", environment: .both), pem: "P")
        #expect(throws: StoreError.self) { try store.setAPNsKey(key, for: ApplicationCode("ABCDE-12345")!) }
    }

    @Test(arguments: Engine.allCases) func replacesTheAPNsKey(_ engine: Engine) throws {
        let db = try engine.open()
        let store = db.applications()
        try store.createApplication(application("ABCDE-12345"), tokens: [], apnsKey: nil)
        let code = ApplicationCode("ABCDE-12345")!
        for keyID in ["KEY0000001", "KEY0000002"] {
            try store.setAPNsKey(APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: keyID, environment: .both), pem: keyID), for: code)
        }
        #expect(try store.apnsKey(for: code)?.pem == "KEY0000002")
        #expect(try store.application(code)?.apnsKey?.keyID == "KEY0000002")
    }

    @Test(arguments: Engine.allCases) func aSecondHandleOnTheSameDatabaseSeesWritesAtOnce(_ engine: Engine) throws {
        // The CLI and a running server open the same database: the server must see new applications (issue 2).
        let db = try engine.open()
        let server = db.applications()
        let cli = SQLApplicationStore(database: try db.reopen())
        #expect(try server.application(ApplicationCode("ABCDE-12345")!) == nil)
        try cli.createApplication(application("ABCDE-12345"), tokens: [], apnsKey: nil)
        #expect(try server.application(ApplicationCode("ABCDE-12345")!) != nil)
    }

    @Test(arguments: Engine.allCases) func concurrentWritersAllSucceed(_ engine: Engine) async throws {
        let db = try engine.open()
        let store = db.applications()
        try store.createApplication(application("ABCDE-12345"), tokens: [], apnsKey: nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask { try store.addToken(token("tk_\(i)", "ABCDE-12345", .device, secret: "s\(i)")) }
            }
            try await group.waitForAll()
        }
        #expect(try store.tokens(of: ApplicationCode("ABCDE-12345")!).count == 40)
    }
}

@Suite("Migrations, on both engines")
struct MigrationTests {
    @Test(arguments: Engine.allCases) func aFreshDatabaseIsAtTheLatestVersion(_ engine: Engine) throws {
        let db = try engine.open()
        #expect(try db.database.schemaVersion() == SQLMigrations.latestVersion)
        // Opening again applies nothing and keeps the version.
        #expect(try db.reopen().schemaVersion() == SQLMigrations.latestVersion)
    }

    /// Version 11 is PostgreSQL's only: its tag-filter index would slow SQLite's filters down.
    @Test(arguments: Engine.allCases) func theTagFilterIndexIsPostgreSQLsOnly(_ engine: Engine) throws {
        let db = try engine.open()
        let found = try db.database.withConnection { (c) throws(StoreError) in
            try c.query(engine == .sqlite
                ? "SELECT COUNT(*) AS count FROM sqlite_master WHERE type = 'index' AND name = 'device_tags_by_name_device'"
                : "SELECT COUNT(*) AS count FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'device_tags_by_name_device'")[0]["count"].int
        }
        #expect(found == (engine == .sqlite ? 0 : 1))
        #expect(try db.database.schemaVersion() == SQLMigrations.latestVersion, "the version is taken on both")
    }

    @Test(arguments: Engine.allCases) func upgradesAnExistingVersionOneDatabaseKeepingItsData(_ engine: Engine) throws {
        let db = try engine.open(migrateUpTo: 1)
        let old = db.database
        #expect(try old.schemaVersion() == 1)
        try SQLApplicationStore(database: old).createApplication(
            application("ABCDE-12345"), tokens: [token("tk_1", "ABCDE-12345", .api, secret: "a")], apnsKey: nil)
        #expect(throws: StoreError.self) {
            try old.withConnection { (c) throws(StoreError) in try c.query("SELECT * FROM apns_keys") }
        }

        let upgraded = try db.reopen()
        #expect(try upgraded.schemaVersion() == SQLMigrations.latestVersion)
        let store = SQLApplicationStore(database: upgraded)
        let code = ApplicationCode("ABCDE-12345")!
        #expect(try store.application(code)?.name == "Shop")
        #expect(try store.tokens(of: code).map(\.id) == ["tk_1"])
        try store.setAPNsKey(APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both), pem: "P"), for: code)
        #expect(try store.application(code)?.apnsKey?.keyID == "KEY1234567")
        let names = try upgraded.withConnection { (c) throws(StoreError) in
            try c.query("SELECT version, name FROM schema_migrations ORDER BY version").map { $0["name"].text ?? "" }
        }
        #expect(names == SQLMigrations.all.map(\.name))
    }

    @Test(arguments: Engine.allCases) func refusesADatabaseFromANewerIslet(_ engine: Engine) throws {
        let db = try engine.open()
        _ = try db.database.withConnection { (c) throws(StoreError) in
            try c.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)")
        }
        #expect {
            _ = try db.reopen()
        } throws: { error in
            (error as? StoreError)?.code == .newerSchema && (error as? StoreError)?.message.contains("upgrade Islet") == true
        }
    }

    @Test func reportsAnUnopenableFile() {
        #expect {
            _ = try SQLiteDatabase(path: "/proc/islet-cannot-exist/x.sqlite")
        } throws: { error in
            (error as? StoreError)?.code == .io
        }
    }
}
