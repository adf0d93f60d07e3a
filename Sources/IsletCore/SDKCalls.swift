/// The rest of what an app sends when its Pushwoosh SDK points at Islet (issue 45), besides registration, tags and
/// Live Activity tokens: what Islet answers to each call, and what it says of the Pushwoosh server methods it does
/// not serve. The iOS SDK (7.1.3) and the Android SDK (6.10.0) count a call as done when the answer is HTTP 200 with
/// a numeric `status_code` 200; where they parse `response`, a missing key they read fails the call (Android), so each
/// answer has the shape the SDK reads, empty where Islet has nothing to give.
public enum SDKCalls {
    /// Calls for features Islet does not have (in-app messages, the inbox, geozones, email, events, purchases,
    /// test devices, the badge): answered 200 with the empty form of what the SDK parses, and nothing kept.
    public static let answeredEmpty: [String: JSONObject] = [
        // Events and in-app messages: the SDK reads an optional in-app `code` from postEvent, and `inApps` from getInApps.
        "postEvent": [:],
        "getInApps": ["inApps": []],
        "triggerInAppAction": [:],
        "richMediaAction": [:],
        // The inbox: Android reads `messages`, `deleted` and `new_inbox`.
        "getInboxMessages": ["messages": [], "deleted": [], "new_inbox": 0],
        "inboxStatus": [:],
        // Geozones: Android fails the call without `geozones`.
        "getNearestZone": ["geozones": []],
        // Email: the SDK registers an address and its tags; Islet sends no email.
        "registerEmail": [:],
        "registerEmailUser": [:],
        "setEmailTags": [:],
        "createTestDevice": [:],
        // Sent by SDKs before iOS 7.0.18 and Android 6.7.11; Android's getConfig needs `features.public_key`.
        "setPurchase": [:],
        "setBadge": [:],
        "getConfig": ["features": ["public_key": "", "events": [], "channels": [], "logger": 0]],
        // Merging moves the User ID of every device of another user: not for the public device token (see docs/API.md).
        "mergeUser": [:],
    ]

    /// What a device's own receipt of a push says: `messageDeliveryEvent` (the push reached the phone, sent by the app's
    /// notification service extension) or `pushStat` (the user opened it).
    public enum Receipt: String, Sendable, CaseIterable {
        case received
        case opened

        /// The SDK method that reports it.
        public var method: String {
            switch self {
            case .received: "messageDeliveryEvent"
            case .opened: "pushStat"
            }
        }
    }

    /// The top-level keys that make a push one the SDK reports receipts of: `pw_msg` (a Pushwoosh push) and `p`, the
    /// hash it sends back, here the message's code.
    public static func receiptKeys(messageCode: String) -> JSONObject {
        ["pw_msg": "1", "p": .string(messageCode)]
    }

    /// Pushwoosh server methods Islet does not serve, with where to turn instead.
    public static let notServed: [String: String] = {
        var table: [String: String] = [:]
        let groups: [([String], String)] = [
            (["createMessage", "createTargetedMessage", "createEmailMessage", "createSMSMessage"],
             "Islet sends Live Activities through APNs, not ordinary pushes, email or SMS: start one with startLiveActivity, update or end it with updateLiveActivity"),
            (["cancelMessage"], "deleteMessage takes back a message not sent yet"),
            (["getMsgStats", "getMsgPlatformsStats", "getResults", "getPushHistory"],
             "getMessageDetails gives a message's counts, states and APNs reasons; GET /metrics gives the server's"),
            (["getAppStats", "getApplicationSubscribersStats", "totalsByIntervals"],
             "GET /metrics gives the server's counters; getApplication describes the application"),
            (["createApplication", "updateApplication", "deleteApplication", "getApplications"],
             "applications are managed on the server with `islet app`; getApplication describes the calling one"),
            (["addTag", "deleteTag", "listTags"],
             "a tag is created by its first value (setTags or registerDevice) and managed on the server with `islet app tag`"),
            (["bulkSetTags"], "setTags sets one device's tags"),
        ]
        for (methods, instead) in groups {
            for method in methods { table[method] = instead }
        }
        return table
    }()

    /// The answer to a Pushwoosh method Islet does not serve, or nil for a name that is not one.
    public static func notServedMessage(_ method: String) -> String? {
        notServed[method].map { "'\(method)' is a Pushwoosh method Islet does not serve: Islet serves the Live Activities API and the device API; \($0)" }
    }
}
