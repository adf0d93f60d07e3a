import Foundation
import Testing
import IsletTestPeers
@testable import IsletCore

/// Issue 12: the parser and the field reader take anything an attacker can send (random bytes, deep
/// nesting, huge numbers, invalid UTF-8, duplicate keys, NUL) and answer with a value or a clear error.
@Suite("JSON parser and field reader under hostile input")
struct JSONPropertyTests {
    static let seeds = """
        {"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","notifications":[{"title":"T","live_activity":{"content-state":{"a":1.5e3},"attributes-type":"T","attributes":{}},"live_activity_id":"A","devices":["d"]}]}}
        """

    @Test func randomBytesAndMutationsParseOrFailCleanly() {
        var random = SeededRandom(seed: 12)
        let valid = Array(Self.seeds.utf8)
        var parsed = 0, refused = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            } else {
                bytes = valid
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    switch Int.random(in: 0...2, using: &random) {
                    case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(Array("{}[],:\"\\0e-".utf8).randomElement(using: &random)!, at: index)
                    }
                    if bytes.isEmpty { break }
                }
            }
            do {
                let value = try JSONParser.parse(bytes)
                // What parses round-trips: the writer's text parses back to the same text (1.5e3 is written 1500).
                #expect(try JSONParser.parse(value.jsonText).jsonText == value.jsonText, "\(String(decoding: bytes, as: UTF8.self)) → \(value.jsonText)")
                parsed += 1
            } catch {
                #expect(!error.description.isEmpty)
                refused += 1
            }
        }
        #expect(parsed > 100 && refused > 10_000, "both outcomes are exercised: \(parsed) parsed, \(refused) refused")
    }

    @Test(arguments: [
        (String(repeating: "[", count: 100_000), "nesting deeper than 64"),
        (String(repeating: "{\"a\":", count: 100_000), "nesting deeper than 64"),
        ("{\"a\":1,\"a\":2}", "duplicate"),
        ("\"a\u{0}b\"", "control character"),
        ("[1,]", ""),
        ("\"\\ud800\"", ""),
    ])
    func hostileDocumentsAreRefused(text: String, mentions: String) {
        do {
            _ = try JSONParser.parse(text)
            Issue.record("accepted: \(text.prefix(40))")
        } catch {
            #expect(mentions.isEmpty || error.description.contains(mentions), "\(error)")
        }
    }

    @Test func invalidUTF8AndHugeNumbersAreHandled() throws {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse([0x22, 0xC3, 0x22]) }
        for huge in ["1e999999", "-1e999999", "123456789012345678901234567890", "0.0000000000000000000000000001e-400"] {
            let object: JSONValue
            do {
                object = try JSONParser.parse("{\"n\": \(huge)}")
            } catch {
                #expect(error.description.contains("out of range"), "\(huge): \(error)")
                continue
            }
            let reader = try FieldReader(object, path: "")
            // An integer field given a number it cannot hold is a 400 naming the field, never a trap.
            do {
                let value = try reader.int("n")
                #expect(value != nil)
            } catch {
                #expect(error.message.hasPrefix("n: must be an integer"), "\(error)")
            }
            _ = try? reader.date("n")
        }
        #expect(try FieldReader(JSONParser.parse("{\"n\": 9223372036854775807}"), path: "").int("n") == Int64.max)
    }
}
