/// What a setTags or registerDevice call does to one tag of a device (D2): set a value, remove the tag, or one of the
/// operations the Pushwoosh SDK's tag builders send (issue 45): `{"operation": "increment", "value": n}` on an integer
/// tag, `append` and `remove` on a list tag. An operation is applied to the device's value under its row lock, so two
/// increments at once both count.
public enum TagChange: Sendable, Hashable, ExpressibleByNilLiteral {
    case set(TagValue)
    case remove
    case increment(Int64)
    case append([String])
    case removeItems([String])

    /// The most strings a list tag holds.
    public static let maximumListItems = 100

    /// `nil` removes the tag, as `null` does in the API.
    public init(nilLiteral: ()) { self = .remove }

    /// Setting a value of each kind, spelled as the value is.
    public static func string(_ text: String) -> Self { .set(.string(text)) }
    public static func integer(_ number: Int64) -> Self { .set(.integer(number)) }
    public static func list(_ items: [String]) -> Self { .set(.list(items)) }

    /// What applying the change makes of the tag on the device.
    public enum Outcome: Sendable, Equatable {
        /// Store this value (nil: the device no longer has the tag).
        case store(TagValue?)
        /// Leave the device's value as it is, and name the tag in the answer.
        case skip(SkippedTag.Why)
    }

    /// The tag's new value on the device, from its `current` value (nil: none) and the tag's `type` in the application
    /// (nil: no device set it yet, so the result's type becomes the tag's). A list holds each string once, at most
    /// `listLimit` of them.
    public func apply(current: TagValue?, type: TagType?, listLimit: Int) -> Outcome {
        switch self {
        case .remove:
            return .store(nil)
        case .set(let value):
            return Self.coerce(value, to: type)
        case .increment(let step):
            if let type, type != .integer { return .skip(.typeClash(existing: type, given: .integer)) }
            guard case .integer(let base)? = current else { return .store(.integer(step)) }
            let (sum, overflow) = base.addingReportingOverflow(step)
            return overflow ? .skip(.overflow) : .store(.integer(sum))
        case .append(let items), .removeItems(let items):
            if let type, type != .list { return .skip(.typeClash(existing: type, given: .list)) }
            var list: [String] = []
            if case .list(let held)? = current { list = held }
            if case .append = self {
                for item in items where !list.contains(item) { list.append(item) }
                guard list.count <= listLimit else { return .skip(.listTooLong(limit: listLimit)) }
            } else {
                list.removeAll { items.contains($0) }
                // Removing from a tag no device has set gives it no type.
                if type == nil && current == nil { return .store(nil) }
            }
            return .store(.list(list))
        }
    }

    /// A value set under a tag of `type`: a string becomes a date under a date tag; any other value of another type
    /// than the tag's is skipped.
    static func coerce(_ value: TagValue, to type: TagType?) -> Outcome {
        guard let type, type != value.type else { return .store(value) }
        if type == .date, case .string(let text) = value {
            guard let seconds = TagDate.parse(text) else { return .skip(.notADate(text)) }
            return .store(.date(seconds))
        }
        return .skip(.typeClash(existing: type, given: value.type))
    }
}

/// Dates of date tags, as the Pushwoosh SDK formats them: `yyyy-MM-dd HH:mm`, taken as UTC (and `yyyy-MM-dd`,
/// midnight). Kept as seconds since 1970, so filters compare them as integers.
public enum TagDate {
    /// Seconds since 1970 (UTC) of `text`, or nil when it is not such a date, or a day that does not exist.
    public static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10 || bytes.count == 16, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        var minutes: Int64 = 0
        if bytes.count == 16 {
            guard bytes[10] == UInt8(ascii: " "), bytes[13] == UInt8(ascii: ":"), let hour = number(11..<13), let minute = number(14..<16),
                  hour < 24, minute < 60 else { return nil }
            minutes = hour * 60 + minute
        }
        return daysSince1970(year: year, month: month, day: day) * 86_400 + minutes * 60
    }

    /// `yyyy-MM-dd HH:mm` (UTC) of seconds since 1970.
    public static func text(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let minuteOfDay = (seconds - days * 86_400) / 60
        let (year, month, day) = civil(daysSince1970: days)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(yearText)-\(two(month))-\(two(day)) \(two(minuteOfDay / 60)):\(two(minuteOfDay % 60))"
    }

    static func isLeap(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a day of the proleptic Gregorian calendar, by its 400-year cycles of 146,097 days.
    static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of `daysSince1970`.
    static func civil(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
