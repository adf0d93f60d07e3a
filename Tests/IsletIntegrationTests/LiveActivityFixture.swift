import Foundation
import Testing
import IsletAPI
import IsletApp
import IsletCore
import IsletDelivery
import IsletStore

/// The world of the reference documents' examples: the demo application, the devices `first_third`
/// and `second_device`, the filter `FILTER_NAME_1`, and a few more devices for the S7 branches.
final class LiveActivityWorld {
    let transport: RecordingTransport
    let clock: TestClock
    let running: RunningServer
    let code = "XXXXX-XXXXX"
    let auth = "SECRET_API_TOKEN"

    static let bundle = "com.example.fooddelivery"
    /// hwid → (push token, iOS version, push-to-start tokens by attributes type, language)
    static let devices: [(hwid: String, push: String, os: String?, pushToStart: [String: String], language: String)] = [
        ("first_third", hex("a1", 32), "17.4", ["": hex("51", 80)], "en"),
        ("second_device", hex("a2", 32), "18.0", ["": hex("52", 80), "FoodDeliveryAttributes": hex("53", 80)], "en"),
        ("old_phone", hex("a3", 32), "15.7", [:], "en"),
        ("mid_phone", hex("a4", 32), "16.4", [:], "en"),
        ("no_token", hex("a5", 32), nil, [:], "en"),
        ("portuguese", hex("a6", 32), "17.4", ["": hex("56", 80)], "pt"),
    ]

    static func hex(_ byte: String, _ count: Int) -> String { String(repeating: byte, count: count) }

    init(transport: RecordingTransport = RecordingTransport(), clock: TestClock = TestClock(), directory: URL? = nil,
         delivery: DeliveryConfiguration? = nil, logger: Logger = .discard, configure: @escaping (inout ServerConfiguration) -> Void = { _ in }) throws {
        self.transport = transport
        self.clock = clock
        running = try RunningServer(demo: true, transport: transport, clock: clock, directory: directory, delivery: delivery, logger: logger,
                                    configure: configure)
        for device in Self.devices {
            var request: JSONObject = ["application": .string(code), "hwid": .string(device.hwid), "push_token": .string(device.push),
                                       "language": .string(device.language)]
            if let os = device.os { request["os_version"] = .string(os) }
            try expectOK(call(running.port, "registerDevice", request, token: auth))
            for (type, token) in device.pushToStart {
                var tokenRequest: JSONObject = ["application": .string(code), "hwid": .string(device.hwid),
                                                "activity_push_to_start_token": .string(token)]
                if !type.isEmpty { tokenRequest["attributes_type"] = .string(type) }
                try expectOK(call(running.port, "setActivityPushToStartToken", tokenRequest, token: auth))
            }
        }
        try expectOK(call(running.port, "createFilter", ["application": .string(code), "auth": .string(auth), "name": "FILTER_NAME_1",
                                                         "conditions": [["Language", "EQ", "en"]]]))
    }

    /// Reopens the same database with a new server (a restart); the old one must be stopped first.
    func restarted(transport: RecordingTransport) throws -> RunningServer {
        try RunningServer(demo: false, transport: transport, clock: clock, directory: running.directory)
    }

    @discardableResult
    func expectOK(_ response: RawHTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        #expect(response.status == 200, "\(response.message ?? "")", sourceLocation: sourceLocation)
        return try #require(response.json?.objectValue?["response"]?.objectValue, sourceLocation: sourceLocation)
    }

    /// Sends a JSON API body as given (the reference examples are whole bodies).
    func post(_ method: String, _ body: JSONValue) throws -> RawHTTPResponse {
        try request(running.port, "/json/1.3/\(method)", body: body.jsonText)
    }

    func server(_ method: String, _ fields: JSONObject) throws -> RawHTTPResponse {
        try call(running.port, method, (["application": .string(code), "auth": .string(auth)] as JSONObject).merging(fields))
    }

    /// What the SDK does once an activity runs on a device: report its update token (D4).
    func reportUpdateToken(_ hwid: String, activity: String, token: String) throws {
        try expectOK(call(running.port, "setActivityToken", ["application": .string(code), "hwid": .string(hwid),
                                                             "activity_id": .string(activity), "activity_token": .string(token)], token: auth))
    }

    /// Moves the clock past the least time between two updates of one activity (A9), so the next update
    /// of an activity that just had one goes at once.
    func nextUpdateTurn() {
        clock.advance(UpdatePacing.standard.interval)
        running.server.delivery?.kick()
    }

    /// Waits until every message in `codes` is done, and returns its details.
    func waitUntilSent(_ codes: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> [MessageDetails] {
        let messages = running.server.messages
        let appCode = ApplicationCode(code)!
        let done = try eventually {
            try codes.allSatisfy { try messages.messageDetails(code: $0, in: appCode)?.state == .done }
        }
        #expect(done, "messages \(codes) were not all sent", sourceLocation: sourceLocation)
        return try codes.compactMap { try messages.messageDetails(code: $0, in: appCode) }
    }

    func messageCodes(_ response: RawHTTPResponse) throws -> [String] {
        try expectOK(response)["Messages"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// The pushes sent to one device token, in order.
    func pushes(to token: String) -> [Push] { transport.pushes.filter { $0.deviceToken == token } }
}

/// A push as the golden tests compare it: path, the A2 headers, and the payload as decoded JSON.
struct ExpectedPush: Equatable, CustomStringConvertible {
    let path: String
    let pushType: String
    let topic: String
    let priority: String
    let payload: JSONValue

    init(token: String, pushType: String, topic: String, priority: Int, payload: JSONValue) {
        path = "/3/device/\(token)"
        self.pushType = pushType
        self.topic = topic
        self.priority = String(priority)
        self.payload = payload
    }

    init(_ push: Push) {
        let headers = Dictionary(push.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        path = push.path
        pushType = headers["apns-push-type"] ?? ""
        topic = headers["apns-topic"] ?? ""
        priority = headers["apns-priority"] ?? ""
        payload = (try? JSONParser.parse(push.payload)) ?? .null
    }

    var description: String { "\(path) [\(pushType) \(topic) \(priority)] \(payload.jsonText)" }
}

/// Requests in the shapes of the Pushwoosh documentation's examples (every revision's: filter, named
/// devices, a schedule, updates), kept in `Fixtures/pushwoosh-requests.json`; the tests state the exact
/// APNs requests each must produce. Nothing outside the repository is read.
enum ReferenceExamples {
    static let file = packageRoot.appendingPathComponent("Tests/IsletIntegrationTests/Fixtures/pushwoosh-requests.json")

    static func all() throws -> [(file: String, body: JSONValue)] {
        let fixture = try JSONParser.parse(Array(try Data(contentsOf: file)))
        return (fixture.arrayValue ?? []).compactMap { entry in
            guard let name = entry.objectValue?["example"]?.stringValue, let body = entry.objectValue?["request"] else { return nil }
            return (name, body)
        }
    }
}
