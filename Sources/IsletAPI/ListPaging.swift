import IsletCore

/// How a list answer is paged, never silently cut (X4): at most `limit` items (1–1000, default 1000) after
/// `cursor`, and the answer's `next_cursor` (null on the last page) continues it.
struct ListPaging: Sendable {
    static let maximum = 1000
    let limit: Int
    /// The previous page's `next_cursor`: the key of its last item.
    let cursor: String?

    /// `numeric`: the list's keys are non-negative integers, so any other cursor is refused.
    init(_ request: FieldReader, method: String, numeric: Bool = false) throws(APIError) {
        let limit = try request.int("limit") ?? Int64(Self.maximum)
        guard (1...Int64(Self.maximum)).contains(limit) else {
            throw APIError.invalid("limit", "must be an integer from 1 to \(Self.maximum)")
        }
        self.limit = Int(limit)
        cursor = try request.string("cursor")
        if let cursor, numeric, Int64(cursor).map({ $0 < 0 }) ?? true {
            throw APIError.invalid("cursor", "must be the next_cursor of a previous \(method) answer")
        }
    }

    /// How many items to read: one more than the page, which tells whether another page follows.
    var fetch: Int { limit + 1 }

    /// The page out of `fetched` (read with `fetch`), and its `next_cursor`.
    func page<Item>(_ fetched: [Item], key: (Item) -> String) -> (items: ArraySlice<Item>, nextCursor: JSONValue) {
        let items = fetched.prefix(limit)
        return (items, fetched.count > limit ? items.last.map { .string(key($0)) } ?? .null : .null)
    }
}
