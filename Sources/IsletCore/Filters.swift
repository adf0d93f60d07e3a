/// How a filter joins its conditions (X1).
public struct FilterJoin: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let and = Self(uncheckedRawValue: "AND")
    public static let or = Self(uncheckedRawValue: "OR")
    public static let all = [and, or]
}

/// A condition operator (X1): EQ NOTEQ IN NOTIN GTE LTE BETWEEN.
public struct ConditionOperator: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let eq = Self(uncheckedRawValue: "EQ")
    public static let notEq = Self(uncheckedRawValue: "NOTEQ")
    public static let `in` = Self(uncheckedRawValue: "IN")
    public static let notIn = Self(uncheckedRawValue: "NOTIN")
    public static let gte = Self(uncheckedRawValue: "GTE")
    public static let lte = Self(uncheckedRawValue: "LTE")
    public static let between = Self(uncheckedRawValue: "BETWEEN")
    public static let all = [eq, notEq, `in`, notIn, gte, lte, between]
}

/// A scalar a condition compares with: text, an integer, a version key (`OS Version`), a boolean, or a date.
public enum ConditionScalar: Sendable, Hashable {
    case text(String)
    case integer(Int64)
    case version(key: Int64, text: String)
    case boolean(Bool)
    /// Seconds since 1970 (UTC), and the text it was given as.
    case date(seconds: Int64, text: String)

    public var json: JSONValue {
        switch self {
        case .text(let s): .string(s)
        case .integer(let i): .int(i)
        case .version(_, let text): .string(text)
        case .boolean(let b): .bool(b)
        case .date(_, let text): .string(text)
        }
    }

    /// The integer it compares as, for all but text (a boolean is 0 or 1, as stored).
    public var number: Int64? {
        switch self {
        case .text: nil
        case .integer(let i): i
        case .version(let key, _): key
        case .boolean(let b): b ? 1 : 0
        case .date(let seconds, _): seconds
        }
    }
}

/// One `[tag, operator, value]` condition, checked against the tag's type.
public struct FilterCondition: Sendable, Hashable {
    public let tag: String
    public let builtIn: BuiltInTag?
    public let op: ConditionOperator
    /// One value for EQ NOTEQ GTE LTE, the list for IN NOTIN, [min, max] for BETWEEN.
    public let values: [ConditionScalar]

    public var json: JSONValue {
        let value: JSONValue = (op == .in || op == .notIn || op == .between) ? .array(values.map(\.json)) : values[0].json
        return [.string(tag), .string(op.rawValue), value]
    }
}

/// A named filter: conditions over tags joined by AND or OR (X1).
public struct FilterDefinition: Sendable, Hashable {
    /// Every device of one platform (`[["Platform", "EQ", "android"]]`), under `name`.
    public static func platform(_ platform: DevicePlatform, name: String) -> FilterDefinition {
        FilterDefinition(name: name, join: .and, conditions: [FilterCondition(tag: BuiltInTag.platform.name, builtIn: .platform, op: .eq,
                                                                               values: [.text(platform.rawValue)])])
    }

    public let name: String
    public let join: FilterJoin
    public let conditions: [FilterCondition]

    public init(name: String, join: FilterJoin, conditions: [FilterCondition]) {
        self.name = name
        self.join = join
        self.conditions = conditions
    }

    public static let maximumConditions = 50
    public static let maximumListValues = 1000

    /// The filter as the API shows it.
    public var json: JSONValue {
        ["name": .string(name), "operator": .string(join.rawValue), "conditions": .array(conditions.map(\.json))]
    }

    /// Parses and checks `conditions` (an array of `[tag, op, value]`) against the application's tag types.
    ///
    /// `path` prefixes the error paths; `tagTypes` holds the custom tags devices have set.
    public static func parse(name: String, join: FilterJoin, conditions value: JSONValue?, tagTypes: [String: TagType],
                             path: String = "conditions") throws(APIError) -> FilterDefinition {
        guard let value else { throw .invalid(path, "is required: a list of [tag, operator, value]") }
        guard case .array(let items) = value else { throw .invalid(path, "must be an array of [tag, operator, value], got \(value.typeName)") }
        guard !items.isEmpty else { throw .invalid(path, "must hold at least one condition") }
        guard items.count <= maximumConditions else { throw .invalid(path, "must hold at most \(maximumConditions) conditions") }
        var conditions: [FilterCondition] = []
        for (index, item) in items.enumerated() {
            conditions.append(try parseCondition(item, path: "\(path)[\(index)]", tagTypes: tagTypes))
        }
        return FilterDefinition(name: name, join: join, conditions: conditions)
    }

    /// The custom tag names `conditions` (as `parse` takes them) name, so only their types need reading: an application
    /// may have many tag names, and a filter names a few. Whatever is malformed is left to `parse` to name.
    public static func tagNames(in conditions: JSONValue?) -> Set<String> {
        guard case .array(let items)? = conditions else { return [] }
        return Set(items.prefix(maximumConditions).compactMap { item in
            guard case .array(let parts) = item, case .string(let tag)? = parts.first,
                  BuiltInTag.named(tag) == nil || BuiltInTag.shadowable(tag) else { return nil }
            return tag
        })
    }

    static func parseCondition(_ item: JSONValue, path: String, tagTypes: [String: TagType]) throws(APIError) -> FilterCondition {
        guard case .array(let parts) = item, parts.count == 3 else {
            throw .invalid(path, "must be [tag, operator, value]")
        }
        guard case .string(let tag) = parts[0], !tag.isEmpty else { throw .invalid("\(path)[0]", "must be a tag name") }
        guard case .string(let opText) = parts[1], let op = ConditionOperator(rawValue: opText) else {
            throw .invalid("\(path)[1]", "must be one of \(ConditionOperator.all.map(\.rawValue).joined(separator: " "))")
        }
        let builtIn = BuiltInTag.named(tag, customTypes: tagTypes)
        guard let type = builtIn?.type ?? tagTypes[tag] else {
            throw .invalid("\(path)[0]", "unknown tag '\(tag)'; built-in tags are \(BuiltInTag.all.map(\.name).joined(separator: ", ")), custom tags exist once a device sets them")
        }
        let valuePath = "\(path)[2]"
        let value = parts[2]
        func scalar(_ value: JSONValue, _ path: String) throws(APIError) -> ConditionScalar {
            switch type {
            case .integer:
                guard let i = value.intValue else { throw .invalid(path, "'\(tag)' is an integer tag: expected an integer, got \(value.typeName)") }
                return .integer(i)
            case .version:
                guard let text = value.stringValue ?? value.intValue.map({ String($0) }) ?? (value.typeName == "number" ? value.jsonText : nil),
                      let key = VersionKey.make(text) else {
                    throw .invalid(path, "'\(tag)' is a version: expected a version such as \"17.2\"")
                }
                return .version(key: key, text: text)
            case .boolean:
                guard case .bool(let b) = value else { throw .invalid(path, "'\(tag)' is a boolean tag: expected true or false, got \(value.typeName)") }
                return .boolean(b)
            case .date:
                guard let text = value.stringValue, let seconds = TagDate.parse(text) else {
                    throw .invalid(path, "'\(tag)' is a date tag: expected a date such as \"2026-12-04 18:30\" (yyyy-MM-dd HH:mm, UTC)")
                }
                return .date(seconds: seconds, text: text)
            default:
                guard let s = value.stringValue else { throw .invalid(path, "'\(tag)' is a \(type) tag: expected a string, got \(value.typeName)") }
                if builtIn == .platform, DevicePlatform(rawValue: s) == nil {
                    throw .invalid(path, "'Platform' is ios or android, got '\(s.prefix(64))'")
                }
                return .text(s)
            }
        }
        var values: [ConditionScalar]
        switch op {
        case .in, .notIn:
            guard case .array(let list) = value, !list.isEmpty else { throw .invalid(valuePath, "\(op) needs a non-empty array of values") }
            guard list.count <= maximumListValues else { throw .invalid(valuePath, "\(op) takes at most \(maximumListValues) values") }
            values = []
            for (i, element) in list.enumerated() { values.append(try scalar(element, "\(valuePath)[\(i)]")) }
        case .between:
            guard case .array(let pair) = value, pair.count == 2 else { throw .invalid(valuePath, "BETWEEN needs [min, max]") }
            values = [try scalar(pair[0], "\(valuePath)[0]"), try scalar(pair[1], "\(valuePath)[1]")]
        default:
            values = [try scalar(value, valuePath)]
        }
        if op == .gte || op == .lte || op == .between {
            guard type == .integer || type == .version || type == .date else {
                throw .invalid("\(path)[1]", "\(op) compares numbers: '\(tag)' is a \(type) tag; use an integer or date tag, or OS Version")
            }
        }
        if op == .between, let low = values[0].number, let high = values[1].number, low > high {
            throw .invalid(valuePath, "BETWEEN needs min <= max")
        }
        return FilterCondition(tag: tag, builtIn: builtIn, op: op, values: values)
    }
}
