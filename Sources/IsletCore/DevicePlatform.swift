/// Which kind of phone a device is (issue 45): from the Pushwoosh SDK's `device_type` at registerDevice. Islet sends
/// Live Activities to iPhones; Android devices are registered and kept, with their tags and User IDs, and a start
/// counts them as skipped until Islet sends them Live Updates.
public struct DevicePlatform: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    /// `device_type` 1, with an APNs device token (hex).
    public static let ios = Self(uncheckedRawValue: "ios")
    /// `device_type` 3, with an FCM registration token.
    public static let android = Self(uncheckedRawValue: "android")
    public static let all = [ios, android]

    /// The platform of a Pushwoosh `device_type` Islet keeps; nil for the others (Amazon, Huawei, macOS, email…).
    public init?(deviceType: String) {
        switch deviceType {
        case "1": self = .ios
        case "3": self = .android
        default: return nil
        }
    }

    /// registerDevice's answer to another `device_type`.
    public static let deviceTypeRule = "must be 1 (iOS) or 3 (Android)"

    /// The push token as kept, or nil when it is not one of this platform's: an APNs token is even-length hex, stored
    /// lowercase; an FCM registration token is 32 to 4,096 letters, digits, `-`, `_`, `:` or `.`, kept as sent (its
    /// case matters).
    public func pushToken(_ text: String) -> String? {
        if self == .android {
            let bytes = text.utf8
            guard (32...4096).contains(bytes.count), bytes.allSatisfy(Self.isFCMTokenByte) else { return nil }
            return text
        }
        return HexToken.normalize(text)
    }

    /// What a push token of this platform must be, for the 400 that refuses another.
    public var pushTokenRule: String {
        self == .android ? "must be an FCM registration token: 32 to 4096 letters, digits, '-', '_', ':' or '.'"
            : "must be an even-length hex string of 16 to 400 characters"
    }

    /// The slot of a push token in a device's token history (A10): the APNs gateway for an iPhone, `fcm` for Android.
    public func tokenSlot(gateway: Gateway) -> String { self == .android ? "fcm" : gateway.rawValue }

    private static func isFCMTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }
}
