/// A tag's value on a device: a string, an integer, a list of strings, a boolean, or a date (D2; the last two are
/// Pushwoosh tag types the SDK's builders send, issue 45).
public enum TagValue: Sendable, Hashable {
    case string(String)
    case integer(Int64)
    case list([String])
    case boolean(Bool)
    /// Seconds since 1970, UTC, to the minute (`TagDate`).
    case date(Int64)

    public var type: TagType {
        switch self {
        case .string: .string
        case .integer: .integer
        case .list: .list
        case .boolean: .boolean
        case .date: .date
        }
    }

    /// As getTags answers it: a date as the SDK sends one, `yyyy-MM-dd HH:mm` (UTC).
    public var json: JSONValue {
        switch self {
        case .string(let s): .string(s)
        case .integer(let i): .int(i)
        case .list(let l): .array(l.map { .string($0) })
        case .boolean(let b): .bool(b)
        case .date(let seconds): .string(TagDate.text(seconds))
        }
    }
}

/// The type of a tag, fixed by the first value any device sets for it.
public struct TagType: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let string = Self(uncheckedRawValue: "string")
    public static let integer = Self(uncheckedRawValue: "integer")
    public static let list = Self(uncheckedRawValue: "list")
    public static let boolean = Self(uncheckedRawValue: "boolean")
    /// A moment, to the minute: the SDK sends `yyyy-MM-dd HH:mm`.
    public static let date = Self(uncheckedRawValue: "date")
    /// Dotted version numbers (`OS Version`), compared part by part.
    public static let version = Self(uncheckedRawValue: "version")
    public static let all = [string, integer, list, boolean, date, version]
}

/// A tag value not stored, because the tag already has another type (D2) or is a new name past the application's
/// limit (`TagNames`): the rest of the call applies, so one such tag never costs a registration; the answer names it.
public struct SkippedTag: Sendable, Equatable {
    public let tag: String
    public let why: Why

    public enum Why: Sendable, Equatable {
        /// The tag's type, fixed by its first value, is not the value's (D2).
        case typeClash(existing: TagType, given: TagType)
        /// A new tag name, and the application has as many names as it may (`TagNames`).
        case tooManyNames(limit: Int)
        /// A date tag given a string that is not a date.
        case notADate(String)
        /// An increment past the largest (or smallest) integer.
        case overflow
        /// An append that would make the list longer than a list tag may be.
        case listTooLong(limit: Int)
    }

    public init(tag: String, existing: TagType, given: TagType) {
        self.tag = tag
        why = .typeClash(existing: existing, given: given)
    }

    public init(tag: String, why: Why) {
        self.tag = tag
        self.why = why
    }

    /// Whether a value of type `given` may be stored under a tag whose type is `existing` (nil: a new tag,
    /// which takes the type of its first value).
    public static func check(tag: String, given: TagType, existing: TagType?) -> SkippedTag? {
        guard let existing, existing != given else { return nil }
        return SkippedTag(tag: tag, existing: existing, given: given)
    }

    public var reason: String {
        switch why {
        case .typeClash(let existing, let given):
            "is a tag of type \(existing.rawValue); got a value of type \(given.rawValue), not stored (D2)"
        case .tooManyNames(let limit):
            "is a new tag name, and this application has \(limit), the most it may have (islet serve --tag-names-per-application); not stored"
        case .notADate(let text):
            "is a tag of type date; got \"\(text.prefix(64))\", not a date such as \"2026-12-04 18:30\" (yyyy-MM-dd HH:mm, UTC), not stored (D2)"
        case .overflow:
            "the increment would take it past the largest integer, not stored (D2)"
        case .listTooLong(let limit):
            "would hold more than \(limit) strings, not stored (D2)"
        }
    }
    public var warning: String { "tags.\(tag): \(reason)" }
}

/// How many tag names an application may have. Tags are named by whoever calls setTags or registerDevice, the
/// public device API token included: every new name is kept for good and read by the filters, so a flood of names
/// would slow every filter of the application. 1,000 by default, far above what apps use.
public struct TagNames: Sendable, Equatable {
    public let limit: Int
    public static let standard = TagNames(limit: 1000)
    public static let allowed = 1...1_000_000

    public init(limit: Int) { self.limit = limit }

    /// The refusal of a new tag name when the application already has `names`; nil when it may have one more.
    public func admit(_ tag: String, names: Int) -> SkippedTag? {
        names < limit ? nil : SkippedTag(tag: tag, why: .tooManyNames(limit: limit))
    }
}

/// The tags every device has, derived from registerDevice (X1).
public struct BuiltInTag: Hashable, Sendable {
    public let name: String
    public let type: TagType

    public static let language = BuiltInTag(name: "Language", type: .string)
    public static let osVersion = BuiltInTag(name: "OS Version", type: .version)
    public static let timezone = BuiltInTag(name: "Timezone", type: .string)
    public static let userID = BuiltInTag(name: "User ID", type: .string)
    /// `ios` or `android`, from registerDevice's `device_type` (issue 46).
    public static let platform = BuiltInTag(name: "Platform", type: .string)

    public static let all: [BuiltInTag] = [.language, .osVersion, .timezone, .userID, .platform]

    public static func named(_ name: String) -> BuiltInTag? { all.first { $0.name == name } }

    /// Platform was built in late (issue 46): an application may already have a custom tag of that name, which then
    /// stays its own, in filters and in setTags. The other built-in names were never free.
    public static func shadowable(_ name: String) -> Bool { name == platform.name }

    /// The built-in tag a filter's `name` means for an application whose custom tags have `customTypes`.
    public static func named(_ name: String, customTypes: [String: TagType]) -> BuiltInTag? {
        shadowable(name) && customTypes[name] != nil ? nil : named(name)
    }
}

/// Version numbers as one sortable integer, so `17.10 > 17.2` in SQL: major·10⁶ + minor·10³ + patch.
public enum VersionKey {
    /// nil unless `text` is 1 to 3 dot-separated numbers, each below 1000.
    public static func make(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count) else { return nil }
        var key: Int64 = 0
        for index in 0..<3 {
            let part = index < parts.count ? parts[index] : "0"
            guard !part.isEmpty, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), part.count <= 3, let number = Int64(part) else { return nil }
            key = key * 1000 + number
        }
        return key
    }
}

/// Hex tokens (push, push-to-start, activity) as Islet stores them: lowercase (D4).
public enum HexToken {
    /// The lowercased token when `text` is even-length hex of `lengths` characters; nil otherwise.
    public static func normalize(_ text: String, lengths: ClosedRange<Int> = 16...400) -> String? {
        let bytes = Array(text.utf8)
        guard lengths.contains(bytes.count), bytes.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case 0x30...0x39, 0x61...0x66: out.append(byte)
            case 0x41...0x46: out.append(byte + 0x20)
            default: return nil
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
