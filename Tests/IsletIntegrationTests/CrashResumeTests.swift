import Foundation
import Testing
import IsletCore
#if canImport(Glibc)
import Glibc
#endif

/// Kill -9 in the middle of a fan-out loses no accepted message: on restart the job resumes, every
/// target is delivered, and a device that got a push twice got the very same push (issue 4).
@Suite("Crash and resume")
struct CrashResumeTests {
    static let devices = 120

    /// One worker on the whole fan-out; then two workers on a fan-out split into shards of 40 device ids.
    @Test(arguments: [(workers: 1, shardSpan: 50_000), (workers: 2, shardSpan: 40)])
    func killNineMidFanOutThenRestartDeliversEveryTargetOnceOrIdentically(_ setting: (workers: Int, shardSpan: Int)) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-crash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let record = directory.appendingPathComponent("pushes.jsonl")
        let arguments = ["--database", directory.appendingPathComponent("islet.sqlite").path, "--record", record.path,
                         "--batch-size", "10", "--batch-delay-ms", "40", "--workers", String(setting.workers),
                         "--shard-span", String(setting.shardSpan)]
        var server = try ServeProcess(executable: "islet-test-server", arguments: arguments, directory: directory)

        let auth = ["Authorization": "Token SECRET_API_TOKEN"]
        for n in 0..<Self.devices {
            let body = #"{"request":{"application":"XXXXX-XXXXX","hwid":"device-\#(n)","push_token":"\#(String(format: "%064x", n))","language":"en"}}"#
            #expect(try request(server.port, "/json/1.3/registerDevice", body: body, headers: auth).status == 200)
            let token = #"{"request":{"application":"XXXXX-XXXXX","hwid":"device-\#(n)","activity_push_to_start_token":"\#(String(format: "%080x", n + 1_000_000))"}}"#
            #expect(try request(server.port, "/json/1.3/setActivityPushToStartToken", body: token, headers: auth).status == 200)
        }
        let filter = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","name":"all","conditions":[["Language","EQ","en"]]}}"#
        #expect(try request(server.port, "/json/1.3/createFilter", body: filter).status == 200)
        let start = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"title":"Order","live_activity":{"content-state":{"step":1},"attributes-type":"OrderAttributes","attributes":{}},"live_activity_id":"CRASH","filter":"all"}]}}"#
        let accepted = try request(server.port, "/json/1.3/startLiveActivity", body: start)
        let code = try #require(accepted.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue)

        func recorded() -> [JSONObject] {
            ((try? String(contentsOf: record, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue }
        }
        // Kill it a third of the way through: 12 batches of 10 at 40 ms each.
        #expect(eventually { recorded().count >= 40 })
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        let beforeCrash = recorded().count
        #expect(beforeCrash < Self.devices, "killed mid fan-out")

        server = try ServeProcess(executable: "islet-test-server", arguments: arguments, directory: directory)
        let details = #"{"request":{"auth":"SECRET_API_TOKEN","message":"\#(code)"}}"#
        let done = eventually(30) {
            (try? request(server.port, "/json/1.3/getMessageDetails", body: details))?.json?.objectValue?["response"]?
                .objectValue?["message"]?.objectValue?["status"] == "done"
        }
        #expect(done)
        let stats = try request(server.port, "/json/1.3/getMessageDetails", body: details).json?.objectValue?["response"]?.objectValue?["message"]?.objectValue
        #expect(stats?["counts"]?.objectValue?["sent"] == .int(Int64(Self.devices)))
        kill(server.process.processIdentifier, SIGTERM)
        _ = server.waitForExit()

        var byToken: [String: [JSONObject]] = [:]
        for push in recorded() { byToken[push["token"]?.stringValue ?? "", default: []].append(push) }
        #expect(byToken.count == Self.devices, "every target delivered")
        for (token, pushes) in byToken where pushes.count > 1 {
            #expect(Set(pushes.map { $0["payload"] }).count == 1, "\(token): a resend repeats the same payload and timestamp")
            #expect(Set(pushes.map { $0["apns_id"] }).count == 1, "\(token): and the same apns-id")
        }
        #expect(recorded().count - Self.devices <= 30 * setting.workers, "at most the batches in flight (3 of 10 per worker) are sent again")
    }
}
