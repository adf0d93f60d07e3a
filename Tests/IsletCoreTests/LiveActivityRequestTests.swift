import Foundation
import Testing
@testable import IsletCore
import IsletTestPeers

/// The notification rules as pure functions: no server, no sockets.
@Suite("Live Activity requests: priority, dry run, unknown fields, start payload")
struct LiveActivityRequestTests {
    func reader(_ text: String, path: String = "notifications[0]") throws -> FieldReader {
        try FieldReader(try JSONParser.parse(text), path: path)
    }

    @Test(arguments: [("10", 10, false), ("10.0", 10, false), (#""10""#, 10, false), (#"" 5 ""#, 5, false), ("5", 5, false),
                      ("null", 5, false), ("1", 5, true), ("true", 5, true), (#""urgent""#, 5, true)])
    func priority(json: String, expected: Int, warned: Bool) throws {
        let (priority, warning) = LiveActivityRequests.priority(try reader(#"{"apns_priority": \#(json)}"#))
        #expect(priority == expected)
        #expect((warning != nil) == warned, "\(warning ?? "")")
        if let warning { #expect(warning.hasPrefix("notifications[0].apns_priority: ") && warning.hasSuffix("(S6)")) }
    }

    @Test func messageCodesKeepTheirShapeAndTheirRandomPartUsesEveryCharacterEvenly() {
        var generator = SeededRandom(seed: 42)
        var counts: [Character: Int] = [:]
        var codes = Set<String>()
        for n in 0..<2_000 {
            // One stamp for all: the random part alone must keep them apart.
            let code = MessageCode.code(stamp: 1_796_270_400_123_456_789 + UInt64(n % 2), using: &generator)
            #expect(code.wholeMatch(of: /[A-Z0-9]{5}-[A-Z0-9]{8}-[A-Z0-9]{8}/) != nil, "\(code)")
            for character in code.suffix(8) { counts[character, default: 0] += 1 }
            codes.insert(code)
        }
        #expect(codes.count == 2_000)
        // 16,000 characters over 36: about 444 each; a character drawn from a biased digit would stray far.
        #expect(counts.count == 36)
        #expect(counts.values.allSatisfy { (360...530).contains($0) }, "\(counts.sorted { $0.key < $1.key })")
    }

    @Test(arguments: [(UInt64(0), "00000-00000000"), (35, "00000-0000000Z"), (36, "00000-00000010"),
                      (1_796_270_400_123_456_789, "0DNAS-PPV65EZ9"), (UInt64.max, "3W5E1-1264SGSF")])
    func aCodesStampIsThirteenBase36DigitsInByteOrder(stamp: UInt64, expected: String) {
        var generator = SeededRandom(seed: 7)
        #expect(MessageCode.code(stamp: stamp, using: &generator).prefix(14) == expected)
    }

    @Test func codesMadeLaterSortLaterEvenInOneNanosecondOrWithTheClockSetBack() {
        var generator = SeededRandom(seed: 1)
        // Far ahead of the real clock, which other tests' codes follow meanwhile (the last stamp is the process's).
        let now = Date(timeIntervalSince1970: 13_569_465_600)   // 2400-01-01
        // The same instant twice, a later one, then the clock set back a minute.
        let dates = [now, now, now.addingTimeInterval(0.000_001), now.addingTimeInterval(-60), now.addingTimeInterval(3_600)]
        let stamps = dates.map { MessageCode.nextStamp(at: $0) }
        #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 < $1 }, "\(stamps)")
        let codes = stamps.map { MessageCode.code(stamp: $0, using: &generator) }
        #expect(codes == codes.sorted(), "\(codes)")
        // The code made an hour on carries that hour's stamp (not one more than the last).
        #expect(stamps.last == UInt64(now.addingTimeInterval(3_600).timeIntervalSince1970 * 1e9))
        // Codes from `next()` sort in the order they were made too.
        let made = (0..<1_000).map { _ in MessageCode.next() }
        #expect(made == made.sorted())
        #expect(Set(made).count == made.count)
    }

    @Test func dryRunBesideOrInsideEveryNotification() throws {
        let request = try reader(#"{"dry_run": false}"#, path: "")
        let dry = try reader(#"{"dry_run": true}"#), wet = try reader(#"{}"#, path: "notifications[1]")
        #expect(try LiveActivityRequests.dryRun(try reader(#"{"dry_run": true}"#, path: ""), [wet]))
        #expect(try LiveActivityRequests.dryRun(request, [dry, dry]))
        #expect(try !LiveActivityRequests.dryRun(request, [wet]))
        #expect(throws: APIError.self) { try LiveActivityRequests.dryRun(request, [dry, wet]) }
        #expect(throws: APIError.self, "a string is not a boolean") { try LiveActivityRequests.dryRun(request, [try reader(#"{"dry_run": "yes"}"#)]) }
    }

    @Test func unknownFieldsSuggestTheNearestKnownOne() throws {
        let warnings = LiveActivityRequests.unknownFields(try reader(#"{"live_activity_id": "A", "filtr": "F", "zzz": 1}"#), known: ["live_activity_id", "filter"])
        #expect(Set(warnings) == ["notifications[0].filtr: unknown field, ignored (did you mean filter?)", "notifications[0].zzz: unknown field, ignored"])
        // Issue 45: send_rate is close to send_date, but it is a Pushwoosh field Live Activities do not take, and said so.
        #expect(LiveActivityRequests.unknownFields(try reader(#"{"send_rate": 100}"#), known: ["send_date"])
                == ["notifications[0].send_rate: ignored: the send rate is not customisable for Live Activities; each push goes as soon as it is due"])
    }

    @Test func aStartCarriesRelevanceScoreAndStaleDate() throws {
        let n = try reader(#"{"title": "T", "live_activity_id": "A", "devices": ["d"], "live_activity": {"content-state": {}, "attributes-type": "X", "attributes": {}, "relevance-score": 50, "stale-date": 1796000000}}"#)
        let start = try LiveActivityRequests.start(n, now: Date(timeIntervalSince1970: 1_795_000_000))
        let aps = LiveActivityPayload.start(start, timestamp: 1).objectValue?["aps"]?.objectValue
        #expect(aps?["relevance-score"] == .int(50) && aps?["stale-date"] == .int(1_796_000_000))
        #expect(start.warnings.isEmpty)
        #expect(throws: APIError.self) {
            try LiveActivityRequests.start(try reader(#"{"title": "T", "live_activity_id": "A", "devices": ["d"], "live_activity": {"content-state": {}, "attributes-type": "X", "attributes": {}, "relevance-score": 0}}"#), now: Date())
        }
    }

    /// Issue 44: the activity's name is kept with it and no payload limit bounds it: 1,024 characters at most.
    @Test func anActivitysTitleIsBounded() throws {
        func start(title: String) throws -> StartNotification {
            try LiveActivityRequests.start(try reader(#"{"title": "T", "live_activity_id": "A", "devices": ["d"], "live_activity": {"title": "\#(title)", "content-state": {}, "attributes-type": "X", "attributes": {}}}"#), now: Date())
        }
        #expect(try start(title: String(repeating: "é", count: 1024)).name?.count == 1024)
        #expect(throws: APIError.invalid("notifications[0].live_activity.title", "must be at most 1024 characters (the activity's name, kept with it), got 1025")) {
            try start(title: String(repeating: "x", count: 1025))
        }
    }

    /// Issue 45: values that can never be right are refused, values that lose something are named in a warning.
    @Test func silentDropsAreNamed() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func update(_ extra: String, activity: String = "") throws -> UpdateNotification {
            try LiveActivityRequests.update(try reader(#"{"live_activity_id": "A", "live_activity": {"event": "update", "content-state": {}\#(activity)}\#(extra)}"#), now: now)
        }
        #expect(throws: APIError.invalid("notifications[0].live_activity.stale-date",
                                         "1796366444000 seconds since 1970 is the year \(TagDate.civil(daysSince1970: 1_796_366_444_000 / 86_400).year): it looks like milliseconds; send seconds (1796366444)")) {
            try update("", activity: #", "stale-date": 1796366444000"#)
        }
        #expect(throws: APIError.invalid("notifications[0].live_activity.dismissal-date", "must be seconds since 1970, not negative, got -5")) {
            try update("", activity: #", "dismissal-date": -5"#)
        }
        #expect(try update("", activity: #", "dismissal-date": 0"#).dismissalDate == 0, "1970 is a past date: the card goes at once (U3)")
        #expect(try update(#", "ios_sound": "ding.caf""#).warnings
                == ["notifications[0].ios_sound: ignored: a sound plays with an alert only; give title, subtitle or content (U6)"])
        let blank = try update(#", "title": "Driver", "content": "   ""#)
        #expect(blank.alert == PushAlert(title: "Driver") && blank.warnings == ["notifications[0].content: only spaces, ignored: an alert shows no blank text"])
        let start = #"{"live_activity_id": "A", "devices": ["d"], "live_activity": {"content-state": {}, "attributes-type": "X", "attributes": {}}"#
        #expect(throws: APIError.invalid("notifications[0]", "content or title must be a non-empty string: they are the start push's alert (S2)")) {
            try LiveActivityRequests.start(try reader(start + #", "title": " ", "content": "\t "}"#), now: now)
        }
        #expect(LiveActivityRequests.unknownTargetsWarning(["g1", "g2"], of: 3, users: false, in: try reader("{}"))
                == "notifications[0].devices: 2 of 3 entries name no device of this application ('g1', 'g2'); nothing goes to them (S4)")
        #expect(LiveActivityRequests.unknownTargetsWarning((1...7).map { "u\($0)" }, of: 7, users: true, in: try reader("{}"))
                == "notifications[0].users: 7 of 7 entries name no device's User ID ('u1', 'u2', 'u3', 'u4', 'u5', …); nothing goes to them (S4)")
        #expect(LiveActivityRequests.unknownTargetsWarning([], of: 3, users: false, in: try reader("{}")) == nil)
    }

    @Test func anUpdatesSendDateAndAStartsEndDate() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)   // 2027-01-15 08:00 UTC
        let update = #"{"live_activity_id": "A", "live_activity": {"event": "update", "content-state": {}}, "send_date": "2027-01-15 09:30", "timezone": "Europe/Paris"}"#
        #expect(try LiveActivityRequests.update(try reader(update), now: now).sendTime == .at(now.addingTimeInterval(30 * 60)), "09:30 in Paris is 08:30 UTC")
        let plain = #"{"live_activity_id": "A", "live_activity": {"event": "end", "content-state": {}}}"#
        #expect(try LiveActivityRequests.update(try reader(plain), now: now).sendTime == .now)
        #expect(try LiveActivityRequests.update(try reader(plain), now: now).warnings.isEmpty)

        func start(_ fields: String) throws -> StartNotification {
            try LiveActivityRequests.start(try reader(#"{"title": "T", "live_activity": {"content-state": {}, "attributes-type": "T", "attributes": {}}, "live_activity_id": "A", "devices": ["d"]\#(fields)}"#), now: now)
        }
        #expect(try start(#", "end_date": "2027-01-15 16:00""#).endTime == now.addingTimeInterval(8 * 3600), "exactly 8 hours is allowed")
        #expect(try start(#", "send_date": "2027-01-15 12:00", "end_date": "2027-01-15 19:00""#).endTime == now.addingTimeInterval(11 * 3600),
                "8 hours from a scheduled start's own time")
        #expect(try start("").endTime == nil)
        #expect(throws: APIError.invalid("notifications[0].end_date", "2027-01-15 16:01 (UTC) is more than 8 hours after the start: iOS ends a Live Activity after 8 hours (A8)")) {
            try start(#", "end_date": "2027-01-15 16:01""#)
        }
        #expect(throws: APIError.invalid("notifications[0].timezone", "unknown time zone 'Mars/Olympus' (use an IANA name such as Europe/Lisbon)")) {
            try start(#", "end_date": "2027-01-15 09:00", "timezone": "Mars/Olympus""#)
        }
    }

}

@Suite("Joining an activity (D5), as a pure rule")
struct ActivityJoinRuleTests {
    @Test(arguments: [
        (ActivityJoinFacts(), false, true),
        (ActivityJoinFacts(known: true, startedByIslet: true), false, false),
        (ActivityJoinFacts(known: true, startedByIslet: true, targeted: true), false, true),
        (ActivityJoinFacts(known: true, startedByIslet: true), true, true),
        (ActivityJoinFacts(known: true, isMember: true), false, true),
        (ActivityJoinFacts(known: true), false, false),
        (ActivityJoinFacts(known: true, targeted: true), false, false),
    ])
    func decides(facts: ActivityJoinFacts, trusted: Bool, allowed: Bool) {
        let refusal = ActivityJoin.refusal(activityID: "A", facts: facts, trusted: trusted)
        #expect((refusal == nil) == allowed)
        if let refusal { #expect(refusal.code == .forbidden && refusal.message.hasSuffix("(D5)")) }
    }

    @Test func aServerMayRefusePhoneStartedActivities() {
        let unknown = ActivityJoinFacts()
        #expect(ActivityJoin.refusal(activityID: "A", facts: unknown, trusted: false, phoneStarted: .allow) == nil)
        let refused = ActivityJoin.refusal(activityID: "A", facts: unknown, trusted: false, phoneStarted: .refuse)
        #expect(refused?.message == "activity_id: this device may not join activity 'A': it was not started by startLiveActivity, and this server takes no phone-started activities (D5)")
        #expect(ActivityJoin.refusal(activityID: "A", facts: unknown, trusted: true, phoneStarted: .refuse) == nil, "the backend may still bind one")
        #expect(ActivityJoin.refusal(activityID: "A", facts: ActivityJoinFacts(known: true, startedByIslet: true, targeted: true), trusted: false,
                                     phoneStarted: .refuse) == nil)
    }
}
