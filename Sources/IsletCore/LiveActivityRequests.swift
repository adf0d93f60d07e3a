import Foundation
import Synchronization

/// The `event` of a Live Activity push (A4).
public struct LiveActivityEvent: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let start = Self(uncheckedRawValue: "start")
    public static let update = Self(uncheckedRawValue: "update")
    public static let end = Self(uncheckedRawValue: "end")
    public static let all = [start, update, end]
}

/// Who a start is for (S4).
public enum Targeting: Sendable, Equatable {
    case filter(String)
    case devices([String])
    case users([String])
}

/// When a start is sent (S5).
public enum SendTime: Sendable, Equatable {
    case now
    case at(Date)

    /// When it goes, asked at `now`.
    public func date(now: Date) -> Date {
        if case .at(let date) = self { date } else { now }
    }
}

/// An alert carried by a push: `aps.alert` (S2, U6).
public struct PushAlert: Sendable, Equatable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    /// `aps.alert.sound`: only ever inside the alert, never top-level `aps.sound` (U6).
    public var sound: String?

    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil, sound: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
    }

    public var json: JSONValue {
        var object = JSONObject()
        if let title { object["title"] = .string(title) }
        if let subtitle { object["subtitle"] = .string(subtitle) }
        if let body { object["body"] = .string(body) }
        if let sound { object["sound"] = .string(sound) }
        return .object(object)
    }
}

/// One validated notification of startLiveActivity (S1–S6).
public struct StartNotification: Sendable, Equatable {
    public let activityID: String
    /// `live_activity.title`: the activity's name (S1).
    public let name: String?
    public let attributesType: String
    public let contentState: JSONObject
    /// The caller's attributes with `pushwoosh.activityId` added (A4).
    public let attributes: JSONObject
    /// From `title` and `content`; at least one is set (S2).
    public let alert: PushAlert
    public let targeting: Targeting
    public let sendTime: SendTime
    public let priority: Int
    /// `live_activity.relevance-score` and `stale-date`, passed to `aps` as in an update (A4).
    public var relevanceScore: Int64? = nil
    public var staleDate: Int64? = nil
    /// `end_date`: when Islet sends the activity's end itself, with its latest content-state (A11).
    public var endTime: Date? = nil
    /// `renew`: Islet starts the activity again shortly before iOS ends it at 8 hours (A8).
    public var renew = false
    /// `channel`: the started activity listens to this broadcast channel (X5), on phones with iOS 18.
    public var channel: String? = nil
    /// `fallback_alert`: whether phones that cannot be started remotely (below iOS 17.2, or without a push-to-start
    /// token below it) get `title`/`content` as an ordinary alert (S7). On by default.
    public var fallbackAlert = true
    /// `android`: what the Android Live Update shows beyond `title` and `content` (issue 46).
    public var android: AndroidContent? = nil
    /// Fields ignored or read leniently, named for the answer's `warnings`.
    public var warnings: [String] = []
}

/// One validated notification of updateLiveActivity (U1–U6).
public struct UpdateNotification: Sendable, Equatable {
    public let activityID: String
    public let event: LiveActivityEvent
    public let contentState: JSONObject
    public let dismissalDate: Int64?
    public let relevanceScore: Int64?
    public let staleDate: Int64?
    /// nil: a silent content-state update (U6).
    public let alert: PushAlert?
    public let priority: Int
    /// `send_date`: now, or when Islet sends it (A11).
    public var sendTime: SendTime = .now
    /// `android`: what the Android Live Update shows beyond `title` and `content` (issue 46).
    public var android: AndroidContent? = nil
    /// Fields ignored or read leniently, named for the answer's `warnings`.
    public var warnings: [String] = []
}

/// Parsing and validation of the two Live Activity methods. Every error names the notification's
/// index and the field, and one bad notification rejects the whole request (E4).
public enum LiveActivityRequests {
    public static let maximumNotifications = 100
    public static let maximumListedTargets = 10_000

    /// S6/U5: 10 for ten, written as an integer, a number (10.0) or a string ("10"); anything else, or
    /// nothing, is 5 without an error, as Pushwoosh does — but a value other than 5 or 10 is named in a
    /// warning, so a typo does not silently cost the priority.
    public static func priority(_ n: FieldReader) -> (priority: Int, warning: String?) {
        let value = n.value("apns_priority")
        let number: Double?
        switch value {
        case nil, .null?: return (5, nil)
        case .int(let i)?: number = Double(i)
        case .double(let d)?: number = d
        case .string(let text)?: number = Double(text.trimmingCharacters(in: .whitespaces))
        default: number = nil
        }
        if number == 10 { return (10, nil) }
        if number == 5 { return (5, nil) }
        return (5, "\(n.fieldPath("apns_priority")): \(value!.jsonText) is neither 5 nor 10, so the push goes at priority 5 (S6)")
    }

    /// Fields a notification may carry, and those of its `live_activity`; anything else is named in a warning.
    static let startFields = ["live_activity", "live_activity_id", "title", "content", "filter", "filter_code", "devices", "users",
                              "send_date", "end_date", "renew", "channel", "timezone", "apns_priority", "dry_run", "fallback_alert", "android"]
    /// The longest `live_activity.title` of a start, in characters.
    public static let maximumActivityTitleLength = 1024
    static let startActivityFields = ["event", "title", "content-state", "attributes-type", "attributes", "relevance-score", "stale-date"]
    static let updateFields = ["live_activity", "live_activity_id", "channel", "title", "subtitle", "content", "ios_sound", "apns_priority",
                               "apns_expiration", "dry_run", "send_date", "timezone", "android"]
    static let updateActivityFields = ["event", "title", "content-state", "dismissal-date", "relevance-score", "stale-date"]

    /// Fields of Pushwoosh's ordinary messages that its Live Activities API does not take, and why they are ignored.
    static let notForLiveActivities: [String: String] = [
        "send_rate": "the send rate is not customisable for Live Activities; each push goes as soon as it is due",
    ]

    /// One warning per field of `object` that is not in `known`: why, for a Pushwoosh field Live Activities do not
    /// take; else with the nearest known name when there is one.
    public static func unknownFields(_ object: FieldReader, known: [String]) -> [String] {
        object.object.keys.filter { !known.contains($0) }.map { key in
            if let why = notForLiveActivities[key] { return "\(object.fieldPath(key)): ignored: \(why)" }
            let hint = Suggestion.nearest(key, among: known).map { " (did you mean \($0)?)" } ?? ""
            return "\(object.fieldPath(key)): unknown field, ignored\(hint)"
        }
    }

    /// The warning of a start (`n`) whose `devices` (or, with `users`, `users`) entries name no device: how many of
    /// `total`, and the first few; nil when every entry names one.
    public static func unknownTargetsWarning(_ unknown: [String], of total: Int, users: Bool, in n: FieldReader) -> String? {
        guard !unknown.isEmpty else { return nil }
        let shown = unknown.prefix(5).map { "'\($0.prefix(64))'" }.joined(separator: ", ") + (unknown.count > 5 ? ", …" : "")
        let what = users ? "name no device's User ID" : "name no device of this application"
        return "\(n.fieldPath(users ? "users" : "devices")): \(unknown.count) of \(total) entries \(what) (\(shown)); nothing goes to them (S4)"
    }

    /// `live_activity.relevance-score` (S1, U4): an integer of at least 1 when given.
    static func relevanceScore(_ activity: FieldReader) throws(APIError) -> Int64? {
        let relevance = try activity.int("relevance-score")
        if let relevance, relevance < 1 { throw .invalid(activity.fieldPath("relevance-score"), "must be an integer of at least 1") }
        return relevance
    }

    /// A notification's priority (S6/U5) and what it carried that Islet ignored or read leniently.
    static func priorityAndWarnings(_ n: FieldReader, _ activity: FieldReader, known: [String],
                                    activityKnown: [String]) -> (priority: Int, warnings: [String]) {
        let (priority, warning) = priority(n)
        return (priority, unknownFields(n, known: known) + unknownFields(activity, known: activityKnown) + [warning].compactMap { $0 })
    }

    /// X3: a dry run is asked beside `notifications` or inside them. Inside, every notification must agree
    /// (a request is sent whole or not at all), else it is refused rather than half sent.
    public static func dryRun(_ request: FieldReader, _ notifications: [FieldReader]) throws(APIError) -> Bool {
        if try request.bool("dry_run") == true { return true }
        var inside: [Bool] = []
        for n in notifications { inside.append(try n.bool("dry_run") ?? false) }
        guard inside.contains(true) else { return false }
        guard inside.allSatisfy({ $0 }) else {
            let dry = inside.indices.filter { inside[$0] }.map { "notifications[\($0)]" }.joined(separator: ", ")
            throw .invalid("dry_run", "set in \(dry) but not in every notification; a request is sent whole or not at all, so put \"dry_run\": true beside notifications (X3)")
        }
        return true
    }

    /// The `notifications` array, each item an object, with its path.
    public static func notifications(_ request: FieldReader) throws(APIError) -> [FieldReader] {
        guard let items = try request.array("notifications") else { throw .invalid("notifications", "is required: an array of notifications") }
        guard !items.isEmpty else { throw .invalid("notifications", "must hold at least one notification") }
        guard items.count <= maximumNotifications else {
            throw .invalid("notifications", "must hold at most \(maximumNotifications) notifications per request")
        }
        var readers: [FieldReader] = []
        for (index, item) in items.enumerated() { readers.append(try FieldReader(item, path: "notifications[\(index)]")) }
        return readers
    }

    /// Validates one startLiveActivity notification at `now`.
    public static func start(_ n: FieldReader, now: Date) throws(APIError) -> StartNotification {
        let activity = try n.requiredObject("live_activity", known: startFields)
        if let event = try activity.string("event"), event != LiveActivityEvent.start.rawValue {
            throw .invalid(activity.fieldPath("event"), "must be \"start\" in startLiveActivity (use updateLiveActivity for \"\(event)\")")
        }
        let contentState = try activity.requiredObject("content-state", known: startActivityFields).object
        let attributesType = try activity.requiredString("attributes-type", known: startActivityFields)
        var attributes = try activity.requiredObject("attributes", known: startActivityFields).object
        let activityID = try n.requiredString("live_activity_id", known: startFields)
        guard activityID.count <= 256 else { throw .invalid(n.fieldPath("live_activity_id"), "must be at most 256 characters") }

        // A4: the Pushwoosh SDK finds the activity's id in attributes.pushwoosh.activityId.
        switch attributes["pushwoosh"] {
        case nil, .null?:
            attributes["pushwoosh"] = ["activityId": .string(activityID)]
        case .object(var pushwoosh)?:
            if pushwoosh["activityId"] == nil {
                pushwoosh["activityId"] = .string(activityID)
                attributes["pushwoosh"] = .object(pushwoosh)
            }
        case let other?:
            throw .invalid(activity.fieldPath("attributes.pushwoosh"), "must be an object like {\"activityId\": \"...\"}, got \(other.typeName)")
        }

        var blank: [String] = []
        let title = try alertText(n, "title", blank: &blank), content = try alertText(n, "content", blank: &blank)
        guard title != nil || content != nil else {
            throw .invalid(n.path, "content or title must be a non-empty string: they are the start push's alert (S2)")
        }
        let alert = PushAlert(title: title, body: content)

        // The activity's name, kept with it (not in the payload, so Apple's size limit does not bound it).
        let name = try activity.string("title")
        if let name, name.count > maximumActivityTitleLength {
            throw .invalid(activity.fieldPath("title"), "must be at most \(maximumActivityTitleLength) characters (the activity's name, kept with it), got \(name.count)")
        }
        let relevance = try relevanceScore(activity)
        let (priority, warnings) = priorityAndWarnings(n, activity, known: startFields, activityKnown: startActivityFields)
        let sendTime = try sendTime(n, now: now)
        var start = StartNotification(
            activityID: activityID, name: name, attributesType: attributesType,
            contentState: contentState, attributes: attributes, alert: alert, targeting: try targeting(n),
            sendTime: sendTime, priority: priority, relevanceScore: relevance, staleDate: try activity.date("stale-date"))
        start.endTime = try endTime(n, startsAt: sendTime.date(now: now))
        start.renew = try n.bool("renew") ?? false
        start.fallbackAlert = try n.bool("fallback_alert") ?? true
        start.android = try AndroidContent.read(n)
        if n.value("channel") != nil { start.channel = try BroadcastChannels.name(n, field: "channel") }
        start.warnings = warnings + blank
        return start
    }

    /// A text of the push's alert; one of spaces only counts as absent, and is named in `blank` (issue 45: it would show
    /// as an empty line).
    static func alertText(_ n: FieldReader, _ key: String, blank: inout [String]) throws(APIError) -> String? {
        guard let text = try n.string(key), !text.isEmpty else { return nil }
        guard text.contains(where: { !$0.isWhitespace }) else {
            blank.append("\(n.fieldPath(key)): only spaces, ignored: an alert shows no blank text")
            return nil
        }
        return text
    }

    /// A11: `end_date` (`YYYY-MM-DD HH:mm` in `timezone`), after the start and within its 8 hours (A8).
    static func endTime(_ n: FieldReader, startsAt: Date) throws(APIError) -> Date? {
        guard let text = try n.string("end_date") else { return nil }
        let (zone, zoneLabel) = try timeZone(n)
        guard let date = Schedule.parse(text, in: zone) else {
            throw .invalid(n.fieldPath("end_date"), "must be a date and time as YYYY-MM-DD HH:mm, got '\(text)'")
        }
        guard date > startsAt else {
            throw .invalid(n.fieldPath("end_date"), "\(text) (\(zoneLabel)) is not after the start (\(startsAt.formatted(.iso8601))) (A11)")
        }
        guard date <= ActivityLifetime.endsBy(startedAt: startsAt) else {
            throw .invalid(n.fieldPath("end_date"), "\(text) (\(zoneLabel)) is more than 8 hours after the start: iOS ends a Live Activity after 8 hours (A8)")
        }
        return date
    }

    /// `timezone` (default UTC) and how error messages name it.
    static func timeZone(_ n: FieldReader) throws(APIError) -> (TimeZone, String) {
        guard let name = try n.string("timezone") else { return (TimeZone(identifier: "UTC")!, "UTC") }
        guard let zone = TimeZone(identifier: name) else {
            throw .invalid(n.fieldPath("timezone"), "unknown time zone '\(name)' (use an IANA name such as Europe/Lisbon)")
        }
        return (zone, name)
    }

    /// S4: exactly one of filter (or the older filter_code), devices, users.
    static func targeting(_ n: FieldReader) throws(APIError) -> Targeting {
        var found: [(String, Targeting)] = []
        for key in ["filter", "filter_code"] {
            if let name = try n.string(key) {
                guard !name.isEmpty else { throw .invalid(n.fieldPath(key), "must not be empty") }
                found.append((key, .filter(name)))
            }
        }
        for key in ["devices", "users"] {
            guard let list = try n.array(key) else { continue }
            guard !list.isEmpty else { throw .invalid(n.fieldPath(key), "must hold at least one entry") }
            guard list.count <= maximumListedTargets else { throw .invalid(n.fieldPath(key), "must hold at most \(maximumListedTargets) entries; use a filter") }
            var entries: [String] = []
            for (index, value) in list.enumerated() {
                guard case .string(let entry) = value, !entry.isEmpty else {
                    throw .invalid("\(n.fieldPath(key))[\(index)]", "must be a non-empty string")
                }
                entries.append(entry)
            }
            found.append((key, key == "devices" ? .devices(entries) : .users(entries)))
        }
        guard let first = found.first else {
            throw .invalid(n.path, "a target is required: filter or devices (or users) (S4)")
        }
        guard found.count == 1 else {
            throw .invalid(n.path, "give one target, not \(found.map(\.0).joined(separator: " and ")) (S4)")
        }
        return first.1
    }

    /// S5: "now" or `YYYY-MM-DD HH:mm` in `timezone` (default UTC), from 1 day ago to 30 days ahead.
    static func sendTime(_ n: FieldReader, now: Date) throws(APIError) -> SendTime {
        let (zone, zoneLabel) = try timeZone(n)
        guard let text = try n.string("send_date"), text != "now" else { return .now }
        guard let date = Schedule.parse(text, in: zone) else {
            throw .invalid(n.fieldPath("send_date"), "must be \"now\" or a date and time as YYYY-MM-DD HH:mm, got '\(text)'")
        }
        if date < now.addingTimeInterval(-Schedule.maximumPast) {
            throw .invalid(n.fieldPath("send_date"), "\(text) (\(zoneLabel)) is more than 1 day in the past (S5)")
        }
        if date > now.addingTimeInterval(Schedule.maximumFuture) {
            throw .invalid(n.fieldPath("send_date"), "\(text) (\(zoneLabel)) is more than 30 days in the future (S5)")
        }
        return date <= now ? .now : .at(date)
    }

    /// Validates one updateLiveActivity notification at `now`.
    public static func update(_ n: FieldReader, now: Date) throws(APIError) -> UpdateNotification {
        if n.value("apns_expiration") != nil {
            throw .invalid(n.fieldPath("apns_expiration"), "is for broadcasts to a channel (X5); an activity's pushes expire when Islet stops retrying them")
        }
        return try update(n, activityID: try n.requiredString("live_activity_id", known: updateFields), now: now)
    }

    /// X5: a notification with `channel` (an Islet channel name) instead of `live_activity_id`: one
    /// broadcast to every phone on the channel, under the same rules as an update (U3–U6), sent at once.
    /// `apns_expiration`: Apple's `apns-expiration` for the broadcast (Unix seconds; 0: not kept for phones that come
    /// online), checked against the channel's storage policy by `BroadcastChannels.expirationRefusal`.
    public static func broadcast(_ n: FieldReader, now: Date) throws(APIError) -> (channel: String, update: UpdateNotification, expiration: Int64?) {
        let channel = try BroadcastChannels.name(n, field: "channel")
        let expiration = try n.int("apns_expiration")
        if let expiration, expiration < 0 {
            throw .invalid(n.fieldPath("apns_expiration"), "must be 0 or a time in Unix seconds, got \(expiration)")
        }
        if n.value("live_activity_id") != nil {
            throw .invalid(n.fieldPath("live_activity_id"), "give live_activity_id or channel, not both: a channel reaches the phones subscribed to it (X5)")
        }
        if n.value("android") != nil {
            throw .invalid(n.fieldPath("android"), "a broadcast to a channel reaches iPhones only (X5); send Android phones their Live Update with live_activity_id")
        }
        let update = try update(n, activityID: "", now: now)
        guard update.sendTime == .now else { throw .invalid(n.fieldPath("send_date"), "a broadcast goes at once; leave send_date out with channel (X5)") }
        return (channel, update, expiration)
    }

    static func update(_ n: FieldReader, activityID: String, now: Date) throws(APIError) -> UpdateNotification {
        let activity = try n.requiredObject("live_activity", known: updateFields)
        guard let eventText = try activity.string("event") else { throw .invalid(activity.fieldPath("event"), "is required: \"update\" or \"end\"") }
        guard let event = LiveActivityEvent(rawValue: eventText), event != .start else {
            throw .invalid(activity.fieldPath("event"), "must be \"update\" or \"end\" (start with startLiveActivity)")
        }
        let contentState = try activity.requiredObject("content-state", known: updateActivityFields).object
        let relevance = try relevanceScore(activity)

        // U6: any of content/title/subtitle makes it an alert; older revisions put the title in live_activity.
        var blank: [String] = []
        var title = try alertText(n, "title", blank: &blank)
        if title == nil && n.value("title") == nil { title = try alertText(activity, "title", blank: &blank) }
        let subtitle = try alertText(n, "subtitle", blank: &blank), body = try alertText(n, "content", blank: &blank)
        let sound = try n.string("ios_sound").flatMap { $0.isEmpty ? nil : $0 }
        let alerting = title != nil || subtitle != nil || body != nil
        let alert = alerting ? PushAlert(title: title, subtitle: subtitle, body: body, sound: sound) : nil
        if sound != nil && !alerting {
            blank.append("\(n.fieldPath("ios_sound")): ignored: a sound plays with an alert only; give title, subtitle or content (U6)")
        }

        var (priority, warnings) = priorityAndWarnings(n, activity, known: updateFields, activityKnown: updateActivityFields)
        warnings += blank
        var update = UpdateNotification(
            activityID: activityID, event: event, contentState: contentState, dismissalDate: try activity.date("dismissal-date"),
            relevanceScore: relevance, staleDate: try activity.date("stale-date"), alert: alert, priority: priority)
        update.sendTime = try sendTime(n, now: now)
        update.android = try AndroidContent.read(n)
        update.warnings = warnings
        return update
    }
}

/// Scheduled sends (S5).
public enum Schedule {
    public static let maximumPast: TimeInterval = 86_400
    public static let maximumFuture: TimeInterval = 30 * 86_400

    /// `YYYY-MM-DD HH:mm` as an instant in `zone`; nil for any other shape or an impossible date.
    public static func parse(_ text: String, in zone: TimeZone) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 16, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x20, bytes[13] == 0x3A else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard bytes[range].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int(String(decoding: bytes[range], as: UTF8.self))
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), hour < 24, minute < 60 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute)
        guard let date = calendar.date(from: components) else { return nil }
        // Reject dates the calendar would roll over (2026-02-30 → March 2).
        let back = calendar.dateComponents([.year, .month, .day], from: date)
        guard back.year == year, back.month == month, back.day == day else { return nil }
        return date
    }
}

/// Message codes, `XXXXX-XXXXXXXX-XXXXXXXX` (E5): the first 13 characters are a stamp, the nanosecond the code
/// was made (base 36, digits in byte order, each stamp above the last one this process gave), the last 8 are
/// random (codes of several nodes made in one nanosecond still differ). So a new code sorts after the codes made
/// before it: the index that keeps codes unique takes it on its last leaf page. Random codes landed on a random
/// page each, and every update's commit wrote a page of that index of its own.
public enum MessageCode {
    static let randomDigits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
    static let orderedDigits = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    /// The last stamp given out by this process.
    private static let lastStamp = Atomic<UInt64>(0)

    /// A new code, made now.
    public static func next() -> String {
        var generator = SystemRandomNumberGenerator()
        return code(stamp: nextStamp(at: Date()), using: &generator)
    }

    /// The stamp of a code made at `date`: its nanoseconds since 1970, or one more than the last stamp given
    /// out when that is not less (several codes in one nanosecond, or the clock set back).
    static func nextStamp(at date: Date) -> UInt64 {
        let nanoseconds = date.timeIntervalSince1970 * 1e9
        // Clamped: a date past 2554 (or infinite) does not fit, and would trap.
        let now = !(nanoseconds > 0) ? 0 : nanoseconds < 1.8e19 ? UInt64(nanoseconds) : UInt64.max / 2
        var last = lastStamp.load(ordering: .relaxed)
        while true {
            let stamp = max(now, last &+ 1)
            let (exchanged, original) = lastStamp.compareExchange(expected: last, desired: stamp, ordering: .relaxed)
            if exchanged { return stamp }
            last = original
        }
    }

    /// The code of `stamp`; its random part is one draw of 8 base-36 digits (36^8 < 2^64, uniform by rejection),
    /// not a draw per character: each draw of the system generator is a system call.
    static func code<G: RandomNumberGenerator>(stamp: UInt64, using generator: inout G) -> String {
        var bytes = [UInt8](repeating: UInt8(ascii: "-"), count: 23)
        var rest = stamp
        // 13 base-36 digits hold any UInt64 (36^13 > 2^64), the most significant first.
        for index in [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13].reversed() {
            bytes[index] = orderedDigits[Int(rest % 36)]
            rest /= 36
        }
        var random = UInt64.random(in: 0..<(36 * 36 * 36 * 36 * 36 * 36 * 36 * 36), using: &generator)
        for index in 15..<23 {
            bytes[index] = randomDigits[Int(random % 36)]
            random /= 36
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
