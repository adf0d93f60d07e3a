import Foundation
import IsletCore
import IsletStore

/// startLiveActivity (SPEC §2): read and checked here, stored by the store (S3). On a local database it is answered
/// later (`APIMethod.later`), as an update is: the connection's thread hands the write to the group commit, and the
/// thread that commits it answers.
extension LiveActivityMethods {
    var startLiveActivity: APIMethod {
        APIMethod(name: "startLiveActivity", access: .server, run: { [self] call in try startNow(call) },
                  later: { [self] call, later in try startLater(call, later) })
    }

    /// A request's starts, read and checked (schemas, named devices, channels): what the store is given.
    struct StartRequest: Sendable {
        let dryRun: Bool
        var accepted: [(message: NewMessage, path: String)] = []
        var warnings: [String] = []
    }

    func startNow(_ call: APICall) throws -> JSONObject {
        let request = try readStarts(call)
        try refusalsAsErrors(request.accepted.map(\.path)) {
            try messages.acceptStarts(request.accepted.map(\.message), in: call.application.code, at: call.receivedAt, validateOnly: request.dryRun)
        }
        return try answer(request, call)
    }

    /// `startNow` without waiting for the commit; a dry run (whose answer reads devices) runs on a worker.
    func startLater(_ call: APICall, _ later: LaterAnswer) throws {
        let request = try readStarts(call)
        guard !request.dryRun else { return later.onWorker() }
        let paths = request.accepted.map(\.path)
        messages.acceptStarts(request.accepted.map(\.message), in: call.application.code, at: call.receivedAt, validateOnly: false) { [self, request] error in
            if let error {
                later.respond(.failure(Self.refusalAsError(error, paths)))
            } else {
                later.respond(Result { try answer(request, call) })
            }
        }
    }

    /// The request's notifications read, checked and made into messages (S1–S7, X2, X5, A11, issue 45 and 46).
    func readStarts(_ call: APICall) throws -> StartRequest {
        let now = call.receivedAt
        let notifications = try LiveActivityRequests.notifications(call.request)
        var request = StartRequest(dryRun: try LiveActivityRequests.dryRun(call.request, notifications))
        for n in notifications {
            let start = try LiveActivityRequests.start(n, now: now)
            request.warnings += start.warnings
            // X2: a published schema catches what the app could not decode, before anything is sent.
            var schemaVersion: Int?
            if let stored = try schemas.currentSchema(start.attributesType, in: call.application.code), let schema = stored.schema {
                let activity = n.fieldPath("live_activity")
                request.warnings += try SchemaValidation.validate(start.contentState, schema.contentState, path: "\(activity).content-state")
                request.warnings += try SchemaValidation.validate(start.attributes, schema.attributes, path: "\(activity).attributes",
                                                                  ignoring: schema.attributes["pushwoosh"] == nil ? ["\(activity).attributes.pushwoosh"] : [])
                schemaVersion = stored.version
            }
            let dueAt = start.sendTime.date(now: now)
            // A fixed timestamp per message: a resend after a crash is harmless on the device (A4).
            let timestamp = Int64(dueAt.timeIntervalSince1970)
            let payload = LiveActivityPayload.start(start, timestamp: timestamp).jsonBytes
            try LiveActivityPayload.checkSize(payload, path: n.path)
            let code = MessageCode.next()
            let fallback = start.fallbackAlert ? LiveActivityPayload.fallbackAlert(start, messageCode: code).jsonBytes : nil
            if let fallback { try LiveActivityPayload.checkSize(fallback, path: n.path) }
            var message = NewMessage(
                code: code, event: .start, activityID: start.activityID,
                target: try selection(start.targeting, n, call.application.code), attributesType: start.attributesType,
                name: start.name, contentState: start.contentState, payload: payload, fallbackPayload: fallback,
                priority: start.priority, dueAt: dueAt, schemaVersion: schemaVersion,
                expiresAt: dueAt.addingTimeInterval(pushLifetime))
            // Issue 46: Android phones get a Live Update where the application can reach them through FCM.
            if call.application.fcmAccount != nil {
                message.androidPayload = AndroidLiveUpdate.start(start, messageCode: code, android: start.android).dataBytes
                try AndroidLiveUpdate.checkSize(message.androidPayload ?? [], path: n.path)
            }
            // A11: the end Islet sends itself at end_date, with its own code (deleteMessage takes it back).
            message.scheduledEnd = start.endTime.map { (MessageCode.next(), $0, $0.addingTimeInterval(pushLifetime)) }
            message.renew = start.renew
            // Issue 45: entries that name no device were dropped without a word.
            if let target = message.target {
                let unknown = try devices.unknownTargets(target, in: call.application.code)
                message.unknownTargets = unknown.count
                if let warning = LiveActivityRequests.unknownTargetsWarning(unknown, of: target.namedCount, users: target.kind == .users, in: n) {
                    request.warnings.append(warning)
                }
            }
            if let channel = start.channel {
                // X5: the started activity listens to the channel, on phones that can (iOS 18).
                guard let record = try channels?.channel(named: channel, in: call.application.code) else {
                    throw APIError.invalid(n.fieldPath("channel"), BroadcastChannels.unknown(channel))
                }
                message.channelIDs = record.ids
                message.channel = record.name
                for (_, id) in record.ids {
                    try LiveActivityPayload.checkSize(BroadcastChannels.startOnChannel(payload, channelID: id) ?? payload, path: n.path)
                }
            }
            request.accepted.append((message, n.path))
        }
        try Self.refuseRepeatedIDs(request.accepted)
        return request
    }

    /// The answer to accepted starts: their message codes and scheduled ends, or what a dry run would do, and warnings.
    func answer(_ request: StartRequest, _ call: APICall) throws -> JSONObject {
        let accepted = request.accepted
        var response = request.dryRun ? try dryRunResponse(accepted.map(\.message), call.application)
            : ["Messages": .array(accepted.map { .string($0.message.code) })]
        let ends = accepted.compactMap { entry in entry.message.scheduledEnd.map { (entry.message.activityID, $0) } }
        if !request.dryRun && !ends.isEmpty {
            response["scheduled_ends"] = .array(ends.map { id, end in
                ["live_activity_id": .string(id), "message": .string(end.code), "send_at": .string(end.at.formatted(.iso8601))]
            })
        }
        if !request.dryRun { kick() }
        if !request.warnings.isEmpty { response["warnings"] = .array(request.warnings.map { .string($0) }) }
        return response
    }
}
