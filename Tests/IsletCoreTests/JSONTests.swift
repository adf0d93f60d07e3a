import Testing
@testable import IsletCore

@Suite("JSON parser and writer")
struct JSONTests {
    @Test func parsesEveryValueKindAndKeepsKeyOrder() throws {
        let value = try JSONParser.parse(#"{"z":1,"a":[true,false,null],"m":-2.5e1,"s":"x\"y\\\/\n\u00e9\ud83d\ude00","big":9223372036854775807}"#)
        let object = try #require(value.objectValue)
        #expect(object.keys == ["z", "a", "m", "s", "big"])
        #expect(object["z"] == .int(1))
        #expect(object["a"] == [true, false, nil])
        #expect(object["m"] == .double(-25))
        #expect(object["s"] == .string("x\"y\\/\né😀"))
        #expect(object["big"] == .int(Int64.max))
    }

    @Test func keepsIntegersApartFromFractions() throws {
        #expect(try JSONParser.parse("60") == .int(60))
        #expect(try JSONParser.parse("60.5") == .double(60.5))
        #expect(try JSONParser.parse("1e2") == .double(100))
        #expect(JSONValue.double(5.0).intValue == 5)
        #expect(JSONValue.double(5.5).intValue == nil)
        #expect(JSONValue.string("5").intValue == nil)
    }

    @Test(arguments: [
        ("{\"a\":1,}", "expected a string key"),
        ("[1,2,]", "unexpected character ']'"),
        ("{\"a\":1,\"a\":2}", "duplicate key \"a\""),
        ("\"tab\there\"", "control character in a string"),
        ("01", "unexpected data after the JSON value"),
        ("{\"a\" 1}", "expected ':' after a key"),
        ("\"\\ud800\"", "unpaired surrogate in \\u escape"),
        ("tru", "unexpected end of input"),
        ("{\"request\":", "unexpected end of input"),
        ("1e999", "number out of range"),
        ("", "unexpected end of input"),
    ])
    func rejectsMalformedText(text: String, reason: String) {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(text) }
        do {
            _ = try JSONParser.parse(text)
        } catch {
            #expect(error.reason == reason)
        }
    }

    @Test func rejectsNestingBeyondTheLimit() {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(deep) }
        let fine = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        #expect((try? JSONParser.parse(fine)) != nil)
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func writesCompactJSONThatParsesBack() throws {
        let value: JSONValue = ["status": "Third", "emoji": "👨‍🍳", "n": 37, "x": 1.5, "ok": true, "none": nil,
                                "list": ["a", "\u{1}"], "quote": "say \"hi\"\n"]
        let text = value.jsonText
        #expect(text == #"{"status":"Third","emoji":"👨‍🍳","n":37,"x":1.5,"ok":true,"none":null,"list":["a","\u0001"],"quote":"say \"hi\"\n"}"#)
        #expect(try JSONParser.parse(text) == value)
    }

    @Test func objectSubscriptReplacesInPlaceAndRemoves() {
        var object: JSONObject = ["a": 1, "b": 2]
        object["a"] = 3
        object["c"] = 4
        object["b"] = nil
        #expect(object.keys == ["a", "c"])
        #expect(object["a"] == 3)
    }
}

@Suite("Field reader (E4: errors name the field and the rule)")
struct FieldReaderTests {
    let reader = FieldReader(["s": "x", "i": 5, "f": 5.5, "o": ["k": "v"], "a": [1], "n": nil, "empty": ""])

    @Test func readsTypedFields() throws {
        #expect(try reader.string("s") == "x")
        #expect(try reader.int("i") == 5)
        #expect(try reader.objectField("o")?.string("k") == "v")
        #expect(try reader.array("a") == [1])
        #expect(try reader.string("n") == nil, "null reads as absent")
        #expect(try reader.lenientString("i") == "5", "the SDK sends some strings as numbers (D1)")
    }

    @Test func namesThePathAndRuleInErrors() throws {
        let nested = try #require(try reader.objectField("o"))
        #expect(throws: APIError.invalid("o.k", "must be an integer, got string")) { try nested.int("k") }
        #expect(throws: APIError.invalid("f", "must be an integer, got number")) { try reader.int("f") }
        #expect(throws: APIError.invalid("s", "must be an object, got string")) { try reader.objectField("s") }
        #expect(throws: APIError.invalid("missing", "is required")) { try reader.requiredString("missing") }
        #expect(throws: APIError.invalid("empty", "must not be empty")) { try reader.requiredString("empty") }
        let notifications = try FieldReader(JSONValue.object(["live_activity": ["content-state": "x"]]), path: "notifications[0]")
        let activity = try #require(try notifications.objectField("live_activity"))
        #expect(throws: APIError.invalid("notifications[0].live_activity.content-state", "must be an object, got string")) {
            try activity.requiredObject("content-state")
        }
    }
}

@Suite("Application codes (E2)")
struct ApplicationCodeTests {
    @Test(arguments: ["XXXXX-XXXXX", "ABCDE-12345", "00000-ZZZZZ"])
    func acceptsTheDocumentedShape(text: String) {
        #expect(ApplicationCode(text)?.rawValue == text)
    }

    @Test(arguments: ["abcde-12345", "ABCDE12345", "ABCDE-1234", "ABCDE-123456", "ABCD--12345", "ÄBCDE-12345", ""])
    func rejectsEverythingElse(text: String) {
        #expect(ApplicationCode(text) == nil)
    }

    @Test func randomCodesHaveTheShapeAndDiffer() {
        var generator = SystemRandomNumberGenerator()
        let codes = (0..<50).map { _ in ApplicationCode.random(using: &generator) }
        #expect(codes.allSatisfy { ApplicationCode($0.rawValue) != nil })
        #expect(Set(codes).count == 50)
    }

    @Test func findsTheFirstNULByPath() {
        let value: JSONValue = ["a": "x", "list": ["ok", "b\u{0}d"], "deep": ["k": "v\u{0}"]]
        #expect(value.pathOfNUL("") == "list[1]")
        #expect(JSONValue.object(["de\u{0}ep": 1]).pathOfNUL("request") == "request.de\u{0}ep")
        #expect(JSONValue.object(["a": ["b": "clean"], "n": 1, "s": "🙂"]).pathOfNUL("") == nil)
    }
}
