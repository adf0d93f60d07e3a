import Foundation
import Testing
import IsletTestPeers
import IsletCore
import IsletHTTP

/// Issue 12: every JSON API method, given thousands of random requests in-process (no sockets), answers in
/// the envelope with a client error or success: never a 5xx, never a crash.
@Suite("Hostile input through the router")
struct HostileInputTests {
    struct Generator {
        var random: SeededRandom
        static let fields = ["application", "auth", "hwid", "push_token", "tags", "notifications", "live_activity", "live_activity_id", "filter",
                             "devices", "users", "conditions", "operator", "name", "attributes_type", "content_state", "attributes", "activity_id",
                             "activity_token", "activity_push_to_start_token", "message", "limit", "cursor", "dry_run", "apns_priority",
                             "send_date", "timezone", "title", "content", "event", "content-state", "attributes-type", "dismissal-date",
                             "relevance-score", "stale-date", "language", "os_version", "userId", "gateway", "device_type", "description"]

        mutating func string() -> String {
            let pool: [String] = ["", "a", "XXXXX-XXXXX", "FILTER_NAME_1", "first_third", "ORDER_1", "now", "2026-12-01 10:00", "Europe/Lisbon",
                                  "start", "update", "end", "EQ", "BETWEEN", "AND", "10", "ab" + String(repeating: "cd", count: 40), "\u{0}", "🙂",
                                  String(repeating: "x", count: 5000), "e\u{301}", "Language", "OS Version", "%00", "'; DROP TABLE devices; --"]
            return pool.randomElement(using: &random)!
        }

        mutating func value(depth: Int = 0) -> JSONValue {
            switch Int.random(in: 0...(depth > 2 ? 4 : 7), using: &random) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &random))
            case 2: return .int([0, 1, -1, 5, 10, Int64.max, Int64.min, 1_796_025_341].randomElement(using: &random)!)
            case 3: return .double([0.5, -1e300, 1e300, 10.0].randomElement(using: &random)!)
            case 4: return .string(string())
            case 5: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in value(depth: depth + 1) })
            default:
                var object = JSONObject()
                for _ in 0..<Int.random(in: 0...5, using: &random) { object[Self.fields.randomElement(using: &random)!] = value(depth: depth + 1) }
                return .object(object)
            }
        }

        mutating func request() -> JSONObject {
            var request: JSONObject = ["application": "XXXXX-XXXXX", "auth": "SECRET_API_TOKEN"]
            for _ in 0..<Int.random(in: 0...6, using: &random) { request[Self.fields.randomElement(using: &random)!] = value() }
            if Bool.random(using: &random) { request["application"] = "XXXXX-XXXXX" }
            if Bool.random(using: &random) { request["auth"] = "SECRET_API_TOKEN" }
            return request
        }
    }

    @Test func randomRequestsToEveryMethodGetClientErrorsNeverServerErrors() throws {
        let running = try RunningServer()
        var generator = Generator(random: SeededRandom(seed: 2026))
        var statuses: [Int: Int] = [:]
        for method in running.server.router.methodNames {
            for _ in 0..<150 {
                let body = JSONValue.object(["request": .object(generator.request())]).jsonBytes
                let response = running.server.router.handle(HTTPRequest(method: "POST", path: "/json/1.3/\(method)",
                                                                         headers: [("Authorization", "Token SECRET_API_TOKEN")], body: body,
                                                                         clientAddress: "127.0.0.1"))
                statuses[response.status, default: 0] += 1
                #expect(response.status < 500, "\(method): \(String(decoding: body, as: UTF8.self).prefix(300)) → \(String(decoding: response.body, as: UTF8.self))")
                let envelope = try? JSONParser.parse(response.body).objectValue
                #expect(envelope?["status_code"]?.intValue == Int64(response.status), "\(method): the answer is the envelope")
            }
        }
        #expect((statuses[200] ?? 0) > 50 && (statuses[400] ?? 0) > 1000, "both outcomes exercised: \(statuses)")
    }
}
