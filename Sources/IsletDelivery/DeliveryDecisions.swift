import Foundation
import IsletCore
import IsletStore

/// How long Islet keeps trying, and how it paces retries (issue 10).
public struct RetryPolicy: Sendable, Equatable {
    /// Wait before the first retry; doubled each attempt after, with jitter.
    public var firstDelay: Duration
    /// The longest wait between two attempts (a `retry-after` from APNs may ask for longer).
    public var maximumDelay: Duration
    /// How long a start whose answer was lost waits for the device's update token before its second copy.
    public var startConfirmationWait: Duration
    /// A push's life when the request sets none: after `send_date` (or acceptance) plus this, it expires.
    public var pushLifetime: Duration

    public init(firstDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60), startConfirmationWait: Duration = .seconds(60),
                pushLifetime: Duration = .seconds(3600)) {
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.startConfirmationWait = startConfirmationWait
        self.pushLifetime = pushLifetime
    }

    /// Copies of one start a device may ever be sent without an answer.
    public static let maximumStartCopies = 2
}

/// What one push's outcome means for its delivery (A5, issue 10): pure, so it is tested without sockets.
public struct DeliveryDecisions: Sendable {
    public let policy: RetryPolicy
    /// 0.5…1.0: the share of the backoff delay actually waited (jitter); fixed in tests.
    public let jitter: @Sendable () -> Double

    public init(policy: RetryPolicy = RetryPolicy(), jitter: @escaping @Sendable () -> Double = { Double.random(in: 0.5...1.0) }) {
        self.policy = policy
        self.jitter = jitter
    }

    /// The wait before attempt number `attempts + 1`; APNs' `retry-after` wins when it asks for longer.
    public func backoff(afterAttempts attempts: Int, retryAfter: Duration?) -> Duration {
        var delay = policy.firstDelay * Int(1 << min(max(attempts - 1, 0), 20))
        if delay > policy.maximumDelay { delay = policy.maximumDelay }
        delay = delay * jitter()
        if let retryAfter, retryAfter > delay { delay = retryAfter }
        return delay
    }

    /// The record of one sent push. `attempts` counts this send; `uncertainCopies` the start's earlier
    /// copies that may be on the phone, this one excluded.
    public func record(device: Int64, push: Push, outcome: PushOutcome, isStart: Bool, attempts: Int, uncertainCopies: Int,
                       expiresAt: Date, now: Date) -> DeliveryRecord {
        func make(_ state: DeliveryState, reason: String?, next: Date? = nil, copies: Int = uncertainCopies) -> DeliveryRecord {
            DeliveryRecord(device: device, pushType: push.pushType, status: outcome.status, reason: reason, apnsID: push.apnsID,
                           attempts: 1, state: state, nextAttemptAt: next, token: push.deviceToken, uncertainCopies: copies,
                           priority: push.priority)
        }
        let verdict = outcome.verdict
        switch verdict {
        case .unconfirmed where isStart && push.pushType == .liveActivity:
            // It may be on the phone already: a second copy would be a second card. Wait for the token.
            return make(.unconfirmed, reason: outcome.recordedReason ?? "no answer from APNs",
                        next: now.addingTimeInterval(policy.startConfirmationWait.timeInterval), copies: uncertainCopies + 1)
        case .delivered:
            return make(.sent, reason: nil)
        case .retry, .unconfirmed, .refreshProviderToken:
            let next = now.addingTimeInterval(backoff(afterAttempts: attempts, retryAfter: outcome.retryAfter).timeInterval)
            let reason = outcome.status == 0 ? (outcome.recordedReason ?? "no answer from APNs") : outcome.recordedReason
            guard next < expiresAt else { return make(.expired, reason: reason) }
            return make(.retrying, reason: reason, next: next)
        case .deadToken, .giveUp, .invalidProviderToken:
            return make(.failed, reason: outcome.recordedReason)
        }
    }

    /// A broadcast's state after one send (X5): sent; a retryable answer retried after the backoff, until it
    /// expires; anything else failed. With the next attempt's time when it is retried.
    public func broadcastVerdict(_ outcome: PushOutcome, attempts: Int, expiresAt: Date, now: Date) -> (DeliveryState, Date?) {
        let verdict = outcome.verdict
        if verdict == .delivered { return (.sent, nil) }
        guard verdict.isRetryable else { return (.failed, nil) }
        let next = now.addingTimeInterval(backoff(afterAttempts: attempts, retryAfter: outcome.retryAfter).timeInterval)
        return next < expiresAt ? (.retrying, next) : (.expired, nil)
    }

    /// What to do with a due delivery when it is claimed at `now`.
    public func verdict(_ due: DueDelivery, now: Date) -> DueVerdict {
        if due.event == .start {
            if due.tokenReportedSince { return .settle(.sent, reason: "confirmed: the device reported its update token") }
            if due.activityEnded { return .settle(.superseded, reason: "the activity ended before the start went out") }
        } else if due.newerMessage {
            return .settle(.superseded, reason: "a newer update or end of the activity went instead")
        } else if !due.pushType.isFCM, ActivityLifetime.isOver(startedAt: due.activityStartedAt, now: now) {
            return .settle(.skipped, reason: ActivityLifetime.skipReason)
        }
        if now >= due.expiresAt { return .settle(.expired, reason: "expired before it could be delivered") }
        if due.event == .start && due.pushType == .liveActivity && due.uncertainCopies >= RetryPolicy.maximumStartCopies {
            return .settle(.failed, reason: "no answer from APNs to either copy of the start, and no update token from the device")
        }
        return .send
    }
}

/// The payload a device gets when it is caught up with state it missed: the same bytes' content
/// (its original timestamp, content-state, dismissal-date) without the alert, which was news then.
public enum CatchUpPayload {
    public static func make(_ payload: [UInt8]) -> [UInt8] {
        guard case .object(var root)? = try? JSONParser.parse(payload), case .object(var aps)? = root["aps"] else { return payload }
        aps["alert"] = nil
        aps["sound"] = nil
        root["aps"] = .object(aps)
        return JSONValue.object(root).jsonBytes
    }
}
