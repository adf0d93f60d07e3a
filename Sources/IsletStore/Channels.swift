import Foundation
import IsletCore

/// Islet's record of a broadcast channel (X5): its name, Apple's storage policy, and Apple's channel id in
/// each environment it was created in.
public struct ChannelRecord: Sendable, Equatable {
    public let name: String
    public let policy: BroadcastChannels.StoragePolicy
    public let createdAt: Date
    public let ids: [Gateway: String]
    /// The last broadcast to it, update broadcast along or start on it; nil: never used.
    public var lastUsedAt: Date?
    /// What its idleness counts from: its last use, or its creation when never used.
    public var idleSince: Date { lastUsedAt ?? createdAt }

    public init(name: String, policy: BroadcastChannels.StoragePolicy, createdAt: Date, ids: [Gateway: String], lastUsedAt: Date? = nil) {
        self.name = name
        self.policy = policy
        self.createdAt = createdAt
        self.ids = ids
        self.lastUsedAt = lastUsedAt
    }
}

/// Where Islet keeps its channel records, per application.
public protocol ChannelStore: Sendable {
    func channel(named name: String, in application: ApplicationCode) throws(StoreError) -> ChannelRecord?
    /// In name order, at most `limit` after the name `after`.
    func channels(in application: ApplicationCode, after: String?, limit: Int) throws(StoreError) -> [ChannelRecord]
    /// How many channels the application has in one environment (Apple counts them per environment).
    func channelCount(in application: ApplicationCode, gateway: Gateway) throws(StoreError) -> Int
    /// Stores a new record; a name already taken is a conflict.
    func saveChannel(_ record: ChannelRecord, in application: ApplicationCode) throws(StoreError)
    /// Removes the record's channel in one environment; the record goes with its last. Whether there was one.
    func deleteChannel(named name: String, gateway: Gateway, in application: ApplicationCode) throws(StoreError) -> Bool
    /// Channels not used since `date` (never used: not since their creation), of every application but `excluding`,
    /// at most `limit`.
    func idleChannels(unusedSince date: Date, excluding: Set<ApplicationCode>, limit: Int) throws(StoreError)
        -> [(application: ApplicationCode, record: ChannelRecord)]
}

/// One accepted broadcast (X5), before it is split by environment.
public struct NewBroadcast: Sendable {
    public let code: String
    /// Islet's channel name.
    public let channel: String
    public let payload: [UInt8]
    public let priority: Int
    /// When Islet stops retrying it.
    public let expiresAt: Date
    /// `apns-expiration` as asked (`apns_expiration`); nil: the channel's default.
    public let expiration: Int64?

    public init(code: String, channel: String, payload: [UInt8], priority: Int, expiresAt: Date, expiration: Int64? = nil) {
        self.code = code
        self.channel = channel
        self.payload = payload
        self.priority = priority
        self.expiresAt = expiresAt
        self.expiration = expiration
    }
}

/// A broadcast request due to go to APNs: one environment of one broadcast.
public struct DueBroadcast: Sendable, Equatable {
    public let id: Int64
    public let code: String
    public let application: ApplicationCode
    public let gateway: Gateway
    public let channelID: String
    public let payload: [UInt8]
    public let priority: Int
    /// `apns-expiration`: 0 on a channel that stores nothing.
    public let expiration: Int64
    public let expiresAt: Date
    /// Sends before this one.
    public let attempts: Int

    public init(id: Int64, code: String, application: ApplicationCode, gateway: Gateway, channelID: String, payload: [UInt8], priority: Int,
                expiration: Int64, expiresAt: Date, attempts: Int) {
        self.id = id
        self.code = code
        self.application = application
        self.gateway = gateway
        self.channelID = channelID
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.expiresAt = expiresAt
        self.attempts = attempts
    }
}

/// What one send of a broadcast came to.
public struct BroadcastResult: Sendable, Equatable {
    public let id: Int64
    public let state: DeliveryState
    public let status: Int
    public let reason: String?
    /// Apple's `apns-unique-id`, for a request Apple took.
    public let uniqueID: String?
    /// When a retry goes.
    public let nextAt: Date?

    public init(id: Int64, state: DeliveryState, status: Int, reason: String?, uniqueID: String?, nextAt: Date?) {
        self.id = id
        self.state = state
        self.status = status
        self.reason = reason
        self.uniqueID = uniqueID
        self.nextAt = nextAt
    }
}

/// A broadcast as getMessageDetails shows it: one request per environment.
public struct BroadcastDetails: Sendable, Equatable {
    public struct Request: Sendable, Equatable {
        public let gateway: Gateway
        /// `pending` (not sent yet), `sending`, or a delivery state.
        public let state: String
        public let status: Int?
        public let reason: String?
        public let uniqueID: String?
        public let attempts: Int
        public let nextAttemptAt: Date?
        public let bytes: Int

        public init(gateway: Gateway, state: String, status: Int?, reason: String?, uniqueID: String?, attempts: Int, nextAttemptAt: Date?, bytes: Int) {
            self.gateway = gateway
            self.state = state
            self.status = status
            self.reason = reason
            self.uniqueID = uniqueID
            self.attempts = attempts
            self.nextAttemptAt = nextAttemptAt
            self.bytes = bytes
        }
    }

    public let code: String
    public let channel: String
    public let createdAt: Date
    public let requests: [Request]

    public init(code: String, channel: String, createdAt: Date, requests: [Request]) {
        self.code = code
        self.channel = channel
        self.createdAt = createdAt
        self.requests = requests
    }
}

/// Broadcasts waiting for, or carrying, their one request per environment (X5): durable, retried until
/// they expire, as per-device pushes are.
public protocol BroadcastStore: Sendable {
    /// Queues each broadcast once per environment its channel exists in, all or none; an unknown channel is
    /// an `AcceptRefusal` naming the notification's `channel`.
    func acceptBroadcasts(_ broadcasts: [NewBroadcast], in application: ApplicationCode, at date: Date) throws
    /// Takes up to `limit` requests that are due, each for `claimFor` (after that, one not recorded is due again).
    func claimDueBroadcasts(at date: Date, limit: Int, claimFor: TimeInterval) throws(StoreError) -> [DueBroadcast]
    func recordBroadcasts(_ results: [BroadcastResult], at date: Date) throws(StoreError)
    /// When the next request is due; nil when none waits.
    func nextBroadcastDue() throws(StoreError) -> Date?
    func broadcastDetails(code: String, in application: ApplicationCode) throws(StoreError) -> BroadcastDetails?
}
