import Foundation
import IsletCore
import IsletCrypto
import IsletStore

/// Why a device got no push (S7, U2): counted per message in its statistics (X4).
public enum SkipReason {
    public static let noPushToStartToken = "no push-to-start token"
    public static let cannotStartRemotely = "iOS 16.1–17.1"
    public static let activityEndedOnDevice = "activity ended on device"
    public static let updateTokenUnregistered = "update token unregistered"
    public static let noUpdateToken = "no update token yet"
    public static let unregistered = "token unregistered"
    public static let pastLifetime = ActivityLifetime.skipReason
    /// X5: the device's activity was started on a channel; the update reaches it as the channel's broadcast.
    public static let onChannel = "gets the channel's broadcast"
    /// Issue 46: an Android phone gets a message's Live Update only when the message has one: its application had an FCM
    /// service account when it was accepted (and it is not an iOS renewal, which Android has no need of).
    public static let android = "Android device: no Live Update in this message (no FCM service account when it was accepted, or an iOS renewal)"
    /// Android below 16 drops Live Updates; it gets a start's title and content as a notification, unless the start's
    /// fallback alert is off, and no update or end.
    public static let belowLiveUpdates = "Android below 16"
    /// A phone below iOS 16.1, which has no Live Activities, when the start's fallback alert is off (S7).
    public static let belowLiveActivities = "iOS below 16.1"
    /// Issue 46: a message made by Pushwoosh's `/messaging/v2/notify`, which carries an Android Live Update only.
    public static let androidOnly = "iPhone: this message is for Android phones only (messaging/v2/notify)"

    public static let all: Set<String> = [noPushToStartToken, cannotStartRemotely, activityEndedOnDevice, updateTokenUnregistered,
                                          noUpdateToken, unregistered, pastLifetime, onChannel, android, belowLiveUpdates,
                                          belowLiveActivities, androidOnly]
}

/// What one device gets from one message.
public enum PlannedDelivery: Sendable, Equatable {
    case push(Push)
    case skip(reason: String)
    /// A push-to-start held until the device's next slot (A12).
    case held(Push, until: Date, reason: String)
}

/// Decides, per device, which push a message becomes (S7, U2) — for delivery and for dry runs alike.
public struct PushPlanner: Sendable {
    public let application: ApplicationCode
    public let bundleID: String
    public let messageCode: String
    public let payload: [UInt8]
    public let fallbackPayload: [UInt8]?
    /// By kind of device: an update past the activity's budget goes at 5 to some (A7).
    public let priority: BudgetedPriority
    /// `apns-expiration` (seconds since 1970), the message's expiry.
    public let expiration: Int64?
    /// iOS has ended the activity, 8 hours after it started (A8): its updates reach no iPhone.
    public var lifetimeOver = false
    /// The FCM `data` of the message's Android Live Update (issue 46); nil: Android phones are skipped.
    public var androidPayload: [UInt8]?
    /// A start on a broadcast channel (X5): the payload that subscribes, per environment.
    public var channelPayloads: [Gateway: [UInt8]] = [:]
    /// An update or end of an activity started on a channel (X5): Apple's channel id per environment. Devices
    /// whose start subscribed them get the channel's broadcast instead of a push of their own.
    public var sessionChannelIDs: [Gateway: String]?

    /// The start's payloads on the channel `ids` (Apple's id per environment).
    public mutating func startOnChannel(_ ids: [Gateway: String]?) {
        channelPayloads = (ids ?? [:]).compactMapValues { BroadcastChannels.startOnChannel(payload, channelID: $0) }
    }

    /// X5: the payload a start sends a device: the one that subscribes to the channel where the device's
    /// environment has it and its iOS takes it (18), else the plain start.
    static func startPayload(_ base: [UInt8], channel: [UInt8]?, osVersion: String?) -> [UInt8] {
        guard let channel, BroadcastChannels.takesChannelStart(osVersion: osVersion) else { return base }
        return channel
    }

    public init(application: ApplicationCode, bundleID: String, messageCode: String, payload: [UInt8], fallbackPayload: [UInt8]?,
                priority: BudgetedPriority, expiration: Int64? = nil) {
        self.expiration = expiration
        self.application = application
        self.bundleID = bundleID
        self.messageCode = messageCode
        self.payload = payload
        self.fallbackPayload = fallbackPayload
        self.priority = priority
    }

    static let iOS16_1 = VersionKey.make("16.1")!
    static let iOS17_2 = VersionKey.make("17.2")!

    /// S7: the push-to-start token if the device has one (that alone means iOS 17.2+), with or without a push token:
    /// Live Activities need no notification permission, so an app whose user declined it reports its push-to-start
    /// token without registering (D6); below iOS 17.2, where a start cannot be pushed, a plain alert (the start's
    /// fallback, unless it turned it off); otherwise a skip with its reason.
    public func start(_ device: Device) -> PlannedDelivery {
        if device.platform == .android { return android(device, start: true) }
        if payload.isEmpty { return .skip(reason: SkipReason.androidOnly) }
        if let token = device.pushToStartToken {
            return .push(liveActivity(to: token, device: device, start: true))
        }
        guard let pushToken = device.pushToken else { return .skip(reason: SkipReason.unregistered) }
        guard let version = device.osVersion.flatMap(VersionKey.make), version < Self.iOS17_2 else {
            return .skip(reason: SkipReason.noPushToStartToken)
        }
        // Issue 45: iOS 16.1–17.1 shows Live Activities but cannot be started remotely; like a phone below 16.1, it gets
        // the start's title and content as an alert, so the customer hears of the order at all.
        guard let fallbackPayload else {
            return .skip(reason: version < Self.iOS16_1 ? SkipReason.belowLiveActivities : SkipReason.cannotStartRemotely)
        }
        return .push(Push(application: application, deviceToken: pushToken, gateway: device.gateway, pushType: .alert,
                          topic: PushType.alert.topic(bundleID: bundleID), priority: priority.forDevice(frequentUpdates: device.frequentUpdates),
                          apnsID: apnsID(device), payload: fallbackPayload, expiration: expiration))
    }

    /// U2: the device's update token for the activity, unless it ended there or APNs declared it dead.
    public func update(_ target: UpdateTarget) -> PlannedDelivery {
        // An Android Live Update has no update token and no 8 hours: it goes to the phone's FCM token while it runs.
        if target.device.platform == .android { return android(target.device, start: false) }
        if payload.isEmpty { return .skip(reason: SkipReason.androidOnly) }
        if lifetimeOver { return .skip(reason: SkipReason.pastLifetime) }
        if target.tokenDead { return .skip(reason: SkipReason.updateTokenUnregistered) }
        if let token = target.updateToken { return .push(liveActivity(to: token, device: target.device)) }
        if target.endedOnDevice { return .skip(reason: SkipReason.activityEndedOnDevice) }
        // An activity on a channel has no update token: its phone is reached by the broadcast, once.
        if BroadcastChannels.startsOnChannel(ids: sessionChannelIDs, gateway: target.device.gateway, osVersion: target.device.osVersion) {
            return .skip(reason: SkipReason.onChannel)
        }
        return .skip(reason: SkipReason.noUpdateToken)
    }

    /// Issue 46: an Android phone's push: the Live Update on Android 16 and later; below, a start's title and content as an
    /// ordinary notification (unless the start's fallback alert is off) and nothing of an update or end.
    private func android(_ device: Device, start: Bool) -> PlannedDelivery {
        guard let data = androidPayload else { return .skip(reason: SkipReason.android) }
        guard let token = device.pushToken else { return .skip(reason: SkipReason.unregistered) }
        var pushType = PushType.liveUpdate, payload = data
        if !AndroidPush.showsLiveUpdates(osVersion: device.osVersion) {
            guard start, fallbackPayload != nil, let notification = AndroidPush.notification(data) else {
                return .skip(reason: SkipReason.belowLiveUpdates)
            }
            (pushType, payload) = (.androidNotification, notification)
        }
        return .push(Push(application: application, deviceToken: token, gateway: device.gateway, pushType: pushType, topic: "",
                          priority: 10, apnsID: apnsID(device), payload: payload, expiration: expiration))
    }

    private func liveActivity(to token: String, device: Device, start: Bool = false) -> Push {
        Push(application: application, deviceToken: token, gateway: device.gateway, pushType: .liveActivity,
             topic: PushType.liveActivity.topic(bundleID: bundleID), priority: priority.forDevice(frequentUpdates: device.frequentUpdates),
             apnsID: apnsID(device), payload: start ? Self.startPayload(payload, channel: channelPayloads[device.gateway], osVersion: device.osVersion) : payload,
             expiration: expiration)
    }

    /// The push a due delivery (retry, second copy of a start, catch-up) becomes: the same request as
    /// its first send, to the token stored with it; a catch-up without its alert.
    public static func push(_ due: DueDelivery, bundleID: String) -> Push {
        var payload = due.catchUp ? CatchUpPayload.make(due.payload) : due.payload
        if due.event == .start, due.pushType == .liveActivity, let id = due.channelIDs?[due.gateway] {
            payload = startPayload(payload, channel: BroadcastChannels.startOnChannel(payload, channelID: id), osVersion: due.osVersion)
        }
        return Push(application: due.application, deviceToken: due.token, gateway: due.gateway, pushType: due.pushType,
                    topic: due.pushType.isFCM ? "" : due.pushType.topic(bundleID: bundleID), priority: due.priority,
                    apnsID: apnsID(messageCode: due.code, device: due.device), payload: payload,
                    expiration: Int64(due.expiresAt.timeIntervalSince1970))
    }

    /// The same UUID every time this message goes to this device, so a resend after a crash is the
    /// same request in APNs' and Islet's records (A2).
    func apnsID(_ device: Device) -> String { Self.apnsID(messageCode: messageCode, device: device.id) }

    static func apnsID(messageCode: String, device: Int64) -> String {
        // The first 16 bytes of SHA-256("code:device"), as an uppercase UUID with version 4 / variant 1
        // bits, so it is well formed; written straight into 36 bytes (this runs once per push).
        let digest = Crypto.sha256(Array("\(messageCode):\(device)".utf8))
        let digits: StaticString = "0123456789ABCDEF"
        return String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 { out[position] = UInt8(ascii: "-"); position += 1 }
                var byte = digest[index]
                if index == 6 { byte = 0x40 | (byte & 0x0F) }
                if index == 8 { byte = 0x80 | (byte & 0x3F) }
                out[position] = digits.utf8Start[Int(byte >> 4)]
                out[position + 1] = digits.utf8Start[Int(byte & 0x0F)]
                position += 2
            }
            return 36
        }
    }
}
