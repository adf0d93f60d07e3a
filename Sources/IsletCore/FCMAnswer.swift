import Foundation

/// What an FCM HTTP v1 error answer says went wrong (issue 46): FCM's own `errorCode` (the `FcmError` entry of the
/// answer's `error.details`) when it gives one, else Google's canonical `error.status`; by name, any other as it came.
public enum FCMError: Hashable, Sendable, CustomStringConvertible {
    /// The registration token is no longer valid (the app was uninstalled, or the token expired): 404.
    case unregistered
    /// The registration token belongs to another Firebase project: 403.
    case senderIdMismatch
    /// A field of the message (or the token's form) is wrong: 400.
    case invalidArgument
    /// Too many messages, to the project or to one device: 429, with `Retry-After`.
    case quotaExceeded
    /// FCM is overloaded: 503, maybe with `Retry-After`.
    case unavailable
    /// FCM failed to process the message: 500.
    case internalError
    /// The APNs certificate or web push key the Firebase project holds was refused: 401.
    case thirdPartyAuthError
    /// The OAuth2 access token is missing, wrong or expired: 401 (`error.status` only).
    case unauthenticated
    /// The service account may not send for the project: 403 (`error.status` only).
    case permissionDenied
    /// No such project (or message target): 404 (`error.status` only).
    case notFound
    /// FCM gave no detail.
    case unspecified
    /// A code this table does not know; its status class decides (`PushVerdict.of(fcmStatus:…)`).
    case unknown(String)

    /// Every name Islet knows: FCM's `errorCode` values, then the canonical statuses it answers with.
    static let byName: [String: FCMError] = [
        "UNREGISTERED": .unregistered, "SENDER_ID_MISMATCH": .senderIdMismatch, "INVALID_ARGUMENT": .invalidArgument,
        "QUOTA_EXCEEDED": .quotaExceeded, "UNAVAILABLE": .unavailable, "INTERNAL": .internalError,
        "THIRD_PARTY_AUTH_ERROR": .thirdPartyAuthError, "UNSPECIFIED_ERROR": .unspecified,
        "UNAUTHENTICATED": .unauthenticated, "PERMISSION_DENIED": .permissionDenied, "NOT_FOUND": .notFound,
        "RESOURCE_EXHAUSTED": .quotaExceeded,
    ]

    /// The error `text` names; `.unknown` for any other text.
    public init(_ text: String) { self = Self.byName[text] ?? .unknown(text) }

    /// FCM's spelling (a canonical status for the cases only it names).
    public var rawValue: String {
        switch self {
        case .unregistered: "UNREGISTERED"
        case .senderIdMismatch: "SENDER_ID_MISMATCH"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .internalError: "INTERNAL"
        case .thirdPartyAuthError: "THIRD_PARTY_AUTH_ERROR"
        case .unauthenticated: "UNAUTHENTICATED"
        case .permissionDenied: "PERMISSION_DENIED"
        case .notFound: "NOT_FOUND"
        case .unspecified: "UNSPECIFIED_ERROR"
        case .unknown(let text): text
        }
    }

    public var description: String { rawValue }

    /// One of the errors Islet knows by name.
    public var isKnown: Bool {
        if case .unknown = self { return false }
        return true
    }

    /// The error of an answer's body (`{"error": {"status": …, "details": [{"@type": "…FcmError", "errorCode": …}]}}`):
    /// FCM's `errorCode` first, as it is the more precise; nil for a body that names none.
    public static func of(body: [UInt8]) -> FCMError? {
        guard let error = (try? JSONParser.parse(body))?.objectValue?["error"]?.objectValue else { return nil }
        let details = error["details"]?.arrayValue ?? []
        if let code = details.lazy.compactMap({ $0.objectValue }).first(where: { $0["@type"]?.stringValue?.hasSuffix(".FcmError") == true })?["errorCode"]?.stringValue {
            return FCMError(code)
        }
        return error["status"]?.stringValue.map(FCMError.init)
    }
}

extension PushVerdict {
    /// The verdict on one FCM answer: `status` 0 when none came, with what is known of the message (`fate`); a code
    /// FCM documents decides by name, any other by its status class. A dead token is one FCM no longer knows
    /// (`UNREGISTERED`); a token of another project (`SENDER_ID_MISMATCH`) says the account is wrong, not the token;
    /// `INVALID_ARGUMENT` and `NOT_FOUND` fail the message without judging the token, as their causes are several.
    public static func of(fcmStatus status: Int, error: FCMError?, fate: PushFate = .answered, retryAfter: Duration? = nil) -> PushVerdict {
        if status == 0 { return fate == .notSent ? .retry(after: nil) : .unconfirmed }
        if (200..<300).contains(status) { return .delivered }
        switch error {
        case .unregistered?:
            return .deadToken(invalidSince: nil)
        case .unauthenticated?:
            return .refreshProviderToken
        // A token of another Firebase project: the service account set is likely the wrong one, which fails every
        // phone's push alike; the tokens are kept, to work once the right account is set.
        case .senderIdMismatch?, .thirdPartyAuthError?, .permissionDenied?:
            return .invalidProviderToken
        case .quotaExceeded?, .unavailable?, .internalError?:
            return .retry(after: retryAfter)
        case .invalidArgument?, .notFound?:
            return .giveUp
        case .unspecified?, .unknown?, nil:
            switch status {
            case 401: return .refreshProviderToken
            case 429, 500...599: return .retry(after: retryAfter)
            default: return .giveUp
            }
        }
    }
}

/// An HTTP `Retry-After` value (RFC 9110): whole seconds, or a date (IMF-fixdate) measured from `now`. Nil for
/// anything else; a date already past is zero.
public func retryAfterDuration(_ value: String, now: Date) -> Duration? {
    let text = value.trimmingCharacters(in: .whitespaces)
    if let seconds = Int(text), seconds >= 0 { return .seconds(seconds) }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    guard let date = formatter.date(from: text) else { return nil }
    return .milliseconds(Int64(max(0, date.timeIntervalSince(now)) * 1000))
}
