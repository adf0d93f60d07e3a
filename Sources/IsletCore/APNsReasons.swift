/// What Islet does with an APNs answer (A5).
public enum APNsAction: Sendable, Equatable {
    /// Delivered to APNs.
    case delivered
    /// The token is dead: never retry, mark it, skip the device from now on.
    case dropToken
    /// A passing condition: retry with backoff, a bounded number of times.
    case retry
    /// The provider token expired: make a new JWT once and retry (A3).
    case refreshProviderToken
    /// The key is wrong: stop sending with it and surface the error (A3).
    case invalidProviderToken
    /// The push itself is wrong: fail it with the reason, never retry.
    case fail
}

/// Apple's APNs reasons and what each means for Islet: the one table (A5).
public enum APNsReasons {
    public static let table: [String: (status: Int, action: APNsAction)] = [
        "BadCollapseId": (400, .fail),
        "BadDeviceToken": (400, .dropToken),
        "BadExpirationDate": (400, .fail),
        "BadMessageId": (400, .fail),
        "BadPriority": (400, .fail),
        "BadTopic": (400, .fail),
        "DeviceTokenNotForTopic": (400, .dropToken),
        "DuplicateHeaders": (400, .fail),
        "IdleTimeout": (400, .retry),
        "InvalidPushType": (400, .fail),
        "MissingDeviceToken": (400, .fail),
        "MissingTopic": (400, .fail),
        "PayloadEmpty": (400, .fail),
        "TopicDisallowed": (400, .fail),
        "BadCertificate": (403, .fail),
        "BadCertificateEnvironment": (403, .fail),
        "ExpiredProviderToken": (403, .refreshProviderToken),
        "Forbidden": (403, .fail),
        "InvalidProviderToken": (403, .invalidProviderToken),
        "MissingProviderToken": (403, .fail),
        "BadPath": (404, .fail),
        "MethodNotAllowed": (405, .fail),
        "ExpiredToken": (410, .dropToken),
        "Unregistered": (410, .dropToken),
        "PayloadTooLarge": (413, .fail),
        "TooManyProviderTokenUpdates": (429, .retry),
        "TooManyRequests": (429, .retry),
        "InternalServerError": (500, .retry),
        "ServiceUnavailable": (503, .retry),
        "Shutdown": (503, .retry),
    ]

    /// The action for an answer; an unknown reason falls back on its status class.
    public static func action(status: Int, reason: String?) -> APNsAction {
        if status == 200 { return .delivered }
        if let reason, let entry = table[reason] { return entry.action }
        switch status {
        case 410: return .dropToken
        case 429, 500...599: return .retry
        default: return .fail
        }
    }
}
