/// An application code, `XXXXX-XXXXX`: two groups of five uppercase letters or digits (E2).
public struct ApplicationCode: Hashable, Sendable, CustomStringConvertible, Comparable {
    public let rawValue: String

    /// Accepts only the exact `XXXXX-XXXXX` shape.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 11, bytes[5] == UInt8(ascii: "-") else { return nil }
        for (i, byte) in bytes.enumerated() where i != 5 {
            guard ApplicationCode.alphabet.contains(byte) else { return nil }
        }
        rawValue = text
    }

    /// A fresh random code.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> ApplicationCode {
        var bytes: [UInt8] = []
        for i in 0..<11 {
            bytes.append(i == 5 ? UInt8(ascii: "-") : alphabet.randomElement(using: &generator)!)
        }
        return ApplicationCode(String(decoding: bytes, as: UTF8.self))!
    }

    public var description: String { rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
}
