import Foundation
import IsletCore
import IsletStore

/// updateLiveActivity (SPEC §3): read and checked here, decided and written by the store. On a local database it is
/// answered later (`APIMethod.later`): the connection's thread hands the write to the group commit, and the thread that
/// commits it answers.
extension LiveActivityMethods {
    var updateLiveActivity: APIMethod {
        APIMethod(name: "updateLiveActivity", access: .server, run: { [self] call in try updateNow(call) },
                  later: { [self] call, later in try updateLater(call, later) })
    }

    /// A request's updates, read and checked as far as can be without the stored state: what the store is given.
    struct UpdateRequest: Sendable {
        let notifications: [FieldReader]
        let dryRun: Bool
        var accepted: [(message: NewMessage, path: String)] = []
        var requestWarnings: [[String]] = []
        var schemaWarnings: [[String]] = []
        /// X5: notifications to channels, a request of their own (broadcasts, which each store commits apart).
        var toChannels: Bool
    }

    func updateNow(_ call: APICall) throws -> JSONObject {
        var request = try readUpdates(call)
        if request.toChannels { return try broadcast(request.notifications, call, dryRun: request.dryRun) }
        // X2: each update checked against the schema its activity started with. An application that never saved a
        // schema has nothing to read; the store refuses an update whose check does not hold, which is then checked.
        var checking = try schemaPresence.mayHaveSchemas(call.application.code, schemas)
        var decided: [AcceptedUpdate] = []
        for attempt in 1... {
            try checkSchemas(&request, reading: checking, call)
            do {
                try refusalsAsErrors(request.accepted.map(\.path)) {
                    decided = try messages.acceptUpdates(request.accepted.map(\.message), in: call.application.code, budget: call.application.updateBudget,
                                                         pacing: pacing, at: call.receivedAt, validateOnly: request.dryRun)
                }
                break
            } catch let outdated as SchemaCheckOutdated {
                schemaPresence.sawSchemas(call.application.code)
                // Checked once more at most: an activity started again and again meanwhile is not waited for.
                guard attempt < 3 else {
                    throw APIError(.unavailable, ActivityRules.startedAgainWhileChecked(path: request.accepted[outdated.index].path))
                }
                checking = true
            }
        }
        return try answer(request, decided, call)
    }

    /// `updateNow` without waiting for the commit: the store answers once the group commit has written it. Broadcasts,
    /// dry runs (whose answer reads devices) and an update whose schema check the store found outdated run on a worker.
    func updateLater(_ call: APICall, _ later: LaterAnswer) throws {
        var request = try readUpdates(call)
        guard !request.toChannels, !request.dryRun else { return later.onWorker() }
        try checkSchemas(&request, reading: try schemaPresence.mayHaveSchemas(call.application.code, schemas), call)
        let paths = request.accepted.map(\.path)
        messages.acceptUpdates(request.accepted.map(\.message), in: call.application.code, budget: call.application.updateBudget,
                               pacing: pacing, at: call.receivedAt, validateOnly: false) { [self, request] result in
            switch result {
            case .success(let decided):
                later.respond(Result { try answer(request, decided, call) })
            case .failure(is SchemaCheckOutdated):
                // An activity started with a schema since this application was last seen without one: checked on a worker.
                schemaPresence.sawSchemas(call.application.code)
                later.onWorker()
            case .failure(let error):
                later.respond(.failure(Self.refusalAsError(error, paths)))
            }
        }
    }

    /// The request's notifications read and their payloads made (U2–U6, A11), each within APNs' and FCM's sizes.
    func readUpdates(_ call: APICall) throws -> UpdateRequest {
        let now = call.receivedAt
        let notifications = try LiveActivityRequests.notifications(call.request)
        let dryRun = try LiveActivityRequests.dryRun(call.request, notifications)
        let toChannels = notifications.filter { $0.value("channel") != nil }
        var request = UpdateRequest(notifications: notifications, dryRun: dryRun, toChannels: !toChannels.isEmpty)
        if !toChannels.isEmpty {
            guard toChannels.count == notifications.count else {
                throw APIError.invalid("notifications", "a request holds broadcasts to channels or updates of activities, not both: send them apart (X5)")
            }
            return request
        }
        for n in notifications {
            let update = try LiveActivityRequests.update(n, now: now)
            request.requestWarnings.append(update.warnings)
            // A11: one sent later carries its own send time, as a scheduled start does.
            let dueAt = update.sendTime.date(now: now)
            let payload = LiveActivityPayload.update(update, timestamp: Int64(dueAt.timeIntervalSince1970)).jsonBytes
            try LiveActivityPayload.checkSize(payload, path: n.path)
            var message = NewMessage(
                code: MessageCode.next(), event: update.event, activityID: update.activityID, target: nil, attributesType: nil,
                name: nil, contentState: update.contentState, payload: payload, fallbackPayload: nil, priority: update.priority,
                dueAt: dueAt, expiresAt: dueAt.addingTimeInterval(pushLifetime), dismissalDate: update.dismissalDate)
            if call.application.fcmAccount != nil {
                message.androidPayload = AndroidLiveUpdate.update(update, messageCode: message.code, android: update.android).dataBytes
                try AndroidLiveUpdate.checkSize(message.androidPayload ?? [], path: n.path)
            }
            request.accepted.append((message, n.path))
        }
        return request
    }

    /// X2: each update checked against its activity's schema when `reading` (the application may have schemas), and
    /// marked with what it was checked against, which the store holds it to.
    func checkSchemas(_ request: inout UpdateRequest, reading: Bool, _ call: APICall) throws {
        request.schemaWarnings = []
        for (index, n) in request.notifications.enumerated() {
            let (checked, warnings) = try reading ? checkSchema(of: request.accepted[index].message, n, call.application.code) : (nil, [])
            request.accepted[index].message.checkedSchema = .against(checked)
            request.schemaWarnings.append(warnings)
        }
    }

    /// The answer to accepted updates: their message codes (a repeated end: the code of the end that ended the activity,
    /// issue 45), or what a dry run would do, and the warnings of the request, of the schemas and of the store's decisions.
    func answer(_ request: UpdateRequest, _ decided: [AcceptedUpdate], _ call: APICall) throws -> JSONObject {
        var warnings = zip(request.requestWarnings, request.schemaWarnings).flatMap { $0 + $1 }
        for ((message, path), update) in zip(request.accepted, decided) {
            if let endedBy = update.endedBy {
                warnings.append(ActivityRules.repeatedEndWarning(path: path, activityID: message.activityID, endedBy: endedBy))
            } else if let started = update.activityStartedAt, ActivityLifetime.isOver(startedAt: started, now: update.dueAt) {
                warnings.append(ActivityLifetime.warning(path: path, activityID: message.activityID, startedAt: started, now: update.dueAt))
            } else if let warning = call.application.updateBudget.warning(path: path, activityID: message.activityID,
                                                                           requested: message.priority, priorities: update.priority) {
                warnings.append(warning)
            }
        }
        let codes = zip(request.accepted, decided).map { entry, update in JSONValue.string(update.endedBy ?? entry.message.code) }
        var response = request.dryRun ? try dryRunResponse(request.accepted.map(\.message), updates: decided, call.application) : ["Messages": .array(codes)]
        if !request.dryRun { kick() }
        if !warnings.isEmpty { response["warnings"] = .array(warnings.map { .string($0) }) }
        return response
    }
}
