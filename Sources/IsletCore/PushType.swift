/// `apns-push-type`: what a push is, to APNs (A2). Islet sends `liveactivity`, and `alert` for the fallback
/// of devices below iOS 16.1 (S7); the others are Apple's, which the simulator accepts as APNs does.
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
    public static let all = [alert, background, liveActivity, voip, complication, fileProvider, mdm, location, pushToTalk]

    /// The `apns-topic` of a device push of this type (A2): the bundle id, with `.push-type.liveactivity`
    /// for Live Activities.
    public func topic(bundleID: String) -> String {
        self == .liveActivity ? bundleID + Self.liveActivityTopicSuffix : bundleID
    }

    /// What a Live Activity's topic adds to the bundle id.
    public static let liveActivityTopicSuffix = ".push-type." + liveActivity.rawValue
}

extension PushType: Codable {
    /// As its header spelling; a type Apple does not define does not decode.
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
