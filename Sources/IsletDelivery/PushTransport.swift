import Foundation
import Synchronization
import IsletCore
import IsletStore

/// Where a request to APNs goes.
public enum PushRoute: Sendable, Equatable {
    /// `POST /3/device/<token>` on the push hosts (A1).
    case device
    /// A request of Apple's channel management API, on its own hosts (X5): the method, the path under
    /// `/1/apps/<bundle id>/`, and the channel it is about (`apns-channel-id`).
    case manageChannels(method: String, path: String, channelID: String?)
    /// `POST /4/broadcasts/apps/<bundle id>` on the broadcast hosts: one request for every phone on the channel (X5).
    case broadcast(channelID: String, bundleID: String)
}

/// Which of Apple's host pairs a request goes to: device pushes, broadcasts and channel management each have
/// their own (X5).
public enum APNsService: Sendable, Equatable {
    case push
    case broadcast
    case management
}

/// One HTTP/2 request to APNs: `POST /3/device/<token>` with its headers and payload (A1, A2).
public struct Push: Sendable, Equatable {
    /// Whose APNs key signs it.
    public let application: ApplicationCode
    public let deviceToken: String
    public let gateway: Gateway
    /// `.liveActivity`, or `.alert` for the fallback of devices below iOS 16.1 (A2, S7); channel management
    /// requests send none.
    public let pushType: PushType
    public let topic: String
    public let priority: Int
    public let apnsID: String
    public let payload: [UInt8]
    /// `apns-expiration`: seconds since 1970 after which APNs stops trying to deliver it (and Islet stops
    /// retrying it); nil sends no header (APNs then tries once).
    public let expiration: Int64?
    /// A device push unless said otherwise.
    public var route = PushRoute.device

    public init(application: ApplicationCode, deviceToken: String, gateway: Gateway, pushType: PushType, topic: String,
                priority: Int, apnsID: String, payload: [UInt8], expiration: Int64? = nil) {
        self.expiration = expiration
        self.application = application
        self.deviceToken = deviceToken
        self.gateway = gateway
        self.pushType = pushType
        self.topic = topic
        self.priority = priority
        self.apnsID = apnsID
        self.payload = payload
    }

    /// A channel management request (X5) for the application whose bundle id is `bundleID`.
    public static func manageChannels(application: ApplicationCode, gateway: Gateway, bundleID: String, method: String,
                                      path: String, channelID: String? = nil, body: [UInt8] = []) -> Push {
        var push = Push(application: application, deviceToken: "", gateway: gateway, pushType: .liveActivity, topic: bundleID, priority: 10,
                        apnsID: "", payload: body)
        push.route = .manageChannels(method: method, path: "/1/apps/\(bundleID)/\(path)", channelID: channelID)
        return push
    }

    /// A broadcast to the channel `channelID` (Apple's id) of one environment (X5): no topic, no apns-id;
    /// `expiration` is always sent (0 on a channel that stores nothing).
    public static func broadcast(application: ApplicationCode, gateway: Gateway, bundleID: String, channelID: String, priority: Int,
                                 expiration: Int64, payload: [UInt8]) -> Push {
        var push = Push(application: application, deviceToken: "", gateway: gateway, pushType: .liveActivity, topic: "", priority: priority,
                        apnsID: "", payload: payload, expiration: expiration)
        push.route = .broadcast(channelID: channelID, bundleID: bundleID)
        return push
    }

    /// The hosts it goes to.
    public var service: APNsService {
        switch route {
        case .device: .push
        case .broadcast: .broadcast
        case .manageChannels: .management
        }
    }

    /// The request's method.
    public var method: String {
        if case .manageChannels(let method, _, _) = route { return method }
        return "POST"
    }

    /// The request path.
    public var path: String {
        switch route {
        case .device: "/3/device/\(deviceToken)"
        case .manageChannels(_, let path, _): path
        case .broadcast(_, let bundleID): "/4/broadcasts/apps/\(bundleID)"
        }
    }

    /// The A2 headers (or a management request's); `authorization: bearer <JWT>` is the transport's to add.
    public var headers: [(name: String, value: String)] {
        switch route {
        case .device: break
        case .manageChannels(_, _, let channelID):
            return (channelID.map { [("apns-channel-id", $0)] } ?? []) + (payload.isEmpty ? [] : [("content-type", "application/json")])
        case .broadcast(let channelID, _):
            return [("apns-channel-id", channelID), ("apns-push-type", pushType.rawValue), ("apns-priority", String(priority)),
                    ("apns-expiration", String(expiration ?? 0))]
        }
        var headers = [("apns-push-type", pushType.rawValue), ("apns-topic", topic), ("apns-priority", String(priority)), ("apns-id", apnsID)]
        if let expiration { headers.append(("apns-expiration", String(expiration))) }
        return headers
    }
}

/// What a channel management or broadcast answer carries besides its status (X5).
public struct ManagementResponse: Sendable, Equatable {
    /// `apns-channel-id` of a created channel.
    public let channelID: String?
    /// `apns-unique-id` of a broadcast Apple took: what to quote to Apple when asking about it.
    public var uniqueID: String?
    public let body: [UInt8]

    public init(channelID: String?, uniqueID: String? = nil, body: [UInt8]) {
        self.channelID = channelID
        self.uniqueID = uniqueID
        self.body = body
    }
}

/// The push service's answer to one push (APNs', or FCM's for an Android push); status 0 when no answer came
/// (connection lost, timed out).
public struct PushOutcome: Sendable, Equatable {
    public let status: Int
    /// Apple's reason, when APNs answered with one.
    public let reason: APNsReason?
    /// FCM's error, when FCM answered with one (issue 46).
    public private(set) var fcmError: FCMError?
    /// FCM's answer rather than APNs': its verdict is read by FCM's rules.
    public private(set) var viaFCM = false
    /// What became of a push APNs never answered ("connection lost before APNs answered", REFUSED_STREAM…).
    public let unanswered: String?
    /// With 410: when APNs learned the token was invalid (milliseconds since 1970).
    public let timestamp: Int64?
    /// With 429 or 503: APNs' `retry-after`, when it sent one.
    public let retryAfter: Duration?
    public let fate: PushFate
    /// A channel management or broadcast request's answer (X5); nil for device pushes.
    public var management: ManagementResponse?

    public init(status: Int, reason: APNsReason? = nil, timestamp: Int64? = nil, retryAfter: Duration? = nil) {
        self.status = status
        self.reason = reason
        self.unanswered = nil
        self.timestamp = timestamp
        self.retryAfter = retryAfter
        self.fate = status == 0 ? .unknown : .answered
    }

    private init(unanswered: String, fate: PushFate) {
        status = 0
        reason = nil
        self.unanswered = unanswered
        timestamp = nil
        retryAfter = nil
        self.fate = fate
    }

    public static let delivered = PushOutcome(status: 200)

    /// No answer, and provably not processed.
    public static func notSent(_ why: String) -> PushOutcome { PushOutcome(unanswered: why, fate: .notSent) }
    /// No answer, and it may have reached APNs.
    public static func unknown(_ why: String) -> PushOutcome { PushOutcome(unanswered: why, fate: .unknown) }

    /// FCM's answer to an Android push: `status` 0 with the `fate` and `detail` of one that got none.
    public static func fcm(status: Int, error: FCMError?, retryAfter: Duration?, fate: PushFate, detail: String?) -> PushOutcome {
        var outcome = status == 0 ? PushOutcome(unanswered: detail ?? "no answer from FCM", fate: fate)
            : PushOutcome(status: status, retryAfter: retryAfter)
        outcome.fcmError = error
        outcome.viaFCM = true
        return outcome
    }

    /// What it means: the one decision (`PushVerdict.of`), by the rules of the service that answered.
    public var verdict: PushVerdict {
        if viaFCM { return PushVerdict.of(fcmStatus: status, error: fcmError, fate: fate, retryAfter: retryAfter) }
        return PushVerdict.of(status: status, reason: reason, fate: fate, retryAfter: retryAfter, timestamp: timestamp)
    }

    /// The reason a record keeps: Apple's or FCM's, or what became of a push that got no answer.
    public var recordedReason: String? { reason?.rawValue ?? fcmError?.rawValue ?? unanswered }
}

/// Something that delivers pushes: Apple's APNs, the simulator, or a test's recorder.
public protocol PushTransport: Sendable {
    /// Sends every push and returns one outcome for each, in the same order, when all are answered or
    /// at `deadline`, whichever comes first (the unanswered ones then have fate `.unknown`). A push it
    /// could prove never processed has fate `.notSent`; the transport never resends a push whose fate
    /// is unknown: that is the caller's decision (a start resent blindly is a second card on the phone).
    func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome]
    /// Starts sending and returns at once; the outcomes arrive in the `PendingOutcomes`, same order. A push not
    /// yet written by `writeBy` is not written at all (`.notSent`): its sender's claim on it may have passed to
    /// another node by then (issue 14).
    func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?) -> PendingOutcomes
    /// The same; `bulk` marks a fan-out's page, whose pushes a transport may send after those of small messages
    /// submitted later (an update to one phone does not wait behind thousands of a start's pushes).
    func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?, bulk: Bool) -> PendingOutcomes
}

extension PushTransport {
    /// A transport with one lane sends bulk pages like any other.
    public func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?, bulk: Bool) -> PendingOutcomes {
        submit(pushes, deadline: deadline, writeBy: writeBy)
    }

    /// Sends with a deadline two minutes away: for tools and tests that have no deadline of their own.
    public func send(_ pushes: [Push]) -> [PushOutcome] { send(pushes, deadline: .now + .seconds(120)) }

    /// Starts sending and returns at once; the outcomes arrive in `pending` (a transport without a
    /// native way sends on a thread of its own, checking `writeBy` as that thread starts).
    public func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant? = nil) -> PendingOutcomes {
        let pending = PendingOutcomes(count: pushes.count)
        Thread.detachNewThread {
            if let writeBy, ContinuousClock.now >= writeBy {
                pending.fulfil(pushes.map { _ in .notSent("not written before its sender's claim ran out") })
            } else {
                pending.fulfil(send(pushes, deadline: deadline))
            }
        }
        return pending
    }
}

/// Outcomes of a batch still in flight: the delivery service keeps a few batches on the wire while
/// it reads the next page and records the previous one.
public final class PendingOutcomes: Sendable {
    /// One slot a push, and how many are still empty.
    private let state: Mutex<(outcomes: [PushOutcome?], missing: Int)>
    private let done = DispatchSemaphore(value: 0)

    public init(count: Int) {
        state = Mutex((Array(repeating: nil, count: count), count))
        if count == 0 { done.signal() }
    }

    /// The outcome of push number `index`; the first answer for a push is the one kept.
    public func fulfil(_ index: Int, _ outcome: PushOutcome) {
        let complete = state.withLock { s -> Bool in
            guard s.outcomes[index] == nil else { return false }
            s.outcomes[index] = outcome
            s.missing -= 1
            return s.missing == 0
        }
        if complete { done.signal() }
    }

    /// Every outcome at once, in push order.
    public func fulfil(_ outcomes: [PushOutcome]) {
        for (index, outcome) in outcomes.enumerated() { fulfil(index, outcome) }
    }

    /// Waits for the outcomes until `deadline`; what has not come by then is `.unknown`. Waiting again (a batch
    /// collected once more after its record failed) returns at once once they are all in.
    public func wait(deadline: ContinuousClock.Instant) -> [PushOutcome] {
        let remaining = deadline - .now
        if done.wait(timeout: .now() + .milliseconds(Int(max(0, remaining / .milliseconds(1))))) == .success { done.signal() }
        return state.withLock { $0.outcomes.map { $0 ?? .unknown("no answer from the transport before the deadline") } }
    }
}

extension DeliveryEffects {
    /// What an APNs answer to `push` changes beyond its own record: the device where a start landed, a dead token.
    mutating func add(_ outcome: PushOutcome, of push: Push, isStart: Bool, activity: Int64, device: Int64) {
        add(outcome.verdict, pushType: push.pushType, token: push.deviceToken, isStart: isStart, activity: activity, device: device)
    }
}
