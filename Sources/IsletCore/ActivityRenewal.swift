import Foundation

/// A8, `renew: true` on a start: iOS ends a Live Activity after 8 hours, so shortly before, Islet ends the
/// card and starts it again by push-to-start, with the activity's latest content-state, under the same id
/// and to the same audience; the new session is renewed the same way until the activity is ended.
public enum ActivityRenewal {
    /// How long before iOS's 8 hours the activity is renewed: room for an APNs hiccup or a busy queue.
    public static let lead: TimeInterval = 15 * 60

    /// When a session started at `startedAt` (or due to start then) is renewed.
    public static func dueAt(startedAt: Date) -> Date {
        ActivityLifetime.endsBy(startedAt: startedAt).addingTimeInterval(-lead)
    }

    /// The old card's end: its latest state, dismissed at once, without an alert, so the new card
    /// does not appear beside it.
    public static func endPayload(contentState: JSONObject, timestamp: Int64) -> JSONValue {
        ["aps": ["timestamp": .int(timestamp), "event": .string(LiveActivityEvent.end.rawValue), "content-state": .object(contentState),
                 "dismissal-date": .int(timestamp)]]
    }

    /// The new start: the session's push-to-start payload with the latest content-state and a new
    /// timestamp; a `stale-date` already past is left out, or the new card would show stale at once.
    /// nil when `original` is not a start payload.
    public static func startPayload(original: [UInt8], contentState: JSONObject, timestamp: Int64) -> [UInt8]? {
        guard var payload = (try? JSONParser.parse(original))?.objectValue, var aps = payload["aps"]?.objectValue,
              aps["event"]?.stringValue == LiveActivityEvent.start.rawValue else { return nil }
        aps["content-state"] = .object(contentState)
        aps["timestamp"] = .int(timestamp)
        if let stale = aps["stale-date"]?.intValue, stale <= timestamp { aps["stale-date"] = Optional<JSONValue>.none }
        payload["aps"] = .object(aps)
        return JSONValue.object(payload).jsonBytes
    }
}
