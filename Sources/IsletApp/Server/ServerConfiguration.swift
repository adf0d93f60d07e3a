import Foundation
import IsletCore
import IsletAPI
import IsletCrypto
import IsletDelivery
import IsletHTTP
import IsletStore

/// Where pushes go: the built-in simulator or Apple's APNs.
public struct APNsMode: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let simulator = Self(uncheckedRawValue: "simulator")
    public static let apple = Self(uncheckedRawValue: "apple")
    public static let all = [simulator, apple]
}

/// A numeric address and port to listen on, parsed from `HOST:PORT` or `[IPv6]:PORT`.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init?(_ text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
        self.host = host == "localhost" ? "127.0.0.1" : String(host)
        self.port = port
    }

    /// True for 127.0.0.0/8 and ::1: only this machine can reach the server.
    public var isLoopback: Bool { host.hasPrefix("127.") || host == "::1" }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Everything `islet serve` runs with. Built from flags and environment in the CLI, nowhere else.
public struct ServerConfiguration: Sendable, CustomStringConvertible {
    public var listen: ListenAddress
    /// An SQLite file's path or a PostgreSQL URL (`StorageLocation`).
    public var database: String
    /// `database` as the engine and place it names.
    public var location: StorageLocation { StorageLocation(database) }
    public var apns: APNsMode
    /// Replaces both Apple hosts (tests, the simulator).
    public var apnsURL: String?
    /// Extra CA certificate file trusted for the APNs connection.
    public var apnsCA: String?
    /// FCM's base URL, replacing Google's (issue 46: any FCM stand-in); nil: `https://fcm.googleapis.com`.
    public var fcmURL: String?
    /// Extra CA certificate file trusted for FCM and for the service accounts' token endpoints.
    public var fcmCA: String?
    public var shutdownGracePeriod: Duration
    public var http: HTTPServerConfiguration
    /// E6: rate limits of the API (the device API is limited by default).
    public var rateLimits = RateLimits()
    /// How long finished messages and their delivery records are kept.
    public var retention = RetentionPolicy()
    /// A9: the least time between two updates of one activity; a burst in between goes as its latest state.
    public var updatePacing = UpdatePacing.standard
    /// A12: push-to-start pushes a device gets in a minute (starts to named devices).
    public var pushToStartPacing = PushToStartPacing.standard
    /// How many tag names an application may have.
    public var tagNames = TagNames.standard
    /// D5: whether an activity begun on a phone may be defined by its first report.
    public var phoneStartedActivities = PhoneStartedActivities.allow
    /// Seals APNs keys at rest; nil stores them plain (a warning with Apple's APNs).
    public var masterKey: MasterKey?
    /// Where admin actions are logged: a file, "off", or unset for `audit.log` beside an SQLite database.
    public var auditLogSetting: String?
    /// This process among the nodes sharing the database (issue 14); unique per run unless given.
    public var node = NodeID.generated()

    /// The audit log this configuration writes to.
    public var auditLog: AuditLog { AuditLog(setting: auditLogSetting, directory: location.localDirectory) }

    public static let defaultListen = "127.0.0.1:8080"
    public static let defaultDatabase = "var/islet.sqlite"

    public init(listen: ListenAddress = ListenAddress(host: "127.0.0.1", port: 8080),
                database: String = ServerConfiguration.defaultDatabase, apns: APNsMode = .simulator,
                apnsURL: String? = nil, apnsCA: String? = nil, shutdownGracePeriod: Duration = .seconds(10)) {
        self.listen = listen
        self.database = database
        self.apns = apns
        self.apnsURL = apnsURL
        self.apnsCA = apnsCA
        self.shutdownGracePeriod = shutdownGracePeriod
        self.http = HTTPServerConfiguration(host: listen.host, port: listen.port)
    }

    /// The configuration as one JSON object for the start-up log; holds no secrets (any URL password is hidden).
    public var description: String { summary.jsonText }

    public var summary: JSONValue {
        var object: JSONObject = [
            "listen": .string(listen.description), "database": .string(location.description), "apns": .string(apns.rawValue),
            "node": .string(node.rawValue),
            "max_body_bytes": .int(Int64(http.maximumBodyBytes)), "threads": .int(Int64(http.threads)),
            "phone_started_activities": .string(phoneStartedActivities.rawValue),
            "audit_log": auditLog.path.map { .string($0) } ?? .string("off"),
            "master_key": masterKey.map { .string("fingerprint " + $0.fingerprint) } ?? .string("none"),
            "retention_days": retention.keep.map { .int(Int64($0.components.seconds / 86_400)) } ?? .string("off"),
            "delete_idle_channels_days": retention.idleChannels.map { .int(Int64($0.components.seconds / 86_400)) } ?? .string("off"),
            "update_interval_seconds": .double(updatePacing.interval),
            "push_to_start_per_minute": .int(Int64(pushToStartPacing.perMinute)),
            "tag_names_per_application": .int(Int64(tagNames.limit)),
            "connections_per_address": http.connectionsPerAddress.map { .int(Int64($0)) } ?? .string("off"),
            "receive_deadline_seconds": http.receiveDeadline.map { .int($0.headers.components.seconds) } ?? .string("off"),
            "rate_limits": [
                "device_per_address": .string(rateLimits.devicePerAddress?.description ?? "off"),
                "device_per_token": .string(rateLimits.devicePerToken?.description ?? "off"),
                "server_per_token": .string(rateLimits.serverPerToken?.description ?? "off"),
            ],
        ]
        if let apnsURL { object["apns_url"] = .string(Self.hidingPassword(apnsURL)) }
        if let apnsCA { object["apns_ca"] = .string(apnsCA) }
        if let fcmURL { object["fcm_url"] = .string(Self.hidingPassword(fcmURL)) }
        if let fcmCA { object["fcm_ca"] = .string(fcmCA) }
        return .object(object)
    }

    static func hidingPassword(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "hidden"
        return components.string ?? url
    }
}
