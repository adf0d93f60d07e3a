import Foundation
import Synchronization
import Testing
import IsletCore
import IsletCrypto
import IsletSQL
import IsletSQLite
import IsletStore
@testable import IsletApp

/// Issue 12: APNs keys sealed with a master key, its rotation, and the audit log of admin actions.
@Suite("Master key and audit log")
struct SecretsCommandTests {
    let workspace = Workspace()

    func storedPEMs() throws -> [String] {
        try SQLiteDatabase(path: workspace.database).withConnection { (c) throws(StoreError) -> [String] in try c.query("SELECT pem FROM apns_keys").compactMap { $0["pem"].text } }
    }

    func auditEntries() throws -> [JSONObject] {
        let text = try String(contentsOfFile: workspace.directory.appendingPathComponent("audit.log").path, encoding: .utf8)
        return try text.split(separator: "\n").map { try #require(try JSONParser.parse(String($0)).objectValue) }
    }

    @Test func keysAreSealedWithTheMasterKeyAndRotated() throws {
        let first = MasterKey.generate(), second = MasterKey.generate()
        let keyFile = workspace.file("AuthKey_KEY1234567.p8", TestKeys.p256)
        let environment = ["ISLET_MASTER_KEY": first.hexText]
        let created = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                             "--key-file", keyFile, "--database", workspace.database, "--json"], environment: environment)
        #expect(created.status == 0, "\(created.errors)")
        #expect(try storedPEMs().allSatisfy { $0.hasPrefix("islet-sealed:v2:") && !$0.contains("PRIVATE KEY") })

        // The nodes' shared provider token, sealed with the first key, is sealed again with the second: no new one to sign.
        let now = Date()
        let shared = try #require(try SQLClusterStore(database: try SQLiteDatabase(path: workspace.database), masterKey: first)
            .providerToken(named: "TEAM123456.KEY1234567", issuedAfter: now.addingTimeInterval(-60), at: now, sign: { _ in "jwt-shared" }))
        #expect(shared.token == "jwt-shared")

        let newKeyFile = workspace.file("master.key", second.hexText + "\n")
        let rotated = islet(["app", "rotate-master-key", "--new-key-file", newKeyFile, "--database", workspace.database], environment: environment)
        #expect(rotated.status == 0, "\(rotated.errors)")
        #expect(rotated.output == "Sealed 1 APNs key with master key \(second.fingerprint). Start Islet with this key from now on.\n")
        let store = SQLApplicationStore(database: try SQLiteDatabase(path: workspace.database), masterKey: second)
        #expect(try store.checkAPNsKeys() == (1, 0) ? true : false)
        let resealed = try SQLClusterStore(database: try SQLiteDatabase(path: workspace.database), masterKey: second)
            .providerToken(named: "TEAM123456.KEY1234567", issuedAfter: now.addingTimeInterval(-60), at: now, sign: { _ in "jwt-new" })
        #expect(resealed?.token == "jwt-shared", "the provider token is read with the new master key")

        let wrong = islet(["app", "rotate-master-key", "--new-key-file", newKeyFile, "--database", workspace.database], environment: environment)
        #expect(wrong.status == 1 && wrong.errors.contains("sealed with another master key"), "the old key opens nothing now")
        // A key in clear (no master key given) is refused beside sealed ones, as is one under another master key.
        let plain = islet(["app", "set-apns-key", try #require(try store.applications().first?.code.rawValue), "--team-id", "TEAM123456",
                           "--key-id", "KEY7654321", "--key-file", keyFile, "--database", workspace.database])
        #expect(plain.status == 1 && plain.errors.contains("would be stored in clear"), "\(plain.errors)")
        let linked = workspace.directory.appendingPathComponent("linked.key").path
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: newKeyFile)
        #expect(islet(["app", "list", "--database", workspace.database], environment: ["ISLET_MASTER_KEY_FILE": linked]).status == 0,
                "a link to a 0600 key file is read (mounted secrets are links)")
        let open = workspace.file("open.key", second.hexText, mode: 0o644)
        let refused = islet(["app", "rotate-master-key", "--new-key-file", open, "--database", workspace.database], environment: environment)
        #expect(refused.status == 64 && refused.errors.contains("is readable by other users"))
    }

    @Test func rotationRefusesADatabaseWithNothingToSeal() throws {
        let keyFile = workspace.file("master.key", MasterKey.generate().hexText)
        let missing = workspace.directory.appendingPathComponent("typo.sqlite").path
        let none = islet(["app", "rotate-master-key", "--new-key-file", keyFile, "--database", missing])
        #expect(none.status == 1 && none.errors.contains("no database at"))
        #expect(!FileManager.default.fileExists(atPath: missing))
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        let empty = islet(["app", "rotate-master-key", "--new-key-file", keyFile, "--database", workspace.database])
        #expect(empty.status == 1 && empty.errors.contains("holds no APNs key and no FCM service account"))
    }

    @Test func theServerWillNotStartWithoutTheKeyThatOpensItsKeys() throws {
        let master = MasterKey.generate()
        let keyFile = workspace.file("AuthKey_KEY1234567.p8", TestKeys.p256)
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                   "--key-file", keyFile, "--database", workspace.database], environment: ["ISLET_MASTER_KEY": master.hexText])
        var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: workspace.database, apns: .apple)
        configuration.apnsURL = "https://127.0.0.1:9"
        let locked = try IsletServer(configuration: configuration, logger: .discard)
        do {
            try locked.start()
            Issue.record("started without the master key")
        } catch let error as StoreError {
            #expect(error.code == .locked)
        }
        locked.shutdown()
        configuration.masterKey = master
        let lines = Mutex<[String]>([])
        let logger = Logger(label: "test", minimumLevel: .warning) { line in lines.withLock { $0.append(line) } }
        let unlocked = try IsletServer(configuration: configuration, logger: logger)
        #expect(try unlocked.start() > 0)
        #expect(try unlocked.store.apnsKey(for: ApplicationCode(try #require(try unlocked.store.applications().first).code.rawValue)!)?.pem == TestKeys.p256)
        unlocked.shutdown()
        #expect(!lines.withLock { $0 }.contains { $0.contains("unencrypted") }, "sealed keys and the master key given: no warning")
    }

    @Test func aServerThatSendsToAppleWithoutAMasterKeyWarnsThatItsKeysAreInClear() throws {
        let keyFile = workspace.file("AuthKey_KEY1234567.p8", TestKeys.p256)
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                   "--key-file", keyFile, "--database", workspace.database])
        var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: workspace.database, apns: .apple)
        configuration.apnsURL = "https://127.0.0.1:9"
        let lines = Mutex<[String]>([])
        let logger = Logger(label: "test", minimumLevel: .warning) { line in lines.withLock { $0.append(line) } }
        let server = try IsletServer(configuration: configuration, logger: logger)
        #expect(try server.start() > 0)
        server.shutdown()
        let warning = lines.withLock { $0 }.first { $0.contains("APNs keys are stored unencrypted") }
        #expect(warning?.contains("ISLET_MASTER_KEY") == true && warning?.contains("\"plain_keys\":1") == true, "\(lines.withLock { $0 })")
    }

    @Test func everyAdminActionIsAuditedWithoutSecrets() throws {
        let keyFile = workspace.file("AuthKey_KEY1234567.p8", TestKeys.p256)
        let created = try #require(try JSONParser.parse(islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database",
                                                                workspace.database, "--json"]).output.trimmingCharacters(in: .newlines)).objectValue)
        let code = try #require(created["application"]?.stringValue)
        let issued = islet(["app", "token", "create", code, "--kind", "device", "--database", workspace.database, "--json"])
        let issuedToken = try #require(try JSONParser.parse(issued.output.trimmingCharacters(in: .newlines)).objectValue)
        _ = islet(["app", "token", "revoke", code, try #require(issuedToken["id"]?.stringValue), "--database", workspace.database])
        _ = islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", keyFile, "--database", workspace.database])
        let schema = workspace.file("schema.json", #"{"content_state": {"status": "string"}}"#)
        _ = islet(["schema", "set", code, "Order", "--file", schema, "--database", workspace.database])
        _ = islet(["schema", "delete", code, "Order", "--database", workspace.database])

        let entries = try auditEntries()
        #expect(entries.map { $0["action"]?.stringValue ?? "" } == ["application.created", "token.issued", "token.revoked", "apns_key.set", "schema.set", "schema.deleted"])
        #expect(entries.allSatisfy { $0["application"] == .string(code) && $0["actor"] == "cli" && $0["at"]?.stringValue != nil })
        let text = try String(contentsOfFile: workspace.directory.appendingPathComponent("audit.log").path, encoding: .utf8)
        for secret in [created["api_token"]?.stringValue, created["device_token"]?.stringValue, issuedToken["token"]?.stringValue, "PRIVATE KEY"] {
            #expect(!text.contains(try #require(secret)), "the audit log holds no secret")
        }
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: workspace.directory.appendingPathComponent("audit.log").path)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o077 == 0)
        #expect(islet(["app", "list", "--database", workspace.database], environment: ["ISLET_AUDIT_LOG": "off"]).status == 0)
    }
}
