import Testing
@testable import IsletCore

@Suite("Counts by key")
struct CountsByKeyTests {
    @Test func aKeyIsForgottenWhenItsCountFallsToZero() {
        var counts = CountsByKey()
        counts.add(3, to: "a")
        counts.add(2, to: "b")
        counts.remove(1, from: "a")
        #expect(counts["a"] == 2 && counts["b"] == 2 && counts["c"] == 0)
        counts.remove(2, from: "a")
        counts.remove(5, from: "c")   // more than it held: none, not negative
        #expect(counts["a"] == 0 && counts["c"] == 0)
        #expect(String(describing: counts).contains("\"b\"") && !String(describing: counts).contains("\"a\""), "\(counts)")
    }
}
