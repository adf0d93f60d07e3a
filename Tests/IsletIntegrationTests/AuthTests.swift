import Foundation
import Testing
import IsletAPI
import IsletApp
import IsletSQL
import IsletCore
import IsletStore

@Suite("Token authentication (E2, E3)")
struct AuthTests {
    let running: RunningServer

    init() throws { running = try RunningServer() }

    func getApplication(_ application: String, auth: String?, header: String? = nil) throws -> RawHTTPResponse {
        var request: JSONObject = ["application": .string(application)]
        if let auth { request["auth"] = .string(auth) }
        return try IsletIntegrationTests.request(
            running.port, "/json/1.3/getApplication", body: JSONValue.object(["request": .object(request)]).jsonText,
            headers: header.map { ["Authorization": $0] } ?? [:])
    }

    @Test func acceptsTheTokenInTheBodyOrTheHeader() throws {
        #expect(try getApplication("XXXXX-XXXXX", auth: "SECRET_API_TOKEN").status == 200)
        #expect(try getApplication("XXXXX-XXXXX", auth: nil, header: "Token SECRET_API_TOKEN").status == 200)
    }

    @Test func missingTokenIs401() throws {
        let response = try getApplication("XXXXX-XXXXX", auth: nil)
        #expect(response.status == 401)
        #expect(response.statusCode == 401)
        #expect(response.message == "auth: a server API token is required (request.auth or header Authorization: Token <token>)")
    }

    @Test func wrongTokenAndUnknownApplicationLookAlike() throws {
        let wrong = try getApplication("XXXXX-XXXXX", auth: "SECRET_API_TOKEN_X")
        let unknown = try getApplication("ZZZZZ-99999", auth: "SECRET_API_TOKEN")
        #expect(wrong.status == 401)
        #expect(unknown.status == 401)
        #expect(wrong.message == "auth: not a valid server API token for application XXXXX-XXXXX")
        #expect(unknown.message == "auth: not a valid server API token for application ZZZZZ-99999")
    }

    @Test func aTokenAuthorisesExactlyOneApplication() throws {
        let other = try running.admin().create(name: "Other", bundleID: "com.example.other")
        // The new application is visible to the running server at once, and each token stays with its own.
        #expect(try getApplication(other.application.code.rawValue, auth: other.apiToken.secret).status == 200)
        #expect(try getApplication("XXXXX-XXXXX", auth: other.apiToken.secret).status == 401)
        #expect(try getApplication(other.application.code.rawValue, auth: "SECRET_API_TOKEN").status == 401)
    }

    @Test func deviceTokenCannotCallServerMethods() throws {
        let created = try running.admin().create(name: "Shop", bundleID: "com.example.shop")
        let code = created.application.code.rawValue
        for response in [try getApplication(code, auth: created.deviceToken.secret),
                         try getApplication(code, auth: nil, header: "Token \(created.deviceToken.secret)")] {
            #expect(response.status == 401)
            #expect(response.message == "auth: a device API token cannot call server API methods; use a server API token")
        }
    }

    @Test func aTokenRevokedThroughTheServerIs401AtOnceAndOthersKeepWorking() throws {
        let admin = running.serverAdmin()
        let created = try admin.create(name: "Shop", bundleID: "com.example.shop")
        let code = created.application.code
        let second = try admin.issueToken(for: code, kind: .api, label: "ci")
        #expect(try getApplication(code.rawValue, auth: created.apiToken.secret).status == 200)
        _ = try admin.revokeToken(of: code, idOrSecret: created.apiToken.record.id)
        let revoked = try getApplication(code.rawValue, auth: created.apiToken.secret)
        #expect(revoked.status == 401)
        #expect(revoked.message == "auth: this token was revoked")
        #expect(try getApplication(code.rawValue, auth: second.secret).status == 200)
    }

    /// `islet app token revoke` beside a running server: its cached credential lives a second at most.
    @Test func aTokenRevokedByTheCommandBesideTheServerIsRefusedWithinASecond() throws {
        let command = try running.admin()
        let created = try command.create(name: "Shop", bundleID: "com.example.shop")
        let code = created.application.code
        #expect(try getApplication(code.rawValue, auth: created.apiToken.secret).status == 200)
        _ = try command.revokeToken(of: code, idOrSecret: created.apiToken.record.id)
        #expect(try eventually(5) { try getApplication(code.rawValue, auth: created.apiToken.secret).status == 401 })
        #expect(try getApplication(code.rawValue, auth: created.apiToken.secret).message == "auth: this token was revoked")
    }

    @Test func storesOnlyHashesOfTokens() throws {
        let store = running.server.store
        let tokens = try store.tokens(of: ApplicationCode("XXXXX-XXXXX")!)
        #expect(tokens.count == 2)
        #expect(tokens.allSatisfy { $0.hash.count == 32 })
        // The file's bytes on SQLite; on PostgreSQL every token column, read back.
        if IntegrationEngine.isPostgreSQL {
            let stored = try Storage(StorageLocation(running.database)).database.withConnection { (c) throws(StoreError) in
                try c.query("SELECT id, label, encode(hash, 'hex') AS hash FROM tokens")
            }
            #expect(stored.count == 2 && !stored.contains { $0.values.contains { $0.text?.contains("SECRET_API_TOKEN") == true } })
            return
        }
        for suffix in ["", "-wal"] {
            let bytes = FileManager.default.contents(atPath: running.database + suffix) ?? Data()
            #expect(!bytes.isEmpty || suffix == "-wal")
            #expect(bytes.range(of: Data("SECRET_API_TOKEN".utf8)) == nil, "the token itself is never written")
        }
    }
}
