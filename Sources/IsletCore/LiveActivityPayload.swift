/// The `aps` payloads Islet sends, exactly as Apple's ActivityKit contract describes them (A4).
public enum LiveActivityPayload {
    /// APNs refuses larger payloads; Islet refuses them at the API first (A4).
    public static let maximumBytes = 4096

    /// The push-to-start payload: event start, content-state, attributes-type, attributes, alert.
    public static func start(_ n: StartNotification, timestamp: Int64) -> JSONValue {
        var aps: JSONObject = [
            "timestamp": .int(timestamp),
            "event": "start",
            "content-state": .object(n.contentState),
            "attributes-type": .string(n.attributesType),
            "attributes": .object(n.attributes),
            "alert": n.alert.json,
        ]
        if let score = n.relevanceScore { aps["relevance-score"] = .int(score) }
        if let stale = n.staleDate { aps["stale-date"] = .int(stale) }
        return ["aps": .object(aps)]
    }

    /// The plain alert for devices below iOS 16.1, which have no Live Activities (S7). It carries the keys that make the
    /// Pushwoosh SDK report its receipt (`pw_msg`, and `p`: the message's code; issue 45).
    public static func fallbackAlert(_ n: StartNotification, messageCode: String) -> JSONValue {
        var payload: JSONObject = ["aps": ["alert": n.alert.json]]
        for (key, value) in SDKCalls.receiptKeys(messageCode: messageCode).entries { payload[key] = value }
        return .object(payload)
    }

    /// An update or end payload; `dismissal-date` only when given (U3), alert only when set (U6).
    public static func update(_ n: UpdateNotification, timestamp: Int64) -> JSONValue {
        var aps: JSONObject = [
            "timestamp": .int(timestamp),
            "event": .string(n.event.rawValue),
            "content-state": .object(n.contentState),
        ]
        if let score = n.relevanceScore { aps["relevance-score"] = .int(score) }
        if let stale = n.staleDate { aps["stale-date"] = .int(stale) }
        if let dismissal = n.dismissalDate { aps["dismissal-date"] = .int(dismissal) }
        if let alert = n.alert { aps["alert"] = alert.json }
        return ["aps": .object(aps)]
    }

    /// The end Islet sends itself at a start's `end_date` (A11): the activity's latest content-state, at
    /// that time, without an alert; iOS keeps the ended card up to 4 hours (U3).
    public static func scheduledEnd(contentState: JSONObject, timestamp: Int64) -> JSONValue {
        ["aps": ["timestamp": .int(timestamp), "event": .string(LiveActivityEvent.end.rawValue), "content-state": .object(contentState)]]
    }

    /// A 400 naming the notification when `payload` is over the APNs limit (A4).
    public static func checkSize(_ payload: [UInt8], path: String, maximum: Int = maximumBytes) throws(APIError) {
        guard payload.count <= maximum else {
            throw .invalid(path, "the APNs payload would be \(payload.count) bytes, over Apple's limit of \(maximum) (A4); shorten content-state, attributes or the alert")
        }
    }
}
