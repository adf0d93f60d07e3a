import Testing
@testable import IsletCore

@Suite("Live Activity schemas (X2)")
struct SchemaTests {
    static let schema: JSONValue = [
        "status": "string", "estimatedTime": "string", "emoji": "string?", "eta": "date", "stops": "integer", "progress": "number",
        "late": "boolean", "driver": ["name": "string", "rating": "number?"], "items": ["string"], "extra": "object?", "tags": "array?",
    ]

    func check(_ value: JSONValue) throws -> SchemaCheck {
        LiveActivitySchema.check(try #require(value.objectValue), against: try LiveActivitySchema.parseFields(Self.schema, path: "content_state"),
                                 path: "content-state")
    }

    let good: JSONValue = ["status": "Third", "estimatedTime": "37 min", "eta": 1_800_000_000, "stops": 3, "progress": 0.5,
                           "late": false, "driver": ["name": "Ana"], "items": ["pizza"]]

    @Test func aContentStateThatDecodesPasses() throws {
        #expect(try check(good) == SchemaCheck())
        var more = try #require(good.objectValue)
        more["emoji"] = nil
        more["new"] = 1
        #expect(try check(.object(more)).unknownFields == ["content-state.new"], "unknown fields are reported, not refused")
        more["stops"] = 3.0
        #expect(try check(.object(more)).errors.isEmpty, "3.0 decodes as an Int")
    }

    @Test(arguments: [
        ("status", JSONValue.int(5), "content-state.status: expected string, got number"),
        ("status", .null, "content-state.status: null for a field that is not optional"),
        ("stops", .double(2.5), "content-state.stops: expected integer, got number"),
        ("eta", .string("2026-11-29"), "content-state.eta: expected date (seconds since 1970, a number), got string"),
        ("late", .string("no"), "content-state.late: expected boolean, got string"),
        ("progress", .bool(true), "content-state.progress: expected number, got boolean"),
        ("driver", JSONValue.object(["rating": 4.5]), "content-state.driver.name: missing"),
        ("items", JSONValue.array(["a", 1]), "content-state.items[1]: expected string, got number"),
        ("items", "a", "content-state.items: expected array, got string"),
        ("extra", .int(1), "content-state.extra: expected object, got number"),
    ])
    func whatWouldNotDecodeIsNamed(field: String, value: JSONValue, error: String) throws {
        var object = try #require(good.objectValue)
        object[field] = value
        #expect(try check(.object(object)).errors == [error])
    }

    @Test func aMissingFieldIsAnErrorUnlessOptional() throws {
        var object = try #require(good.objectValue)
        object["status"] = nil
        object["extra"] = nil
        #expect(try check(.object(object)).errors == ["content-state.status: missing"])
    }

    @Test(arguments: [
        (#"{"a": "text"}"#, "content_state.a: unknown type 'text'; use string, number, integer, boolean, date, object or array, with ? when optional"),
        (#"{"a": ["string", "integer"]}"#, "content_state.a: an array type is written as [elementType]"),
        (#"{"a": 5}"#, "content_state.a: must be a type name, an object of fields or [elementType], got number"),
        (#"{"a": {"b": "nope?"}}"#, "content_state.a.b: unknown type 'nope?'; use string, number, integer, boolean, date, object or array, with ? when optional"),
        (#""string""#, "content_state: must be an object of field: type"),
    ])
    func badSchemasAreRefusedWithThePath(schema: String, message: String) throws {
        let value = try JSONParser.parse(schema)
        #expect(throws: APIError(.badRequest, message)) { try LiveActivitySchema.parseFields(value, path: "content_state") }
    }

    @Test func schemasRoundTripAndInferFromAnExample() throws {
        let fields = try LiveActivitySchema.parseFields(Self.schema, path: "s")
        #expect(try LiveActivitySchema.parseFields(LiveActivitySchema.json(fields), path: "s") == fields)
        let inferred = LiveActivitySchema.json(LiveActivitySchema.infer(["status": "Third", "n": 3, "x": 0.5, "ok": true, "d": ["a": "b"], "l": [1], "z": nil]))
        #expect(inferred == ["d": ["a": "string"], "l": ["integer"], "n": "integer", "ok": "boolean", "status": "string", "x": "number", "z": "string?"])
    }
}
