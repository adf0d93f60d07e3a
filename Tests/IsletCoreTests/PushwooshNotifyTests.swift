import Foundation
import Testing
import IsletCore

/// Issue 46: Pushwoosh's `/messaging/v2/notify` for Android Live Updates, as Islet reads it.
@Suite("Pushwoosh's notify call for Live Updates")
struct PushwooshNotifyTests {
    static let app = ApplicationCode("APPAA-00001")!
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func request(segment: JSONObject = [:], android: JSONObject = [:], live: JSONObject = [:], locale: String = "default") -> JSONValue {
        var liveUpdate: JSONObject = ["op": "OPERATION_START", "id": "pizza_4521"]
        for (key, value) in live.entries { liveUpdate[key] = value == .null ? nil : value }
        var content: JSONObject = ["title": "Pizza", "body": "On its way", "live_update": .object(liveUpdate)]
        for (key, value) in android.entries { content[key] = value == .null ? nil : value }
        var fields: JSONObject = [
            "application": .string(app.rawValue), "platforms": ["ANDROID"], "expression": .string("A(\"\(app.rawValue)\")"),
            "payload": ["content": ["localized_content": .object([locale: ["android": .object(content)]])]],
        ]
        for (key, value) in segment.entries { fields[key] = value == .null ? nil : value }
        return ["segment": .object(fields)]
    }

    static func parse(_ document: JSONValue) throws(APIError) -> PushwooshNotify { try PushwooshNotify.parse(document, application: app, now: now) }

    @Test func theDocumentedStartReadsAsAStartOfEveryAndroidPhone() throws {
        let notify = try Self.parse(Self.request(live: ["progress": "4", "segments": [["color": "#705289", "length": "8"]], "when": 1_800_000_000_123,
                                                        "chronometer": true]))
        #expect(notify.operation == .start && notify.activityID == "pizza_4521" && notify.title == "Pizza" && notify.body == "On its way")
        #expect(notify.audience == .application && notify.sendAt == nil)
        #expect(notify.android.progress == 4 && notify.android.segments == [.init(color: "#705289", length: 8)])
        #expect(notify.android.when == 1_800_000_000 && notify.android.chronometer == true, "Pushwoosh's milliseconds, kept as Islet's seconds")
        let later = try Self.parse(Self.request(segment: ["code": "LISBON", "expression": nil, "schedule": ["at": "2027-01-15T10:00:00Z"]], locale: "en"))
        let at = try Date("2027-01-15T10:00:00Z", strategy: .iso8601)
        #expect(later.audience == .filter("LISBON") && later.sendAt == at)
    }

    @Test(arguments: [
        (request(segment: ["platforms": ["IOS"]]), "segment.platforms: must include ANDROID"),
        (request(segment: ["expression": "T(\"City\", EQ, \"Lisbon\")"]), "segment.expression: Islet takes A(\"APPAA-00001\")"),
        (request(segment: ["filter_expression": [:]]), "segment.filter_expression: not taken by Islet"),
        (request(segment: ["code": "X"]), "segment: give segment.code or segment.expression, not both"),
        (request(segment: ["schedule": ["at": "tomorrow"]]), "segment.schedule.at: must be a time as RFC 3339"),
        (request(live: ["op": "start"]), "segment.payload.content.localized_content.default.android.live_update.op: must be OPERATION_START"),
        (request(live: ["id": ""]), "segment.payload.content.localized_content.default.android.live_update.id: must not be empty"),
        (request(live: ["progres": 1]), "segment.payload.content.localized_content.default.android.live_update.progres: unknown field (did you mean progress?)"),
        (request(live: ["segments": [["color": "violet"]]]), "segment.payload.content.localized_content.default.android.live_update.segments[0].color: must be a color"),
        (request(android: ["live_update": nil]), "segment.payload.content.localized_content.default.android.live_update: is required"),
        (["transactional": ["hwids": ["a"]]] as JSONValue, "transactional: Islet takes a segment notify"),
    ] as [(JSONValue, String)])
    func aWrongRequestIsRefusedNamingTheField(document: JSONValue, message: String) {
        #expect {
            _ = try Self.parse(document)
        } throws: { error in
            guard let error = error as? APIError else { return false }
            return error.code == .badRequest && error.message.hasPrefix(message)
        }
    }

    @Test func anotherApplicationIsRefusedLikeAWrongToken() {
        #expect(throws: APIError(.unauthorized, "segment.application: the token is not one of application APPBB-00002")) {
            try Self.parse(Self.request(segment: ["application": "APPBB-00002"]))
        }
    }
}
