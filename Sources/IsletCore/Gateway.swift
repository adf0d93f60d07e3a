/// Which APNs environment a device's tokens belong to (A1): from `gateway` at registerDevice.
public struct Gateway: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let production = Self(uncheckedRawValue: "production")
    public static let sandbox = Self(uncheckedRawValue: "sandbox")
    public static let all = [production, sandbox]
}
