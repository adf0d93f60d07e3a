import Foundation

/// Pushwoosh's Messaging API v2 (`POST /messaging/v2/notify`) as Islet takes it (issue 46): the request with which
/// Pushwoosh's own documentation starts, updates and ends an Android Live Update. A `segment` notify for Android whose
/// content (`payload.content.localized_content.<locale>.android`) carries `title`, `body` and a `live_update` object
/// (`op`, `id` and the Live Update's fields), to the devices of an Islet filter (`code`) or of the whole application
/// (`expression` `A("<code>")`), now or at `schedule.at`. So a Pushwoosh user's server code runs against Islet as it is.
public struct PushwooshNotify: Sendable, Equatable {
    public enum Audience: Sendable, Equatable {
        /// `A("<code>")`: every Android phone of the application.
        case application
        /// `code`: an Islet filter, by name.
        case filter(String)
    }

    public let operation: AndroidLiveUpdate.Operation
    /// `live_update.id`: the Live Update's key, which is the activity's `live_activity_id` in Islet.
    public let activityID: String
    public let title: String?
    public let body: String?
    public let android: AndroidContent
    public let audience: Audience
    /// `schedule.at`; nil: now.
    public let sendAt: Date?
    /// Where its `live_update` was (with the locale read), for the errors found after parsing.
    public var livePath = "\(content).default.android.live_update"

    /// The attributes type Islet keeps for an activity started this way (it has no iOS side).
    public static let attributesType = "PushwooshLiveUpdate"
    /// Where a request's fields are, for error messages.
    static let content = "segment.payload.content.localized_content"

    /// Reads the request `document` of the application `application` at `now`; every error names the field and the rule.
    public static func parse(_ document: JSONValue, application: ApplicationCode, now: Date) throws(APIError) -> PushwooshNotify {
        let root = try FieldReader(document, path: "")
        if root.value("transactional") != nil {
            throw .invalid("transactional", "Islet takes a segment notify for Live Updates (segment.code names an Islet filter, segment.expression A(\"\(application)\") every device); to name devices or users, use startLiveActivity's devices or users")
        }
        guard let segment = try root.objectField("segment") else { throw .invalid("segment", "is required: Islet takes a segment notify for Live Updates") }
        if let code = try segment.string("application"), code != application.rawValue {
            throw APIError(.unauthorized, "segment.application: the token is not one of application \(code.prefix(64))")
        }
        let platforms = try (segment.array("platforms") ?? []).map { $0.stringValue ?? "" }
        guard platforms.contains("ANDROID") else {
            throw .invalid("segment.platforms", "must include ANDROID: a live_update reaches Android phones (iPhones take startLiveActivity)")
        }
        let audience = try Self.audience(segment, application: application)
        let sendAt = try Self.sendAt(segment, now: now)

        guard let payload = try segment.objectField("payload") else { throw .invalid("segment.payload", "is required") }
        if try payload.bool("silent") == true { throw .invalid("segment.payload.silent", "a Live Update is shown: send content, not a silent push") }
        guard let locales = try payload.objectField("content")?.objectField("localized_content"), !locales.object.isEmpty else {
            throw .invalid(content, "is required: {\"default\": {\"android\": {\"title\", \"body\", \"live_update\"}}}")
        }
        // The locale a device without a match gets: "default", else "en", else the first (Pushwoosh's order past an exact match).
        let locale = ["default", "en"].first { locales.value($0) != nil } ?? locales.object.keys[0]
        guard let android = try locales.requiredObject(locale).objectField("android") else {
            throw .invalid("\(content).\(locale).android", "is required: the Android content with its live_update")
        }
        let live = try android.requiredObject("live_update")
        let known = ["op", "id"] + AndroidContent.fields.filter { $0 != "title" && $0 != "text" }
        if let unknown = live.object.keys.first(where: { !known.contains($0) }) {
            let hint = Suggestion.nearest(unknown, among: known).map { " (did you mean \($0)?)" } ?? ""
            throw .invalid(live.fieldPath(unknown), "unknown field\(hint); a live_update holds \(known.joined(separator: ", "))")
        }
        let opText = try live.requiredString("op")
        guard let operation = AndroidLiveUpdate.Operation(rawValue: opText) else {
            throw .invalid(live.fieldPath("op"), "must be OPERATION_START, OPERATION_UPDATE or OPERATION_END, got '\(opText.prefix(64))'")
        }
        let id = try live.requiredString("id")
        guard id.count <= 256 else { throw .invalid(live.fieldPath("id"), "must be at most 256 characters") }
        // Pushwoosh's API is protobuf's JSON: its integers may come as strings, and `when` is in milliseconds.
        var fields = live.object
        fields["op"] = nil
        fields["id"] = nil
        for key in ["progress", "when"] {
            if let text = fields[key]?.stringValue, let number = Int64(text) { fields[key] = .int(number) }
        }
        if let when = fields["when"]?.intValue { fields["when"] = .int(when / 1000) }
        if let segments = fields["segments"]?.arrayValue {
            fields["segments"] = .array(segments.map { segment in
                guard var object = segment.objectValue, let text = object["length"]?.stringValue, let length = Int64(text) else { return segment }
                object["length"] = .int(length)
                return .object(object)
            })
        }
        let content = try AndroidContent.read(object: FieldReader(fields, path: live.path)) ?? AndroidContent()
        var notify = PushwooshNotify(operation: operation, activityID: id, title: try android.string("title").flatMap { $0.isEmpty ? nil : $0 },
                                     body: try android.string("body").flatMap { $0.isEmpty ? nil : $0 }, android: content, audience: audience,
                                     sendAt: sendAt)
        notify.livePath = live.path
        return notify
    }

    static func audience(_ segment: FieldReader, application: ApplicationCode) throws(APIError) -> Audience {
        if segment.value("filter_expression") != nil {
            throw .invalid("segment.filter_expression", "not taken by Islet: name an Islet filter in segment.code, or A(\"\(application)\") in segment.expression")
        }
        let code = try segment.string("code"), expression = try segment.string("expression")
        switch (code, expression) {
        case (let name?, nil): return .filter(name)
        case (nil, let text?):
            let compact = text.filter { !$0.isWhitespace }
            guard compact == "A(\"\(application)\")" || compact.hasPrefix("A(\"\(application)\",[") && compact.hasSuffix("])") else {
                throw .invalid("segment.expression", "Islet takes A(\"\(application)\") (every device of the application); for others, name an Islet filter in segment.code")
            }
            return .application
        case (nil, nil): throw .invalid("segment", "give segment.code (an Islet filter's name) or segment.expression (A(\"\(application)\"))")
        default: throw .invalid("segment", "give segment.code or segment.expression, not both")
        }
    }

    /// `schedule.at` (RFC 3339) within Islet's bounds for a send time (S5); none, or a time already here, is now.
    static func sendAt(_ segment: FieldReader, now: Date) throws(APIError) -> Date? {
        guard let schedule = try segment.objectField("schedule"), let text = try schedule.string("at") else { return nil }
        guard let date = try? Date(text, strategy: .iso8601) else {
            throw .invalid("segment.schedule.at", "must be a time as RFC 3339, such as 2026-06-02T12:00:00Z, got '\(text.prefix(64))'")
        }
        guard date.timeIntervalSince(now) <= Schedule.maximumFuture else {
            throw .invalid("segment.schedule.at", "\(text) is more than 30 days in the future (S5)")
        }
        guard now.timeIntervalSince(date) <= Schedule.maximumPast else { throw .invalid("segment.schedule.at", "\(text) is more than 1 day in the past (S5)") }
        return date > now ? date : nil
    }
}
