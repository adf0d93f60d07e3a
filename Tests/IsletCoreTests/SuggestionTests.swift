import Testing
import IsletCore

@Suite("Did you mean …? (issue 11)")
struct SuggestionTests {
    let methods = ["startLiveActivity", "updateLiveActivity", "getMessageDetails", "registerDevice", "setTags", "getTags"]

    @Test func suggestsTheNearestNameForATypo() {
        #expect(Suggestion.nearest("startLiveActivty", among: methods) == "startLiveActivity")
        #expect(Suggestion.nearest("updateliveactivity", among: methods) == "updateLiveActivity", "case does not count")
        #expect(Suggestion.nearest("getTag", among: methods) == "getTags")
    }

    @Test func staysQuietWhenNothingIsClose() {
        #expect(Suggestion.nearest("createMessage", among: methods) == nil)
        #expect(Suggestion.nearest("", among: methods) == nil)
        #expect(Suggestion.nearest("x", among: methods) == nil)
    }

    @Test func datesSayTheirUnit() throws {
        let reader = FieldReader(try JSONParser.parse(Array(#"{"dismissal-date":"tomorrow"}"#.utf8)).objectValue ?? [:], path: "live_activity")
        #expect(throws: APIError.invalid("live_activity.dismissal-date",
                                         "must be a date as an integer of seconds since 1970 (e.g. 1767225600), got string")) {
            try reader.date("dismissal-date")
        }
    }
}
