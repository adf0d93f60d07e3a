import Testing
@testable import IsletCore

/// Issue 44: who may set a device's User ID, as a table.
@Suite("Who may set a User ID")
struct UserIDSourceTests {
    @Test(arguments: [
        (UserIDSource.app, false, true), (.app, true, true),
        (.server, false, false), (.server, true, true),
    ])
    func aUserIDIsStoredFromTheSourcesTheApplicationTakes(source: UserIDSource, byServer: Bool, stored: Bool) {
        #expect(source.accepts(byServer: byServer) == stored)
    }

    @Test func theSpellingIsWhatTheCLIAndTheAPIShow() {
        #expect(UserIDSource.allCases.map(\.rawValue) == ["app", "server"])
        #expect(UserIDSource.ignoredWarning.hasPrefix("userId: "), "a warning names its field")
    }
}
