import IsletCore

extension WireValue {
    /// The value as an SQL string literal. States, events and push types are spelled in SQL only through
    /// this, so the enum's spelling is the one the database holds. Values are the types' own constants:
    /// plain words, never a quote.
    var sql: String {
        precondition(!rawValue.contains("'"), "an SQL spelling cannot hold a quote: \(rawValue)")
        return "'\(rawValue)'"
    }

    /// The value bound as a statement's parameter.
    var parameter: SQLValue { .text(rawValue) }
}

extension Sequence where Element: WireValue {
    /// The values as an SQL list, for `IN (…)`: `('retrying', 'unconfirmed')`.
    var sqlList: String { "(" + map(\.sql).joined(separator: ", ") + ")" }
}
