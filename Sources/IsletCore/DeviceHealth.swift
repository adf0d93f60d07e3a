import Foundation

/// A10: what a device's tokens and recent pushes say about why it may show nothing, although APNs
/// answered 200. Flags are decided here from facts the store reads, so both engines flag alike.
public enum DeviceHealth {
    /// How long after APNs accepted a start the app should have reported the activity's update token.
    public static let confirmationWindow: TimeInterval = 300
    /// Token changes a device keeps, and getDeviceHealth shows.
    public static let historyKept = 50
    /// A push-to-start token not reported again for this long may have been replaced on the phone.
    public static let pushToStartTokenAge: TimeInterval = 30 * 86_400

    /// What one flag is about.
    public struct Code: WireValue {
        public let rawValue: String
        public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

        public static let startNotConfirmed = Self(uncheckedRawValue: "start_not_confirmed")
        public static let stalePushToStartToken = Self(uncheckedRawValue: "stale_push_to_start_token")
        public static let environmentMismatch = Self(uncheckedRawValue: "environment_mismatch")
        public static let all = [startNotConfirmed, stalePushToStartToken, environmentMismatch]
    }

    public struct Flag: Sendable, Equatable {
        public let code: Code
        public let message: String
        /// The activity it is about, when it is about one.
        public let activityID: String?

        public init(code: Code, message: String, activityID: String? = nil) {
            self.code = code
            self.message = message
            self.activityID = activityID
        }
    }

    /// A push-to-start push APNs answered 200, and when (if ever) the app reported that activity's update
    /// token after Islet accepted the start.
    public struct Start: Sendable, Equatable {
        public let activityID: String
        public let acceptedAt: Date
        public let tokenReportedAt: Date?

        public init(activityID: String, acceptedAt: Date, tokenReportedAt: Date?) {
            self.activityID = activityID
            self.acceptedAt = acceptedAt
            self.tokenReportedAt = tokenReportedAt
        }
    }

    /// APNs refusing one of the device's tokens as not of its environment.
    public struct Rejection: Sendable, Equatable {
        /// `BadDeviceToken` (or another reason of Apple's).
        public let reason: String
        public let at: Date

        public init(reason: String, at: Date) {
            self.reason = reason
            self.at = at
        }
    }

    public struct Facts: Sendable, Equatable {
        public var gateway: Gateway
        public var pushToStartTokens: [(attributesType: String, updatedAt: Date)]
        public var starts: [Start]
        public var rejections: [Rejection]

        public init(gateway: Gateway, pushToStartTokens: [(attributesType: String, updatedAt: Date)] = [], starts: [Start] = [],
                    rejections: [Rejection] = []) {
            self.gateway = gateway
            self.pushToStartTokens = pushToStartTokens
            self.starts = starts
            self.rejections = rejections
        }

        public static func == (a: Facts, b: Facts) -> Bool {
            a.gateway == b.gateway && a.starts == b.starts && a.rejections == b.rejections
                && a.pushToStartTokens.map(\.attributesType) == b.pushToStartTokens.map(\.attributesType)
                && a.pushToStartTokens.map(\.updatedAt) == b.pushToStartTokens.map(\.updatedAt)
        }
    }

    public static func flags(_ facts: Facts, now: Date) -> [Flag] {
        var flags: [Flag] = []
        for start in facts.starts where now.timeIntervalSince(start.acceptedAt) >= confirmationWindow {
            guard start.tokenReportedAt == nil else { continue }
            flags.append(Flag(code: .startNotConfirmed, message: "APNs accepted the start of '\(start.activityID.prefix(256))' at "
                + "\(start.acceptedAt.formatted(.iso8601)), but the app never reported its update token: the phone did not show it "
                + "(push-to-start budget, a content-state or attributes the app cannot decode, the app removed, or Live Activities off)",
                activityID: start.activityID))
        }
        for token in facts.pushToStartTokens where now.timeIntervalSince(token.updatedAt) >= pushToStartTokenAge {
            let type = token.attributesType.isEmpty ? "any attributes type" : "'\(token.attributesType)'"
            flags.append(Flag(code: .stalePushToStartToken, message: "the push-to-start token for \(type) was last reported "
                + "\(Int(now.timeIntervalSince(token.updatedAt) / 86_400)) days ago; the app should report it at each launch "
                + "(pushToStartTokenUpdates), as iOS may have replaced it"))
        }
        if let latest = facts.rejections.max(by: { $0.at < $1.at }) {
            let other = facts.gateway == .production ? Gateway.sandbox : .production
            flags.append(Flag(code: .environmentMismatch, message: "APNs \(facts.gateway) answered \(latest.reason) for this device's token at "
                + "\(latest.at.formatted(.iso8601)): a token from a development (Xcode) build belongs to sandbox, one from TestFlight or "
                + "the App Store to production; the device registered with gateway \"\(facts.gateway)\", so if it is a \(other) build, "
                + "register it with gateway \"\(other)\""))
        }
        return flags
    }
}
