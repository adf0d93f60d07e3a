/// Counts by key (runs per application, connections or body bytes per client address) that forget a key whose count
/// falls back to zero, so the keys of clients long gone do not pile up. Not synchronized: kept inside a lock.
public struct CountsByKey: Sendable {
    private var counts: [String: Int] = [:]

    public init() {}

    public subscript(key: String) -> Int { counts[key, default: 0] }

    public mutating func add(_ amount: Int, to key: String) { counts[key, default: 0] += amount }

    public mutating func remove(_ amount: Int, from key: String) {
        let left = counts[key, default: amount] - amount
        counts[key] = left > 0 ? left : nil
    }
}
