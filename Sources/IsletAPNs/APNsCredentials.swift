import Foundation
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// An application's signing key and provider token as the APNs loop holds them (A3).
struct SigningCredential {
    /// nil: the application has no usable key (none stored, or it does not load).
    var key: SigningKey?
    var keyReadAt: ContinuousClock.Instant
    /// The provider token signed with `key`, and when it was issued (by this node or, shared, by another).
    var token: String?
    var tokenIssuedAt: Date?
    /// APNs answered InvalidProviderToken for this key: nothing is sent with it until it changes.
    var invalid = false
}

/// The APNs loop's keys and provider tokens (A3, issue 43). Nothing on the loop waits for the database: a push
/// whose application's key or token is not at hand waits here, off its pool, while the key is read and the token
/// signed (or read from the other nodes, issue 14) on a queue of their own; the answer comes back to the loop,
/// and the waiting pushes go on. A key is read again every `keyRefresh`, and a token renewed once 50 minutes old,
/// in the background: the pushes keep the ones in hand meanwhile.
///
/// `@unchecked Sendable`: loop-confined (`ClientState` owns it and calls it on the loop only; the resolver's
/// answers come back through `loop.execute`).
final class APNsCredentials: @unchecked Sendable {
    /// What the loop may do with a push of an application now.
    enum Status: Equatable {
        case ready(token: String)
        case noKey
        case invalid
        /// Not at hand: the push waits for the credentials being read.
        case waiting
    }

    private let loop: EventLoop
    private let resolver: APNsCredentialResolver
    private let keyRefresh: Duration
    private let now: @Sendable () -> Date
    private let logger: Logger
    private var entries: [ApplicationCode: SigningCredential] = [:]
    /// Pushes waiting for their application's credentials, and the timer that answers them at their deadline.
    private var waiting: [ApplicationCode: [PendingPush]] = [:]
    private var deadlineTimer: (id: Int, fires: ContinuousClock.Instant)?
    /// Applications whose credentials are being read, and the token to expire first on the next read.
    private var reading: Set<ApplicationCode> = []
    private var expiring: [ApplicationCode: String] = [:]
    private var stopped = false

    init(loop: EventLoop, resolver: APNsCredentialResolver, keyRefresh: Duration, now: @escaping @Sendable () -> Date, logger: Logger) {
        self.loop = loop
        self.resolver = resolver
        self.keyRefresh = keyRefresh
        self.now = now
        self.logger = logger
    }

    /// Pushes parked here now, for diagnostics.
    var waitingCount: Int { waiting.values.reduce(0) { $0 + $1.count } }

    /// What a push of `application` may do now; a stale key or an old token is read again in the background.
    func status(of application: ApplicationCode) -> Status {
        loop.preconditionInLoop()
        guard let entry = entries[application] else {
            read(application)
            return .waiting
        }
        let keyStale = ContinuousClock.now - entry.keyReadAt >= keyRefresh
        if keyStale { read(application) }
        guard entry.key != nil else { return keyStale ? .waiting : .noKey }
        if entry.invalid { return keyStale ? .waiting : .invalid }
        guard let token = entry.token, let issuedAt = entry.tokenIssuedAt else {
            read(application)
            return .waiting
        }
        let age = now().timeIntervalSince(issuedAt)
        if age >= ProviderTokens.reuseFor { read(application) }
        // Apple refuses a token older than an hour; until then the one in hand goes while a new one is made.
        return age < ProviderTokens.lifetime ? .ready(token: token) : .waiting
    }

    /// Where parked pushes go once their credentials are in hand (set once by the owner).
    var resume: ((PendingPush) -> Void)?

    /// Parks `pending` until its application's credentials are read; `resume` takes it on from there.
    func park(_ pending: PendingPush) {
        loop.preconditionInLoop()
        guard !stopped else { return pending.complete(.notSent("the APNs client is shutting down")) }
        let application = pending.push.application
        waiting[application, default: []].append(pending)
        read(application)
        armDeadline()
    }

    /// APNs said `token` expired (403 ExpiredProviderToken): true when a retry will carry a new one (the token is
    /// dropped and a new one read), false when it is younger than 20 minutes (a new one would earn 429
    /// TooManyProviderTokenUpdates), so the answer stands.
    func expire(_ token: String, of application: ApplicationCode) -> Bool {
        loop.preconditionInLoop()
        guard var entry = entries[application], entry.token == token else { return true }   // replaced already
        guard let issuedAt = entry.tokenIssuedAt, now().timeIntervalSince(issuedAt) >= ProviderTokens.minimumAge else { return false }
        entry.token = nil
        entry.tokenIssuedAt = nil
        entries[application] = entry
        expiring[application] = token
        return true
    }

    /// 403 InvalidProviderToken: stop using the key until it changes (A3).
    func markInvalid(_ application: ApplicationCode) {
        loop.preconditionInLoop()
        guard var entry = entries[application], !entry.invalid else { return }
        entry.invalid = true
        entries[application] = entry
        logger.error("APNs rejected the application's key (InvalidProviderToken); sending stops until the key is replaced", [
            "application": .string(application.rawValue), "key_id": .string(entry.key?.info.keyID ?? ""),
        ])
    }

    /// The key in hand for `application`, if any (for tests and diagnostics).
    func key(of application: ApplicationCode) -> SigningKey? { entries[application]?.key }

    /// Answers every parked push as not sent.
    func shutdown() {
        loop.preconditionInLoop()
        stopped = true
        if let deadlineTimer { loop.cancelTimer(deadlineTimer.id) }
        deadlineTimer = nil
        let parked = waiting.values.flatMap { $0 }
        waiting = [:]
        for pending in parked { pending.complete(.notSent("the APNs client is shutting down")) }
    }

    /// Reads `application`'s key and token on the resolver's queue, once at a time; the answer comes back on the loop.
    private func read(_ application: ApplicationCode) {
        guard !stopped, reading.insert(application).inserted else { return }
        let expiring = self.expiring.removeValue(forKey: application)
        let at = now()
        resolver.resolve(application, expiring: expiring, now: at) { [loop] resolution in
            // A read that ends after the client stopped has nobody to tell.
            guard !loop.isStopping else { return }
            loop.execute { [weak self] in self?.resolved(application, resolution) }
        }
    }

    private func resolved(_ application: ApplicationCode, _ resolution: APNsCredentialResolver.Resolution) {
        loop.preconditionInLoop()
        reading.remove(application)
        guard !stopped else { return }
        let previous = entries[application]
        if let failure = resolution.failure {
            // The store did not answer: what is in hand stays (read again after `keyRefresh`); a push with nothing in
            // hand is given back not sent, for delivery to retry, rather than failed for want of a key.
            if var kept = previous {
                kept.keyReadAt = .now
                entries[application] = kept
            }
            let parked = waiting.removeValue(forKey: application) ?? []
            for pending in parked {
                if case .ready = status(of: application) { resume?(pending) } else { pending.complete(.notSent(failure)) }
            }
            return
        }
        // A changed key clears "invalid"; the same key keeps it.
        let unchanged = previous?.key?.info == resolution.key?.info && previous?.key != nil
        var entry = SigningCredential(key: resolution.key, keyReadAt: .now, token: resolution.token?.token, tokenIssuedAt: resolution.token?.issuedAt,
                               invalid: unchanged ? previous?.invalid ?? false : false)
        // A token expired while this read was under way is not brought back by it: the pushes wait for the next read,
        // which expires it first.
        if let expired = expiring[application], expired == entry.token {
            entry.token = nil
            entry.tokenIssuedAt = nil
            entries[application] = entry
            return read(application)
        }
        entries[application] = entry
        guard let parked = waiting.removeValue(forKey: application) else { return }
        // Decided on what was just read: no key (or none that signs) fails the pushes, as reading again would not help.
        for pending in parked {
            if entry.key == nil || entry.token == nil {
                pending.complete(PushOutcome(status: 403, reason: "NoAPNsKey"))
            } else if entry.invalid {
                pending.complete(PushOutcome(status: 403, reason: .invalidProviderToken))
            } else {
                resume?(pending)
            }
        }
    }

    /// One timer for every parked push, at the earliest deadline: each is answered by its deadline even if its
    /// credentials never come.
    private func armDeadline() {
        guard let first = waiting.values.joined().map(\.deadline).min() else { return }
        if let timer = deadlineTimer {
            guard first < timer.fires else { return }
            loop.cancelTimer(timer.id)
        }
        let id = loop.schedule(after: max(.zero, first - .now)) { [weak self] in
            guard let self else { return }
            self.deadlineTimer = nil
            let at = ContinuousClock.now
            for (application, parked) in self.waiting {
                let (late, onTime) = (parked.filter { $0.deadline <= at }, parked.filter { $0.deadline > at })
                for pending in late { pending.complete(.notSent("no APNs key or provider token in time (its store did not answer)")) }
                self.waiting[application] = onTime.isEmpty ? nil : onTime
            }
            self.armDeadline()
        }
        deadlineTimer = (id, first)
    }
}

/// Reads keys from the store and signs or fetches provider tokens, off the APNs loop, on threads of its own: the
/// reads of different applications go at once (`APNsCredentials` makes one at a time per application), so a store
/// that hangs for one holds up no other.
final class APNsCredentialResolver: Sendable {
    struct Resolution: Sendable {
        let key: SigningKey?
        let token: (token: String, issuedAt: Date)?
        /// The store could not be read (not: it has no key).
        var failure: String?
    }

    private let keys: APNsClient.KeyLookup
    private let logger: Logger
    private let queue = DispatchQueue(label: "islet-apns-credentials", attributes: .concurrent)
    private let tokens: ProviderTokens

    init(keys: @escaping APNsClient.KeyLookup, shared: (any ClusterStore)?, logger: Logger) {
        self.keys = keys
        self.logger = logger
        tokens = ProviderTokens(shared: shared, logger: logger)
    }

    /// Provider tokens this process signed (first ones and renewals), for `/metrics`.
    var issued: Int { tokens.issued }

    func resolve(_ application: ApplicationCode, expiring: String?, now: Date, _ done: @escaping @Sendable (Resolution) -> Void) {
        queue.async { [self] in
            let stored: APNsSigningKey?
            do {
                stored = try keys(application)
            } catch {
                logger.warning("cannot read the application's APNs key", ["application": .string(application.rawValue), "error": .string("\(error)")])
                return done(Resolution(key: nil, token: nil, failure: "cannot read the application's APNs key: \(error)"))
            }
            var key: SigningKey?
            do {
                if let stored { key = try SigningKey(stored) }
            } catch {
                logger.error("cannot use the application's APNs key", ["application": .string(application.rawValue), "error": .string("\(error)")])
            }
            guard let key else { return done(Resolution(key: nil, token: nil)) }
            if let expiring { tokens.expire(expiring, for: key, now: now) }
            done(Resolution(key: key, token: tokens.token(for: key, now: now)))
        }
    }
}
