import Foundation
import IsletCore
import IsletStore
import Synchronization

/// Counts of recorded push outcomes for operators (`/metrics`): by what became of the push and why.
///
/// Counted only once recorded, so the figures agree with getMessageDetails. Labels come from bounded
/// sets (delivery states, Apple's reasons, Islet's skip reasons), never from free text.
public final class DeliveryMetrics: Sendable {
    public struct Key: Hashable, Sendable, Comparable {
        public let result: DeliveryState
        public let reason: String

        public static func < (a: Key, b: Key) -> Bool { (a.result.rawValue, a.reason) < (b.result.rawValue, b.reason) }
    }

    private let counts = Mutex<[Key: Int]>([:])

    public init() {}

    /// The label a record is counted under: Apple's reason when it is one of Apple's, the skip reason for
    /// a skip, "no answer" when APNs never answered, "" for a plain success, else "other".
    public static func key(_ record: DeliveryRecord) -> Key {
        let reason: String
        switch record.reason {
        case nil: reason = record.status == 0 && record.state != .sent && record.state != .skipped ? "no answer" : ""
        case let text? where APNsReasons.table[text] != nil: reason = text
        case let text? where record.state == .skipped && SkipReason.all.contains(text): reason = text
        case _? where record.status == 0: reason = "no answer"
        case _?: reason = "other"
        }
        return Key(result: record.state, reason: reason)
    }

    func count(_ records: [DeliveryRecord]) { count(keys: records.map(Self.key)) }

    func count(keys: [Key]) {
        guard !keys.isEmpty else { return }
        counts.withLock { counts in
            for key in keys { counts[key, default: 0] += 1 }
        }
    }

    /// The label of a push settled without a send (its reason is Islet's own words, so it is not a label).
    static func settledKey(_ state: DeliveryState, reason: String) -> Key {
        Key(result: state, reason: state == .failed ? "no answer" : "")
    }

    public func snapshot() -> [Key: Int] { counts.withLock { $0 } }
}
