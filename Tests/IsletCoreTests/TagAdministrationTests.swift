import Testing
@testable import IsletCore

/// Issue 44: what the operator may do to a tag, as a table.
@Suite("Tags from the server side")
struct TagAdministrationTests {
    @Test func builtInTagsAndTagsAFilterNamesStayAsTheyAre() {
        #expect(TagAdministration.refusal("Level", filters: []) == nil)
        #expect(TagAdministration.refusal("User ID", filters: [])?.hasPrefix("tag 'User ID' is built in") == true)
        #expect(TagAdministration.refusal("Level", filters: ["b", "a"])
                == "tag 'Level' is used by filters 'a', 'b': delete them first (deleteFilter), and create them again after")
        #expect(TagAdministration.refusal("Level", filters: ["a"])
                == "tag 'Level' is used by filter 'a': delete it first (deleteFilter), and create it again after")
    }

    @Test(arguments: [
        (TagType.integer, nil as TagType?, 0, false, true),   // defined before any device
        (.integer, .integer, 5, false, true),                 // already so
        (.integer, .string, 0, false, true),                  // no device holds a value
        (.integer, .string, 5, false, false),                 // values would go: only when asked
        (.integer, .string, 5, true, true),
        (.version, nil, 0, false, false),                     // OS Version's type alone
    ])
    func aTypeChangeDeletesValuesOnlyWhenAsked(type: TagType, current: TagType?, devices: Int, dropping: Bool, allowed: Bool) {
        let refusal = TagAdministration.typeRefusal("Level", type: type, current: current, devices: devices, droppingValues: dropping)
        #expect((refusal == nil) == allowed, "\(refusal ?? "allowed")")
    }
}
