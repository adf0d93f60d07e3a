import Foundation
import Testing
import IsletCore
import Synchronization
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
        defer { IntegrationEngine.remove(directory) }
        let record = directory.appendingPathComponent("pushes.jsonl")
        let arguments = ["--database", try IntegrationEngine.database(in: directory), "--record", record.path,
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

    /// Issue 13: a 200 means durable. Four clients start activities, report tokens and update them as fast as
    /// the server answers; kill -9 lands in the middle. After a restart every message answered 200 is there,
    /// and delivered: each start to its device, and each activity's latest update (earlier ones are sent or
    /// superseded by it, never lost or failed). Runs on the engine of the pass (SQLite, then PostgreSQL).
    @Test func killNineDuringABurstOfStartsAndUpdatesLosesNoAcceptedMessage() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-burst-\(UUID().uuidString)")
        defer { IntegrationEngine.remove(directory) }
        let record = directory.appendingPathComponent("pushes.jsonl")
        let arguments = ["--database", try IntegrationEngine.database(in: directory), "--record", record.path,
                         "--batch-size", "10", "--batch-delay-ms", "2", "--workers", "2"]
        var server = try ServeProcess(executable: "islet-test-server", arguments: arguments, directory: directory)
        let auth = ["Authorization": "Token SECRET_API_TOKEN"]
        let activities = 40, updates = 3
        for n in 0..<activities {
            let body = #"{"request":{"application":"XXXXX-XXXXX","hwid":"burst-\#(n)","push_token":"\#(String(format: "%064x", n + 1))"}}"#
            #expect(try request(server.port, "/json/1.3/registerDevice", body: body, headers: auth).status == 200)
            let token = #"{"request":{"application":"XXXXX-XXXXX","hwid":"burst-\#(n)","activity_push_to_start_token":"\#(String(format: "%080x", n + 500))"}}"#
            #expect(try request(server.port, "/json/1.3/setActivityPushToStartToken", body: token, headers: auth).status == 200)
        }

        // (activity, event, step, code) of every answer 200, as the clients saw them.
        final class Accepted: Sendable { let list = Mutex<[(activity: Int, step: Int, code: String)]>([]) }
        let accepted = Accepted()
        let port = server.port
        @Sendable func send(_ method: String, _ notification: String) -> String? {
            let body = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[\#(notification)]}}"#
            guard let answer = try? request(port, "/json/1.3/" + method, body: body), answer.status == 200 else { return nil }
            return answer.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue
        }
        let clients = (0..<4).map { client in
            Thread {
                for n in stride(from: client, to: activities, by: 4) {
                    let start = #"{"title":"Order","live_activity":{"content-state":{"step":0},"attributes-type":"OrderAttributes","attributes":{}},"live_activity_id":"BURST_\#(n)","devices":["burst-\#(n)"]}"#
                    guard let code = send("startLiveActivity", start) else { return }
                    accepted.list.withLock { $0.append((n, 0, code)) }
                    let report = #"{"request":{"application":"XXXXX-XXXXX","hwid":"burst-\#(n)","activity_id":"BURST_\#(n)","activity_token":"\#(String(format: "%064x", n + 9000))"}}"#
                    guard (try? request(port, "/json/1.3/setActivityToken", body: report, headers: auth))?.status == 200 else { return }
                    for step in 1...updates {
                        let update = #"{"live_activity":{"event":"update","content-state":{"step":\#(step)}},"live_activity_id":"BURST_\#(n)"}"#
                        guard let code = send("updateLiveActivity", update) else { return }
                        accepted.list.withLock { $0.append((n, step, code)) }
                    }
                }
            }
        }
        clients.forEach { $0.start() }
        #expect(eventually(30) { accepted.list.withLock { $0.count } >= 60 }, "the burst is under way")
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        #expect(eventually(30) { clients.allSatisfy(\.isFinished) }, "the clients saw the server go")
        let answered = accepted.list.withLock { $0 }
        #expect(answered.count < activities * (updates + 1), "killed mid-burst")

        server = try ServeProcess(executable: "islet-test-server", arguments: arguments, directory: directory)
        func details(_ code: String) -> JSONObject? {
            let body = #"{"request":{"auth":"SECRET_API_TOKEN","message":"\#(code)"}}"#
            return (try? request(server.port, "/json/1.3/getMessageDetails", body: body))?.json?.objectValue?["response"]?
                .objectValue?["message"]?.objectValue
        }
        func isSettled(_ code: String) -> Bool { ["done", "superseded"].contains(details(code)?["status"]?.stringValue) }
        let settled = eventually(60) { answered.allSatisfy { isSettled($0.code) } }
        let unsettled = answered.filter { !isSettled($0.code) }.prefix(5)
            .map { "BURST_\($0.activity) step \($0.step): \(details($0.code).map { JSONValue.object($0).jsonText } ?? "missing")" }
        #expect(settled, "every accepted message is there, and done or superseded; not: \(unsettled)")
        let latest = Dictionary(grouping: answered, by: \.activity).mapValues { $0.max { $0.step < $1.step }! }
        for message in answered {
            let counts = details(message.code)?["counts"]?.objectValue
            if message.step == 0 || latest[message.activity]?.code == message.code {
                // The latest answered update may have been superseded by one the server accepted but had no time
                // to answer before the kill: then that newer one reached the device.
                // That newer one was never answered, so the wait above did not cover it: it may still wait for its
                // turn (A9 paces an update a second after the one before), so its delivery is waited for here.
                var code = message.code
                func lastOfChain() -> JSONObject? {
                    while let newer = details(code)?["superseded_by"]?.stringValue { code = newer }
                    return details(code)
                }
                _ = eventually(30) { lastOfChain()?["counts"]?.objectValue?["sent"] == .int(1) }
                let final = lastOfChain()
                #expect(final?["counts"]?.objectValue?["sent"] == .int(1),
                        "BURST_\(message.activity) step \(message.step) (\(message.code)), or what superseded it (\(code)), was delivered: \(final.map { JSONValue.object($0).jsonText } ?? "missing")")
            } else {
                #expect(counts?["failed"] == .int(0), "BURST_\(message.activity) step \(message.step): sent or superseded, never failed: \(counts ?? [:])")
            }
        }
        kill(server.process.processIdentifier, SIGTERM)
        _ = server.waitForExit()
    }
}
