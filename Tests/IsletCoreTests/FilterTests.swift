import Testing
@testable import IsletCore

@Suite("Filter definitions (X1)")
struct FilterDefinitionTests {
    let types: [String: TagType] = ["Level": .integer, "City": .string, "Sports": .list]

    func parse(_ conditions: String) throws -> FilterDefinition {
        try FilterDefinition.parse(name: "f", join: .and, conditions: try JSONParser.parse(conditions), tagTypes: types)
    }

    @Test func parsesEveryOperatorIntoTypedValues() throws {
        let filter = try parse(#"[["Level","BETWEEN",[1,5]],["City","IN",["a","b"]],["OS Version","GTE","17.2"],["Language","NOTEQ","en"]]"#)
        #expect(filter.conditions.map(\.op) == [.between, .in, .gte, .notEq])
        #expect(filter.conditions[0].values == [.integer(1), .integer(5)])
        #expect(filter.conditions[2].values == [.version(key: 17_002_000, text: "17.2")])
        #expect(filter.conditions[2].builtIn == .osVersion)
        #expect(filter.json == ["name": "f", "operator": "AND", "conditions": [
            ["Level", "BETWEEN", [1, 5]], ["City", "IN", ["a", "b"]], ["OS Version", "GTE", "17.2"], ["Language", "NOTEQ", "en"],
        ]])
    }

    @Test(arguments: [
        (#"[]"#, "conditions: must hold at least one condition"),
        (#"{"a":1}"#, "conditions: must be an array of [tag, operator, value], got object"),
        (#"[["City","EQ"]]"#, "conditions[0]: must be [tag, operator, value]"),
        (#"[["Mood","EQ","x"]]"#, "conditions[0][0]: unknown tag 'Mood'; built-in tags are Language, OS Version, Timezone, User ID, Platform, custom tags exist once a device sets them"),
        (#"[["City","LIKE","x"]]"#, "conditions[0][1]: must be one of EQ NOTEQ IN NOTIN GTE LTE BETWEEN"),
        (#"[["Level","EQ","5"]]"#, "conditions[0][2]: 'Level' is an integer tag: expected an integer, got string"),
        (#"[["City","EQ",5]]"#, "conditions[0][2]: 'City' is a string tag: expected a string, got number"),
        (#"[["City","GTE","a"]]"#, "conditions[0][1]: GTE compares numbers: 'City' is a string tag; use an integer or date tag, or OS Version"),
        (#"[["Level","IN",[]]]"#, "conditions[0][2]: IN needs a non-empty array of values"),
        (#"[["Level","IN",[1,"x"]]]"#, "conditions[0][2][1]: 'Level' is an integer tag: expected an integer, got string"),
        (#"[["Level","BETWEEN",[9,1]]]"#, "conditions[0][2]: BETWEEN needs min <= max"),
        (#"[["Level","BETWEEN",5]]"#, "conditions[0][2]: BETWEEN needs [min, max]"),
        (#"[["OS Version","GTE","seventeen"]]"#, "conditions[0][2]: 'OS Version' is a version: expected a version such as \"17.2\""),
        (#"[["Language","EQ","en"],["Sports","EQ",["ski"]]]"#, "conditions[1][2]: 'Sports' is a list tag: expected a string, got array"),
    ])
    func rejectsBadConditionsNamingThePath(conditions: String, message: String) {
        #expect(throws: APIError(.badRequest, message)) { try parse(conditions) }
    }

    @Test func versionKeysOrderLikeVersions() {
        #expect(VersionKey.make("17.10")! > VersionKey.make("17.2")!)
        #expect(VersionKey.make("17") == VersionKey.make("17.0.0"))
        #expect(VersionKey.make("16.4.1") == 16_004_001)
        for bad in ["", "17.", "a.b", "1.2.3.4", "17.1000", "-1"] { #expect(VersionKey.make(bad) == nil, "\(bad)") }
    }

    @Test func hexTokensAreCheckedAndLowercased() {
        #expect(HexToken.normalize("ABCDEF0123456789") == "abcdef0123456789")
        #expect(HexToken.normalize(String(repeating: "a", count: 400)) != nil)
        for bad in ["abc", "abcdef012345678", "zz" + String(repeating: "0", count: 30), String(repeating: "a", count: 402)] {
            #expect(HexToken.normalize(bad) == nil)
        }
    }

    /// Issue 46: Platform is built in, unless the application already has a custom tag of that name.
    @Test func platformIsBuiltInUnlessACustomTagHasItsName() throws {
        let builtIn = try FilterDefinition.parse(name: "A", join: .and, conditions: [["Platform", "EQ", "android"]], tagTypes: [:])
        #expect(builtIn.conditions.first?.builtIn == .platform)
        #expect(throws: APIError.invalid("conditions[0][2]", "'Platform' is ios or android, got 'Android'")) {
            try FilterDefinition.parse(name: "A", join: .and, conditions: [["Platform", "EQ", "Android"]], tagTypes: [:])
        }
        let custom = try FilterDefinition.parse(name: "A", join: .and, conditions: [["Platform", "EQ", "Android"]], tagTypes: ["Platform": .string])
        #expect(custom.conditions.first?.builtIn == nil, "the application's own tag")
        #expect(FilterDefinition.tagNames(in: [["Platform", "EQ", "x"], ["Language", "EQ", "en"]]) == ["Platform"], "its type is read")
    }
}
