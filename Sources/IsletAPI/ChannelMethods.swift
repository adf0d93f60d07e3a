import Foundation
import IsletCore
import IsletDelivery
import IsletStore

/// Broadcast channels (X5): `createLiveActivityChannel`, `listLiveActivityChannels`, `getLiveActivityChannel`,
/// `deleteLiveActivityChannel`. Islet creates and deletes them through Apple's channel management API and
/// keeps its record in step: a record exists for what Apple confirmed, and only that.
public struct ChannelMethods: Sendable {
    let store: any ChannelStore
    /// Where management requests go (Apple, or the simulator); nil when the server has no APNs transport.
    let transport: (any PushTransport)?
    let audit: AuditLog
    /// The longest one management request may take.
    let timeout: Duration
    /// Calls that ask Apple, running at once: each holds a shared HTTP worker until Apple answers or `timeout` passes.
    let managementSlots: AtOnceLimit

    public init(store: any ChannelStore, transport: (any PushTransport)?, audit: AuditLog = .disabled, timeout: Duration = .seconds(15),
                atOnce: Int = BroadcastChannels.managementAtOnce, atOncePerApplication: Int = BroadcastChannels.managementAtOncePerApplication) {
        self.store = store
        self.transport = transport
        self.audit = audit
        self.timeout = timeout
        managementSlots = AtOnceLimit(limit: atOnce, perKey: atOncePerApplication)
    }

    /// Runs a call that asks Apple, unless as many run already, in all or for the application: then 429, retry later.
    private func managing<T>(_ application: ApplicationCode, _ body: () throws -> T) throws -> T {
        guard let result = try managementSlots.run(key: application.rawValue, body) else {
            throw RateLimited(message: BroadcastChannels.managementBusy(atOnce: managementSlots.limit, perApplication: managementSlots.perKey),
                              retryAfter: BroadcastChannels.managementRetryAfter)
        }
        return result
    }

    public var all: [APIMethod] {
        [createLiveActivityChannel, listLiveActivityChannels, getLiveActivityChannel, deleteLiveActivityChannel, checkLiveActivityChannels]
    }

    static func json(_ record: ChannelRecord) -> JSONValue {
        ["name": .string(record.name), "storage_policy": .string(record.policy.rawValue),
         "apns_channel_ids": .object(JSONObject(Gateway.all.compactMap { gateway in record.ids[gateway].map { (gateway.rawValue, .string($0)) } })),
         "created_at": .string(record.createdAt.formatted(.iso8601)),
         "last_used_at": record.lastUsedAt.map { .string($0.formatted(.iso8601)) } ?? .null]
    }

    static let noTransport = APIError(.unavailable, "this server has no APNs connection to manage channels with (start it with --apns apple or --apns simulator)")

    private func management(_ push: Push) throws(APIError) -> PushOutcome {
        guard let transport else { throw Self.noTransport }
        return transport.send([push], deadline: .now + timeout).first ?? .unknown("no answer")
    }

    var createLiveActivityChannel: APIMethod {
        APIMethod(name: "createLiveActivityChannel", access: .server) { [self] call in
            let new = try BroadcastChannels.newChannel(call.request)
            let application = call.application
            return try managing(application.code) { try create(new, application, call) }
        }
    }

    private func create(_ new: BroadcastChannels.NewChannel, _ application: Application, _ call: APICall) throws -> JSONObject {
        guard try store.channel(named: new.name, in: application.code) == nil else {
            throw APIError.invalid("name", "a channel named '\(new.name)' already exists")
        }
        for gateway in new.gateways where try store.channelCount(in: application.code, gateway: gateway) >= BroadcastChannels.limitPerEnvironment {
            throw BroadcastChannels.limitReached(gateway)
        }
        var ids: [Gateway: String] = [:]
        do {
            for gateway in new.gateways {
                let outcome = try management(.manageChannels(application: application.code, gateway: gateway, bundleID: application.bundleID,
                                                             method: "POST", path: "channels",
                                                             body: BroadcastChannels.createBody(new.policy).jsonBytes))
                guard outcome.status == 201, let id = outcome.management?.channelID, !id.isEmpty else {
                    throw BroadcastChannels.appleRefusal(action: "create", name: new.name, gateway: gateway, status: outcome.status, reason: outcome.recordedReason)
                }
                ids[gateway] = id
            }
            let record = ChannelRecord(name: new.name, policy: new.policy, createdAt: call.receivedAt, ids: ids)
            do {
                try store.saveChannel(record, in: application.code)
            } catch {
                guard error.code == .conflict else { throw error }
                throw APIError.invalid("name", "a channel named '\(new.name)' already exists")
            }
            audit.record(.channelCreated, application: application.code, actor: call.actor, details: ["channel": Self.json(record)])
            return ["channel": Self.json(record)]
        } catch {
            // Nothing half-made: the channels Apple created for this call go again; one Apple would not delete is named.
            var left: [String] = []
            for (gateway, id) in ids {
                let outcome = try? management(.manageChannels(application: application.code, gateway: gateway, bundleID: application.bundleID,
                                                              method: "DELETE", path: "channels", channelID: id))
                if !(outcome.map(ChannelDeletion.isGone) ?? false) { left.append("\(id) (\(gateway))") }
            }
            guard !left.isEmpty, let refusal = error as? APIError else { throw error }
            throw APIError(refusal.code, refusal.message + "; Apple's channel " + left.joined(separator: " and ")
                           + " could not be deleted again: checkLiveActivityChannels names it")
        }
    }

    var listLiveActivityChannels: APIMethod {
        APIMethod(name: "listLiveActivityChannels", access: .server, effect: .reads) { [store] call in
            let paging = try ListPaging(call.request, method: "listLiveActivityChannels")
            let (channels, nextCursor) = paging.page(try store.channels(in: call.application.code, after: paging.cursor, limit: paging.fetch)) { $0.name }
            return ["channels": .array(channels.map(Self.json)), "next_cursor": nextCursor]
        }
    }

    var getLiveActivityChannel: APIMethod {
        APIMethod(name: "getLiveActivityChannel", access: .server, effect: .reads) { [store] call in
            let name = try BroadcastChannels.name(call.request)
            guard let record = try store.channel(named: name, in: call.application.code) else { throw Self.unknown(name) }
            return ["channel": Self.json(record)]
        }
    }

    /// Apple's channel in each environment goes first; the record keeps what Apple still has (`ChannelDeletion`).
    var deleteLiveActivityChannel: APIMethod {
        APIMethod(name: "deleteLiveActivityChannel", access: .server) { [self] call in
            let name = try BroadcastChannels.name(call.request)
            let application = call.application
            guard let record = try store.channel(named: name, in: application.code) else { throw Self.unknown(name) }
            guard let transport else { throw Self.noTransport }
            try managing(application.code) {
                try ChannelDeletion(store: store, transport: transport, timeout: timeout).delete(record, application: application.code, bundleID: application.bundleID)
            }
            audit.record(.channelDeleted, application: application.code, actor: call.actor, details: ["name": .string(name)])
            return [:]
        }
    }

    /// Compares Islet's records with Apple's list of channels (`all-channels`) in each environment and names
    /// what differs: records whose channel Apple no longer has (broadcasts to them fail), and Apple channels
    /// no record holds (they count against Apple's limit). `repair: true` drops the former from the records;
    /// Apple's channels are never deleted here, as another system may own them.
    var checkLiveActivityChannels: APIMethod {
        APIMethod(name: "checkLiveActivityChannels", access: .server) { [self] call in
            let repair = try call.request.bool("repair") ?? false
            let application = call.application
            var records: [ChannelRecord] = []
            var after: String?
            while true {
                let page = try store.channels(in: application.code, after: after, limit: 1000)
                records += page
                guard page.count == 1000, let last = page.last else { break }
                after = last.name
            }
            let known = Set(records.flatMap { $0.ids.values })
            var missing: [JSONValue] = [], unknown: [JSONValue] = [], counts = JSONObject()
            for gateway in Gateway.all {
                let outcome = try managing(application.code) {
                    try management(.manageChannels(application: application.code, gateway: gateway, bundleID: application.bundleID,
                                                   method: "GET", path: "all-channels"))
                }
                guard outcome.status == 200, let body = outcome.management?.body, let listed = (try? JSONParser.parse(body))?.objectValue?["channels"]?.arrayValue else {
                    throw BroadcastChannels.appleRefusal(action: "list", name: "*", gateway: gateway, status: outcome.status, reason: outcome.recordedReason)
                }
                let apple = Set(listed.compactMap(\.stringValue))
                counts[gateway.rawValue] = .int(Int64(apple.count))
                for record in records {
                    guard let id = record.ids[gateway], !apple.contains(id) else { continue }
                    missing.append(["name": .string(record.name), "environment": .string(gateway.rawValue), "apns_channel_id": .string(id)])
                    if repair { _ = try store.deleteChannel(named: record.name, gateway: gateway, in: application.code) }
                }
                for id in apple.subtracting(known).sorted() {
                    unknown.append(["environment": .string(gateway.rawValue), "apns_channel_id": .string(id)])
                }
            }
            return ["missing_at_apple": .array(missing), "unknown_to_islet": .array(unknown), "apple_channels": .object(counts),
                    "repaired": .bool(repair && !missing.isEmpty)]
        }
    }

    static func unknown(_ name: String) -> APIError {
        .invalid("name", BroadcastChannels.unknown(name))
    }
}
