import Foundation
import IsletAPI
import IsletCore
import IsletHTTP
import IsletStore

/// The console's own reads (what the JSON API has no method for): the overview, the activity list, an
/// activity's message timeline, and device search. Paged by `cursor` (the `next_cursor` of the page before).
struct ConsoleReads {
    let store: any ConsoleStore
    let messages: any MessageStore
    let now: @Sendable () -> Date

    /// The overview's window: pushes a minute over the last hour.
    static let window: TimeInterval = 3600

    func overview(_ application: Application) throws -> JSONObject {
        let date = now()
        let overview = try store.consoleOverview(of: application.code, pushesSince: date.addingTimeInterval(-Self.window))
        let queue = try messages.queueStatistics(at: date)
        let lag = [queue.oldestDueAt, queue.oldestRetryDueAt].compactMap { $0 }.min().map { max(0, date.timeIntervalSince($0)) } ?? 0
        return [
            "application": ["code": .string(application.code.rawValue), "name": .string(application.name), "bundle_id": .string(application.bundleID)],
            "devices": .int(Int64(overview.devices)), "push_to_start_tokens": .int(Int64(overview.pushToStartTokens)),
            "activities": .object(JSONObject(ActivityState.all.map { (key: $0.rawValue, value: .int(Int64(overview.activities[$0] ?? 0))) })),
            "window_start": .string(date.addingTimeInterval(-Self.window).formatted(.iso8601)),
            "pushes": .array(overview.pushes.map { minute in
                ["minute": .string(Date(timeIntervalSince1970: Double(minute.minute)).formatted(.iso8601)), "state": .string(minute.state.rawValue),
                 "reason": minute.reason.map { .string($0) } ?? .null, "count": .int(Int64(minute.count))]
            }),
            // The queue is the server's, shared by every application.
            "queue": ["jobs_due": .int(Int64(queue.jobsDue)), "jobs_scheduled": .int(Int64(queue.jobsScheduled)),
                      "retrying": .int(Int64(queue.retrying)), "unconfirmed": .int(Int64(queue.unconfirmed)), "lag_seconds": .double(lag.rounded())],
        ]
    }

    func activities(_ application: Application, _ request: HTTPRequest) throws -> JSONObject {
        let (limit, cursor) = try Self.paging(request)
        var state: ActivityState?
        if let text = request.queryValue("state"), !text.isEmpty {
            guard let parsed = ActivityState(rawValue: text) else {
                throw APIError.invalid("state", "must be one of \(ActivityState.all.map(\.rawValue).joined(separator: ", "))")
            }
            state = parsed
        }
        let type = request.queryValue("attributes_type").flatMap { $0.isEmpty ? nil : $0 }
        let found = try store.activities(in: application.code, state: state, attributesType: type, before: cursor, limit: limit + 1)
        let page = found.prefix(limit)
        return [
            "activities": .array(page.map { activity in
                ["live_activity_id": .string(activity.activityID), "state": .string(activity.state.rawValue),
                 "attributes_type": activity.attributesType.map { .string($0) } ?? .null, "name": activity.name.map { .string($0) } ?? .null,
                 "updated_at": .string(activity.updatedAt.formatted(.iso8601)), "devices": .int(Int64(activity.deviceCount)),
                 "devices_capped": .bool(activity.deviceCount >= ConsoleOverview.deviceCountCap)]
            }),
            "next_cursor": found.count > limit ? .string(String(page.last!.id)) : .null,
        ]
    }

    func messages(_ application: Application, _ request: HTTPRequest) throws -> JSONObject {
        let (limit, cursor) = try Self.paging(request)
        guard let activityID = request.queryValue("live_activity_id"), !activityID.isEmpty else {
            throw APIError.invalid("live_activity_id", "is required")
        }
        guard let activity = try messages.activity(activityID, in: application.code) else {
            throw APIError.invalid("live_activity_id", "no activity '\(activityID.prefix(256))' in this application")
        }
        let found = try store.messages(ofActivity: activity.id, before: cursor, limit: limit + 1)
        let page = found.prefix(limit)
        return [
            "messages": .array(page.map { message in
                var object: JSONObject = [
                    "code": .string(message.code), "event": .string(message.event.rawValue), "state": .string(message.state.rawValue),
                    "created_at": .string(message.createdAt.formatted(.iso8601)), "send_at": .string(message.dueAt.formatted(.iso8601)),
                    "finished_at": message.finishedAt.map { .string($0.formatted(.iso8601)) } ?? .null,
                ]
                // What the push says, as the phone reads it.
                let aps = (try? JSONParser.parse(message.payload))?.objectValue?["aps"]?.objectValue ?? [:]
                for key in ["content-state", "stale-date", "dismissal-date", "relevance-score", "alert"] { object[key] = aps[key] ?? .null }
                // And what an Android phone's Live Update shows of it (issue 46): its title, text and pw_live, read.
                object["android"] = message.androidPayload.flatMap { (try? JSONParser.parse($0))?.objectValue }.map { data -> JSONValue in
                    ["title": data["header"] ?? .null, "text": data["title"] ?? .null,
                     "live": data["pw_live"]?.stringValue.flatMap { try? JSONParser.parse(Array($0.utf8)) } ?? .null]
                } ?? .null
                return .object(object)
            }),
            "next_cursor": found.count > limit ? .string(String(page.last!.id)) : .null,
        ]
    }

    /// Devices whose HWID starts with `q`, in HWID order, a page at a time (the cursor is the last HWID); the
    /// first page starts with the devices whose User ID is `q`.
    func devices(_ application: Application, _ request: HTTPRequest) throws -> JSONObject {
        let limit = try Self.limit(request)
        let after = request.queryValue("cursor") ?? ""
        let text = request.queryValue("q")?.trimmingCharacters(in: .whitespaces) ?? ""
        guard text.count <= 256 else { throw APIError.invalid("q", "must be at most 256 characters") }
        let found = try store.devices(in: application.code, hwidPrefix: text, after: after, limit: limit + 1)
        let page = Array(found.prefix(limit))
        var shown = after.isEmpty && !text.isEmpty ? try store.devices(in: application.code, userID: text, limit: limit) : []
        shown += page.filter { device in !shown.contains { $0.id == device.id } }
        return [
            "devices": .array(shown.map { device in
                ["hwid": .string(device.hwid), "user_id": device.userID.map { .string($0) } ?? .null,
                 "os_version": device.osVersion.map { .string($0) } ?? .null, "push_token": .bool(device.hasPushToken),
                 "gateway": .string(device.sandbox ? "sandbox" : "production"), "updated_at": .string(device.updatedAt.formatted(.iso8601))]
            }),
            "next_cursor": found.count > limit ? .string(page.last!.hwid) : .null,
        ]
    }

    static func limit(_ request: HTTPRequest) throws -> Int {
        guard let text = request.queryValue("limit") else { return 50 }
        guard let value = Int(text), (1...200).contains(value) else { throw APIError.invalid("limit", "must be an integer from 1 to 200") }
        return value
    }

    /// `limit` (1 to 200, default 50) and `cursor` (a row id from `next_cursor`; 0 for the first page).
    static func paging(_ request: HTTPRequest) throws -> (limit: Int, cursor: Int64) {
        let limit = try limit(request)
        var cursor: Int64 = 0
        if let text = request.queryValue("cursor"), !text.isEmpty {
            guard let value = Int64(text), value > 0 else { throw APIError.invalid("cursor", "must be the next_cursor of a previous page") }
            cursor = value
        }
        return (limit, cursor)
    }
}
