import IsletCore

extension WireValue {
    /// The value as an SQL string literal. States, events and push types are spelled in SQL only through
    /// this, so the enum's spelling is the one the database holds. Values are the types' own constants:
    /// plain words, never a quote (a test checks every type the stores spell). Built on the writers' hot path:
    /// plain concatenation, nothing of Foundation's.
    var sql: String { "'" + rawValue + "'" }

    /// The value bound as a statement's parameter.
    var parameter: SQLValue { .text(rawValue) }
}

extension Sequence where Element: WireValue {
    /// The values as an SQL list, for `IN (…)`: `('retrying', 'unconfirmed')`.
    var sqlList: String {
        var list = "("
        for (index, value) in enumerated() {
            if index > 0 { list += ", " }
            list += value.sql
        }
        return list + ")"
    }
}
