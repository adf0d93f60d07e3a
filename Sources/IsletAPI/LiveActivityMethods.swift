import Foundation
import IsletCore
import IsletDelivery
import IsletStore

/// startLiveActivity, updateLiveActivity and what goes with them: deleteMessage, getMessageDetails,
/// getLiveActivity (SPEC §2, §3, X3, X4).
public struct LiveActivityMethods: Sendable {
    let devices: any DeviceStore
    let messages: any MessageStore
    let schemas: any SchemaStore
    /// Wakes the delivery service after a message is stored.
    let kick: @Sendable () -> Void
    /// How long after its send time a push is still worth delivering (`apns-expiration`; retries stop then).
    let pushLifetime: TimeInterval
    /// The least time between two updates of one activity (A9).
    let pacing: UpdatePacing
    /// Broadcasts to channels (X5), and the channels they go to; nil: notifications with `channel` are refused.
    let broadcasts: (any BroadcastStore)?
    let channels: (any ChannelStore)?
    /// Which applications' updates are checked against a schema before they are offered to the store (X2).
    let schemaPresence = SchemaPresence()

    public init(devices: any DeviceStore, messages: any MessageStore, schemas: any SchemaStore, pushLifetime: Duration = .seconds(3600),
                pacing: UpdatePacing = .standard, broadcasts: (any BroadcastStore)? = nil, channels: (any ChannelStore)? = nil,
                kick: @escaping @Sendable () -> Void) {
        self.broadcasts = broadcasts
        self.channels = channels
        self.pushLifetime = Double(pushLifetime.components.seconds)
        self.pacing = pacing
        self.devices = devices
        self.messages = messages
        self.schemas = schemas
        self.kick = kick
    }

    public var all: [APIMethod] { [startLiveActivity, updateLiveActivity, deleteMessage, getMessageDetails, getLiveActivity] }

    /// Pushes shown per notification by a dry run (X3).
    static let dryRunPushes = 100

    /// S4: a filter by name (unknown: refused), or the listed devices or users.
    func selection(_ targeting: Targeting, _ n: FieldReader, _ application: ApplicationCode) throws -> TargetSelection {
        switch targeting {
        case .filter(let name):
            guard let filter = try devices.filter(named: name, in: application) else {
                let key = n.object["filter"] != nil ? "filter" : "filter_code"
                throw APIError.invalid(n.fieldPath(key), "no filter named '\(name)' in this application (create it with createFilter)")
            }
            return .filter(filter)
        case .devices(let list): return .devices(list)
        case .users(let list): return .users(list)
        }
    }

    /// X5: one broadcast per notification, one request per environment of its channel, sent at once; the
    /// payload is an update's (U3–U6) within Apple's 5 KB for broadcasts.
    func broadcast(_ notifications: [FieldReader], _ call: APICall, dryRun: Bool) throws -> JSONObject {
        guard let broadcasts, let channels else { throw APIError(.unavailable, "this server does not send broadcasts (X5)") }
        let now = call.receivedAt
        var accepted: [NewBroadcast] = []
        var warnings: [String] = []
        for n in notifications {
            let (channel, update, expiration) = try LiveActivityRequests.broadcast(n, now: now)
            warnings += update.warnings
            let payload = LiveActivityPayload.update(update, timestamp: Int64(now.timeIntervalSince1970)).jsonBytes
            try LiveActivityPayload.checkSize(payload, path: n.path, maximum: BroadcastChannels.maximumPayloadBytes)
            // Kept by Apple until its apns_expiration: Islet retries it no longer than that either.
            let retriesUntil = expiration.flatMap { $0 > 0 ? Date(timeIntervalSince1970: Double($0)) : nil } ?? now.addingTimeInterval(pushLifetime)
            accepted.append(NewBroadcast(code: MessageCode.next(), channel: channel, payload: payload, priority: update.priority,
                                         expiresAt: min(retriesUntil, now.addingTimeInterval(pushLifetime)), expiration: expiration))
        }
        var response: JSONObject
        if dryRun {
            // X3: the exact requests, one per environment of the channel, and nothing stored.
            var results: [JSONValue] = []
            for (broadcast, n) in zip(accepted, notifications) {
                guard let channel = try channels.channel(named: broadcast.channel, in: call.application.code) else {
                    throw APIError.invalid(n.fieldPath("channel"), BroadcastChannels.unknown(broadcast.channel))
                }
                if let asked = broadcast.expiration,
                   let refusal = BroadcastChannels.expirationRefusal(asked, channel: channel.name, policy: channel.policy, now: now) {
                    throw APIError.invalid(n.fieldPath("apns_expiration"), refusal)
                }
                let requests: [JSONValue] = Gateway.all.compactMap { gateway in
                    channel.ids[gateway].map { id in
                        Self.describeBroadcast(call.application, gateway: gateway, channelID: id, policy: channel.policy, priority: broadcast.priority,
                                               expiresAt: broadcast.expiresAt, asked: broadcast.expiration, payload: broadcast.payload)
                    }
                }
                results.append(["channel": .string(broadcast.channel), "send_at": .string(now.formatted(.iso8601)), "requests": .array(requests)])
            }
            response = ["Messages": [], "dry_run": .array(results)]
        } else {
            try refusalsAsErrors(notifications.map(\.path)) {
                try broadcasts.acceptBroadcasts(accepted, in: call.application.code, at: now)
            }
            kick()
            response = ["Messages": .array(accepted.map { .string($0.code) })]
        }
        if !warnings.isEmpty { response["warnings"] = .array(warnings.map { .string($0) }) }
        return response
    }

    /// S3 within one request: two starts of one id cannot both begin a session.
    static func refuseRepeatedIDs(_ accepted: [(message: NewMessage, path: String)]) throws {
        var first: [String: String] = [:]
        for (message, path) in accepted {
            if let earlier = first[message.activityID] {
                throw APIError.invalid("\(path).live_activity_id", "'\(message.activityID)' is already started by \(earlier) of this request (S3)")
            }
            first[message.activityID] = path
        }
    }

    /// X2: `message`'s content-state checked against the schema its activity started with, if any: that schema (nil:
    /// none), and the check's warnings.
    func checkSchema(of message: NewMessage, _ n: FieldReader, _ application: ApplicationCode) throws -> (ActivitySchema?, [String]) {
        guard let started = try schemas.activitySchemaVersion(message.activityID, in: application) else { return (nil, []) }
        var warnings: [String] = []
        if let schema = try schemas.schema(started.attributesType, version: started.version, in: application)?.schema {
            warnings = try SchemaValidation.validate(message.contentState, schema.contentState, path: "\(n.fieldPath("live_activity")).content-state")
        }
        return (started, warnings)
    }

    /// A refusal by stored state (S3, U1) becomes the 400 that names the notification and field.
    func refusalsAsErrors(_ paths: [String], _ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            throw Self.refusalAsError(error, paths)
        }
    }

    /// `error`, or the 400 naming the notification and field when it is a refusal by stored state (S3, U1).
    static func refusalAsError(_ error: any Error, _ paths: [String]) -> any Error {
        guard let refusal = error as? AcceptRefusal else { return error }
        return APIError.invalid("\(paths[refusal.index]).\(refusal.field)", refusal.message)
    }

    // MARK: - Dry run (X3)

    /// The exact pushes each notification would make, for its first targets, with the target count.
    /// `updates`: what accepting each update decided, its priority (A7) and its turn (A9); starts go as asked.
    func dryRunResponse(_ messages: [NewMessage], updates: [AcceptedUpdate] = [], _ application: Application) throws -> JSONObject {
        var results: [JSONValue] = []
        for (index, message) in messages.enumerated() {
            let decided = index < updates.count ? updates[index] : nil
            let priority = decided?.priority ?? BudgetedPriority(requested: message.priority)
            var planner = PushPlanner(application: application.code, bundleID: application.bundleID, messageCode: message.code,
                                      payload: message.payload, fallbackPayload: message.fallbackPayload, priority: priority,
                                      expiration: Int64(message.expiresAt.timeIntervalSince1970))
            if message.event == .start { planner.startOnChannel(message.channelIDs) } else { planner.sessionChannelIDs = decided?.channel?.ids }
            var shown: [JSONValue] = []
            var count = 0
            var after: Int64 = 0
            while true {
                let page: [(hwid: String, id: Int64, plan: PlannedDelivery)]
                if decided?.endedBy != nil {
                    page = []   // a repeated end sends nothing
                } else if let target = message.target {
                    page = try devices.targets(target, in: application.code, attributesType: message.attributesType, afterID: after, limit: 1000)
                        .map { ($0.hwid, $0.id, planner.start($0)) }
                } else if let activity = try self.messages.activity(message.activityID, in: application.code) {
                    planner.lifetimeOver = ActivityLifetime.isOver(startedAt: activity.startedAt, now: message.dueAt)
                    page = try self.messages.updateTargets(activity: activity.id, afterID: after, limit: 1000)
                        .map { ($0.device.hwid, $0.device.id, planner.update($0)) }
                } else {
                    page = []
                }
                guard let last = page.last else { break }
                for entry in page where shown.count < Self.dryRunPushes { shown.append(Self.describe(entry.plan, hwid: entry.hwid)) }
                count += page.count
                after = last.id
            }
            var result: JSONObject = [
                "live_activity_id": .string(message.activityID), "event": .string(message.event.rawValue),
                "send_at": .string((decided?.dueAt ?? message.dueAt).formatted(.iso8601)), "targets": .int(Int64(count)), "pushes": .array(shown),
            ]
            if let channel = decided?.channel {
                result["broadcasts"] = .array(try sessionBroadcasts(message, channel: channel, priority: priority.standard, application))
            }
            results.append(.object(result))
        }
        return ["Messages": [], "dry_run": .array(results)]
    }

    /// X5: the broadcasts an update of an activity started on `channel` goes out with, one per environment
    /// the channel still has (a channel deleted since reaches no phone).
    private func sessionBroadcasts(_ message: NewMessage, channel: SessionChannel, priority: Int, _ application: Application) throws -> [JSONValue] {
        let record = try channel.name.flatMap { name in try channels?.channel(named: name, in: application.code) }
        return Gateway.all.compactMap { gateway in
            guard let id = channel.ids[gateway] else { return nil }
            guard let record, record.ids[gateway] == id else {
                return ["gateway": .string(gateway.rawValue), "skipped": .string(BroadcastChannels.channelGone)]
            }
            return Self.describeBroadcast(application, gateway: gateway, channelID: id, policy: record.policy, priority: priority,
                                          expiresAt: message.expiresAt, payload: message.payload)
        }
    }

    /// One broadcast request (X5) as a dry run shows it.
    static func describeBroadcast(_ application: Application, gateway: Gateway, channelID: String, policy: BroadcastChannels.StoragePolicy,
                                  priority: Int, expiresAt: Date, asked: Int64? = nil, payload: [UInt8]) -> JSONValue {
        describe(.broadcast(application: application.code, gateway: gateway, bundleID: application.bundleID, channelID: channelID, priority: priority,
                            expiration: BroadcastChannels.expiration(policy, expiresAt: expiresAt, asked: asked), payload: payload))
    }

    /// One APNs request as a dry run shows it.
    static func describe(_ push: Push) -> JSONValue {
        var headers = JSONObject()
        for header in push.headers { headers[header.name] = .string(header.value) }
        return ["gateway": .string(push.gateway.rawValue), "path": .string(push.path), "headers": .object(headers),
                "payload": (try? JSONParser.parse(push.payload)) ?? .null, "bytes": .int(Int64(push.payload.count))]
    }

    static func describe(_ plan: PlannedDelivery, hwid: String) -> JSONValue {
        switch plan {
        case .skip(let reason):
            return ["hwid": .string(hwid), "skipped": .string(reason)]
        case .push(let push), .held(let push, _, _):   // a dry run plans no pacing (A12)
            var shown: JSONObject = ["hwid": .string(hwid)]
            for (key, value) in describe(push).objectValue?.entries ?? [] { shown[key] = value }
            return .object(shown)
        }
    }

    // MARK: - Messages and activities

    var deleteMessage: APIMethod {
        APIMethod(name: "deleteMessage", access: .server) { [messages] call in
            let code = try call.request.requiredString("message")
            switch try messages.cancelMessage(code: code, in: call.application.code, at: call.receivedAt) {
            case .notFound:
                throw APIError.invalid("message", "no message '\(code)' in this application")
            case .cancelled:
                return [:]
            case .notCancellable(let state, let event) where event != .start:
                throw APIError.invalid("message", "'\(code)' is an \(event.rawValue) (\(state.rawValue)); only a start that has not fired can be deleted")
            case .notCancellable(let state, _):
                throw APIError.invalid("message", "'\(code)' is \(state == .sending ? "being sent" : state.rawValue); only a start that has not fired can be deleted")
            }
        }
    }

    var getMessageDetails: APIMethod {
        APIMethod(name: "getMessageDetails", access: .server, effect: .reads) { [messages] call in
            let code = try call.request.requiredString("message")
            guard let details = try messages.messageDetails(code: code, in: call.application.code) else {
                if let broadcast = try broadcasts?.broadcastDetails(code: code, in: call.application.code) { return ["message": Self.json(broadcast)] }
                throw APIError.invalid("message", "no message '\(code)' in this application")
            }
            let open = details.pending.filter { $0.key.isOpen }.values.reduce(0, +)
            // X5: an update of an activity started on a channel went to the channel as well.
            let broadcast = details.event == .start ? nil : try broadcasts?.broadcastDetails(code: code, in: call.application.code)
            let broadcastOpen = broadcast.map { Self.status(of: $0) } ?? "done"
            let status = details.supersededBy != nil && details.targeted == 0 ? "superseded"
                : details.state == .pending && details.dueAt > call.receivedAt ? "scheduled"
                : details.state == .done && (open > 0 || broadcastOpen == "retrying") ? "retrying"
                : details.state == .done && broadcastOpen == "sending" ? "sending" : details.state.rawValue
            var object: JSONObject = [
                "code": .string(details.code), "event": .string(details.event.rawValue), "live_activity_id": .string(details.activityID),
                "status": .string(status), "created_at": .string(details.createdAt.formatted(.iso8601)),
                "send_at": .string(details.dueAt.formatted(.iso8601)),
                "finished_at": details.finishedAt.map { .string($0.formatted(.iso8601)) } ?? .null,
            ]
            var counts: JSONObject = [
                "targeted": .int(Int64(details.targeted)), "sent": .int(Int64(details.sent)), "failed": .int(Int64(details.failed)),
                "skipped": .object(Self.counts(details.skipped)),
            ]
            // Pushes not settled yet, or settled without being sent (issue 10); present only when there are some.
            for state in [DeliveryState.retrying, .sending, .unconfirmed, .superseded, .expired] {
                if let count = details.pending[state], count > 0 { counts[state.rawValue] = .int(Int64(count)) }
            }
            if details.caughtUp > 0 { counts["caught_up"] = .int(Int64(details.caughtUp)) }
            if details.overBudget > 0 { counts["over_budget"] = .int(Int64(details.overBudget)) }
            // The devices' own receipts (issue 45), as their SDK reported them.
            if details.received > 0 { counts["received"] = .int(Int64(details.received)) }
            if details.opened > 0 { counts["opened"] = .int(Int64(details.opened)) }
            if details.fallbackAlerts > 0 { counts["fallback_alerts"] = .int(Int64(details.fallbackAlerts)) }
            if details.unknownTargets > 0 { counts["unknown_targets"] = .int(Int64(details.unknownTargets)) }
            object["counts"] = .object(counts)
            if let next = details.nextAttemptAt { object["next_attempt_at"] = Self.nextAttempt(next, now: call.receivedAt) }
            if let superseded = details.supersededBy { object["superseded_by"] = .string(superseded) }
            if let expires = details.expiresAt { object["expires_at"] = .string(expires.formatted(.iso8601)) }
            object["apns_reasons"] = .object(Self.counts(details.reasons))
            if let broadcast {
                let shown = Self.json(broadcast).objectValue ?? [:]
                object["channel"] = shown["channel"]
                object["broadcasts"] = shown["broadcasts"]
            }
            return ["message": .object(object)]
        }
    }

    var getLiveActivity: APIMethod {
        APIMethod(name: "getLiveActivity", access: .server, effect: .reads) { [messages, schemas] call in
            let activityID = try call.request.requiredString("live_activity_id")
            guard let activity = try messages.activity(activityID, in: call.application.code) else {
                throw APIError.invalid("live_activity_id", "no activity '\(activityID)' in this application")
            }
            let paging = try ListPaging(call.request, method: "getLiveActivity", numeric: true)
            let (devices, nextCursor) = paging.page(try messages.activityDevices(activity: activity.id, after: paging.cursor.flatMap { Int64($0) } ?? 0,
                                                                                  limit: paging.fetch)) { String($0.id) }
            return ["live_activity": [
                "live_activity_id": .string(activity.activityID), "state": .string(activity.state.rawValue),
                "attributes_type": activity.attributesType.map { .string($0) } ?? .null,
                "name": activity.name.map { .string($0) } ?? .null,
                "content_state": activity.contentState.map { .object($0) } ?? .null,
                "updated_at": .string(activity.updatedAt.formatted(.iso8601)),
                // A8: when iOS ends it on its own, and when it leaves the lock screen.
                "started_at": activity.startedAt.map { .string($0.formatted(.iso8601)) } ?? .null,
                "ends_by": activity.startedAt.map { .string(ActivityLifetime.endsBy(startedAt: $0).formatted(.iso8601)) } ?? .null,
                "dismiss_at": ActivityLifetime.leavesLockScreen(startedAt: activity.startedAt, dismissAt: activity.dismissAt,
                                                                ended: activity.state == .ended, now: call.receivedAt)
                    .map { .string($0.formatted(.iso8601)) } ?? .null,
                "renews_at": try messages.renewal(ofActivity: activity.id).map { .string($0.formatted(.iso8601)) } ?? .null,
                // X2: the schema version its start was checked against, which its updates are checked against too.
                "schema_version": try schemas.activitySchemaVersion(activityID, in: call.application.code).map { .int(Int64($0.version)) } ?? .null,
                "devices": .array(devices.map { device in
                    [
                        "hwid": .string(device.hwid), "state": .string(device.state),
                        "last_status": device.lastStatus.map { .int(Int64($0)) } ?? .null,
                        "last_reason": device.lastReason.map { .string($0) } ?? .null,
                        "last_message": device.lastMessage.map { .string($0) } ?? .null,
                        "last_delivery": device.lastState.map { .string($0.rawValue) } ?? .null,
                        "caught_up": .bool(device.caughtUp),
                        "attempts": device.attempts.map { .int(Int64($0)) } ?? .null,
                        "next_attempt_at": device.nextAttemptAt.map { Self.nextAttempt($0, now: call.receivedAt) } ?? .null,
                        "token_updated_at": device.tokenUpdatedAt.map { .string($0.formatted(.iso8601)) } ?? .null,
                        "flags": DeviceMethods.flags(device.health, now: call.receivedAt),
                    ]
                }),
                "device_count": .int(Int64(try messages.activityDeviceCount(activity: activity.id))),
                // Phones whose start's answer was lost: not among `devices` until their app reports a token (S8).
                "unconfirmed_starts": try {
                    let unconfirmed = try messages.unconfirmedStarts(activity: activity.id)
                    return ["count": .int(Int64(unconfirmed.count)),
                            "next_attempt_at": unconfirmed.nextAttemptAt.map { Self.nextAttempt($0, now: call.receivedAt) } ?? .null]
                }(),
                "next_cursor": nextCursor,
            ]]
        }
    }

    /// When a push is tried next, as answered: a retry due already (a rescued one is due at once) is due now.
    public static func nextAttempt(_ date: Date, now: Date) -> JSONValue {
        .string(max(date, now).formatted(.iso8601))
    }

    /// A broadcast in getMessageDetails (X5): done once every request is settled.
    static func json(_ broadcast: BroadcastDetails) -> JSONValue {
        ["code": .string(broadcast.code), "channel": .string(broadcast.channel), "status": .string(status(of: broadcast)),
                "created_at": .string(broadcast.createdAt.formatted(.iso8601)),
                "broadcasts": .array(broadcast.requests.map { request in
                    ["environment": .string(request.gateway.rawValue), "state": .string(request.state),
                     "apns_status": request.status.map { .int(Int64($0)) } ?? .null, "apns_reason": request.reason.map { .string($0) } ?? .null,
                     "apns_unique_id": request.uniqueID.map { .string($0) } ?? .null, "attempts": .int(Int64(request.attempts)),
                     "next_attempt_at": request.nextAttemptAt.map { .string($0.formatted(.iso8601)) } ?? .null, "bytes": .int(Int64(request.bytes))]
                })]
    }

    /// `done` once every request of the broadcast is settled; `retrying` while one waits for its next attempt.
    static func status(of broadcast: BroadcastDetails) -> String {
        guard broadcast.requests.contains(where: { ["pending", "sending", "retrying"].contains($0.state) }) else { return "done" }
        return broadcast.requests.contains { $0.state == "retrying" } ? "retrying" : "sending"
    }

    static func counts(_ counts: [String: Int]) -> JSONObject {
        JSONObject(counts.keys.sorted().map { (key: $0, value: .int(Int64(counts[$0]!))) })
    }
}
