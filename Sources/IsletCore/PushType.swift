/// What a push is. To APNs it is `apns-push-type` (A2): Islet sends `liveactivity`, and `alert` for the fallback of
/// devices below iOS 17.2 (S7); the other APNs types are Apple's, which the simulator accepts as APNs does. To FCM
/// (issue 46) it is one of Islet's own kinds: an Android Live Update, or an ordinary notification for Android below 16.
public struct PushType: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let liveActivity = Self(uncheckedRawValue: "liveactivity")
    public static let alert = Self(uncheckedRawValue: "alert")
    public static let background = Self(uncheckedRawValue: "background")
    public static let voip = Self(uncheckedRawValue: "voip")
    public static let complication = Self(uncheckedRawValue: "complication")
    public static let fileProvider = Self(uncheckedRawValue: "fileprovider")
    public static let mdm = Self(uncheckedRawValue: "mdm")
    public static let location = Self(uncheckedRawValue: "location")
    public static let pushToTalk = Self(uncheckedRawValue: "pushtotalk")
    /// An FCM data message the Pushwoosh Android SDK renders as a Live Update (`pw_live`, Android 16 and later).
    public static let liveUpdate = Self(uncheckedRawValue: "fcm-liveupdate")
    /// An FCM data message the Pushwoosh Android SDK shows as an ordinary notification (Android below 16).
    public static let androidNotification = Self(uncheckedRawValue: "fcm-notification")
    /// Apple's `apns-push-type` values.
    public static let apple = [alert, background, liveActivity, voip, complication, fileProvider, mdm, location, pushToTalk]
    public static let all = apple + [liveUpdate, androidNotification]

    /// Sent through FCM rather than APNs.
    public var isFCM: Bool { self == .liveUpdate || self == .androidNotification }

    /// A push that starts an activity on the phone: a Live Activity's start, or a Live Update's.
    public var startsActivity: Bool { self == .liveActivity || self == .liveUpdate }

    /// The `apns-topic` of a device push of this type (A2): the bundle id, with `.push-type.liveactivity`
    /// for Live Activities.
    public func topic(bundleID: String) -> String {
        self == .liveActivity ? bundleID + Self.liveActivityTopicSuffix : bundleID
    }

    /// What a Live Activity's topic adds to the bundle id.
    public static let liveActivityTopicSuffix = ".push-type." + liveActivity.rawValue
}

extension PushType: Codable {
    /// As its spelling; a type neither Apple nor Islet defines does not decode.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let type = PushType(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an apns-push-type: \(text)"))
        }
        self = type
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
