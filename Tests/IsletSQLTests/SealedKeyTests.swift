import Foundation
import Testing
import IsletCore
import IsletCrypto
import IsletStore
import IsletSQL

/// Issue 12: APNs signing keys sealed at rest with a master key (AES-256-GCM).
@Suite("APNs keys sealed at rest")
struct SealedKeyTests {
    static let code = ApplicationCode("SHOPA-00001")!
    static let pem = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
    static let key = APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both), pem: pem)

    /// The application store on `db` as a process started with `masterKey` sees it.
    func store(_ db: EngineDatabase, _ masterKey: MasterKey?) throws -> SQLApplicationStore {
        SQLApplicationStore(database: try db.reopen(), masterKey: masterKey)
    }

    func storedText(_ db: EngineDatabase) throws -> String {
        try db.database.withConnection { (c) throws(StoreError) -> String in
            try c.query("SELECT pem FROM apns_keys")[0]["pem"].text ?? ""
        }
    }

    @Test(arguments: Engine.allCases) func aSealedKeyIsUnreadableOnDiskAndOpensOnlyWithItsMasterKey(_ engine: Engine) throws {
        let db = try engine.open()
        let master = MasterKey.generate()
        let sealed = try store(db, master)
        try sealed.createApplication(Application(code: Self.code, name: "x", bundleID: "com.example.x", createdAt: Date()), tokens: [], apnsKey: Self.key)
        let onDisk = try storedText(db)
        #expect(onDisk.hasPrefix("islet-sealed:v2:") && !onDisk.contains("PRIVATE KEY") && !onDisk.contains("MIGHAgEA"))
        #expect(try sealed.apnsKey(for: Self.code)?.pem == Self.pem)
        #expect(try sealed.checkAPNsKeys() == (1, 0) ? true : false)

        #expect(throws: StoreError.self, "no master key: refused, with the reason") { _ = try store(db, nil).apnsKey(for: Self.code) }
        do {
            _ = try store(db, MasterKey.generate()).checkAPNsKeys()
            Issue.record("another master key must not open it")
        } catch let error as StoreError {
            #expect(error.code == .locked && error.message.contains("sealed with another master key"))
        }
    }

    @Test(arguments: Engine.allCases) func keysAreResealedWithANewMasterKeyInOneGo(_ engine: Engine) throws {
        let db = try engine.open()
        let plain = try store(db, nil)
        try plain.createApplication(Application(code: Self.code, name: "x", bundleID: "com.example.x", createdAt: Date()), tokens: [], apnsKey: Self.key)
        #expect(try storedText(db) == Self.pem, "without a master key the key is stored as given")
        let first = MasterKey.generate(), second = MasterKey.generate()
        #expect(try plain.resealAPNsKeys(with: first) == 1)
        #expect(try store(db, first).apnsKey(for: Self.code)?.pem == Self.pem)
        #expect(try store(db, first).resealAPNsKeys(with: second) == 1)
        #expect(try store(db, second).apnsKey(for: Self.code)?.pem == Self.pem)
        #expect(throws: StoreError.self) { _ = try store(db, first).apnsKey(for: Self.code) }
    }

    @Test func sealingIsAuthenticatedAndNeverRepeatsItself() throws {
        let master = MasterKey.generate()
        let a = master.seal("secret", boundTo: "x"), b = master.seal("secret", boundTo: "x")
        #expect(a != b, "a fresh nonce each time")
        #expect(master.open(a, boundTo: "x") == "secret" && master.open(b, boundTo: "x") == "secret")
        // Every byte is authenticated: flipping one bit of the nonce, the ciphertext or the tag is refused.
        let sealed = try #require(Data(base64Encoded: String(a.dropFirst("islet-sealed:v2:".count))))
        for index in [0, 12, sealed.count - 1] {
            var bytes = Array(sealed)
            bytes[index] ^= 0x01
            #expect(master.open("islet-sealed:v2:" + Data(bytes).base64EncodedString(), boundTo: "x") == nil, "byte \(index)")
        }
        // Issue 44: sealed text is bound to what it is: moved to another row (another binding), it does not open.
        #expect(master.open(a, boundTo: "y") == nil)
        // Text sealed before bindings (v1, no associated data; made with Python's cryptography) still opens.
        let legacy = MasterKey(bytes: Array(0..<32))
        #expect(legacy.open("islet-sealed:v1:BwcHBwcHBwcHBwcHYw/BPQx294ej/mHl9A6PAVOzVDbuGSmYNifYewY=", boundTo: "anything") == "legacy secret")
        #expect(MasterKey(text: master.hexText) == master)
        #expect(MasterKey(text: Data(repeating: 7, count: 32).base64EncodedString()) != nil)
        #expect(MasterKey(text: "abc") == nil && MasterKey(text: String(repeating: "zz", count: 32)) == nil)
    }

    /// Issue 44: two applications' sealed keys swapped between their rows open for neither (each is bound to its
    /// application); `rotate-master-key`'s reseal binds keys sealed before bindings.
    @Test(arguments: Engine.allCases) func sealedKeysSwappedBetweenApplicationsOpenForNeither(_ engine: Engine) throws {
        let db = try engine.open()
        let master = MasterKey.generate()
        let sealed = try store(db, master)
        let other = ApplicationCode("SWAPS-00002")!
        for code in [Self.code, other] {
            try sealed.createApplication(Application(code: code, name: "x", bundleID: "com.example.x", createdAt: Date()), tokens: [], apnsKey: Self.key)
        }
        #expect(try sealed.apnsKey(for: other)?.pem == Self.pem)
        _ = try db.database.withConnection { (c) throws(StoreError) in
            try c.run("""
                UPDATE apns_keys SET pem = (SELECT k.pem FROM apns_keys k WHERE k.application = ?2) WHERE application = ?1
                """, [.text(other.rawValue), .text(Self.code.rawValue)])
        }
        #expect(throws: StoreError.self, "a key moved from another application's row does not open") { _ = try sealed.apnsKey(for: other) }
        #expect(try sealed.apnsKey(for: Self.code)?.pem == Self.pem)
    }
}

/// Issue 46: an FCM service account is sealed as an APNs key is, and counted by the checks and the rotation.
@Suite("FCM service accounts sealed at rest")
struct SealedFCMAccountTests {
    @Test(arguments: Engine.allCases) func anAccountIsSealedCheckedAndResealed(_ engine: Engine) throws {
        let db = try engine.open()
        let master = MasterKey.generate(), code = SealedKeyTests.code
        let store = SQLApplicationStore(database: try db.reopen(), masterKey: master)
        try store.createApplication(Application(code: code, name: "x", bundleID: "com.example.x", createdAt: Date()), tokens: [], apnsKey: nil)
        let json = #"{"type":"service_account","project_id":"p","private_key":"-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n"}"#
        try store.setFCMAccount(FCMAccountInfo(projectID: "p", clientEmail: "a@p.iam.gserviceaccount.com"), keyJSON: json, for: code)
        let onDisk = try db.database.withConnection { (c) throws(StoreError) -> String in try c.query("SELECT key_json FROM fcm_accounts")[0]["key_json"].text ?? "" }
        #expect(onDisk.hasPrefix("islet-sealed:") && !onDisk.contains("secret"), "the key is not on disk in clear")
        #expect(try store.fcmAccountKey(for: code) == json)
        #expect(try store.application(code)?.fcmAccount == FCMAccountInfo(projectID: "p", clientEmail: "a@p.iam.gserviceaccount.com"))
        #expect(try store.checkAPNsKeys() == (1, 0) ? true : false, "the check counts it")
        #expect(throws: StoreError.self, "another master key does not open it") {
            _ = try SQLApplicationStore(database: try db.reopen(), masterKey: MasterKey.generate()).checkAPNsKeys()
        }
        #expect(throws: StoreError.self, "no master key: refused rather than stored in clear beside a sealed one") {
            try SQLApplicationStore(database: try db.reopen(), masterKey: nil).setFCMAccount(FCMAccountInfo(projectID: "q", clientEmail: "b"), keyJSON: "{}", for: code)
        }
        let next = MasterKey.generate()
        #expect(try store.resealAPNsKeys(with: next) == 1)
        #expect(try SQLApplicationStore(database: try db.reopen(), masterKey: next).fcmAccountKey(for: code) == json)
    }
}
