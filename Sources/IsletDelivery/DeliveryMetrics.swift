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
        /// `apns` or `fcm`: the service the push went through (issue 46); "" when none was sent (a skip, a settled retry).
        public var service = ""

        public static func < (a: Key, b: Key) -> Bool {
            (a.result.rawValue, a.reason, a.service) < (b.result.rawValue, b.reason, b.service)
        }
    }

    private let counts = Mutex<[Key: Int]>([:])

    /// Upper bounds (seconds) of the delivery-lag buckets: from a message falling due (its acceptance, for
    /// an update) to its push leaving Islet.
    public static let lagBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]

    /// The delivery-lag histogram: a count per bucket (the last one is +Inf), the count and the sum.
    public struct LagHistogram: Sendable, Equatable {
        public var buckets = [Int](repeating: 0, count: DeliveryMetrics.lagBuckets.count + 1)
        public var count = 0
        public var sum = 0.0
    }

    private let lag = Mutex(LagHistogram())

    public init() {}

    /// Counts pushes leaving Islet `seconds` after their message fell due (first sends only, not retries,
    /// which wait on purpose).
    func recordLag(_ seconds: Double, pushes: Int) {
        guard pushes > 0 else { return }
        let index = Self.lagBuckets.firstIndex { seconds <= $0 } ?? Self.lagBuckets.count
        lag.withLock { histogram in
            histogram.buckets[index] += pushes
            histogram.count += pushes
            histogram.sum += max(0, seconds) * Double(pushes)
        }
    }

    public func lagSnapshot() -> LagHistogram { lag.withLock { $0 } }

    /// The label a record is counted under: Apple's reason when it is one of Apple's (FCM's error, for an Android push),
    /// the skip reason for a skip, "no answer" when the service never answered, "" for a plain success, else "other".
    public static func key(_ record: DeliveryRecord) -> Key {
        let reason: String
        let fcm = record.pushType?.isFCM == true
        switch record.reason {
        case nil: reason = record.status == 0 && record.state != .sent && record.state != .skipped ? "no answer" : ""
        case let text? where fcm && FCMError(text).isKnown: reason = text
        case let text? where !fcm && APNsReason(text).isKnown: reason = text
        case let text? where record.state == .skipped && SkipReason.all.contains(text): reason = text
        case let text? where PushToStartPacing.isPaced(text): reason = "paced"
        case _? where record.status == 0: reason = "no answer"
        case _?: reason = "other"
        }
        var key = Key(result: record.state, reason: reason)
        key.service = record.pushType.map { $0.isFCM ? "fcm" : "apns" } ?? ""
        return key
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

    /// What this node did among the nodes sharing its database (issue 14).
    public struct ClusterCounts: Sendable, Equatable {
        /// Claims that took work: jobs and shards, groups of small messages, groups of due retries.
        public var claims = 0
        /// Looks for work that found none: each costs the database a claim's queries (for nothing).
        public var emptyLooks = 0
        /// Looks for work not made because this node's liveness session was down (the other nodes count it gone).
        public var withheldLooks = 0
        /// Claims whose lease was rescued before their outcome was written: their work went to another node.
        public var leaseLosses = 0
        /// Leases this node rescued (expired, or their node gone), and the jobs/shards and retries they freed.
        public var rescuedLeases = 0
        public var rescuedJobs = 0
        public var rescuedDeliveries = 0
    }

    private let cluster = Mutex(ClusterCounts())

    func count(_ change: (inout ClusterCounts) -> Void) { cluster.withLock { change(&$0) } }

    public func clusterSnapshot() -> ClusterCounts { cluster.withLock { $0 } }
}
