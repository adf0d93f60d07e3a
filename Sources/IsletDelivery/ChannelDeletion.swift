import Foundation
import IsletCore
import IsletStore

/// Deletes a broadcast channel (X5): Apple's channel in each environment first, then that environment of
/// Islet's record, so a failure half way leaves a record of exactly what Apple still has. A channel Apple
/// no longer has (deleted behind Islet's back) counts as deleted.
public struct ChannelDeletion: Sendable {
    let store: any ChannelStore
    let transport: any PushTransport
    /// The longest one management request may take.
    let timeout: Duration

    public init(store: any ChannelStore, transport: any PushTransport, timeout: Duration = .seconds(15)) {
        self.store = store
        self.transport = transport
        self.timeout = timeout
    }

    /// Whether Apple's answer to a DELETE means the channel is gone: deleted now, or already (behind Islet's back).
    public static func isGone(_ outcome: PushOutcome) -> Bool { outcome.status == 204 || outcome.reason == .channelNotRegistered }

    /// Throws Apple's refusal as the API error to answer (`BroadcastChannels.appleRefusal`), or a store error.
    public func delete(_ record: ChannelRecord, application: ApplicationCode, bundleID: String) throws {
        for gateway in Gateway.all {
            guard let id = record.ids[gateway] else { continue }
            let push = Push.manageChannels(application: application, gateway: gateway, bundleID: bundleID, method: "DELETE", path: "channels", channelID: id)
            let outcome = transport.send([push], deadline: .now + timeout).first ?? .unknown("no answer")
            guard Self.isGone(outcome) else {
                throw BroadcastChannels.appleRefusal(action: "delete", name: record.name, gateway: gateway, status: outcome.status, reason: outcome.recordedReason)
            }
            _ = try store.deleteChannel(named: record.name, gateway: gateway, in: application)
        }
    }
}

/// X5: channels no broadcast, update or start has used for a while, deleted for their application (Apple
/// allows 10,000 per environment, and keeps each until it is deleted). Run by the retention service.
public struct IdleChannels: Sendable {
    let store: any ChannelStore
    let applications: any ApplicationStore
    let deletion: ChannelDeletion
    /// Told of each channel deleted (the audit log).
    let deleted: @Sendable (ApplicationCode, String) -> Void

    public init(store: any ChannelStore, applications: any ApplicationStore, deletion: ChannelDeletion,
                deleted: @escaping @Sendable (ApplicationCode, String) -> Void = { _, _ in }) {
        self.store = store
        self.applications = applications
        self.deletion = deletion
        self.deleted = deleted
    }
}
