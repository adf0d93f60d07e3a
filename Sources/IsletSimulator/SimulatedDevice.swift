import Foundation
import IsletCore
import IsletStore

/// One Live Activity on a simulated lock screen.
public struct SimulatedActivity: Codable, Sendable, Equatable {
    public var activityID: String
    public var attributesType: String
    /// JSON text, exactly as received.
    public var attributes: String
    /// What the lock screen shows (JSON text).
    public var contentState: String
    /// A priority-5 update that arrived while the device was locked: shown on unlock.
    public var pendingContentState: String?
    public var updateToken: String
    public var timestamp: Int64
    public var relevanceScore: Int64?
    public var staleDate: Int64?
    public var ended: Bool
    /// When the card leaves the lock screen (seconds since 1970); nil while it runs.
    public var dismissAt: Double?
    public var startedAt: Double
    /// When its priority-10 updates of the last hour came, for ActivityKit's budget (A7); nil before the first.
    public var priorityTen: [Double]?
    /// iOS ended it, 8 hours after it started (A8); nil: not by iOS.
    public var endedByIOS: Bool?
    /// The broadcast channel it is subscribed to (Apple's id, X5); such an activity has no update token.
    public var channelID: String?
}

/// A push the simulated device received, with what became of it.
public struct SimulatedPush: Codable, Sendable, Equatable {
    public var at: Double
    public var apnsID: String
    public var pushType: PushType
    public var event: String?
    public var priority: Int
    /// Why ActivityKit dropped it silently (APNs still answered 200); nil when applied.
    public var dropped: String?
    public var payload: String
}

/// A simulated iPhone: its tokens, its lock screen and what it received (issue 6); or a simulated Android phone, its
/// FCM token and its notification shade (issue 46, `SimulatedAndroid.swift`).
public struct SimulatedDevice: Codable, Sendable, Equatable {
    public var application: String
    public var hwid: String
    /// Its iOS version; an Android phone's Android release.
    public var iosVersion: String
    /// `android` for an Android phone; nil for an iPhone (as every phone saved before issue 46).
    public var platform: String?
    /// An Android phone's Live Updates on its notification shade.
    public var liveUpdates: [SimulatedLiveUpdate]?
    /// When FCM took its messages in the last minute (its per-device quota).
    public var recentFCM: [Double]?
    public var locked: Bool
    public var pushToken: String
    /// Attributes type ("" for any) → push-to-start token.
    public var pushToStartTokens: [String: String]
    /// Set when the app was uninstalled: APNs answers 410 with this time (milliseconds).
    public var uninstalledAt: Int64?
    public var activities: [SimulatedActivity] = []
    public var log: [SimulatedPush] = []
    /// Alerts shown (fallback pushes of devices below iOS 16.1).
    public var alerts: [String] = []
    /// When recent push-to-start pushes came, for the ~10-in-a-row budget.
    public var recentStarts: [Double] = []
    /// Whether the app's "More Frequent Updates" are on (A7); nil: off, as on a phone that never said.
    public var frequentUpdates: Bool?

    public static let logLimit = 200
    /// Push-to-start pushes accepted in a minute before ActivityKit drops them silently (reference docs).
    public static let startBudget = 10
    /// An ended activity without dismissal-date stays up to four hours (U3).
    public static let endedLifetime: Double = 4 * 3600

    public init(application: String, hwid: String, iosVersion: String, locked: Bool, pushToken: String, pushToStartTokens: [String: String]) {
        self.application = application
        self.hwid = hwid
        self.iosVersion = iosVersion
        self.locked = locked
        self.pushToken = pushToken
        self.pushToStartTokens = pushToStartTokens
    }

    /// Which of this device's tokens `token` is.
    public enum TokenKind: Equatable { case push, pushToStart(attributesType: String), update(activityIndex: Int) }

    /// Every token that reaches this phone: push, push-to-start, and its activities' update tokens.
    public var tokens: [String] { [pushToken] + pushToStartTokens.values.sorted() + activities.map(\.updateToken).filter { !$0.isEmpty } }

    public func kind(of token: String) -> TokenKind? {
        if token == pushToken { return .push }
        if let entry = pushToStartTokens.first(where: { $0.value == token }) { return .pushToStart(attributesType: entry.key) }
        if !token.isEmpty, let index = activities.firstIndex(where: { $0.updateToken == token }) { return .update(activityIndex: index) }
        return nil
    }

    /// Whether an activity on this phone listens to the channel `channelID` (X5).
    public func subscribes(to channelID: String) -> Bool { activities.contains { $0.channelID == channelID } }

    /// The app starts an activity itself, subscribed to a broadcast channel (`pushType: .channel(id)`, iOS 18).
    public mutating func startOnChannel(activityID: String, attributesType: String, attributes: JSONObject, contentState: JSONObject,
                                        channelID: String, now: Date) {
        expire(now: now)
        activities.append(SimulatedActivity(
            activityID: activityID, attributesType: attributesType, attributes: JSONValue.object(attributes).jsonText,
            contentState: JSONValue.object(contentState).jsonText, pendingContentState: nil, updateToken: "",
            // Started by the app, not by a push: any broadcast's timestamp is newer.
            timestamp: 0, relevanceScore: nil, staleDate: nil, ended: false, dismissAt: nil,
            startedAt: now.timeIntervalSince1970, priorityTen: nil, channelID: channelID))
    }

    /// A broadcast on `channelID` (X5): applied as an update to every activity subscribed to it, each under
    /// ActivityKit's rules (timestamp, budget, 8 hours, decoding), and logged once.
    public mutating func receiveBroadcast(payload: [UInt8], channelID: String, priority: Int, apnsID: String, now: Date,
                                          decodingError: (_ attributesType: String, _ contentState: JSONObject, _ attributes: JSONObject?) -> String? = { _, _, _ in nil }) {
        expire(now: now)
        let aps = (try? JSONParser.parse(payload))?.objectValue?["aps"]?.objectValue ?? [:]
        var entry = SimulatedPush(at: now.timeIntervalSince1970, apnsID: apnsID, pushType: .liveActivity, event: aps["event"]?.stringValue,
                                  priority: priority, dropped: nil, payload: String(decoding: payload, as: UTF8.self))
        for index in activities.indices where activities[index].channelID == channelID {
            if let state = aps["content-state"]?.objectValue, let error = decodingError(activities[index].attributesType, state, nil) {
                entry.dropped = "unable to decode: \(error)"
                continue
            }
            update(index, aps, priority: priority, entry: &entry, now: now)
        }
        log.append(entry)
        if log.count > Self.logLimit { log.removeFirst(log.count - Self.logLimit) }
    }

    /// Applies a push APNs accepted, as ActivityKit would; returns the update token of an activity it
    /// started, for the app to report (setActivityToken), and records the push.
    /// `decodingError` says why the app could not decode a content-state (and, for a start, attributes)
    /// of an attributes type; nil when it could.
    /// `channelExists` says whether APNs has a channel a start subscribes to (`input-push-channel`, X5).
    public mutating func receive(payload: [UInt8], token: String, pushType: PushType, priority: Int, apnsID: String, now: Date,
                                 newToken: () -> String,
                                 decodingError: (_ attributesType: String, _ contentState: JSONObject, _ attributes: JSONObject?) -> String? = { _, _, _ in nil },
                                 channelExists: (String) -> Bool = { _ in false })
        -> (activityID: String, updateToken: String)? {
        expire(now: now)
        let text = String(decoding: payload, as: UTF8.self)
        let aps = (try? JSONParser.parse(payload))?.objectValue?["aps"]?.objectValue ?? [:]
        var entry = SimulatedPush(at: now.timeIntervalSince1970, apnsID: apnsID, pushType: pushType, event: aps["event"]?.stringValue,
                                  priority: priority, dropped: nil, payload: text)
        defer {
            log.append(entry)
            if log.count > Self.logLimit { log.removeFirst(log.count - Self.logLimit) }
        }
        switch kind(of: token) {
        case .push?:
            guard pushType == .alert else { entry.dropped = "a Live Activity push needs a push-to-start or update token"; return nil }
            let alert = aps["alert"]?.objectValue
            alerts.append([alert?["title"]?.stringValue, alert?["body"]?.stringValue].compactMap { $0 }.joined(separator: ": "))
            return nil
        case .pushToStart?:
            if let type = aps["attributes-type"]?.stringValue, let state = aps["content-state"]?.objectValue,
               let error = decodingError(type, state, aps["attributes"]?.objectValue) {
                entry.dropped = "unable to decode: \(error)"
                return nil
            }
            if let channel = aps["input-push-channel"]?.stringValue {
                guard BroadcastChannels.takesChannelStart(osVersion: iosVersion) else {
                    entry.dropped = "input-push-channel needs iOS 18: the Live Activity fails to start"
                    return nil
                }
                guard channelExists(channel) else { entry.dropped = "no such channel at APNs: the Live Activity fails to start"; return nil }
            }
            return start(aps, entry: &entry, now: now, newToken: newToken)
        case .update(let index)?:
            if let state = aps["content-state"]?.objectValue, let error = decodingError(activities[index].attributesType, state, nil) {
                entry.dropped = "unable to decode: \(error)"
                return nil
            }
            update(index, aps, priority: priority, entry: &entry, now: now)
            return nil
        case nil:
            entry.dropped = "unknown token"
            return nil
        }
    }

    private mutating func start(_ aps: JSONObject, entry: inout SimulatedPush, now: Date, newToken: () -> String)
        -> (activityID: String, updateToken: String)? {
        recentStarts = recentStarts.filter { now.timeIntervalSince1970 - $0 < 60 } + [now.timeIntervalSince1970]
        guard recentStarts.count <= Self.startBudget else {
            entry.dropped = "push-to-start budget exhausted (more than \(Self.startBudget) starts in a minute)"
            return nil
        }
        guard aps["event"] == "start", let contentState = aps["content-state"]?.objectValue,
              let type = aps["attributes-type"]?.stringValue, let attributes = aps["attributes"]?.objectValue else {
            entry.dropped = "unable to decode: a start needs event, content-state, attributes-type and attributes"
            return nil
        }
        let activityID = attributes["pushwoosh"]?.objectValue?["activityId"]?.stringValue ?? UUID().uuidString
        // On a channel (X5) the activity has no update token: broadcasts reach it, and the app has nothing to report.
        let channel = aps["input-push-channel"]?.stringValue
        let token = channel == nil ? newToken() : ""
        activities.append(SimulatedActivity(
            activityID: activityID, attributesType: type, attributes: JSONValue.object(attributes).jsonText,
            contentState: JSONValue.object(contentState).jsonText, pendingContentState: nil, updateToken: token,
            timestamp: aps["timestamp"]?.intValue ?? 0, relevanceScore: aps["relevance-score"]?.intValue,
            staleDate: aps["stale-date"]?.intValue, ended: false, dismissAt: nil, startedAt: now.timeIntervalSince1970, priorityTen: nil,
            channelID: channel))
        return channel == nil ? (activityID, token) : nil
    }

    private mutating func update(_ index: Int, _ aps: JSONObject, priority: Int, entry: inout SimulatedPush, now: Date) {
        var activity = activities[index]
        guard let event = aps["event"]?.stringValue, event == "update" || event == "end",
              let contentState = aps["content-state"]?.objectValue else {
            entry.dropped = "unable to decode: an update needs event update or end, and a content-state"
            return
        }
        let timestamp = aps["timestamp"]?.intValue ?? 0
        guard timestamp >= activity.timestamp else {
            entry.dropped = "older than what the activity shows (timestamp \(timestamp) < \(activity.timestamp))"
            return
        }
        guard activity.endedByIOS != true else {
            entry.dropped = "iOS ended the activity 8 hours after it started (A8)"
            return
        }
        guard !activity.ended || event == "end" else {
            entry.dropped = "the activity has ended"
            return
        }
        if priority == 10 {
            // ActivityKit's hourly budget of priority-10 updates, counted per activity; past it, throttled silently.
            let budget = UpdateBudget.standard.perHour(frequentUpdates: frequentUpdates)
            let recent = (activity.priorityTen ?? []).filter { now.timeIntervalSince1970 - $0 < UpdateBudget.window }
            guard recent.count < budget else {
                activity.priorityTen = recent
                activities[index] = activity
                entry.dropped = "throttled: the activity had its \(budget) priority-10 updates of the last hour (A7)"
                return
            }
            activity.priorityTen = recent + [now.timeIntervalSince1970]
        }
        activity.timestamp = timestamp
        let state = JSONValue.object(contentState).jsonText
        if priority == 5 && locked {
            activity.pendingContentState = state   // low priority on a locked device: visible on unlock
        } else {
            activity.contentState = state
            activity.pendingContentState = nil
        }
        if let score = aps["relevance-score"]?.intValue { activity.relevanceScore = score }
        if let stale = aps["stale-date"]?.intValue { activity.staleDate = stale }
        if event == "end" {
            activity.ended = true
            if let dismissal = aps["dismissal-date"]?.intValue {
                activity.dismissAt = Double(dismissal)
            } else {
                activity.dismissAt = now.timeIntervalSince1970 + Self.endedLifetime
            }
        }
        activities[index] = activity
        expire(now: now)
    }

    /// Ends activities that ran 8 hours, as iOS does (A8: they stay on the lock screen 4 hours more), and
    /// removes cards whose dismissal time has come.
    public mutating func expire(now: Date) {
        for index in activities.indices where activities[index].endedByIOS != true
            && ActivityLifetime.isOver(startedAt: Date(timeIntervalSince1970: activities[index].startedAt), now: now) {
            let endsAt = activities[index].startedAt + ActivityLifetime.running
            if !activities[index].ended { activities[index].dismissAt = endsAt + ActivityLifetime.onLockScreenAfterEnd }
            activities[index].ended = true
            activities[index].endedByIOS = true
        }
        activities.removeAll { ($0.dismissAt ?? .infinity) <= now.timeIntervalSince1970 }
    }

    /// What a tester can make a simulated phone: locked, unlocked, or with the app uninstalled.
    public enum Setting: String, CaseIterable, Sendable {
        case locked, unlocked, uninstalled
    }

    public mutating func apply(_ setting: Setting, now: Date) {
        switch setting {
        case .locked: locked = true
        case .unlocked: unlock()
        case .uninstalled: uninstalledAt = Int64(now.timeIntervalSince1970 * 1000)
        }
    }

    public mutating func unlock() {
        locked = false
        for index in activities.indices {
            if let pending = activities[index].pendingContentState {
                activities[index].contentState = pending
                activities[index].pendingContentState = nil
            }
        }
    }

    /// The lock screen as the device would show it: activities by relevance (highest first), then by start.
    public func lockScreen(now: Date) -> JSONValue {
        let visible = activities.filter { ($0.dismissAt ?? .infinity) > now.timeIntervalSince1970 }
            .sorted { ($0.relevanceScore ?? 0, -$0.startedAt) > ($1.relevanceScore ?? 0, -$1.startedAt) }
        return .array(visible.map { activity in
            [
                "activity_id": .string(activity.activityID), "attributes_type": .string(activity.attributesType),
                "content_state": (try? JSONParser.parse(activity.contentState)) ?? .null,
                "stale": .bool(activity.staleDate.map { Double($0) <= now.timeIntervalSince1970 } ?? false),
                "ended": .bool(activity.ended), "relevance_score": activity.relevanceScore.map { .int($0) } ?? .null,
                "waiting_for_unlock": .bool(activity.pendingContentState != nil),
                "channel_id": activity.channelID.map { .string($0) } ?? .null,
            ]
        })
    }

    /// What `GET /simulator/devices/<hwid>` answers.
    public func json(now: Date, withLog: Bool) -> JSONValue {
        if isAndroid {
            var object: JSONObject = [
                "hwid": .string(hwid), "application": .string(application), "platform": .string(DevicePlatform.android.rawValue),
                "android_version": .string(iosVersion), "push_token": .string(pushToken), "uninstalled": .bool(uninstalledAt != nil),
                "shade": shadeJSON, "notifications": .array(alerts.suffix(20).map { .string($0) }),
            ]
            if withLog { object["log"] = logJSON }
            return .object(object)
        }
        var object: JSONObject = [
            "hwid": .string(hwid), "application": .string(application), "ios_version": .string(iosVersion), "locked": .bool(locked),
            "push_token": .string(pushToken),
            "push_to_start_tokens": .object(JSONObject(pushToStartTokens.keys.sorted().map { (key: $0, value: .string(pushToStartTokens[$0]!)) })),
            "uninstalled": .bool(uninstalledAt != nil), "frequent_updates": .bool(frequentUpdates == true), "lock_screen": lockScreen(now: now),
            "alerts": .array(alerts.suffix(20).map { .string($0) }),
        ]
        if withLog { object["log"] = logJSON }
        return .object(object)
    }

    /// What the phone received, oldest first (`apns_id`: an FCM message's name for an Android phone).
    var logJSON: JSONValue {
        .array(log.map { push in
            [
                "at": .string(Date(timeIntervalSince1970: push.at).formatted(.iso8601)), "apns_id": .string(push.apnsID),
                "push_type": .string(push.pushType.rawValue), "event": push.event.map { .string($0) } ?? .null, "priority": .int(Int64(push.priority)),
                "dropped": push.dropped.map { .string($0) } ?? .null, "payload": (try? JSONParser.parse(push.payload)) ?? .string(push.payload),
            ]
        })
    }
}

extension SimulatorStore {
    /// Saves a simulated phone, indexed by its tokens.
    public func save(_ device: SimulatedDevice, application: ApplicationCode) throws {
        try saveSimulatedDevice(application: application, hwid: device.hwid, state: String(decoding: try JSONEncoder().encode(device), as: UTF8.self),
                                tokens: device.tokens)
    }
}
