import Foundation
import IsletCore

/// Islet's record of a broadcast channel (X5): its name, Apple's storage policy, and Apple's channel id in
/// each environment it was created in.
public struct ChannelRecord: Sendable, Equatable {
    public let name: String
    public let policy: BroadcastChannels.StoragePolicy
    public let createdAt: Date
    public let ids: [Gateway: String]

    public init(name: String, policy: BroadcastChannels.StoragePolicy, createdAt: Date, ids: [Gateway: String]) {
        self.name = name
        self.policy = policy
        self.createdAt = createdAt
        self.ids = ids
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
}
