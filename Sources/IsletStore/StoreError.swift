/// The one error type of storage engines.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The row a change refers to does not exist.
        public static let notFound = Code(rawValue: "not_found")
        /// A unique value is taken.
        public static let conflict = Code(rawValue: "conflict")
        /// The database was written by a newer Islet.
        public static let newerSchema = Code(rawValue: "newer_schema")
        /// The database could not be opened, read or written.
        public static let io = Code(rawValue: "io")
        /// An APNs key is sealed and the master key to open it is missing or wrong.
        public static let locked = Code(rawValue: "locked")
        /// A claim's lease was rescued (it expired, or its node was taken for gone): its work is another
        /// node's now, and nothing of this write was kept (issue 14).
        public static let leaseLost = Code(rawValue: "lease_lost")
        /// A row another transaction held past a short wait, or a deadlock PostgreSQL broke on this side: nothing
        /// was written, and trying again shortly is right. A claim claimed nothing and looks again; a write is
        /// run again by its group commit (a few times, then its caller gets this: a 503 at the API).
        public static let busy = Code(rawValue: "busy")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
