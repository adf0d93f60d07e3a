import Foundation
import Testing
import IsletCore
import IsletCrypto
import IsletStore
@testable import IsletSQL

private let code = ApplicationCode("ABCDE-12345")!
private let application = Application(code: code, name: "Shop", bundleID: "com.example.shop", createdAt: Date(timeIntervalSince1970: 1_700_000_000))

private func token(_ id: String, secret: String) -> TokenRecord {
    TokenRecord(id: id, application: code, kind: .api, hash: Crypto.sha256(Array(secret.utf8)), label: "l",
                createdAt: Date(timeIntervalSince1970: 1_700_000_000))
}

/// Counts the database reads a cache makes.
private final class Reads: @unchecked Sendable {
    var count = 0
    var answer: CredentialCache.Credential?
    init(_ answer: CredentialCache.Credential?) { self.answer = answer }
    func read() -> CredentialCache.Credential? {
        count += 1
        return answer
    }
}

@Suite("Credential cache: API calls authenticate without a read, and changes are seen")
struct CredentialCacheTests {
    let hash = Crypto.sha256(Array("secret".utf8))

    @Test func aCredentialIsReadOnceForItsLifetimeThenAgain() throws {
        let cache = CredentialCache(lifetime: .seconds(1))
        let reads = Reads((token("tk_1", secret: "secret"), application))
        let t0 = ContinuousClock.now
        for offset in [0, 300, 999] {
            #expect(try cache.value(for: hash, now: t0 + .milliseconds(offset), read: reads.read)?.token.id == "tk_1")
        }
        #expect(reads.count == 1)
        // Past its lifetime, a change made elsewhere (another node, the islet command) is read.
        reads.answer = (token("tk_2", secret: "secret"), application)
        #expect(try cache.value(for: hash, now: t0 + .milliseconds(1000), read: reads.read)?.token.id == "tk_2")
        #expect(reads.count == 2)
    }

    @Test func unknownTokensAreNotKept() throws {
        let cache = CredentialCache()
        let reads = Reads(nil)
        #expect(try cache.value(for: hash, read: reads.read) == nil)
        // Created meanwhile: works on the next call.
        reads.answer = (token("tk_1", secret: "secret"), application)
        #expect(try cache.value(for: hash, read: reads.read)?.token.id == "tk_1")
        #expect(reads.count == 2)
    }

    @Test func aChangeDropsTheEntriesAndWhatAReadInProgressWouldKeep() throws {
        let cache = CredentialCache(lifetime: .seconds(60))
        let reads = Reads((token("tk_1", secret: "secret"), application))
        _ = try cache.value(for: hash, read: reads.read)
        cache.invalidate()
        _ = try cache.value(for: hash, read: reads.read)
        #expect(reads.count == 2)
        // A read that began before a change returns what it read, but the cache does not keep it.
        let other = Crypto.sha256(Array("other".utf8))
        _ = try cache.value(for: other) { () throws(StoreError) in
            cache.invalidate()
            return (token("tk_old", secret: "other"), application)
        }
        let after = try cache.value(for: other) { () throws(StoreError) in (token("tk_new", secret: "other"), application) }
        #expect(after?.token.id == "tk_new")
    }

    @Test(arguments: Engine.allCases) func aChangeThroughTheStoreIsSeenByTheNextCall(_ engine: Engine) throws {
        let db = try engine.open()
        let store = db.applications()
        try store.createApplication(application, tokens: [token("tk_1", secret: "secret")], apnsKey: nil)
        #expect(try store.credential(hash: hash)?.token.isRevoked == false)
        #expect(try store.revokeToken(application: code, id: "tk_1", at: Date(timeIntervalSince1970: 1_700_000_100)))
        #expect(try store.credential(hash: hash)?.token.isRevoked == true)
        try store.setUpdateBudget(UpdateBudget(perHour: 7, frequentPerHour: 70), for: code)
        #expect(try store.credential(hash: hash)?.application.updateBudget.perHour == 7)
    }

    @Test func aChangeMadeByAnotherProcessIsSeenOnceTheEntryExpires() throws {
        let db = try Engine.sqlite.open()
        let server = db.applications()
        try server.createApplication(application, tokens: [token("tk_1", secret: "secret")], apnsKey: nil)
        let read = { () throws(StoreError) in try server.storedCredential(hash: hash) }
        let t0 = ContinuousClock.now
        #expect(try server.credentials.value(for: hash, now: t0, read: read)?.token.isRevoked == false)
        // `islet token revoke`: another store over the same file.
        #expect(try db.applications().revokeToken(application: code, id: "tk_1", at: Date(timeIntervalSince1970: 1_700_000_100)))
        #expect(try server.credentials.value(for: hash, now: t0 + .milliseconds(500), read: read)?.token.isRevoked == false)
        #expect(try server.credentials.value(for: hash, now: t0 + .seconds(1), read: read)?.token.isRevoked == true)
    }
}
