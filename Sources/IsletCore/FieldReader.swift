/// Reads typed fields out of a JSON object and names the full path in every error (E4).
///
/// Paths are relative to the `request` object, e.g. `notifications[0].live_activity.content-state`.
public struct FieldReader: Sendable {
    public let object: JSONObject
    public let path: String

    public init(_ object: JSONObject, path: String = "") {
        self.object = object
        self.path = path
    }

    /// Reads `value` as an object, or fails naming `path`.
    public init(_ value: JSONValue, path: String) throws(APIError) {
        guard case .object(let object) = value else { throw .invalid(path, "must be an object, got \(value.typeName)") }
        self.init(object, path: path)
    }

    public func fieldPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The raw value of `key`, treating an explicit `null` like absence.
    public func value(_ key: String) -> JSONValue? {
        guard let value = object[key], value != .null else { return nil }
        return value
    }

    public func string(_ key: String) throws(APIError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let s) = value else { throw .invalid(fieldPath(key), "must be a string, got \(value.typeName)") }
        return s
    }

    /// `known`: the fields this object may hold; a given field outside them that looks like a misspelling of a
    /// missing required one is named in the error (`live_activty_id` for `live_activity_id`).
    public func requiredString(_ key: String, allowEmpty: Bool = false, known: [String] = []) throws(APIError) -> String {
        guard let s = try string(key) else { throw missing(key, known: known) }
        guard allowEmpty || !s.isEmpty else { throw .invalid(fieldPath(key), "must not be empty") }
        return s
    }

    /// A string, also accepted as a number, as the Pushwoosh SDK sends some fields either way (D1).
    public func lenientString(_ key: String) throws(APIError) -> String? {
        switch value(key) {
        case nil: return nil
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return JSONValue.double(d).jsonText
        case let other?: throw .invalid(fieldPath(key), "must be a string, got \(other.typeName)")
        }
    }

    public func int(_ key: String) throws(APIError) -> Int64? {
        guard let value = value(key) else { return nil }
        guard let i = value.intValue else { throw .invalid(fieldPath(key), "must be an integer, got \(value.typeName)") }
        return i
    }

    /// A date as ActivityKit reads it in a payload: whole seconds since 1970. A negative one, and one past the year 5000
    /// (milliseconds taken for seconds: 1796366444000 is the year 58,894), can never be right (issue 45).
    public func date(_ key: String) throws(APIError) -> Int64? {
        guard let value = value(key) else { return nil }
        guard let i = value.intValue else {
            throw .invalid(fieldPath(key), "must be a date as an integer of seconds since 1970 (e.g. 1767225600), got \(value.typeName)")
        }
        guard i >= 0 else { throw .invalid(fieldPath(key), "must be seconds since 1970, not negative, got \(i)") }
        guard i < Self.latestDate else {
            throw .invalid(fieldPath(key), "\(i) seconds since 1970 is the year \(TagDate.civil(daysSince1970: i / 86_400).year): it looks like milliseconds; send seconds (\(i / 1000))")
        }
        return i
    }

    /// 5000-01-01 00:00 UTC, in seconds since 1970: no date of a Live Activity is that far.
    public static let latestDate: Int64 = 95_617_584_000

    public func bool(_ key: String) throws(APIError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let b) = value else { throw .invalid(fieldPath(key), "must be a boolean, got \(value.typeName)") }
        return b
    }

    public func objectField(_ key: String) throws(APIError) -> FieldReader? {
        guard let value = value(key) else { return nil }
        return try FieldReader(value, path: fieldPath(key))
    }

    public func requiredObject(_ key: String, known: [String] = []) throws(APIError) -> FieldReader {
        guard let reader = try objectField(key) else { throw missing(key, known: known) }
        return reader
    }

    /// The error for a required `key` that is absent: with the given field that looks like a misspelling of it, when
    /// one does (a field neither `key` nor one of `known`, within `Suggestion`'s reach).
    public func missing(_ key: String, known: [String] = []) -> APIError {
        let given = object.keys.filter { $0 != key && !known.contains($0) }
        let hint = Suggestion.nearest(key, among: given).map { "; \(fieldPath($0)) was given: is it \(key) misspelt?" } ?? ""
        return .invalid(fieldPath(key), "is required" + hint)
    }

    public func array(_ key: String) throws(APIError) -> [JSONValue]? {
        guard let value = value(key) else { return nil }
        guard case .array(let a) = value else { throw .invalid(fieldPath(key), "must be an array, got \(value.typeName)") }
        return a
    }
}
