import Foundation
import IsletCore

/// What registerDevice says of a device (D1). Tokens are already lowercase hex.
public struct DeviceRegistration: Sendable, Equatable {
    public var hwid: String
    public var pushToken: String
    public var gateway: Gateway
    public var language: String?
    public var timezone: String?
    public var osVersion: String?
    public var userID: String?
    /// Whether the app's "More Frequent Updates" are on (A7); nil leaves what the device said before.
    public var frequentUpdates: Bool?
    /// An iPhone (an APNs token) or an Android phone (an FCM token), from the SDK's `device_type`.
    public var platform: DevicePlatform

    public init(hwid: String, pushToken: String, gateway: Gateway = .production, language: String? = nil,
                timezone: String? = nil, osVersion: String? = nil, userID: String? = nil, frequentUpdates: Bool? = nil,
                platform: DevicePlatform = .ios) {
        self.platform = platform
        self.hwid = hwid
        self.pushToken = pushToken
        self.gateway = gateway
        self.language = language
        self.timezone = timezone
        self.osVersion = osVersion
        self.userID = userID
        self.frequentUpdates = frequentUpdates
    }
}

/// What the app says of its device without registering it (issue 45): an app open (`applicationOpen`), a User ID
/// (`registerUser`). The SDK sends these before `registerDevice`, and without it when the user declines
/// notifications: they are kept on the device, known by its HWID, until it registers. nil leaves a field as it was.
public struct DeviceNote: Sendable, Equatable {
    public var hwid: String
    public var language: String?
    public var timezone: String?
    public var osVersion: String?
    public var userID: String?
    /// The app was opened: kept as the device's last sign of life.
    public var appOpened: Bool

    public init(hwid: String, language: String? = nil, timezone: String? = nil, osVersion: String? = nil, userID: String? = nil,
                appOpened: Bool = false) {
        self.hwid = hwid
        self.language = language
        self.timezone = timezone
        self.osVersion = osVersion
        self.userID = userID
        self.appOpened = appOpened
    }
}

/// A device, registered or known by its HWID only, as targeting and delivery see it.
public struct Device: Sendable, Equatable {
    /// Storage identity; stable for the device's life, used to page through audiences.
    public let id: Int64
    public let application: ApplicationCode
    public let hwid: String
    /// nil once unregistered.
    public let pushToken: String?
    public let gateway: Gateway
    public let language: String?
    public let timezone: String?
    public let osVersion: String?
    public let userID: String?
    /// The push-to-start token that serves the requested attributes type, when one was asked for (S7, D3).
    public let pushToStartToken: String?
    /// What the device last said of frequent updates (A7); nil: nothing.
    public let frequentUpdates: Bool?
    /// An iPhone, or an Android phone (registered and kept; Islet sends it nothing yet).
    public let platform: DevicePlatform

    public init(id: Int64, application: ApplicationCode, hwid: String, pushToken: String?, gateway: Gateway, language: String?,
                timezone: String?, osVersion: String?, userID: String?, pushToStartToken: String?, frequentUpdates: Bool? = nil,
                platform: DevicePlatform = .ios) {
        self.platform = platform
        self.frequentUpdates = frequentUpdates
        self.id = id
        self.application = application
        self.hwid = hwid
        self.pushToken = pushToken
        self.gateway = gateway
        self.language = language
        self.timezone = timezone
        self.osVersion = osVersion
        self.userID = userID
        self.pushToStartToken = pushToStartToken
    }
}

/// A per-device update token of one activity (D4); `token` nil means the activity ended on the device.
public struct ActivityToken: Sendable, Equatable {
    public let activityID: String
    public let token: String?
    public let updatedAt: Date

    public init(activityID: String, token: String?, updatedAt: Date) {
        self.activityID = activityID
        self.token = token
        self.updatedAt = updatedAt
    }
}

/// Who a start is for (S4): a filter, devices by push token or HWID, or users by User ID.
public enum TargetSelection: Sendable, Equatable {
    case filter(FilterDefinition)
    case devices([String])
    case users([String])

    /// How it names its audience, kept beside the stored target (`messages.target_kind`).
    public var kind: TargetKind {
        switch self {
        case .filter: .filter
        case .devices: .devices
        case .users: .users
        }
    }

    /// How many entries it names: devices or users (a filter names none).
    public var namedCount: Int {
        switch self {
        case .filter: 0
        case .devices(let list), .users(let list): list.count
        }
    }

    /// How many devices it names: a list of hwids only (a filter or users may reach any number).
    public var namedDevices: Int? {
        if case .devices(let list) = self { return list.count }
        return nil
    }
}

/// How a start names its audience: devices by hwid, users by id, or a filter over tags.
public struct TargetKind: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let devices = Self(uncheckedRawValue: "devices")
    public static let users = Self(uncheckedRawValue: "users")
    public static let filter = Self(uncheckedRawValue: "filter")
    public static let all = [devices, users, filter]
}

/// Devices, their tags and tokens, and the filters over them.
public protocol DeviceStore: Sendable {
    /// Creates or updates the device (application, hwid), merging `tags`; a tag whose type clashes is
    /// skipped and returned, everything else applies in one transaction.
    func registerDevice(_ registration: DeviceRegistration, tags: [(name: String, change: TagChange)],
                        in application: ApplicationCode, at date: Date) throws(StoreError) -> (device: Device, skipped: [SkippedTag])
    /// Clears the device's push tokens; false when no such device exists.
    func unregisterDevice(hwid: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> Bool
    func device(hwid: String, in application: ApplicationCode) throws(StoreError) -> Device?

    /// Creates the device (application, hwid) without a push token when it is new, or updates it, with what the app
    /// said of it (issue 45); a push token it has is kept.
    @discardableResult
    func noteDevice(_ note: DeviceNote, in application: ApplicationCode, at date: Date) throws(StoreError) -> Device

    /// Merges tags (nil removes one), skipping and returning those whose type clashes. A device not known yet is
    /// created without a push token (the SDK sets tags before it registers).
    func setTags(_ tags: [(name: String, change: TagChange)], hwid: String, in application: ApplicationCode,
                 at date: Date) throws(StoreError) -> [SkippedTag]
    /// The device's custom tags, nil when the device does not exist.
    func tags(hwid: String, in application: ApplicationCode) throws(StoreError) -> [String: TagValue]?
    /// The device and its custom tags, read together (one statement: one round trip on PostgreSQL); nil when
    /// the device does not exist.
    func deviceWithTags(hwid: String, in application: ApplicationCode) throws(StoreError) -> (device: Device, tags: [String: TagValue])?
    /// Types of the custom tags devices of the application have set; with `named`, of those names only (what a filter
    /// names: an application may have many).
    func tagTypes(in application: ApplicationCode, named: Set<String>?) throws(StoreError) -> [String: TagType]

    /// Stores (or with nil, removes) the push-to-start token for `attributesType` ("" serves every type). A device not
    /// known yet is created without a push token: Live Activities need no notification permission, so an app whose
    /// user declined it reports its Live Activity tokens without ever registering.
    func setPushToStartToken(_ token: String?, attributesType: String, hwid: String, in application: ApplicationCode,
                             at date: Date) throws(StoreError)
    /// Stores an activity's update token; nil marks the activity ended on the device, and with
    /// `activityID` "" every activity on the device. A device not known yet is created, as for push-to-start
    /// tokens. Before a token joins the device to an activity, `admit` sees the facts (D5) and may throw to
    /// refuse; nothing is then written.
    func setActivityToken(_ token: String?, activityID: String, hwid: String, in application: ApplicationCode,
                          at date: Date, admit: (ActivityJoinFacts) throws -> Void) throws
    func activityTokens(hwid: String, in application: ApplicationCode) throws(StoreError) -> [ActivityToken]
    /// A10: the device's tokens, their last `historyLimit` changes, and its recent starts and token rejections.
    func deviceHealth(hwid: String, in application: ApplicationCode, historyLimit: Int) throws(StoreError) -> DeviceHealthReport?

    func createFilter(_ filter: FilterDefinition, in application: ApplicationCode, at date: Date) throws(StoreError)
    /// In name order: at most `limit` after the name `after` (nil: from the first; nil limit: all).
    func filters(in application: ApplicationCode, after: String?, limit: Int?) throws(StoreError) -> [FilterDefinition]
    func filter(named name: String, in application: ApplicationCode) throws(StoreError) -> FilterDefinition?
    func deleteFilter(named name: String, in application: ApplicationCode) throws(StoreError) -> Bool

    /// The entries of a `devices` or `users` selection that name no device of the application (a HWID or push token
    /// no device has, a User ID no device carries), in the order given; none for a filter.
    func unknownTargets(_ selection: TargetSelection, in application: ApplicationCode) throws(StoreError) -> [String]

    /// One page of the devices a selection targets, in id order after `afterID`: an audience is
    /// read page by page, never whole. A filter leaves unregistered devices out; named devices and
    /// users include them (with no push token), so they can be counted.
    /// With `attributesType`, each device carries its push-to-start token for that type (or the generic one).
    func targets(_ selection: TargetSelection, in application: ApplicationCode, attributesType: String?,
                 afterID: Int64, limit: Int) throws(StoreError) -> [Device]
}

extension DeviceStore {
    /// Every filter of the application, in name order.
    public func filters(in application: ApplicationCode) throws(StoreError) -> [FilterDefinition] {
        try filters(in: application, after: nil, limit: nil)
    }

    /// A report Islet itself trusts (its simulator, a server API token): no join check.
    public func setActivityToken(_ token: String?, activityID: String, hwid: String, in application: ApplicationCode,
                                 at date: Date) throws {
        try setActivityToken(token, activityID: activityID, hwid: hwid, in: application, at: date, admit: { _ in })
    }
}

/// Which of a device's tokens a history entry is about (A10).
public struct DeviceTokenKind: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    /// The regular APNs device token; its slot is the gateway it was registered for.
    public static let push = Self(uncheckedRawValue: "push")
    /// A push-to-start token; its slot is the attributes type ("" for any).
    public static let pushToStart = Self(uncheckedRawValue: "push-to-start")
    /// An activity's update token; its slot is the activity id.
    public static let update = Self(uncheckedRawValue: "update")
    public static let all = [push, pushToStart, update]
}

/// One change of a device's token: a new token, or its removal (nil).
public struct TokenChange: Sendable, Equatable {
    public let kind: DeviceTokenKind
    public let slot: String
    public let token: String?
    public let at: Date

    public init(kind: DeviceTokenKind, slot: String, token: String?, at: Date) {
        self.kind = kind
        self.slot = slot
        self.token = token
        self.at = at
    }
}

/// What `getDeviceHealth` shows of a device (A10): its tokens now, their recent changes, and the facts its flags are decided on.
public struct DeviceHealthReport: Sendable {
    public let device: Device
    public let pushTokenUpdatedAt: Date?
    public let pushToStartTokens: [(attributesType: String, updatedAt: Date)]
    public let activityTokens: [ActivityToken]
    /// Newest first.
    public let history: [TokenChange]
    public let facts: DeviceHealth.Facts
    /// When the app last said it was opened (`applicationOpen`): a sign the install, and its tokens, live.
    public let appOpenedAt: Date?

    public init(device: Device, pushTokenUpdatedAt: Date?, pushToStartTokens: [(attributesType: String, updatedAt: Date)],
                activityTokens: [ActivityToken], history: [TokenChange], facts: DeviceHealth.Facts, appOpenedAt: Date? = nil) {
        self.appOpenedAt = appOpenedAt
        self.device = device
        self.pushTokenUpdatedAt = pushTokenUpdatedAt
        self.pushToStartTokens = pushToStartTokens
        self.activityTokens = activityTokens
        self.history = history
        self.facts = facts
    }
}

extension DeviceStore {
    /// Types of every custom tag devices of the application have set.
    public func tagTypes(in application: ApplicationCode) throws(StoreError) -> [String: TagType] {
        try tagTypes(in: application, named: nil)
    }
}
