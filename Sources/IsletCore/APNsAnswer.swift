import Foundation

/// Apple's `reason` in an APNs error answer (A5): Apple's documented reasons by name, and any other as it came.
public enum APNsReason: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic, deviceTokenNotForTopic
    case duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken, missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken, missingProviderToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge, tooManyProviderTokenUpdates, tooManyRequests
    case internalServerError, serviceUnavailable, shutdown
    /// Broadcast channels (X5): the channel does not exist (any more).
    case channelNotRegistered
    /// A reason this table does not know; its status class decides (`PushVerdict`).
    case unknown(String)

    /// Every reason Islet knows, with the status Apple documents it with.
    public static let known: [(reason: APNsReason, status: Int)] = [
        (.badCollapseId, 400), (.badDeviceToken, 400), (.badExpirationDate, 400), (.badMessageId, 400), (.badPriority, 400),
        (.badTopic, 400), (.deviceTokenNotForTopic, 400), (.duplicateHeaders, 400), (.idleTimeout, 400), (.invalidPushType, 400),
        (.missingDeviceToken, 400), (.missingTopic, 400), (.payloadEmpty, 400), (.topicDisallowed, 400),
        (.badCertificate, 403), (.badCertificateEnvironment, 403), (.expiredProviderToken, 403), (.forbidden, 403),
        (.invalidProviderToken, 403), (.missingProviderToken, 403),
        (.badPath, 404), (.methodNotAllowed, 405), (.expiredToken, 410), (.unregistered, 410), (.payloadTooLarge, 413),
        (.tooManyProviderTokenUpdates, 429), (.tooManyRequests, 429),
        (.internalServerError, 500), (.serviceUnavailable, 503), (.shutdown, 503), (.channelNotRegistered, 400),
    ]
    private static let byName = Dictionary(uniqueKeysWithValues: known.map { ($0.reason.rawValue, $0.reason) })

    /// The reason Apple's text names; `.unknown` for any other text.
    public init(_ text: String) { self = Self.byName[text] ?? .unknown(text) }
    public init(stringLiteral text: String) { self.init(text) }

    /// Apple's spelling.
    public var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .unknown(let text): text
        }
    }

    public var description: String { rawValue }

    /// One of Apple's reasons that Islet knows by name.
    public var isKnown: Bool {
        if case .unknown = self { return false }
        return true
    }
}

/// What is known of a push that got no answer from APNs.
public enum PushFate: Sendable, Equatable {
    /// APNs answered (see the status).
    case answered
    /// Provably never processed: refused (REFUSED_STREAM, above GOAWAY's last stream), never fully
    /// written, or no connection: safe to send again at once.
    case notSent
    /// May have reached APNs (the answer was lost with the connection, or it timed out after being
    /// written): a resend may be a second copy on the phone.
    case unknown
}

/// What a push service's answer means (A5, A3, issue 10): the one decision every part of Islet asks, the transport
/// (provider tokens, trusted connections) and delivery (the push's next state, dead tokens) alike. An APNs answer
/// is read by `of(status:reason:fate:retryAfter:timestamp:)`, an FCM answer by `of(fcmStatus:error:fate:retryAfter:)`.
public enum PushVerdict: Sendable, Equatable {
    /// APNs took it.
    case delivered
    /// A passing condition: try again after the backoff, or after APNs' `retry-after` when it asks for longer.
    case retry(after: Duration?)
    /// No answer, and it may have reached APNs: a start waits for the device's token rather than risk a
    /// second card (S8); anything else is retried.
    case unconfirmed
    /// The device token is dead: never retry; clear it unless it was registered again after `invalidSince`
    /// (a 410's timestamp, milliseconds since 1970).
    case deadToken(invalidSince: Int64?)
    /// The provider token expired (APNs' JWT, FCM's OAuth2 access token): make a new one once and try again (A3).
    case refreshProviderToken
    /// The key is wrong (APNs' signing key, FCM's service account): stop sending with it and surface the error (A3).
    case invalidProviderToken
    /// The push itself is wrong: fail it with the reason, never retry.
    case giveUp

    /// The verdict on one answer: `status` 0 when none came, with what is known of the push (`fate`).
    /// A reason Apple documents decides by name; any other by its status class.
    public static func of(status: Int, reason: APNsReason?, fate: PushFate = .answered, retryAfter: Duration? = nil,
                          timestamp: Int64? = nil) -> PushVerdict {
        if status == 0 { return fate == .notSent ? .retry(after: nil) : .unconfirmed }
        if status == 200 { return .delivered }
        switch reason {
        case .badDeviceToken?, .deviceTokenNotForTopic?, .expiredToken?, .unregistered?:
            return .deadToken(invalidSince: timestamp)
        case .expiredProviderToken?:
            return .refreshProviderToken
        case .invalidProviderToken?:
            return .invalidProviderToken
        case .idleTimeout?, .tooManyProviderTokenUpdates?, .tooManyRequests?, .internalServerError?, .serviceUnavailable?, .shutdown?:
            return .retry(after: retryAfter)
        case .channelNotRegistered?, .unknown?, nil:
            switch status {
            case 410: return .deadToken(invalidSince: timestamp)
            case 429, 500...599: return .retry(after: retryAfter)
            default: return .giveUp
            }
        default:
            return .giveUp
        }
    }

    /// Worth another attempt later (a new provider token counts: the transport made one and it failed again).
    public var isRetryable: Bool {
        switch self {
        case .retry, .unconfirmed, .refreshProviderToken: true
        case .delivered, .deadToken, .invalidProviderToken, .giveUp: false
        }
    }
}
