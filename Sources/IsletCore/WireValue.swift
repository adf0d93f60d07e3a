/// A closed set of wire strings as a struct with named constants (`Gateway.sandbox`, `TokenKind.api`).
///
/// Parsing goes through `init?(rawValue:)`, which accepts only the values in `all`.
public protocol WireValue: Hashable, Sendable, CustomStringConvertible {
    var rawValue: String { get }
    /// Builds a value without checking: for the type's own constants only.
    init(uncheckedRawValue: String)
    /// Every accepted value, in the order error messages list them.
    static var all: [Self] { get }
}

extension WireValue {
    public init?(rawValue: String) {
        guard let value = Self.all.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = value
    }

    public var description: String { rawValue }

    /// The accepted values for an error message: `"production", "sandbox"` style lists.
    public static var listed: String { all.map(\.rawValue).joined(separator: ", ") }
}
