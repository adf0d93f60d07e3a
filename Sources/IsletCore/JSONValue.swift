/// A JSON value that keeps what the caller sent: key order, integers as integers, strings verbatim.
///
/// Payloads are built from these so a content-state reaches the device exactly as it was given (A4).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The path (`request.tags.City`, `request.devices[2]`) of the first string or key holding U+0000, which
    /// no storage engine keeps alike (PostgreSQL text cannot hold it): the API refuses it by name.
    public func pathOfNUL(_ path: String) -> String? {
        switch self {
        case .string(let s): return s.utf8.contains(0) ? path : nil
        case .array(let items):
            for (index, item) in items.enumerated() { if let found = item.pathOfNUL("\(path)[\(index)]") { return found } }
            return nil
        case .object(let object):
            for (key, value) in object.entries {
                let child = path.isEmpty ? key : "\(path).\(key)"
                if key.utf8.contains(0) { return child }
                if let found = value.pathOfNUL(child) { return found }
            }
            return nil
        default: return nil
        }
    }

    /// Refuses a document holding U+0000 anywhere, naming the first field that does (`pathOfNUL`).
    public func refuseNUL() throws(APIError) {
        if let path = pathOfNUL("") { throw APIError.invalid(path, "must not contain the NUL character (\\u0000)") }
    }

    /// The JSON type name used in error messages ("string", "object", ...).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }

    /// An integer, also from a double with no fractional part (`5.0`), as JSON does not tell them apart.
    public var intValue: Int64? {
        switch self {
        case .int(let i): i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: Int64(d)
        default: nil
        }
    }
}

/// A JSON object that keeps its keys in the order they were written.
public struct JSONObject: Sendable, Hashable {
    public private(set) var entries: [(key: String, value: JSONValue)]

    public init(_ entries: [(key: String, value: JSONValue)] = []) { self.entries = entries }

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }
    public var keys: [String] { entries.map(\.key) }

    public subscript(key: String) -> JSONValue? {
        get { entries.first(where: { $0.key == key })?.value }
        set {
            if let index = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
            } else if let newValue {
                entries.append((key, newValue))
            }
        }
    }

    /// This object with `other`'s entries set on top (replacing equal keys in place).
    public func merging(_ other: JSONObject) -> JSONObject {
        var merged = self
        for (key, value) in other.entries { merged[key] = value }
        return merged
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.entries.count == rhs.entries.count
            && zip(lhs.entries, rhs.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for (key, value) in entries { hasher.combine(key); hasher.combine(value) }
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements.map { (key: $0.0, value: $0.1) })
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { (key: $0.0, value: $0.1) }))
    }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .double(value) }
}
