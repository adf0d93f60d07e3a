import Foundation
import Testing
import IsletCore

/// A8: 8 hours running, then at most 4 on the lock screen; an end's dismissal-date within those 4 hours.
@Suite("Activity lifetime (A8)")
struct ActivityLifetimeTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func iOSEndsAnActivityEightHoursAfterItsStart() {
        #expect(ActivityLifetime.endsBy(startedAt: start) == start.addingTimeInterval(8 * 3600))
        #expect(!ActivityLifetime.isOver(startedAt: start, now: start.addingTimeInterval(8 * 3600 - 1)))
        #expect(ActivityLifetime.isOver(startedAt: start, now: start.addingTimeInterval(8 * 3600)))
        #expect(!ActivityLifetime.isOver(startedAt: nil, now: start.addingTimeInterval(100 * 3600)), "unknown start: never over")
    }

    @Test func anEndStaysUntilItsDismissalDateButNeverMoreThanFourHours() {
        let end = start.addingTimeInterval(3600)
        #expect(ActivityLifetime.dismissAt(endedAt: end, dismissalDate: nil) == end.addingTimeInterval(4 * 3600))
        #expect(ActivityLifetime.dismissAt(endedAt: end, dismissalDate: Int64(end.timeIntervalSince1970) + 600) == end.addingTimeInterval(600))
        #expect(ActivityLifetime.dismissAt(endedAt: end, dismissalDate: 1) == end, "a past date: at once")
        #expect(ActivityLifetime.dismissAt(endedAt: end, dismissalDate: Int64(end.timeIntervalSince1970) + 86_400) == end.addingTimeInterval(4 * 3600))
    }

    @Test func theCardLeavesTheLockScreenAtItsDismissalOrTwelveHoursAfterItsStart() {
        let late = start.addingTimeInterval(9 * 3600)
        #expect(ActivityLifetime.leavesLockScreen(startedAt: start, dismissAt: nil, ended: false, now: start.addingTimeInterval(3600)) == nil, "running")
        #expect(ActivityLifetime.leavesLockScreen(startedAt: start, dismissAt: nil, ended: false, now: late) == start.addingTimeInterval(12 * 3600))
        #expect(ActivityLifetime.leavesLockScreen(startedAt: start, dismissAt: start.addingTimeInterval(7200), ended: true, now: late)
                == start.addingTimeInterval(7200))
        #expect(ActivityLifetime.leavesLockScreen(startedAt: start, dismissAt: late.addingTimeInterval(4 * 3600), ended: true, now: late)
                == start.addingTimeInterval(12 * 3600), "an end after iOS ended it changes nothing on the phone")
    }

    @Test func theWarningSaysHowOldTheActivityIs() {
        #expect(ActivityLifetime.warning(path: "notifications[0]", activityID: "ORDER_1", startedAt: start, now: start.addingTimeInterval(8 * 3600 + 12 * 60))
                == "notifications[0].live_activity_id: activity 'ORDER_1' started 8 h 12 min ago, and iOS ends a Live Activity after 8 hours, so this reaches no device (A8); start a new activity to go on showing it")
    }
}
