import Foundation
import IsletCore
import IsletStore

/// The device API of the Pushwoosh iOS SDK (D1–D4): what an app calls about its own device.
public struct DeviceMethods: Sendable {
    let store: any DeviceStore

    /// Wakes the delivery service: a reported update token may have made a catch-up push due (issue 10).
    let kick: @Sendable () -> Void
    /// D5: whether the first report of an activity Islet never started defines it.
    let phoneStarted: PhoneStartedActivities

    public init(store: any DeviceStore, phoneStarted: PhoneStartedActivities = .allow, kick: @escaping @Sendable () -> Void = {}) {
        self.store = store
        self.kick = kick
        self.phoneStarted = phoneStarted
    }

    public var all: [APIMethod] {
        [registerDevice, unregisterDevice, setTags, getTags, setActivityPushToStartToken, setActivityToken, getDeviceHealth]
    }

    static let maximumTags = 100
    static let maximumListItems = TagChange.maximumListItems
    static let maximumText = 1024

    /// `registerDevice` (D1): create or update (application, hwid), with tags merged.
    var registerDevice: APIMethod {
        APIMethod(name: "registerDevice", access: .device) { [store] call in
            let body = call.request
            let hwid = try Self.hwid(body)
            // Issue 45: an Android phone (device_type 3, an FCM token) is registered and kept like an iPhone.
            var platform = DevicePlatform.ios
            if let type = try body.lenientString("device_type") {
                guard let known = DevicePlatform(deviceType: type) else { throw APIError.invalid("device_type", DevicePlatform.deviceTypeRule) }
                platform = known
            }
            let tokenText = try body.requiredString("push_token")
            guard let pushToken = platform.pushToken(tokenText) else { throw APIError.invalid("push_token", platform.pushTokenRule) }
            var gateway = Gateway.production
            if let text = try body.string("gateway") {
                guard let value = Gateway(rawValue: text) else { throw APIError.invalid("gateway", "must be \"production\" or \"sandbox\"") }
                gateway = value
            }
            var registration = DeviceRegistration(
                hwid: hwid, pushToken: pushToken, gateway: gateway,
                language: try Self.shortText(body, "language"), timezone: try Self.shortText(body, "timezone"),
                osVersion: try Self.shortText(body, "os_version"), userID: try Self.shortText(body, "userId"),
                // A7: ActivityAuthorizationInfo().frequentPushesEnabled, as the app reads it; absent leaves it as it was.
                frequentUpdates: try body.bool("frequent_updates"), platform: platform)
            let tags = try body.objectField("tags").map(Self.parseTags) ?? []
            // Issue 44: an application may take User IDs from its server only; the app's claim is then not stored, and said so.
            let userIDIgnored = registration.userID != nil && !call.application.userIDSource.accepts(byServer: call.tokenKind == .api)
            if userIDIgnored { registration.userID = nil }
            let registered = try store.registerDevice(registration, tags: tags, in: call.application.code, at: call.receivedAt)
            var answer = Self.describe(registered.skipped)
            if userIDIgnored {
                Self.warn(&answer, UserIDSource.ignoredWarning)
            }
            return answer
        }
    }

    /// `unregisterDevice` (D2): the device stops receiving pushes; idempotent.
    var unregisterDevice: APIMethod {
        APIMethod(name: "unregisterDevice", access: .device) { [store] call in
            _ = try store.unregisterDevice(hwid: try Self.hwid(call.request), in: call.application.code, at: call.receivedAt)
            return [:]
        }
    }

    /// `setTags` (D2): merge; `null` removes a tag. A device not registered yet keeps them for when it does (issue 45).
    var setTags: APIMethod {
        APIMethod(name: "setTags", access: .device) { [store] call in
            let hwid = try Self.hwid(call.request)
            let tags = try Self.parseTags(try call.request.requiredObject("tags"))
            var answer = Self.describe(try store.setTags(tags, hwid: hwid, in: call.application.code, at: call.receivedAt))
            if call.request.value("user_id") != nil { Self.warn(&answer, Self.userIDInSetTags) }
            return answer
        }
    }

    /// `getDeviceHealth` (A10, server API): a device's tokens, their recent changes, and flags for what
    /// would make its phone show nothing although APNs answered 200.
    var getDeviceHealth: APIMethod {
        APIMethod(name: "getDeviceHealth", access: .server, effect: .reads) { [store] call in
            let hwid = try Self.hwid(call.request)
            guard let report = try store.deviceHealth(hwid: hwid, in: call.application.code, historyLimit: DeviceHealth.historyKept) else {
                throw Self.unknownDevice(hwid, call.application)
            }
            func time(_ date: Date) -> JSONValue { .string(date.formatted(.iso8601)) }
            let device = report.device
            return ["device": [
                "hwid": .string(device.hwid), "platform": .string(device.platform.rawValue), "gateway": .string(device.gateway.rawValue),
                "registered": .bool(device.pushToken != nil),
                "app_opened_at": report.appOpenedAt.map(time) ?? .null,
                "frequent_updates": device.frequentUpdates.map { .bool($0) } ?? .null,
                "push_token_changed_at": report.pushTokenUpdatedAt.map(time) ?? .null,
                "push_to_start_tokens": .array(report.pushToStartTokens.map { token in
                    ["attributes_type": .string(token.attributesType), "reported_at": time(token.updatedAt)]
                }),
                "activity_tokens": .array(report.activityTokens.map { token in
                    ["live_activity_id": .string(token.activityID), "active": .bool(token.token != nil), "reported_at": time(token.updatedAt)]
                }),
                "token_history": .array(report.history.map { change in
                    ["kind": .string(change.kind.rawValue), "slot": .string(change.slot), "removed": .bool(change.token == nil),
                     "token_suffix": change.token.map { .string(String($0.suffix(8))) } ?? .null, "at": time(change.at)]
                }),
                "flags": Self.flags(report.facts, now: call.receivedAt),
            ]]
        }
    }

    /// A device's health flags (A10) as getDeviceHealth and getLiveActivity show them.
    static func flags(_ facts: DeviceHealth.Facts, now: Date) -> JSONValue {
        .array(DeviceHealth.flags(facts, now: now).map { flag in
            ["code": .string(flag.code.rawValue), "message": .string(flag.message),
             "live_activity_id": flag.activityID.map { .string($0) } ?? .null]
        })
    }

    /// `getTags` (D2) → `{"result": {tags}}`, built-in tags included; `{"result": {}}` for a device Islet has not heard
    /// of yet (the SDK asks on its first launch, before it registers).
    var getTags: APIMethod {
        APIMethod(name: "getTags", access: .device, effect: .reads) { [store] call in
            let hwid = try Self.hwid(call.request)
            guard let (device, tags) = try store.deviceWithTags(hwid: hwid, in: call.application.code) else {
                return ["result": .object([:])]
            }
            var result = JSONObject()
            for (tag, value) in [(BuiltInTag.language, device.language), (.osVersion, device.osVersion), (.timezone, device.timezone),
                                 (.userID, device.userID)] {
                if let value { result[tag.name] = .string(value) }
            }
            for name in tags.keys.sorted() { result[name] = tags[name]!.json }
            return ["result": .object(result)]
        }
    }

    /// `setActivityPushToStartToken` (D3): the token that lets Islet start activities remotely (S7).
    var setActivityPushToStartToken: APIMethod {
        APIMethod(name: "setActivityPushToStartToken", access: .device) { [store] call in
            let hwid = try Self.hwid(call.request)
            let text = try call.request.requiredString("activity_push_to_start_token", allowEmpty: true)
            let token = try text.isEmpty ? nil : Self.activityToken(text, field: "activity_push_to_start_token")
            let attributesType = try call.request.string("attributes_type") ?? ""
            guard attributesType.count <= 256 else { throw APIError.invalid("attributes_type", "must be at most 256 characters") }
            try store.setPushToStartToken(token, attributesType: attributesType, hwid: hwid, in: call.application.code, at: call.receivedAt)
            return [:]
        }
    }

    /// `setActivityToken` (D4): an activity's update token on this device; empty means it ended there.
    var setActivityToken: APIMethod {
        APIMethod(name: "setActivityToken", access: .device) { [store, kick, phoneStarted] call in
            let hwid = try Self.hwid(call.request)
            let activityID = try call.request.string("activity_id") ?? ""
            guard activityID.count <= 256 else { throw APIError.invalid("activity_id", "must be at most 256 characters") }
            let text = try call.request.string("activity_token") ?? ""
            let token = try text.isEmpty ? nil : Self.activityToken(text, field: "activity_token")
            if activityID.isEmpty && token != nil {
                throw APIError.invalid("activity_id", "is required with an activity_token (only an ending may omit it)")
            }
            try store.setActivityToken(token, activityID: activityID, hwid: hwid, in: call.application.code, at: call.receivedAt,
                                       admit: { facts in
                                           if let refusal = ActivityJoin.refusal(activityID: activityID, facts: facts, trusted: call.tokenKind == .api,
                                                                                 phoneStarted: phoneStarted) {
                                               throw refusal
                                           }
                                       })
            if token != nil { kick() }
            return [:]
        }
    }

    // MARK: - Field rules

    static func hwid(_ body: FieldReader) throws(APIError) -> String {
        let hwid = try body.requiredString("hwid")
        guard hwid.count <= 256 else { throw APIError.invalid("hwid", "must be at most 256 characters") }
        return hwid
    }

    static func shortText(_ body: FieldReader, _ key: String) throws(APIError) -> String? {
        guard let text = try body.lenientString(key), !text.isEmpty else { return nil }
        guard text.count <= 256 else { throw APIError.invalid(key, "must be at most 256 characters") }
        return text
    }

    static func activityToken(_ text: String, field: String) throws(APIError) -> String {
        guard let token = HexToken.normalize(text) else {
            throw APIError.invalid(field, "must be an even-length hex string of 16 to 400 characters")
        }
        return token
    }

    /// Adds `warning` to an answer's `warnings`, after those it has (the skipped tags').
    static func warn(_ answer: inout JSONObject, _ warning: String) {
        answer["warnings"] = .array((answer["warnings"]?.arrayValue ?? []) + [.string(warning)])
    }

    /// setTags' answer to a `user_id` beside the tags (issue 45: it was ignored without a word).
    static let userIDInSetTags = "user_id: ignored: setTags sets tags; a device's User ID is set by registerUser, or registerDevice's userId"

    static func unknownDevice(_ hwid: String, _ application: Application) -> APIError {
        APIError.invalid("hwid", "no device '\(hwid)' is registered in application \(application.code); call registerDevice first")
    }

    /// Tags of setTags and registerDevice: strings, integers, booleans, lists of strings, null to remove, or an
    /// operation (`{"operation": "increment", "value": n}`, `append` or `remove` with a string or a list) (D2).
    static func parseTags(_ tags: FieldReader) throws(APIError) -> [(name: String, change: TagChange)] {
        guard tags.object.count <= maximumTags else { throw APIError.invalid("tags", "must hold at most \(maximumTags) tags per call") }
        var parsed: [(name: String, change: TagChange)] = []
        for (name, value) in tags.object.entries {
            let path = "tags.\(name)"
            guard !name.isEmpty, name.count <= 128 else { throw APIError.invalid("tags", "tag names must be 1 to 128 characters") }
            guard BuiltInTag.named(name) == nil || BuiltInTag.shadowable(name) else {
                throw APIError.invalid(path, "is a built-in tag; registerDevice sets it")
            }
            switch value {
            case .null:
                parsed.append((name, nil))
            case .string(let s):
                guard s.count <= maximumText else { throw APIError.invalid(path, "must be at most \(maximumText) characters") }
                parsed.append((name, .string(s)))
            case .int, .double:
                guard let i = value.intValue else { throw APIError.invalid(path, "must be an integer; decimals are not tag values") }
                parsed.append((name, .integer(i)))
            case .array(let items):
                parsed.append((name, .list(try strings(items, path: path))))
            case .bool(let b):
                parsed.append((name, .set(.boolean(b))))
            case .object(let operation):
                parsed.append((name, try self.operation(operation, path: path)))
            }
        }
        return parsed
    }

    /// The strings of a list tag's value (or of an append or remove).
    static func strings(_ items: [JSONValue], path: String) throws(APIError) -> [String] {
        guard items.count <= maximumListItems else { throw APIError.invalid(path, "must hold at most \(maximumListItems) strings") }
        var list: [String] = []
        for (index, item) in items.enumerated() {
            guard case .string(let s) = item, s.count <= maximumText else {
                throw APIError.invalid("\(path)[\(index)]", "list tags hold strings of at most \(maximumText) characters")
            }
            list.append(s)
        }
        return list
    }

    /// `{"operation": "increment", "value": n}`, `{"operation": "append"|"remove", "value": "s" or ["s", ...]}`: what the
    /// Pushwoosh SDK's tag builders send (issue 45).
    static func operation(_ object: JSONObject, path: String) throws(APIError) -> TagChange {
        let fields = FieldReader(object, path: path)
        let name = try fields.requiredString("operation")
        guard let value = fields.value("value") else { throw fields.missing("value") }
        switch name {
        case "increment":
            guard let step = value.intValue else { throw APIError.invalid("\(path).value", "increment takes an integer, got \(value.typeName)") }
            return .increment(step)
        case "append", "remove":
            let items: [String]
            switch value {
            case .string(let s):
                guard s.count <= maximumText else { throw APIError.invalid("\(path).value", "must be at most \(maximumText) characters") }
                items = [s]
            case .array(let list): items = try strings(list, path: "\(path).value")
            default: throw APIError.invalid("\(path).value", "\(name) takes a string or a list of strings, got \(value.typeName)")
            }
            return name == "append" ? .append(items) : .removeItems(items)
        default:
            throw APIError.invalid("\(path).operation", "must be increment, append or remove, got '\(name.prefix(64))'")
        }
    }

    /// The answer of a call that stored its tags: `{}`, or the tags it skipped, named (D2).
    static func describe(_ skipped: [SkippedTag]) -> JSONObject {
        guard !skipped.isEmpty else { return [:] }
        return [
            "skipped_tags": .array(skipped.map { .object(["tag": .string($0.tag), "reason": .string($0.reason)]) }),
            "warnings": .array(skipped.map { .string($0.warning) }),
        ]
    }
}
