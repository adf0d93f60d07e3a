import Foundation

/// The optional `android` object of a startLiveActivity or updateLiveActivity notification (issue 46): what the Android
/// Live Update shows beyond what `title` and `content` give it. Every field is optional; an unknown one is refused.
public struct AndroidContent: Sendable, Equatable {
    /// The notification's title; else the notification's `title`, else (a start) the activity's name.
    public var title: String?
    /// Its text; else the notification's `content`.
    public var text: String?
    public var progress: Int?
    public var progressIndeterminate: Bool?
    public var progressBar: Bool?
    public var segments: [AndroidLiveUpdate.Segment] = []
    /// Seconds since 1970, as every date of the API (the SDK takes milliseconds; Islet converts).
    public var when: Int64?
    public var chronometer: Bool?
    public var chronometerCountDown: Bool?
    public var showWhen: Bool?
    public var extras: JSONObject?

    public init() {}

    static let fields = ["title", "text", "progress", "progress_indeterminate", "progress_bar", "segments", "when", "chronometer",
                         "chronometer_count_down", "show_when", "extras"]
    /// The SDK's `#RRGGBB` or `#AARRGGBB`.
    static let colorRule = "must be a color as #RRGGBB or #AARRGGBB"

    /// The `android` object of the notification `n`; nil when it has none.
    public static func read(_ n: FieldReader) throws(APIError) -> AndroidContent? {
        guard let android = try n.objectField("android") else { return nil }
        return try read(object: android)
    }

    /// The fields of `android`, an object of this shape (also a Pushwoosh `live_update` without its `op` and `id`).
    static func read(object android: FieldReader) throws(APIError) -> AndroidContent? {
        if let unknown = android.object.keys.first(where: { !fields.contains($0) }) {
            let hint = Suggestion.nearest(unknown, among: fields).map { " (did you mean \($0)?)" } ?? ""
            throw .invalid(android.fieldPath(unknown), "unknown field\(hint); an android object holds \(fields.joined(separator: ", "))")
        }
        var content = AndroidContent()
        content.title = try android.string("title").flatMap { $0.isEmpty ? nil : $0 }
        content.text = try android.string("text").flatMap { $0.isEmpty ? nil : $0 }
        if let progress = try android.int("progress") {
            guard progress >= 0, progress <= Int64(Int32.max) else {
                throw .invalid(android.fieldPath("progress"), "must be an integer from 0, got \(progress)")
            }
            content.progress = Int(progress)
        }
        content.progressIndeterminate = try android.bool("progress_indeterminate")
        content.progressBar = try android.bool("progress_bar")
        for (index, value) in (try android.array("segments") ?? []).enumerated() {
            let segment = try FieldReader(value, path: android.fieldPath("segments[\(index)]"))
            let color = try segment.requiredString("color")
            guard isColor(color) else { throw .invalid(segment.fieldPath("color"), "\(colorRule), got \(color)") }
            let length = try segment.int("length") ?? 1
            guard length >= 1, length <= Int64(Int32.max) else {
                throw .invalid(segment.fieldPath("length"), "must be an integer of at least 1, got \(length)")
            }
            content.segments.append(.init(color: color, length: Int(length)))
        }
        content.when = try android.date("when")
        content.chronometer = try android.bool("chronometer")
        content.chronometerCountDown = try android.bool("chronometer_count_down")
        content.showWhen = try android.bool("show_when")
        content.extras = try android.objectField("extras")?.object
        return content
    }

    static func isColor(_ text: String) -> Bool {
        let digits = text.utf8.dropFirst()
        return text.hasPrefix("#") && (digits.count == 6 || digits.count == 8) && digits.allSatisfy { $0.isHexDigit }
    }
}

extension UInt8 {
    var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}

extension AndroidLiveUpdate {
    /// FCM's limit on a message's `data`, keys and values together.
    public static let maximumDataBytes = 4096

    /// The Live Update of a message (issue 46): `operation` from its event, keyed by the activity's id, reported back with
    /// the message's code; the title and text from `android` first, then the notification's `title` and `content`. A
    /// progress bar shows only when the notification asks for one (progress, segments or an indeterminate bar).
    public init(operation: Operation, activityID: String, messageCode: String, title: String?, text: String?, android: AndroidContent?) {
        self.init(operation: operation, id: activityID, title: android?.title ?? title, text: android?.text ?? text, hash: messageCode)
        guard let android else {
            progressBar = false
            return
        }
        progress = android.progress
        progressIndeterminate = android.progressIndeterminate
        segments = android.segments
        let asksForBar = android.progress != nil || !android.segments.isEmpty || android.progressIndeterminate == true
        progressBar = android.progressBar ?? (asksForBar ? nil : false)
        when = android.when.map { $0 * 1000 }
        chronometer = android.chronometer
        chronometerCountDown = android.chronometerCountDown
        showWhen = android.showWhen
        extras = android.extras
    }

    /// A start's Live Update: titled with `android.title`, the start's `title`, or the activity's name.
    public static func start(_ start: StartNotification, messageCode: String, android: AndroidContent?) -> AndroidLiveUpdate {
        AndroidLiveUpdate(operation: .start, activityID: start.activityID, messageCode: messageCode, title: start.alert.title ?? start.name,
                          text: start.alert.body, android: android)
    }

    /// An update's or end's Live Update (an end dismisses the notification: only its `op` and `id` count).
    public static func update(_ update: UpdateNotification, messageCode: String, android: AndroidContent?) -> AndroidLiveUpdate {
        AndroidLiveUpdate(operation: update.event == .end ? .end : .update, activityID: update.activityID, messageCode: messageCode,
                          title: update.alert?.title, text: update.alert?.body, android: android)
    }

    /// The `data` as stored and sent: a JSON object of strings.
    public var dataBytes: [UInt8] { JSONValue.object(JSONObject(data.map { (key: $0.key, value: JSONValue.string($0.value)) })).jsonBytes }

    /// What FCM counts of a message's `data` against its 4,096 bytes: its keys and values, not the JSON around them.
    public static func dataSize(_ data: JSONObject) -> Int {
        data.entries.reduce(0) { $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? 0) }
    }

    /// Refuses `data` past FCM's 4,096 bytes, naming the notification at `path`.
    public static func checkSize(_ data: [UInt8], path: String) throws(APIError) {
        guard let object = (try? JSONParser.parse(data))?.objectValue else { return }
        let size = dataSize(object)
        guard size <= maximumDataBytes else {
            throw .invalid(path.isEmpty ? "android" : "\(path).android", "the Android Live Update's data is \(size) bytes; FCM takes at most \(maximumDataBytes) (keys and values): shorten the title, text or extras")
        }
    }
}

/// What an Android phone is sent of a message's stored Live Update `data` (issue 46).
public enum AndroidPush {
    /// The Live Update as stored, for Android 16 and later, with the title and text it lacks taken from `earlier` (the
    /// activity's earlier messages' data, newest first): the SDK draws the notification anew from each push, so an
    /// update that gives no title or text keeps those last sent.
    public static func liveUpdate(_ data: [UInt8], carrying earlier: [[UInt8]] = []) -> [UInt8] {
        guard var object = (try? JSONParser.parse(data))?.objectValue, object["header"] == nil || object["title"] == nil else { return data }
        for previous in earlier {
            guard let old = (try? JSONParser.parse(previous))?.objectValue else { continue }
            for key in ["header", "title"] where object[key] == nil { object[key] = old[key] }
        }
        // Checked at acceptance without them: what they would push past FCM's limit is not carried.
        guard AndroidLiveUpdate.dataSize(object) <= AndroidLiveUpdate.maximumDataBytes else { return data }
        return JSONValue.object(Self.ordered(object)).jsonBytes
    }

    /// Whether the stored data lacks a title or text that an earlier message may give.
    public static func lacksTexts(_ data: [UInt8]) -> Bool {
        guard let object = (try? JSONParser.parse(data))?.objectValue else { return false }
        return object["header"] == nil || object["title"] == nil
    }

    /// An ordinary notification of the same title and text, for Android below 16, where the SDK drops Live Updates: the
    /// data without `pw_live`; nil when it has neither title nor text to show.
    public static func notification(_ data: [UInt8]) -> [UInt8]? {
        guard var object = (try? JSONParser.parse(data))?.objectValue, object["header"] != nil || object["title"] != nil else { return nil }
        object["pw_live"] = nil
        return JSONValue.object(object).jsonBytes
    }

    /// The SDK's keys in the order `AndroidLiveUpdate.data` writes them.
    static func ordered(_ object: JSONObject) -> JSONObject {
        let order = ["pw_msg", "header", "title", "p", "pw_live"]
        var entries: [(key: String, value: JSONValue)] = order.compactMap { key in object[key].map { (key, $0) } }
        entries += object.entries.filter { !order.contains($0.key) }
        return JSONObject(entries)
    }

    /// Android 16, the first with Live Updates (API 36); the SDK below it drops them.
    public static let liveUpdatesFrom = VersionKey.make("16")!

    /// Whether an Android phone of `osVersion` shows Live Updates; an unknown version is taken for one that does.
    public static func showsLiveUpdates(osVersion: String?) -> Bool {
        guard let version = osVersion.flatMap(VersionKey.make) else { return true }
        return version >= liveUpdatesFrom
    }
}
