/// The type of one field of a Live Activity schema (X2).
public indirect enum SchemaType: Sendable, Equatable {
    case string, number, integer, boolean
    /// Seconds since 1970 as a number. Swift's default `Date` coding counts from 2001: use `.secondsSince1970`.
    case date
    /// Any object, or one with these fields.
    case object([String: SchemaField]?)
    /// Any array, or one whose elements are all of this type.
    case array(SchemaType?)

    var name: String {
        switch self {
        case .string: "string"
        case .number: "number"
        case .integer: "integer"
        case .boolean: "boolean"
        case .date: "date"
        case .object: "object"
        case .array: "array"
        }
    }
}

/// A field: its type and whether it may be missing or null (`Optional` in the app's Codable type).
public struct SchemaField: Sendable, Equatable {
    public let type: SchemaType
    public let optional: Bool
}

/// What Swift's Codable would make of a JSON value against a schema: the errors that stop decoding,
/// and the unknown fields it silently ignores.
public struct SchemaCheck: Sendable, Equatable {
    public var errors: [String] = []
    public var unknownFields: [String] = []
}

/// A schema for one attributes type: the fields of its ContentState and of its attributes (X2).
///
/// Written as JSON: `{"field": "string", "eta": "date?", "driver": {"name": "string"}, "stops": ["string"]}` —
/// a type name (`string number integer boolean date object array`, `?` for optional), an object of
/// fields for a nested struct, or a one-element array for an array of that type.
public struct LiveActivitySchema: Sendable, Equatable {
    public let contentState: [String: SchemaField]
    public let attributes: [String: SchemaField]

    public init(contentState: [String: SchemaField], attributes: [String: SchemaField]) {
        self.contentState = contentState
        self.attributes = attributes
    }

    /// The longest `attributes_type` a schema is set for, in characters: a Swift type's name, as the app's
    /// `ActivityAttributes` struct is called.
    public static let maximumTypeLength = 256
    /// The longest `description` of a schema version, in characters.
    public static let maximumDescriptionLength = 4096

    /// A schema's `attributes_type` and `description` within their limits (each call makes a version that is kept).
    public static func checkNaming(attributesType: String, description: String?) throws(APIError) {
        guard !attributesType.isEmpty else { throw .invalid("attributes_type", "must not be empty") }
        guard attributesType.count <= maximumTypeLength else {
            throw .invalid("attributes_type", "must be at most \(maximumTypeLength) characters (the name of the app's ActivityAttributes type), got \(attributesType.count)")
        }
        if let description, description.count > maximumDescriptionLength {
            throw .invalid("description", "must be at most \(maximumDescriptionLength) characters, got \(description.count)")
        }
    }

    /// Parses the fields of one struct, naming the path of any mistake.
    public static func parseFields(_ value: JSONValue, path: String) throws(APIError) -> [String: SchemaField] {
        guard case .object(let object) = value else { throw .invalid(path, "must be an object of field: type") }
        var fields: [String: SchemaField] = [:]
        for (name, type) in object.entries {
            guard !name.isEmpty else { throw .invalid(path, "field names must not be empty") }
            fields[name] = try parseField(type, path: "\(path).\(name)")
        }
        return fields
    }

    static func parseField(_ value: JSONValue, path: String) throws(APIError) -> SchemaField {
        switch value {
        case .string(let text):
            let optional = text.hasSuffix("?")
            let name = optional ? String(text.dropLast()) : text
            let types: [String: SchemaType] = ["string": .string, "number": .number, "integer": .integer, "boolean": .boolean,
                                               "date": .date, "object": .object(nil), "array": .array(nil)]
            guard let type = types[name] else {
                throw .invalid(path, "unknown type '\(text)'; use string, number, integer, boolean, date, object or array, with ? when optional")
            }
            return SchemaField(type: type, optional: optional)
        case .object:
            return SchemaField(type: .object(try parseFields(value, path: path)), optional: false)
        case .array(let elements):
            guard elements.count == 1 else { throw .invalid(path, "an array type is written as [elementType]") }
            return SchemaField(type: .array(try parseField(elements[0], path: "\(path)[]").type), optional: false)
        default:
            throw .invalid(path, "must be a type name, an object of fields or [elementType], got \(value.typeName)")
        }
    }

    /// The schema back as JSON, as it was written.
    public static func json(_ fields: [String: SchemaField]) -> JSONValue {
        .object(JSONObject(fields.keys.sorted().map { (key: $0, value: json(fields[$0]!)) }))
    }

    static func json(_ field: SchemaField) -> JSONValue {
        switch field.type {
        case .object(let fields?) where !field.optional: return json(fields)
        case .array(let element?) where !field.optional: return [json(SchemaField(type: element, optional: false))]
        default: return .string(field.type.name + (field.optional ? "?" : ""))
        }
    }

    /// Checks `object` the way JSONDecoder would decode it into the schema's struct.
    public static func check(_ object: JSONObject, against fields: [String: SchemaField], path: String) -> SchemaCheck {
        var result = SchemaCheck()
        for name in fields.keys.sorted() {
            let field = fields[name]!
            let fieldPath = "\(path).\(name)"
            guard let value = object[name], value != .null else {
                if !field.optional { result.errors.append("\(fieldPath): \(object[name] == nil ? "missing" : "null for a field that is not optional")") }
                continue
            }
            checkValue(value, field.type, path: fieldPath, into: &result)
        }
        for name in object.keys where fields[name] == nil { result.unknownFields.append("\(path).\(name)") }
        return result
    }

    static func checkValue(_ value: JSONValue, _ type: SchemaType, path: String, into result: inout SchemaCheck) {
        func wrong(_ expected: String) { result.errors.append("\(path): expected \(expected), got \(value.typeName)") }
        switch type {
        case .string: if value.stringValue == nil { wrong("string") }
        case .boolean: if value.boolValue == nil { wrong("boolean") }
        case .number, .date:
            switch value { case .int, .double: break; default: wrong(type == .date ? "date (seconds since 1970, a number)" : "number") }
        case .integer:
            if value.intValue == nil { wrong("integer") }
        case .object(let fields):
            guard case .object(let object) = value else { return wrong("object") }
            if let fields {
                let nested = check(object, against: fields, path: path)
                result.errors += nested.errors
                result.unknownFields += nested.unknownFields
            }
        case .array(let element):
            guard case .array(let items) = value else { return wrong("array") }
            if let element {
                for (index, item) in items.enumerated() {
                    if item == .null { result.errors.append("\(path)[\(index)]: null in an array of \(element.name)"); continue }
                    checkValue(item, element, path: "\(path)[\(index)]", into: &result)
                }
            }
        }
    }

    /// A schema suggested by an example value: every field required, its type from the value.
    public static func infer(_ object: JSONObject) -> [String: SchemaField] {
        var fields: [String: SchemaField] = [:]
        for (name, value) in object.entries { fields[name] = inferField(value) }
        return fields
    }

    static func inferField(_ value: JSONValue) -> SchemaField {
        switch value {
        case .null: SchemaField(type: .string, optional: true)
        case .bool: SchemaField(type: .boolean, optional: false)
        case .int: SchemaField(type: .integer, optional: false)
        case .double: SchemaField(type: .number, optional: false)
        case .string: SchemaField(type: .string, optional: false)
        case .object(let object): SchemaField(type: .object(infer(object)), optional: false)
        case .array(let items): SchemaField(type: .array(items.first.map { inferField($0).type }), optional: false)
        }
    }
}
