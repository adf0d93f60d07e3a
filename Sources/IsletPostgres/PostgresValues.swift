import CPostgres
import IsletSQL

/// Values on PostgreSQL's wire, in its text format: the type a parameter is sent as, and a result cell read back.
extension PostgresConnection {
    static func type(_ value: SQLValue) -> Oid {
        switch value {
        case .null: 0          // inferred from where it is used
        case .int: 20          // int8
        case .double: 701      // float8
        case .text: 25         // text
        case .blob: 17         // bytea
        }
    }

    static func decode(_ pointer: UnsafeMutablePointer<CChar>?, type: Oid) -> SQLValue {
        guard let pointer else { return .null }
        // Integers (ids, times, counts: most cells) straight from the digits, without a String between.
        if type == 20 || type == 21 || type == 23, let value = integer(pointer) { return .int(value) }
        let text = String(cString: pointer)
        switch type {
        case 16: return .int(text == "t" ? 1 : 0)                                  // bool
        case 20, 21, 23, 26: return Int64(text).map(SQLValue.int) ?? .text(text)   // integers, oid
        case 700, 701: return Double(text).map(SQLValue.double) ?? .text(text)
        case 1700: return Int64(text).map(SQLValue.int) ?? Double(text).map(SQLValue.double) ?? .text(text)   // numeric
        case 17: return .blob(hexBytes(text))                                      // bytea, hex output
        default: return .text(text)
        }
    }

    /// A decimal integer's text output (optional `-`, digits), or nil when it is not one that fits.
    static func integer(_ pointer: UnsafePointer<CChar>) -> Int64? {
        var index = 0
        let negative = pointer[0] == 45   // "-"
        if negative { index = 1 }
        var value: Int64 = 0
        while pointer[index] != 0 {
            let digit = Int64(pointer[index]) - 48
            guard digit >= 0 && digit <= 9 else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowed) = shifted.subtractingReportingOverflow(digit)   // built negative: Int64.min fits
            guard !overflow && !overflowed else { return nil }
            value = sum
            index += 1
        }
        guard index > (negative ? 1 : 0) else { return nil }
        if negative { return value }
        return value == .min ? nil : -value
    }

    /// bytea's text output: `\x` then two hex digits a byte.
    private static func hexBytes(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8.dropFirst(2))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index + 1 < digits.count {
            bytes.append(nibble(digits[index]) << 4 | nibble(digits[index + 1]))
            index += 2
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8 {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: digit - UInt8(ascii: "A") + 10
        }
    }
}
