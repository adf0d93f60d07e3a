import Foundation
import IsletCore
import IsletDelivery
import IsletHTTP2
import IsletStore
import Synchronization

/// Where the APNs client connects and how it behaves (A1, A6).
public struct APNsClientConfiguration: Sendable {
    /// Replaces all of Apple's hosts (tests, `--apns-url`, the simulator): `https://host:port`.
    public var overrideURL: URL?
    /// A sandbox URL apart from `overrideURL` (the built-in simulator keeps Apple's two environments apart).
    public var sandboxOverrideURL: URL?
    /// Extra CA certificate (PEM) trusted besides the system store.
    public var extraCA: String?
    /// Connections per (application, environment).
    public var connectionsPerPool: Int
    /// Streams per connection never exceed this, whatever the server allows.
    public var maximumStreams: UInt32
    /// The longest a push waits for a connection and its answer; the caller's deadline may be shorter.
    public var requestTimeout: Duration
    /// Idle time (nothing received) after which a connection is PINGed to keep it and prove it alive.
    public var pingAfter: Duration
    /// A PING unanswered this long closes the connection.
    public var pingTimeout: Duration
    /// A connection quiet this long is PINGed, and must answer, before it carries the next push.
    public var checkAfterIdle: Duration
    /// Sends of one push that APNs provably did not process (REFUSED_STREAM, never written) before it
    /// is given back to the caller as not sent.
    public var maximumResends: Int
    public var reconnectDelays: (first: Duration, maximum: Duration)
    /// How long a key read from the store is trusted before it is read again.
    public var keyRefresh: Duration
    /// How often each pool checks deadlines and idle connections.
    public var sweepInterval: Duration
    /// TCP connect and TLS handshake together; a connection not up by then is closed and retried.
    public var connectTimeout: Duration
    /// Where provider tokens are shared with the other nodes of the database (issue 14); nil: this process only.
    public var sharedTokens: (any ClusterStore)?

    public init(overrideURL: URL? = nil, extraCA: String? = nil, connectionsPerPool: Int = 2, maximumStreams: UInt32 = 1000,
                requestTimeout: Duration = .seconds(30), pingAfter: Duration = .seconds(60), pingTimeout: Duration = .seconds(5),
                checkAfterIdle: Duration = .seconds(15), maximumResends: Int = 5,
                reconnectDelays: (first: Duration, maximum: Duration) = (.seconds(1), .seconds(60)), keyRefresh: Duration = .seconds(60),
                sweepInterval: Duration = .seconds(1), connectTimeout: Duration = .seconds(10)) {
        self.connectTimeout = connectTimeout
        self.overrideURL = overrideURL
        self.extraCA = extraCA
        self.connectionsPerPool = connectionsPerPool
        self.maximumStreams = maximumStreams
        self.requestTimeout = requestTimeout
        self.pingAfter = pingAfter
        self.pingTimeout = pingTimeout
        self.checkAfterIdle = checkAfterIdle
        self.maximumResends = maximumResends
        self.reconnectDelays = reconnectDelays
        self.keyRefresh = keyRefresh
        self.sweepInterval = sweepInterval
    }

    static let production = (host: "api.push.apple.com", port: 443)
    static let sandbox = (host: "api.sandbox.push.apple.com", port: 443)
    /// Apple's broadcast hosts, as its request samples and troubleshooting guide name them (X5).
    static let productionBroadcast = (host: "api-broadcast.push.apple.com", port: 443)
    static let sandboxBroadcast = (host: "api-broadcast.sandbox.push.apple.com", port: 443)
    /// Apple's channel management hosts (X5).
    static let productionManagement = (host: "api-manage-broadcast.push.apple.com", port: 2196)
    static let sandboxManagement = (host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)

    func endpoint(_ gateway: Gateway, service: APNsService = .push) -> (host: String, port: Int) {
        if gateway == .sandbox, let url = sandboxOverrideURL, let host = url.host { return (host, url.port ?? 443) }
        if let url = overrideURL, let host = url.host { return (host, url.port ?? 443) }
        let sandbox = gateway == .sandbox
        switch service {
        case .push: return sandbox ? Self.sandbox : Self.production
        case .broadcast: return sandbox ? Self.sandboxBroadcast : Self.productionBroadcast
        case .management: return sandbox ? Self.sandboxManagement : Self.productionManagement
        }
    }
}

/// The APNs HTTP/2 client: token auth, pooled connections with Apple's stream rules, retries on new
/// connections when APNs refuses or drops them, every answer reported with its reason (A1–A6).
public final class APNsClient: PushTransport, Sendable {
    public typealias KeyLookup = @Sendable (ApplicationCode) throws -> APNsSigningKey?

    let loop: EventLoop
    let state: ClientState

    public init(configuration: APNsClientConfiguration, keys: @escaping KeyLookup, logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() }) throws {
        let tls = try TLSContext(clientTrusting: configuration.extraCA)
        loop = EventLoop(name: "islet-apns")
        state = ClientState(configuration: configuration, tls: tls, keys: keys, logger: logger, now: now, loop: loop)
    }

    /// Sends every push and waits for all answers until `deadline` (A5). Never more in flight than the
    /// caller passes. Must not be called on the client's own loop.
    public func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome] {
        precondition(!loop.inLoop, "APNsClient.send blocks; call it from a worker thread")
        // The pools answer every push by its deadline (sweeps run each second); the extra margin only
        // matters if the loop itself is stuck, and then the caller still gets its answer.
        return submit(pushes, deadline: deadline).wait(deadline: min(deadline, .now + state.configuration.requestTimeout) + .seconds(2))
    }

    /// Hands the pushes to the client's loop and returns at once; the outcomes fill `PendingOutcomes`.
    public func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant? = nil) -> PendingOutcomes {
        submit(pushes, deadline: deadline, writeBy: writeBy, bulk: false)
    }

    /// `bulk`: a fan-out's page, which waits behind the pushes of small messages for a stream.
    public func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?, bulk: Bool) -> PendingOutcomes {
        let pending = PendingOutcomes(count: pushes.count)
        guard !pushes.isEmpty else { return pending }
        let state = self.state
        let pushDeadline = min(deadline, .now + state.configuration.requestTimeout)
        guard !loop.isStopping else {
            pending.fulfil(Array(repeating: .notSent("the APNs client is shutting down"), count: pushes.count))
            return pending
        }
        loop.execute {
            for (index, push) in pushes.enumerated() {
                state.enqueue(push, deadline: pushDeadline, writeBy: writeBy, bulk: bulk) { pending.fulfil(index, $0) }
            }
        }
        return pending
    }

    /// Connections, queued and in-flight pushes, and timers of the client's loop: for tests and metrics.
    public func diagnostics() -> APNsClientDiagnostics? {
        let state = self.state
        return loop.submitAndWait { state.diagnostics() }
    }

    /// Answers every waiting push (not sent, or unknown if already written), closes every connection and
    /// stops the client's thread, by `deadline`. Returns false if the loop was stuck past it.
    @discardableResult
    public func shutdown(deadline: ContinuousClock.Instant = .now + .seconds(5)) -> Bool {
        let state = self.state
        _ = loop.submitAndWait(deadline: deadline) { state.shutdown() }
        return loop.stop(deadline: deadline)
    }
}

/// A snapshot of the APNs client's state.
public struct APNsClientDiagnostics: Sendable, Equatable {
    public let connections: Int
    public let queued: Int
    public let inFlight: Int
    public let timers: Int
    /// Provider tokens (JWTs) signed so far: one per key about every 50 minutes, more means renewals.
    public var providerTokensIssued = 0
}

/// A push waiting for, or carrying, an answer.
final class PendingPush {
    let push: Push
    let completion: (PushOutcome) -> Void
    /// Sends APNs provably did not process (refused, never written).
    var resends = 0
    var renewedToken = false
    var token: String?
    let deadline: ContinuousClock.Instant
    /// Not written after this: the sender's claim on it may belong to another node by then.
    let writeBy: ContinuousClock.Instant?
    /// Part of a fan-out's page: waits behind small messages' pushes for a stream.
    let bulk: Bool
    private(set) var completed = false

    init(push: Push, deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant? = nil, bulk: Bool = false,
         completion: @escaping (PushOutcome) -> Void) {
        self.push = push
        self.deadline = deadline
        self.writeBy = writeBy
        self.bulk = bulk
        self.completion = completion
    }

    func complete(_ outcome: PushOutcome) {
        guard !completed else { return }
        completed = true
        completion(outcome)
    }
}

/// Everything the client keeps; touched only on its event loop's thread.
///
/// `@unchecked Sendable`: loop-confined (APNsClient only reaches it through `loop.execute`).
final class ClientState: @unchecked Sendable {
    let configuration: APNsClientConfiguration
    let tls: TLSContext
    let logger: Logger
    let now: @Sendable () -> Date
    let loop: EventLoop
    /// Keys and provider tokens, read and signed off the loop (issue 43).
    let credentials: APNsCredentials
    private let resolver: APNsCredentialResolver
    private var pools: [String: ConnectionPool] = [:]
    /// The pool the previous push went to: a batch is usually one application and environment.
    private var lastPool: (application: ApplicationCode, gateway: Gateway, pool: ConnectionPool)?
    private var stopped = false

    func diagnostics() -> APNsClientDiagnostics {
        loop.preconditionInLoop()
        return APNsClientDiagnostics(connections: pools.values.reduce(0) { $0 + $1.connectionCount },
                                     queued: pools.values.reduce(0) { $0 + $1.queued } + credentials.waitingCount,
                                     inFlight: pools.values.reduce(0) { $0 + $1.inFlight }, timers: loop.scheduledTimers,
                                     providerTokensIssued: resolver.issued)
    }

    func shutdown() {
        loop.preconditionInLoop()
        stopped = true
        credentials.shutdown()
        for pool in pools.values { pool.shutdown() }
    }

    init(configuration: APNsClientConfiguration, tls: TLSContext, keys: @escaping APNsClient.KeyLookup, logger: Logger,
         now: @escaping @Sendable () -> Date, loop: EventLoop) {
        self.configuration = configuration
        self.tls = tls
        self.logger = logger
        self.now = now
        self.loop = loop
        resolver = APNsCredentialResolver(keys: keys, shared: configuration.sharedTokens, logger: logger)
        credentials = APNsCredentials(loop: loop, resolver: resolver, keyRefresh: configuration.keyRefresh, now: now, logger: logger)
        credentials.resume = { [unowned self] pending in self.dispatch(pending) }
    }

    func enqueue(_ push: Push, deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant? = nil, bulk: Bool = false,
                 completion: @escaping (PushOutcome) -> Void) {
        loop.preconditionInLoop()
        dispatch(PendingPush(push: push, deadline: deadline, writeBy: writeBy, bulk: bulk, completion: completion))
    }

    /// Sends `pending` on its pool when its application's credentials are in hand, parks it while they are read,
    /// or answers it (no key, a key APNs refused).
    func dispatch(_ pending: PendingPush) {
        loop.preconditionInLoop()
        guard !stopped else { return pending.complete(.notSent("the APNs client is shutting down")) }
        switch credentials.status(of: pending.push.application) {
        case .ready: break
        case .waiting: return credentials.park(pending)
        case .noKey: return pending.complete(PushOutcome(status: 403, reason: "NoAPNsKey"))
        case .invalid: return pending.complete(PushOutcome(status: 403, reason: .invalidProviderToken))
        }
        let push = pending.push
        let service = push.service
        if service == .push, let last = lastPool, last.application == push.application, last.gateway == push.gateway {
            return last.pool.enqueue(pending)
        }
        let name = "\(push.application.rawValue)/\(push.gateway.rawValue)" + (service == .broadcast ? "/broadcast" : service == .management ? "/manage" : "")
        let pool = pools[name] ?? {
            let endpoint = configuration.endpoint(push.gateway, service: service)
            let created = ConnectionPool(name: name, host: endpoint.host, port: endpoint.port, state: self)
            pools[name] = created
            return created
        }()
        if service == .push { lastPool = (push.application, push.gateway, pool) }
        pool.enqueue(pending)
    }
}
