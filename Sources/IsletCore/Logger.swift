import Foundation
import Synchronization

/// A JSON-lines logger, passed explicitly to whatever logs.
///
/// Never give it secrets; push tokens go through `Logger.redactToken`.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
        case debug, info, warning, error
        public var description: String { ["debug", "info", "warning", "error"][rawValue] }
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Where lines go; the default writes to standard error.
    public typealias Sink = @Sendable (String) -> Void

    public let label: String
    public let minimumLevel: Level
    private let sink: Sink

    public init(label: String, minimumLevel: Level = .info, sink: @escaping Sink = Logger.standardError) {
        self.label = label
        self.minimumLevel = minimumLevel
        self.sink = sink
    }

    /// The same destination under another label.
    public func with(label: String) -> Logger { Logger(label: label, minimumLevel: minimumLevel, sink: sink) }

    /// A logger that drops everything (tests that do not read logs).
    public static let discard = Logger(label: "discard", minimumLevel: .error, sink: { _ in })

    public func log(_ level: Level, _ message: String, _ fields: [String: JSONValue] = [:]) {
        guard level >= minimumLevel else { return }
        var object = JSONObject()
        object["ts"] = .string(Logger.timestamp())
        object["level"] = .string(level.description)
        object["logger"] = .string(label)
        object["msg"] = .string(message)
        for key in fields.keys.sorted() { object[key] = fields[key] }
        sink(JSONValue.object(object).jsonText)
    }

    public func debug(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.error, message, fields) }

    /// A token shortened for logs: `a1b2…9f0e`.
    public static func redactToken(_ token: String) -> String {
        token.count <= 8 ? "…" : "\(token.prefix(4))…\(token.suffix(4))"
    }

    public static let standardError: Sink = { line in
        standardErrorLock.withLock { _ in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }

    private static let standardErrorLock = Mutex(())

    static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}
