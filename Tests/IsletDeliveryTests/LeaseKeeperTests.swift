import Foundation
import Testing
import IsletStore
@testable import IsletDelivery

/// Issue 14: what a node's workers know of their leases, without a database.
@Suite("Lease keeping and outcomes of a batch in flight")
struct LeaseKeeperTests {
    @Test func aLeaseIsValidUntilItsDeadlineAndLostOnceARenewalMissesIt() {
        let keeper = LeaseKeeper(duration: .seconds(60))
        keeper.add(1, claimedAt: .now)
        keeper.add(2, claimedAt: .now)
        keeper.add(3, claimedAt: .now - .seconds(120))
        #expect(keeper.isValid(1) && keeper.isValid(2))
        #expect(!keeper.isValid(3), "claimed longer ago than the lease lasts: no further batch")
        #expect(!keeper.isValid(4), "a lease this node never held")

        // The renewal extended 1 and 3; 2 was rescued by another node.
        #expect(keeper.apply(LeaseRenewal(renewed: [1, 3], gone: [2]), sentAt: .now) == 1)
        #expect(keeper.isValid(1) && keeper.isValid(3), "renewed from the moment the renewal was sent")
        #expect(!keeper.isValid(2))
        #expect(keeper.held == [1, 3], "a lost lease is not renewed again")

        keeper.remove(1)
        #expect(!keeper.isValid(1) && keeper.held == [3])
        #expect(keeper.apply(LeaseRenewal(renewed: [], gone: [1]), sentAt: .now) == 0, "a lease that ended here is not counted lost")
        keeper.add(5, claimedAt: .now - .seconds(120))
        #expect(keeper.apply(LeaseRenewal(renewed: [], gone: []), sentAt: .now) == 0)
        #expect(!keeper.isValid(5) && keeper.held.contains(5), "skipped by a renewal: neither extended nor lost")
    }

    @Test func theMarginKeepsTheLocalDeadlineBeforeTheDatabases() {
        #expect(LeaseKeeper(duration: .seconds(10)).margin == .seconds(1))
        #expect(LeaseKeeper(duration: .seconds(2)).margin == .milliseconds(400))
    }

    /// A batch whose record failed is collected again in the job's clean-up: that second wait must not sit
    /// until the send deadline (it did, 32 s, and held a paused node's worker that long).
    @Test func outcomesWaitedForTwiceAreReturnedAtOnce() {
        let pending = PendingOutcomes(count: 2)
        pending.fulfil([.delivered, .delivered])
        #expect(pending.wait(deadline: .now + .seconds(30)) == [.delivered, .delivered])
        let started = ContinuousClock.now
        #expect(pending.wait(deadline: .now + .seconds(30)) == [.delivered, .delivered])
        #expect(ContinuousClock.now - started < .seconds(10), "the second wait returned without waiting for the deadline")
    }
}
