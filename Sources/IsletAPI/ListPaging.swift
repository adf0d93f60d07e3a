import IsletCore

/// How a list answer is paged, never silently cut (X4): at most `limit` items (1–1000, default 1000) after
/// `cursor`, and the answer's `next_cursor` (null on the last page) continues it.
public struct ListPaging: Sendable {
    public static let maximum = 1000
    public let limit: Int
    /// The previous page's `next_cursor`: the key of its last item.
    public let cursor: String?

    /// `numeric`: the list's keys are non-negative integers, so any other cursor is refused.
    init(_ request: FieldReader, method: String, numeric: Bool = false) throws(APIError) {
        try self.init(limit: try request.int("limit"), cursor: try request.string("cursor"), method: method, numeric: numeric)
    }

    /// From a GET's query string (`?limit=…&cursor=…`), with the same rules.
    public init(query: [(name: String, value: String)], method: String) throws(APIError) {
        var limit: Int64?
        if let text = query.first(where: { $0.name == "limit" })?.value {
            guard let number = Int64(text) else { throw APIError.invalid("limit", "must be an integer from 1 to \(Self.maximum)") }
            limit = number
        }
        let cursor = query.first { $0.name == "cursor" }?.value
        // A JSON body is refused whole for a NUL; a query string keeps it, so it is refused here (found by schemathesis).
        if let cursor, cursor.utf8.contains(0) { throw APIError.invalid("cursor", "must not contain the NUL character (\\u0000)") }
        try self.init(limit: limit, cursor: cursor, method: method, numeric: false)
    }

    private init(limit: Int64?, cursor: String?, method: String, numeric: Bool) throws(APIError) {
        let limit = limit ?? Int64(Self.maximum)
        guard (1...Int64(Self.maximum)).contains(limit) else {
            throw APIError.invalid("limit", "must be an integer from 1 to \(Self.maximum)")
        }
        self.limit = Int(limit)
        self.cursor = cursor
        if let cursor, numeric, Int64(cursor).map({ $0 < 0 }) ?? true {
            throw APIError.invalid("cursor", "must be the next_cursor of a previous \(method) answer")
        }
    }

    /// How many items to read: one more than the page, which tells whether another page follows.
    public var fetch: Int { limit + 1 }

    /// The page out of `fetched` (read with `fetch`), and its `next_cursor`.
    public func page<Item>(_ fetched: [Item], key: (Item) -> String) -> (items: ArraySlice<Item>, nextCursor: JSONValue) {
        let items = fetched.prefix(limit)
        return (items, fetched.count > limit ? items.last.map { .string(key($0)) } ?? .null : .null)
    }
}
