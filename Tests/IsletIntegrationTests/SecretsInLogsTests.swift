import Foundation
import Testing
import IsletAPI
import IsletApp
import IsletCore
import IsletSQL
import IsletSQLite
#if canImport(Glibc)
import Glibc
#endif

/// Issue 12: a whole run of `islet serve` (tokens used and refused, pushes signed, an activity started,
/// updated and ended) writes no token, key or provider token (JWT) to its log; API admin actions are audited.
@Suite("No secrets in logs")
struct SecretsInLogsTests {
    @Test func aFullRunLogsNoSecretAndAuditsAdminCalls() throws {
        let serve = try ServeProcess(arguments: ["--apns", "simulator"])
        let admin = ApplicationAdmin(store: try Storage(StorageLocation(try IntegrationEngine.database(in: serve.directory))).applications(masterKey: nil))
        let code = ApplicationCode("XXXXX-XXXXX")!
        let server = try admin.issueToken(for: code, kind: .api, label: "backend").secret
        let device = try admin.issueToken(for: code, kind: .device, label: "app").secret
        let wrong = "WRONGTOKEN" + String(repeating: "x", count: 30)
        func post(_ method: String, _ request: JSONObject, token: String) throws -> RawHTTPResponse {
            try call(serve.port, method, request.merging(["application": "XXXXX-XXXXX"]), token: token)
        }
        #expect(try post("getApplication", [:], token: wrong).status == 401)
        #expect(try post("registerDevice", ["hwid": "h", "push_token": .string(String(repeating: "ab", count: 32))], token: wrong).status == 401)
        #expect(try post("createFilter", ["name": "ALL", "conditions": [["Demo", "EQ", "food-delivery"]]], token: server).status == 200)
        let start = try post("startLiveActivity", ["notifications": [["title": "T", "live_activity": ["content-state": ["s": 1], "attributes-type": "T", "attributes": [:]],
                                                                       "live_activity_id": "SECRET_RUN", "filter": "ALL"]]], token: server)
        #expect(start.status == 200)
        #expect(try eventually { try request(serve.port, method: "GET", "/simulator/devices/first_third", headers: ["Authorization": "Token \(server)"])
            .json?.objectValue?["lock_screen"]?.arrayValue?.isEmpty == false })
        #expect(try post("updateLiveActivity", ["notifications": [["live_activity": ["event": "end", "content-state": ["s": 2]], "live_activity_id": "SECRET_RUN"]]],
                         token: server).status == 200)
        #expect(try post("setTags", ["hwid": "first_third", "tags": ["x": "y"]], token: device).status == 200)
        _ = try request(serve.port, method: "GET", "/metrics")
        #expect(eventually { serve.log.contains("message delivered") }, "the start and the end were delivered and logged")
        kill(serve.process.processIdentifier, SIGTERM)
        #expect(serve.waitForExit() == 0)

        let log = serve.log
        #expect(log.contains("\"listening\"") && log.contains("message delivered"), "the log is the run's: \(log.prefix(500))")
        for secret in [server, device, wrong, "SECRET_API_TOKEN", "PRIVATE KEY", "eyJhbGciOiJFUzI1NiIs", "eyJhbGciOiAiRVMyNTYi"] {
            #expect(!log.contains(secret), "the log shows \(secret.prefix(12))…")
        }
        let audit = try String(contentsOfFile: serve.directory.appendingPathComponent("audit.log").path, encoding: .utf8)
        let entries = try audit.split(separator: "\n").map { try #require(try JSONParser.parse(String($0)).objectValue) }
        let filter = try #require(entries.first { $0["action"] == "filter.created" })
        #expect(filter["actor"]?.stringValue?.hasPrefix("api token tk_") == true && filter["application"] == "XXXXX-XXXXX")
        #expect(!audit.contains(server) && !audit.contains(device))
    }
}
