import Testing
@testable import IsletCore

/// S3 and U1 decided without a store: the facts in, the user's words out.
@Suite("Activity rules (S3, U1)")
struct ActivityRulesTests {
    @Test(arguments: [
        (ActivityRules.StartFacts(state: nil, hasMessages: false, unfinished: false), nil),
        (.init(state: .active, hasMessages: false, unfinished: false), nil),
        (.init(state: .active, hasMessages: true, unfinished: false), "'A' is still active in this application; end it before starting it again (S3)"),
        (.init(state: .scheduled, hasMessages: true, unfinished: true), "'A' is already scheduled to start in this application; end it before starting it again (S3)"),
        (.init(state: .ended, hasMessages: true, unfinished: true), "'A' has ended but its end is still being sent; start it again once it has gone out (S3)"),
        (.init(state: .ended, hasMessages: true, unfinished: false), nil),
    ] as [(ActivityRules.StartFacts, String?)])
    func starts(facts: ActivityRules.StartFacts, refusal: String?) {
        #expect(ActivityRules.startRefusal("A", facts: facts) == refusal)
    }

    @Test func updatesNeedAnActiveActivity() {
        #expect(ActivityRules.updateRefusal("A", state: .active) == nil)
        #expect(ActivityRules.updateRefusal("A", state: nil) == "no activity 'A' in this application; start it with startLiveActivity first (U1)")
        #expect(ActivityRules.updateRefusal("A", state: .ended) == "'A' has ended; it takes no more updates (U1)")
        #expect(ActivityRules.isRepeatedEnd(.end, state: .ended))
        #expect(!ActivityRules.isRepeatedEnd(.update, state: .ended) && !ActivityRules.isRepeatedEnd(.end, state: .active)
                && !ActivityRules.isRepeatedEnd(.end, state: nil))
        #expect(ActivityRules.updateRefusal("A", state: .scheduled) == "'A' is scheduled and has not started yet; update it once it has (U1)")
    }
}
