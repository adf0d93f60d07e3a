import IsletCore

/// One HTTP/2 request to APNs: `POST /3/device/<token>` with its headers and payload (A1, A2).
public struct Push: Sendable, Equatable {
    /// Whose APNs key signs it.
    public let application: ApplicationCode
    public let deviceToken: String
    public let gateway: Gateway
    /// "liveactivity", or "alert" for the fallback of devices below iOS 16.1 (A2, S7).
    public let pushType: String
    public let topic: String
    public let priority: Int
    public let apnsID: String
    public let payload: [UInt8]

    public init(application: ApplicationCode, deviceToken: String, gateway: Gateway, pushType: String, topic: String,
                priority: Int, apnsID: String, payload: [UInt8]) {
        self.application = application
        self.deviceToken = deviceToken
        self.gateway = gateway
        self.pushType = pushType
        self.topic = topic
        self.priority = priority
        self.apnsID = apnsID
        self.payload = payload
    }

    /// The request path.
    public var path: String { "/3/device/\(deviceToken)" }

    /// The A2 headers; `authorization: bearer <JWT>` is the transport's to add.
    public var headers: [(name: String, value: String)] {
        [("apns-push-type", pushType), ("apns-topic", topic), ("apns-priority", String(priority)), ("apns-id", apnsID)]
    }
}

/// APNs' answer to one push; status 0 when no answer came (connection lost, timed out).
public struct PushOutcome: Sendable, Equatable {
    public let status: Int
    public let reason: String?
    /// With 410: when APNs learned the token was invalid (milliseconds since 1970).
    public let timestamp: Int64?

    public init(status: Int, reason: String? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    public static let delivered = PushOutcome(status: 200)

    /// What Islet does about it, from the one table of reasons (A5).
    public var action: APNsAction { status == 0 ? .retry : APNsReasons.action(status: status, reason: reason) }
}

/// Something that delivers pushes: Apple's APNs, the simulator, or a test's recorder.
public protocol PushTransport: Sendable {
    /// Sends every push and returns one outcome for each, in the same order; returns when all are answered.
    func send(_ pushes: [Push]) -> [PushOutcome]
}
