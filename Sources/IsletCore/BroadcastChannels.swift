import Foundation

/// X5: broadcast channels (iOS 18). One request to APNs updates every phone whose Live Activity
/// subscribed to the channel. Islet keeps a record per channel name, with Apple's channel id for each
/// environment it was created in.
public enum BroadcastChannels {
    /// Apple's limit: channels per application and environment.
    public static let limitPerEnvironment = 10_000
    public static let maximumNameLength = 64

    /// What APNs keeps of a channel's messages (Apple's `message-storage-policy`).
    public struct StoragePolicy: WireValue {
        public let rawValue: String
        public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

        /// Nothing stored: a phone that was offline misses the message; a larger budget; `apns-expiration` must be 0.
        public static let none = Self(uncheckedRawValue: "none")
        /// The most recent message is kept (up to 8 hours) for phones that come online.
        public static let mostRecent = Self(uncheckedRawValue: "most_recent")
        public static let all = [none, mostRecent]

        /// Apple's number for it.
        public var apple: Int { self == .mostRecent ? 1 : 0 }
        public init?(apple: Int) {
            switch apple {
            case 0: self = .none
            case 1: self = .mostRecent
            default: return nil
            }
        }
    }

    /// A validated createLiveActivityChannel request.
    public struct NewChannel: Sendable, Equatable {
        public let name: String
        public let policy: StoragePolicy
        /// Production, sandbox, or both, in that order.
        public let gateways: [Gateway]
    }

    /// How long APNs keeps a `most_recent` channel's latest message for phones that come online.
    public static let storedMessageLifetime: TimeInterval = 8 * 3600

    /// A start can subscribe its activity to a channel from iOS 18 on; earlier phones get the plain start.
    public static let minimumIOSForChannelStart = VersionKey.make("18.0")!

    /// Whether a start on a channel with Apple's `ids` subscribes this device (its environment has the channel,
    /// its iOS takes it) rather than asking for an update token.
    public static func startsOnChannel(ids: [Gateway: String]?, gateway: Gateway, osVersion: String?) -> Bool {
        ids?[gateway] != nil && takesChannelStart(osVersion: osVersion)
    }

    /// iOS 18 or later; an unknown version is taken as older.
    public static func takesChannelStart(osVersion: String?) -> Bool {
        osVersion.flatMap(VersionKey.make).map { $0 >= minimumIOSForChannelStart } ?? false
    }

    /// A push-to-start payload that subscribes the started activity to the channel `channelID` (Apple's id)
    /// instead of asking for an update token; nil when `payload` is not a start.
    public static func startOnChannel(_ payload: [UInt8], channelID: String) -> [UInt8]? {
        guard var root = (try? JSONParser.parse(payload))?.objectValue, var aps = root["aps"]?.objectValue,
              aps["event"]?.stringValue == LiveActivityEvent.start.rawValue else { return nil }
        aps["input-push-channel"] = .string(channelID)
        root["aps"] = .object(aps)
        return JSONValue.object(root).jsonBytes
    }

    /// Whether a Live Activity payload ends the activity (`aps.event` is `end`).
    public static func isEnd(_ payload: [UInt8]) -> Bool {
        (try? JSONParser.parse(payload))?.objectValue?["aps"]?.objectValue?["event"]?.stringValue == LiveActivityEvent.end.rawValue
    }

    /// Apple's limit for a broadcast's payload.
    public static let maximumPayloadBytes = 5120

    /// `name` (or `field`): 1 to 64 letters, digits, `-`, `_` or `.`, so it is safe in logs and URLs.
    public static func name(_ request: FieldReader, field: String = "name") throws(APIError) -> String {
        let name = try request.requiredString(field)
        let allowed = name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F || byte == 0x2E
        }
        guard (1...maximumNameLength).contains(name.utf8.count), allowed else {
            throw .invalid(request.fieldPath(field), "must be 1 to \(maximumNameLength) letters, digits, '-', '_' or '.'")
        }
        return name
    }

    /// createLiveActivityChannel: `name`, `storage_policy` (`none` by default), `environment`
    /// (`production`, `sandbox` or `both`; `both` by default).
    public static func newChannel(_ request: FieldReader) throws(APIError) -> NewChannel {
        let name = try name(request)
        let policyText = try request.string("storage_policy") ?? StoragePolicy.none.rawValue
        guard let policy = StoragePolicy(rawValue: policyText) else {
            throw .invalid(request.fieldPath("storage_policy"), "must be one of \(StoragePolicy.listed), got '\(policyText.prefix(64))'")
        }
        let environment = try request.string("environment") ?? "both"
        let gateways: [Gateway]
        switch environment {
        case "both": gateways = [.production, .sandbox]
        case Gateway.production.rawValue: gateways = [.production]
        case Gateway.sandbox.rawValue: gateways = [.sandbox]
        default: throw .invalid(request.fieldPath("environment"), "must be one of production, sandbox, both, got '\(environment.prefix(64))'")
        }
        return NewChannel(name: name, policy: policy, gateways: gateways)
    }

    /// Why a channel name is refused: the application has no such channel.
    public static func unknown(_ name: String) -> String {
        "no channel named '\(name)' in this application (create it with createLiveActivityChannel)"
    }

    /// Why an update of an activity started on a channel was not broadcast: the channel its phones listen to
    /// was deleted (or deleted and created anew, with another id from Apple) since the start.
    public static let channelGone = "the channel the activity was started on was deleted since; its phones no longer get updates"

    /// Channel-management calls that ask Apple at once, in all and for one application: each holds a shared HTTP worker
    /// until Apple answers (or 15 s pass), so an endpoint that never answers holds up at most these many.
    public static let managementAtOnce = 8
    public static let managementAtOncePerApplication = 2
    /// Seconds a refused management call is told to wait.
    public static let managementRetryAfter = 5

    /// The refusal of a management call while as many wait for Apple (429 with `Retry-After`).
    public static func managementBusy(atOnce: Int, perApplication: Int) -> String {
        "channel management: \(perApplication) calls of this application, or \(atOnce) in all, are waiting for Apple's answers, "
            + "the most this server sends at once; retry after \(managementRetryAfter) s"
    }

    /// The refusal of a channel past Apple's limit, before Apple is asked.
    public static func limitReached(_ gateway: Gateway) -> APIError {
        .invalid("name", "the application already has \(limitPerEnvironment) \(gateway) channels, Apple's limit per application and environment; "
                 + "delete channels that are no longer used (deleteLiveActivityChannel)")
    }
}

extension BroadcastChannels {
    /// The body of Apple's create request.
    public static func createBody(_ policy: StoragePolicy) -> JSONValue {
        ["message-storage-policy": .int(Int64(policy.apple)), "push-type": "LiveActivity"]
    }

    /// `apns-expiration` of a broadcast: the one asked, else 0 on a channel that stores nothing (Apple refuses any
    /// other), else the broadcast's expiry.
    public static func expiration(_ policy: StoragePolicy, expiresAt: Date, asked: Int64? = nil) -> Int64 {
        asked ?? (policy == .none ? 0 : Int64(expiresAt.timeIntervalSince1970))
    }

    /// The least time ahead an `apns_expiration` may be: the broadcast gets its tries before it.
    public static let minimumExpirationLead: Int64 = 60

    /// Why an `apns_expiration` asked for a broadcast to `channel` is refused, before Apple refuses it: on a `none`
    /// channel only 0 (BadExpirationDate otherwise); on a `most_recent` one 0 or a time within the 8 hours Apple
    /// keeps a message. nil when it is fine.
    public static func expirationRefusal(_ expiration: Int64, channel: String, policy: StoragePolicy, now: Date) -> String? {
        guard expiration != 0 else { return nil }
        if policy == .none {
            return "channel '\(channel)' stores nothing (storage_policy none), where Apple takes apns_expiration 0 only (X5)"
        }
        let seconds = Int64(now.timeIntervalSince1970)
        guard expiration >= seconds + minimumExpirationLead, expiration <= seconds + Int64(storedMessageLifetime) else {
            return "must be 0 or a time (Unix seconds) from a minute to 8 hours ahead, the longest Apple keeps a channel's message (X5)"
        }
        return nil
    }

    /// What to tell the caller when Apple's management API did not do `action` ("create", "delete") in
    /// `gateway`: `status` 0 is no answer at all.
    public static func appleRefusal(action: String, name: String, gateway: Gateway, status: Int, reason: String?) -> APIError {
        let what = "APNs (\(gateway)) did not \(action) channel '\(name)'"
        switch (status, reason) {
        case (0, _):
            return APIError(.unavailable, "\(what): no answer (\(reason ?? "unreachable")); retry later")
        case (_, "CannotCreateChannelConfig"?):
            return .invalid("name", "\(what): CannotCreateChannelConfig, the application has Apple's \(limitPerEnvironment) \(gateway) channels; "
                            + "delete channels that are no longer used")
        case (_, "FeatureNotEnabled"?):
            return .invalid("application", "\(what): FeatureNotEnabled, broadcast push notifications are not enabled for the app; "
                            + "turn on its Broadcast capability in Apple's developer portal")
        case (_, "TopicDisallowed"?):
            return .invalid("application", "\(what): TopicDisallowed, the application's bundle id must not carry a push type suffix")
        case (_, "NoAPNsKey"?):
            return .invalid("application", "\(what): the application has no APNs key; set one with islet app set-apns-key")
        case (403, let reason):
            return .invalid("application", "\(what): \(reason ?? "403"), Apple refused the application's APNs key or bundle id")
        case (429, _), (500..., _):
            return APIError(.unavailable, "\(what): \(status) \(reason ?? ""); retry later")
        default:
            return APIError(.internalError, "\(what): \(status) \(reason ?? "")")
        }
    }
}
