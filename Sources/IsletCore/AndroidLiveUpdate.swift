import Foundation

/// An Android Live Update (Android 16's promoted ongoing notification, issue 46) as the Pushwoosh Android SDK renders
/// it (6.9.2 and later, module `pushwoosh-liveupdates`): the `data` of an FCM data message, every value a string.
/// The SDK handles a push only when it carries `pw_msg`; a Live Update is the JSON text of `pw_live`, whose `op` and
/// `id` it requires (a push whose `op`, `id` or JSON is wrong is dropped without a word, and so is every Live Update
/// below Android 16). The notification's title is `header` (the app's name when absent) and its text is `title`;
/// `p` is the hash the SDK reports the delivery with. One `id` is one notification, refreshed in place.
public struct AndroidLiveUpdate: Sendable, Equatable {
    /// `op`: the SDK matches the full names exactly.
    public enum Operation: String, Sendable, CaseIterable {
        case start = "OPERATION_START"
        case update = "OPERATION_UPDATE"
        case end = "OPERATION_END"
    }

    /// A stretch of the progress bar: `length` of the bar's whole (the sum of the lengths) in `color`.
    public struct Segment: Sendable, Equatable {
        /// `#RRGGBB` or `#AARRGGBB` (a segment whose color Android cannot parse is skipped by the SDK).
        public var color: String
        /// At least 1 (the SDK raises a smaller one to 1).
        public var length: Int

        public init(color: String, length: Int) {
            self.color = color
            self.length = length
        }
    }

    public var operation: Operation
    /// The notification's key: the Live Activity's `live_activity_id`.
    public var id: String
    /// The notification's title (`header`).
    public var title: String?
    /// Its text (the SDK's `title`).
    public var text: String?
    /// The message's code, reported back by the SDK with its delivery (`p`).
    public var hash: String?
    /// Progress along the segments' total length.
    public var progress: Int?
    public var progressIndeterminate: Bool?
    /// False: no progress bar at all.
    public var progressBar: Bool?
    public var segments: [Segment] = []
    /// The time the header shows, and a chronometer counts from (milliseconds since 1970).
    public var when: Int64?
    public var chronometer: Bool?
    public var chronometerCountDown: Bool?
    public var showWhen: Bool?
    /// Passed to the app's own style provider, if it has one.
    public var extras: JSONObject?

    public init(operation: Operation, id: String, title: String? = nil, text: String? = nil, hash: String? = nil) {
        self.operation = operation
        self.id = id
        self.title = title
        self.text = text
        self.hash = hash
    }

    /// The `pw_live` object: `op` and `id`, then each field set. An end carries only `op` and `id`, as the SDK
    /// reads nothing else of it (it dismisses the notification).
    public var liveObject: JSONObject {
        var fields: [(key: String, value: JSONValue)] = [("op", .string(operation.rawValue)), ("id", .string(id))]
        guard operation != .end else { return JSONObject(fields) }
        if let progress { fields.append(("progress", .int(Int64(progress)))) }
        if let progressIndeterminate { fields.append(("progress_indeterminate", .bool(progressIndeterminate))) }
        if let progressBar { fields.append(("progress_bar", .bool(progressBar))) }
        if !segments.isEmpty {
            fields.append(("segments", .array(segments.map { .object(["color": .string($0.color), "length": .int(Int64($0.length))]) })))
        }
        if let when { fields.append(("when", .int(when))) }
        if let chronometer { fields.append(("chronometer", .bool(chronometer))) }
        if let chronometerCountDown { fields.append(("chronometer_count_down", .bool(chronometerCountDown))) }
        if let showWhen { fields.append(("show_when", .bool(showWhen))) }
        if let extras { fields.append(("extras", .object(extras))) }
        return JSONObject(fields)
    }

    /// The FCM message's `data`, in this order: `pw_msg` ("1", as every Pushwoosh push), `header`, `title`, `p` when
    /// set, and `pw_live`.
    public var data: [(key: String, value: String)] {
        var data: [(key: String, value: String)] = [("pw_msg", "1")]
        if let title { data.append(("header", title)) }
        if let text { data.append(("title", text)) }
        if let hash { data.append(("p", hash)) }
        data.append(("pw_live", JSONValue.object(liveObject).jsonText))
        return data
    }
}
