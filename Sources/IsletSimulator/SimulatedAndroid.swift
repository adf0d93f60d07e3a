import Foundation
import IsletCore

/// One Live Update on a simulated Android phone's notification shade (issue 46): what the Pushwoosh Android SDK draws
/// from the last push of its `id`.
public struct SimulatedLiveUpdate: Codable, Sendable, Equatable {
    public var id: String
    /// `header`: the notification's title (the app's name when the push has none).
    public var title: String
    /// The SDK's `title`: the notification's text.
    public var text: String?
    public var progress: Int?
    public var progressIndeterminate: Bool
    public var progressBar: Bool
    /// `pw_live.segments`, as received (JSON text).
    public var segments: String?
    /// Milliseconds since 1970.
    public var when: Int64?
    public var chronometer: Bool
    public var updatedAt: Double
}

/// A simulated Android phone (issue 46): a `SimulatedDevice` whose `platform` is `android`, whose push token is an FCM
/// registration token and whose `iosVersion` holds its Android release. It applies what the Pushwoosh Android SDK
/// (6.9.2+) does with an FCM data message, silently dropping what the SDK drops.
extension SimulatedDevice {
    public var isAndroid: Bool { platform == DevicePlatform.android.rawValue }

    /// FCM's per-device limit: about 240 messages a minute to one phone, past which it answers QUOTA_EXCEEDED.
    public static let fcmMessagesPerMinute = 240

    /// Counts a message FCM takes for this phone; false when the phone's minute is full (QUOTA_EXCEEDED).
    public mutating func admitFCMMessage(now: Date) -> Bool {
        let recent = (recentFCM ?? []).filter { now.timeIntervalSince1970 - $0 < 60 }
        guard recent.count < Self.fcmMessagesPerMinute else {
            recentFCM = recent
            return false
        }
        recentFCM = recent + [now.timeIntervalSince1970]
        return true
    }

    /// Applies an FCM data message as the SDK would, and logs it.
    public mutating func receiveFCM(data: JSONObject, messageID: String, now: Date) {
        let liveText = data["pw_live"]?.stringValue
        let live = liveText.flatMap { try? JSONParser.parse(Array($0.utf8)).objectValue }
        var entry = SimulatedPush(at: now.timeIntervalSince1970, apnsID: messageID, pushType: liveText == nil ? .androidNotification : .liveUpdate,
                                  event: live?["op"]?.stringValue, priority: 10, dropped: nil, payload: JSONValue.object(data).jsonText)
        defer {
            log.append(entry)
            if log.count > Self.logLimit { log.removeFirst(log.count - Self.logLimit) }
        }
        guard data["pw_msg"] != nil else { entry.dropped = "not a Pushwoosh push (no pw_msg): the SDK ignores it"; return }
        let title = data["header"]?.stringValue ?? "App", text = data["title"]?.stringValue
        guard let liveText else {
            alerts.append([title, text].compactMap { $0 }.joined(separator: ": "))
            return
        }
        guard VersionKey.make(iosVersion).map({ $0 >= AndroidPush.liveUpdatesFrom }) ?? true else {
            entry.dropped = "Android \(iosVersion) has no Live Updates: the SDK drops the push (no renderer below API 36)"
            return
        }
        guard let live else { entry.dropped = "pw_live is not valid JSON: the SDK drops the push (\(liveText.prefix(64)))"; return }
        guard let op = live["op"]?.stringValue.flatMap(AndroidLiveUpdate.Operation.init(rawValue:)),
              let id = live["id"]?.stringValue, !id.isEmpty else {
            entry.dropped = "missing or invalid op / id in pw_live: the SDK drops the push"
            return
        }
        var shade = liveUpdates ?? []
        let index = shade.firstIndex { $0.id == id }
        if op == .end {
            if let index { shade.remove(at: index) } else { entry.dropped = "no Live Update \(id) on the shade to end" }
            liveUpdates = shade
            return
        }
        let update = SimulatedLiveUpdate(
            id: id, title: title, text: text, progress: live["progress"]?.intValue.map { Int($0) },
            progressIndeterminate: live["progress_indeterminate"]?.boolValue ?? false, progressBar: live["progress_bar"]?.boolValue ?? true,
            segments: live["segments"].map { $0.jsonText }, when: live["when"]?.intValue, chronometer: live["chronometer"]?.boolValue ?? false,
            updatedAt: now.timeIntervalSince1970)
        if let index { shade[index] = update } else { shade.append(update) }
        liveUpdates = shade
    }

    /// The notification shade's Live Updates, newest first.
    public var shadeJSON: JSONValue {
        .array((liveUpdates ?? []).sorted { $0.updatedAt > $1.updatedAt }.map { update in
            [
                "id": .string(update.id), "title": .string(update.title), "text": update.text.map { .string($0) } ?? .null,
                "progress": update.progress.map { .int(Int64($0)) } ?? .null, "progress_indeterminate": .bool(update.progressIndeterminate),
                "progress_bar": .bool(update.progressBar), "segments": update.segments.flatMap { try? JSONParser.parse(Array($0.utf8)) } ?? .array([]),
                "when": update.when.map { .int($0) } ?? .null, "chronometer": .bool(update.chronometer),
            ]
        })
    }
}
