import Foundation
import IsletCore

/// How a large fan-out is split into shards that workers send at once (issue 10): contiguous ranges
/// of device ids, each with its own progress.
public struct ShardPolicy: Sendable, Equatable {
    /// Device ids per shard; an application whose ids span less than two of these is not split.
    public var span: Int64
    /// Shards of one message at most.
    public var maximum: Int

    /// The default splits only audiences spanning 500,000 device ids or more: on a 2-core machine one
    /// worker's pipeline already keeps the wire busy, and more shards mostly compete for the CPU and
    /// SQLite's writer with the small messages that must get through at once (BENCHMARKS.md).
    public init(span: Int64 = 250_000, maximum: Int = 4) {
        self.span = max(1, span)
        self.maximum = max(1, maximum)
    }

    /// The shards of ids in `lowest...highest`: (after, upTo] ranges covering them, none for a small range.
    public func shards(lowest: Int64, highest: Int64) -> [(after: Int64, upTo: Int64)] {
        let width = highest - lowest + 1
        guard width >= 2 * span else { return [] }
        let count = Int(min(Int64(maximum), (width + span - 1) / span))
        let size = (width + Int64(count) - 1) / Int64(count)
        return (0..<count).map { index in
            let after = lowest - 1 + Int64(index) * size
            return (after, index == count - 1 ? Int64.max : min(after + size, highest))
        }
    }
}

/// A claimed delivery job: one message and how far its fan-out got.
public struct MessageJob: Sendable, Equatable {
    public let id: Int64
    public let code: String
    public let application: ApplicationCode
    public let event: LiveActivityEvent
    public let activity: Int64
    public let activityID: String
    public let target: TargetSelection?
    public let attributesType: String?
    public let payload: [UInt8]
    /// A start on a broadcast channel (X5): Apple's channel id per environment. An update or end of an
    /// activity started on one: the channel, which it is broadcast to as well.
    public var channelIDs: [Gateway: String]?
    public var channel: String?
    public let fallbackPayload: [UInt8]?
    /// The FCM `data` of its Android Live Update (issue 46); nil: it reaches no Android phone.
    public var androidPayload: [UInt8]?
    /// The priority its pushes go at, by kind of device (A7).
    public let priority: BudgetedPriority
    /// Devices up to this id are done; a resumed job starts after it.
    public let cursor: Int64
    public let expiresAt: Date
    /// When it fell due: accepted (or its scheduled time); the delivery lag is measured from here.
    public let dueAt: Date
    /// When its activity's current session started (A8): an update past 8 hours reaches no device.
    public var activityStartedAt: Date?
    /// A shard of a large fan-out: its number, and the last device id it covers.
    public var shard: (number: Int, upTo: Int64)?
    /// The lease of the claim that took it: its fencing token (issue 14).
    public var lease: Int64 = 0

    public static func == (a: MessageJob, b: MessageJob) -> Bool {
        a.id == b.id && a.cursor == b.cursor && a.shard?.number == b.shard?.number && a.shard?.upTo == b.shard?.upTo
    }

    public init(id: Int64, code: String, application: ApplicationCode, event: LiveActivityEvent, activity: Int64, activityID: String, target: TargetSelection?, attributesType: String?, payload: [UInt8], fallbackPayload: [UInt8]?, priority: BudgetedPriority, cursor: Int64, expiresAt: Date, dueAt: Date) {
        self.expiresAt = expiresAt
        self.dueAt = dueAt
        self.id = id
        self.code = code
        self.application = application
        self.event = event
        self.activity = activity
        self.activityID = activityID
        self.target = target
        self.attributesType = attributesType
        self.payload = payload
        self.fallbackPayload = fallbackPayload
        self.priority = priority
        self.cursor = cursor
    }

    /// The same job resumed from another cursor.
    public init(copying job: MessageJob, cursor: Int64) {
        self.init(id: job.id, code: job.code, application: job.application, event: job.event, activity: job.activity,
                  activityID: job.activityID, target: job.target, attributesType: job.attributesType, payload: job.payload,
                  fallbackPayload: job.fallbackPayload, priority: job.priority, cursor: cursor, expiresAt: job.expiresAt, dueAt: job.dueAt)
        activityStartedAt = job.activityStartedAt
        androidPayload = job.androidPayload
        channelIDs = job.channelIDs
        channel = job.channel
        shard = job.shard
        lease = job.lease
    }
}
