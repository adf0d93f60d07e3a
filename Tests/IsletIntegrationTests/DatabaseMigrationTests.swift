import Foundation
import Testing
import IsletApp
import IsletCore
import IsletSQL
import IsletTestPeers

/// Issue 13: `islet db migrate-to` moves a user who started on SQLite to PostgreSQL without losing a device,
/// a tag, a filter, a key or a message; the server then runs on PostgreSQL as it did on SQLite.
@Suite("SQLite to PostgreSQL")
struct DatabaseMigrationTests {
    @Test func everythingMovesAndTheServerCarriesOnOnPostgreSQL() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-move-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sqlite = directory.appendingPathComponent("islet.sqlite").path
        // On SQLite: the demo application, its simulated phones, a filter, a start that reached them, an update.
        var code: String
        do {
            var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: sqlite)
            configuration.auditLogSetting = "off"
            let server = try IsletServer(configuration: configuration, logger: .discard)
            _ = try server.createDemoIfEligible()
            let port = try server.start()
            defer { server.shutdown() }
            let start = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"title":"Order","live_activity":{"content-state":{"step":1},"attributes-type":"FoodDeliveryAttributes","attributes":{}},"live_activity_id":"MOVE_1","filter":"FILTER_NAME_1"}]}}"#
            let accepted = try request(port, "/json/1.3/startLiveActivity", body: start)
            code = try #require(accepted.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue)
            let details = #"{"request":{"auth":"SECRET_API_TOKEN","message":"\#(code)"}}"#
            #expect(eventually { (try? request(port, "/json/1.3/getMessageDetails", body: details))?.json?.objectValue?["response"]?
                .objectValue?["message"]?.objectValue?["status"] == "done" })
        }

        let target = try TestPostgres.createDatabase()
        defer { target.drop() }
        let islet = try builtExecutable("islet")
        let moved = try runProgram(islet, ["db", "migrate-to", target.url, "--database", sqlite])
        #expect(moved.status == 0, "\(moved.output)")
        #expect(moved.output.contains("devices                3 → 3"), "the demo's two iPhones and its Android phone: \(moved.output)")
        #expect(moved.output.contains("Copied \(sqlite) into"), "\(moved.output)")
        #expect(!moved.output.contains("row counts differ"))
        let again = try runProgram(islet, ["db", "migrate-to", target.url, "--database", sqlite])
        #expect(again.status == 1 && again.output.contains("the destination already holds applications"), "\(again.output)")

        // On PostgreSQL: the same application, token, filter, devices and message; new writes get new ids.
        var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), database: target.url)
        configuration.auditLogSetting = "off"
        let server = try IsletServer(configuration: configuration, logger: .discard)
        #expect(try server.createDemoIfEligible() == nil, "not empty: the demo application came along")
        let port = try server.start()
        defer { server.shutdown() }
        let details = #"{"request":{"auth":"SECRET_API_TOKEN","message":"\#(code)"}}"#
        let message = try request(port, "/json/1.3/getMessageDetails", body: details).json?.objectValue?["response"]?.objectValue?["message"]?.objectValue
        #expect(message?["status"] == "done" && message?["counts"]?.objectValue?["sent"] == .int(3), "\(String(describing: message))")
        let update = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"live_activity":{"event":"end","content-state":{"step":2}},"live_activity_id":"MOVE_1"}]}}"#
        #expect(try request(port, "/json/1.3/updateLiveActivity", body: update).status == 200, "the activity is known and active")
        let register = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","hwid":"after-move","push_token":"\#(String(repeating: "cd", count: 32))"}}"#
        #expect(try request(port, "/json/1.3/registerDevice", body: register, headers: ["Authorization": "Token SECRET_API_TOKEN"]).status == 200,
                "a new device gets an id past the copied ones")
    }
}
