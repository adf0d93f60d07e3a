import Foundation
import Testing
import IsletCore
import IsletCrypto
import IsletStore
@testable import IsletSQL

private let app = ApplicationCode("SHOPA-00001")!
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)

/// The console's sessions and password in the store (issue 17), on both engines.
@Suite("Console sessions in the store, on both engines")
struct ConsoleStoreTests {
    func database(_ engine: Engine) throws -> (EngineDatabase, TokenRecord) {
        let db = try engine.open()
        let token = TokenRecord(id: "tk_1", application: app, kind: .api, hash: Crypto.sha256(Array("secret".utf8)), label: "", createdAt: t0)
        try db.applications().createApplication(Application(code: app, name: "x", bundleID: "com.example.x", createdAt: t0), tokens: [token], apnsKey: nil)
        return (db, token)
    }

    func session(_ id: UInt8, application: ApplicationCode? = app, tokenID: String? = "tk_1", expiresAt: Date) -> ConsoleSession {
        ConsoleSession(idHash: Crypto.sha256([id]), application: application, tokenID: tokenID, csrfToken: "csrf-\(id)", createdAt: t0, expiresAt: expiresAt)
    }

    @Test(arguments: Engine.allCases) func aSessionIsFoundByItsHashUntilItExpiresOrIsDeleted(_ engine: Engine) throws {
        let (db, _) = try database(engine)
        let open = session(1, expiresAt: t0.addingTimeInterval(3600))
        try db.console.createConsoleSession(open)
        try db.console.createConsoleSession(session(2, expiresAt: t0.addingTimeInterval(60)))
        #expect(try db.console.consoleSession(idHash: Crypto.sha256([1]), at: t0) == open)
        #expect(try db.console.consoleSession(idHash: Crypto.sha256([2]), at: t0.addingTimeInterval(60)) == nil, "expired at its expiry")
        #expect(try db.console.consoleSession(idHash: Crypto.sha256([3]), at: t0) == nil)
        #expect(try db.console.deleteExpiredConsoleSessions(before: t0.addingTimeInterval(61)) == 1)
        try db.console.deleteConsoleSession(idHash: open.idHash)
        #expect(try db.console.consoleSession(idHash: open.idHash, at: t0) == nil)
    }

    @Test(arguments: Engine.allCases) func aNewPasswordSignsOutThePasswordSessionsOnly(_ engine: Engine) throws {
        let (db, _) = try database(engine)
        #expect(try db.console.consolePassword() == nil)
        try db.console.setConsolePassword("pbkdf2-sha256$1$00$11", at: t0)
        let admin = session(1, application: nil, tokenID: nil, expiresAt: t0.addingTimeInterval(3600))
        let byToken = session(2, expiresAt: t0.addingTimeInterval(3600))
        try db.console.createConsoleSession(admin)
        try db.console.createConsoleSession(byToken)
        #expect(try db.console.consoleSession(idHash: admin.idHash, at: t0) == admin, "a password session has no application: it may act on any")
        try db.console.setConsolePassword("pbkdf2-sha256$1$00$22", at: t0)
        #expect(try db.console.consolePassword() == "pbkdf2-sha256$1$00$22")
        #expect(try db.console.consoleSession(idHash: admin.idHash, at: t0) == nil)
        #expect(try db.console.consoleSession(idHash: byToken.idHash, at: t0) == byToken)
    }

    @Test(arguments: Engine.allCases) func deletingTheApplicationEndsItsSessions(_ engine: Engine) throws {
        let (db, _) = try database(engine)
        let open = session(1, expiresAt: t0.addingTimeInterval(3600))
        try db.console.createConsoleSession(open)
        try db.database.write { (c) throws(StoreError) in _ = try c.run("DELETE FROM applications WHERE code = ?", [.text(app.rawValue)]) }
        #expect(try db.console.consoleSession(idHash: open.idHash, at: t0) == nil)
    }
}
