import Foundation
import Testing
import IsletCore

/// Issue 45: the Pushwoosh SDK's tag builders send booleans, dates and operations.
@Suite("Tag changes and dates (D2)")
struct TagChangeTests {
    typealias Row = (change: TagChange, current: TagValue?, type: TagType?, outcome: TagChange.Outcome)

    static let rows: [Row] = [
        (.string("a"), nil, nil, .store(.string("a"))),
        (.string("a"), nil, .integer, .skip(.typeClash(existing: .integer, given: .string))),
        (.set(.boolean(true)), nil, nil, .store(.boolean(true))),
        (.set(.boolean(false)), .boolean(true), .boolean, .store(.boolean(false))),
        (.integer(1), nil, .boolean, .skip(.typeClash(existing: .boolean, given: .integer))),
        // A string under a date tag is the date it names; another string is skipped, named.
        (.string("2026-12-04 18:30"), nil, .date, .store(.date(1_796_409_000))),
        (.string("2026-12-04"), nil, .date, .store(.date(1_796_342_400))),
        (.string("04/12/2026"), nil, .date, .skip(.notADate("04/12/2026"))),
        (.string("2026-12-04 18:30"), nil, nil, .store(.string("2026-12-04 18:30"))),
        (nil, .integer(3), .integer, .store(nil)),
        // Increments: from nothing, from a value, past the largest integer, on another type.
        (.increment(2), nil, nil, .store(.integer(2))),
        (.increment(-5), .integer(3), .integer, .store(.integer(-2))),
        (.increment(1), .integer(Int64.max), .integer, .skip(.overflow)),
        (.increment(1), .string("x"), .string, .skip(.typeClash(existing: .string, given: .integer))),
        // Lists: each string once, in the order given; removing from nothing gives the tag no type.
        (.append(["b", "a", "b"]), .list(["a"]), .list, .store(.list(["a", "b"]))),
        (.append(["x"]), nil, nil, .store(.list(["x"]))),
        (.append(["x"]), nil, .integer, .skip(.typeClash(existing: .integer, given: .list))),
        (.removeItems(["a", "z"]), .list(["a", "b"]), .list, .store(.list(["b"]))),
        (.removeItems(["a"]), nil, nil, .store(nil)),
        (.removeItems(["a"]), nil, .list, .store(.list([]))),
        (.append((0..<3).map(String.init)), .list((10..<109).map(String.init)), .list, .skip(.listTooLong(limit: 100))),
    ]

    @Test func eachChangeHasOneOutcome() {
        for (index, row) in Self.rows.enumerated() {
            #expect(row.change.apply(current: row.current, type: row.type, listLimit: 100) == row.outcome, "row \(index)")
        }
    }

    @Test func datesReadAndWriteAsTheSDKFormatsThem() {
        let cases: [(String, Int64)] = [("1970-01-01 00:00", 0), ("1969-12-31 23:59", -60), ("2000-02-29 12:00", 951_825_600),
                                        ("2026-12-04 18:30", 1_796_409_000), ("9999-12-31 23:59", 253_402_300_740)]
        for (text, seconds) in cases {
            #expect(TagDate.parse(text) == seconds, "\(text)")
            #expect(TagDate.text(seconds) == text)
        }
        for bad in ["2026-02-29 10:00", "2026-13-01", "2026-12-04 24:00", "2026-12-04 18:60", "2026-12-4", "2026-12-04T18:30", "", "abcd-ef-gh"] {
            #expect(TagDate.parse(bad) == nil, "\(bad)")
        }
        // Every minute of a leap year's February and March round-trips, day boundaries included.
        let start = TagDate.parse("2028-02-28 23:00")!
        for minute in stride(from: Int64(0), to: 60 * 24 * 3, by: 7) {
            let seconds = start + minute * 60
            #expect(TagDate.parse(TagDate.text(seconds)) == seconds)
        }
        #expect(TagValue.date(1_796_409_000).json == "2026-12-04 18:30")
        #expect(SkippedTag(tag: "Due", why: .notADate("soon")).warning
                == #"tags.Due: is a tag of type date; got "soon", not a date such as "2026-12-04 18:30" (yyyy-MM-dd HH:mm, UTC), not stored (D2)"#)
    }

    @Test func filtersCompareBooleansAndDatesByTheirType() throws {
        let types: [String: TagType] = ["Done": .boolean, "Due": .date]
        let filter = try FilterDefinition.parse(name: "f", join: .and, conditions: [["Done", "EQ", true], ["Due", "BETWEEN", ["2026-12-01", "2026-12-31 23:59"]]],
                                                tagTypes: types)
        #expect(filter.conditions.map(\.values) == [[.boolean(true)], [.date(seconds: 1_796_083_200, text: "2026-12-01"),
                                                                      .date(seconds: 1_798_761_540, text: "2026-12-31 23:59")]])
        #expect(filter.json == ["name": "f", "operator": "AND", "conditions": [["Done", "EQ", true], ["Due", "BETWEEN", ["2026-12-01", "2026-12-31 23:59"]]]])
        #expect(throws: APIError.invalid("conditions[0][2]", "'Done' is a boolean tag: expected true or false, got string")) {
            try FilterDefinition.parse(name: "f", join: .and, conditions: [["Done", "EQ", "yes"]], tagTypes: types)
        }
        #expect(throws: APIError.invalid("conditions[0][1]", "GTE compares numbers: 'Done' is a boolean tag; use an integer or date tag, or OS Version")) {
            try FilterDefinition.parse(name: "f", join: .and, conditions: [["Done", "GTE", true]], tagTypes: types)
        }
        #expect(throws: APIError.invalid("conditions[0][2]", "BETWEEN needs min <= max")) {
            try FilterDefinition.parse(name: "f", join: .and, conditions: [["Due", "BETWEEN", ["2026-12-02", "2026-12-01"]]], tagTypes: types)
        }
    }
}
