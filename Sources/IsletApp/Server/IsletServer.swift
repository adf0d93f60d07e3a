import Foundation
import IsletAPI
import IsletAPNs
import IsletConsole
import IsletCore
import IsletDelivery
import IsletFCM
import IsletHTTP
import IsletHTTP2
import IsletSimulator
import IsletSQLite
import IsletStore
import Synchronization

/// The composition root of `islet serve`: opens storage, wires the API to the HTTP server, runs, stops.
public final class IsletServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: any ApplicationStore
    public let devices: any DeviceStore
    public let messages: any MessageStore
    /// The nodes sharing the database (`islet cluster status`, `/healthz`).
    public let cluster: any ClusterStore
    public let metrics = Metrics()
    /// Sends accepted messages.
    public let delivery: DeliveryService?
    /// Deletes finished messages and their delivery records after the retention period.
    public let retention: RetentionService
    /// The built-in APNs simulator (`--apns simulator`).
    public let simulator: APNsSimulator?
    let simulatorWiring: SimulatorWiring
    private let client: APNsClient?
    /// Android pushes (issue 46); nil when the caller gave the transport.
    private let fcm: FCMTransport?
    private let http: HTTPServer
    /// Held from start to shutdown on an SQLite file: one server per file.
    private let serverLock = Mutex<SQLiteServerLock?>(nil)
    /// The HTTP handler, for in-process tests of routing and input handling without sockets.
    public let router: APIRouter
    /// The web console's routes (`/console`), for in-process tests; and what tells its pages of changes.
    public let console: ConsoleRouter
    let consoleEvents: ConsoleEvents
    /// The prefix routes the server answers besides the JSON API, for the OpenAPI conformance test.
    public let prefixRoutes: [String]
    private let logger: Logger

    /// `clock` is the time every rule sees (schedules, timestamps); tests move it. Without a `transport`,
    /// pushes go where the configuration says: the built-in simulator, or Apple (or `--apns-url`).
    public init(configuration: ServerConfiguration, logger: Logger, transport: (any PushTransport)? = nil,
                delivery deliveryConfiguration: DeliveryConfiguration = DeliveryConfiguration(),
                clock: @escaping @Sendable () -> Date = { Date() }) throws {
        self.configuration = configuration
        self.logger = logger
        let storage = try Storage(configuration.location, node: configuration.node)
        let store = storage.applications(masterKey: configuration.masterKey)
        let devices = storage.devices(tagNames: configuration.tagNames), messages = storage.messages, schemas = storage.schemas
        self.store = store
        self.devices = devices
        self.messages = messages
        let wiring = SimulatorWiring(applications: store, devices: devices, simulated: storage.simulated, schemas: schemas)
        self.simulatorWiring = wiring

        var simulator: APNsSimulator?
        var client: APNsClient?
        var fcm: FCMTransport?
        var pushes = transport
        if pushes == nil {
            var clientConfiguration = APNsClientConfiguration(overrideURL: configuration.apnsURL.flatMap(URL.init(string:)),
                                                              extraCA: configuration.apnsCA)
            clientConfiguration.sharedTokens = storage.cluster(masterKey: configuration.masterKey)
            var keys: APNsClient.KeyLookup = { try store.apnsKey(for: $0) }
            var fcmConfiguration = FCMTransportConfiguration(baseURL: configuration.fcmURL ?? FCMClient.defaultBaseURL, caFile: configuration.fcmCA)
            var accounts: FCMTransport.AccountLookup = { try store.fcmAccountKey(for: $0) }
            if configuration.apns == .simulator {
                let running = try Self.startSimulator(configuration, wiring: wiring, logger: logger)
                simulator = running.simulator
                clientConfiguration.overrideURL = URL(string: "https://127.0.0.1:\(running.simulator.port)")
                clientConfiguration.sandboxOverrideURL = URL(string: "https://127.0.0.1:\(running.simulator.sandboxPort)")
                clientConfiguration.extraCA = running.certificate
                keys = { try wiring.signingKey(for: $0) }
                // The simulator is FCM too (issue 46), with its token endpoint, on the same listener.
                let simulated = "https://127.0.0.1:\(running.simulator.port)"
                fcmConfiguration = FCMTransportConfiguration(baseURL: simulated, caFile: running.certificate)
                accounts = { try wiring.fcmAccountKey(for: $0, tokenURI: simulated + "/token") }
            }
            let apnsClient = try APNsClient(configuration: clientConfiguration, keys: keys, logger: logger.with(label: "islet.apns"), now: clock)
            let fcmTransport = FCMTransport(configuration: fcmConfiguration, accounts: accounts, logger: logger.with(label: "islet.fcm"))
            (client, fcm) = (apnsClient, fcmTransport)
            pushes = PushRouter(apns: apnsClient, fcm: fcmTransport)
        }
        self.simulator = simulator
        self.client = client
        self.fcm = fcm
        let node = NodeInfo(id: configuration.node, host: ProcessInfo.processInfo.hostName, pid: Int(ProcessInfo.processInfo.processIdentifier),
                            version: IsletVersion.current)
        var deliveryConfiguration = deliveryConfiguration
        deliveryConfiguration.updatePacing = configuration.updatePacing
        deliveryConfiguration.pushToStartPacing = configuration.pushToStartPacing
        let delivery = pushes.map {
            DeliveryService(messages: messages, devices: devices, applications: store, transport: $0, cluster: storage.cluster, node: node,
                            session: storage.nodeSession(sole: simulator != nil), configuration: deliveryConfiguration, logger: logger.with(label: "islet.delivery"), now: clock,
                            broadcasts: storage.broadcasts)
        }
        self.cluster = storage.cluster
        self.delivery = delivery
        let audit = configuration.auditLog
        let idleChannels = pushes.map { transport in
            IdleChannels(store: storage.channels, applications: store, deletion: ChannelDeletion(store: storage.channels, transport: transport),
                         deleted: { audit.record(.channelDeleted, application: $0, actor: "retention (--delete-idle-channels)", details: ["name": .string($1)]) })
        }
        self.retention = RetentionService(messages: messages, channels: idleChannels, policy: configuration.retention,
                                          logger: logger.with(label: "islet.retention"), now: clock)
        var simulatedKey: (@Sendable (ApplicationCode) throws -> APNsKeyInfo?)?
        if simulator != nil {
            simulatedKey = { @Sendable (code: ApplicationCode) throws -> APNsKeyInfo? in try wiring.signingKey(for: code)?.info }
        }
        let liveActivities = LiveActivityMethods(devices: devices, messages: messages, schemas: schemas, pushLifetime: deliveryConfiguration.retry.pushLifetime,
                                                 pacing: configuration.updatePacing, broadcasts: storage.broadcasts, channels: storage.channels,
                                                 kick: { delivery?.kick() })
        let methods = [ApplicationMethods.getApplication(apnsMode: configuration.apns.rawValue, simulatedKey: simulatedKey)]
            + DeviceMethods(store: devices, phoneStarted: configuration.phoneStartedActivities, kick: { delivery?.kick() }).all
            + SDKMethods(devices: devices, receipts: storage.messages).all
            + FilterMethods(store: devices, audit: configuration.auditLog).all
            + liveActivities.all
            + SchemaMethods(store: schemas, audit: configuration.auditLog).all
            + ChannelMethods(store: storage.channels, transport: pushes, audit: configuration.auditLog).all
        let routes = SimulatorRoutes(wiring: wiring, authenticator: Authenticator(store: store))
        // Pushwoosh's Messaging API v2, for the Android Live Updates it sends (issue 46).
        let notify = PushwooshNotifyRoute(methods: liveActivities, applications: store, limits: configuration.rateLimits, now: clock)
        let extraRoutes: [(prefix: String, handle: @Sendable (HTTPRequest) -> HTTPResponse)] =
            [(PushwooshNotifyRoute.path, { @Sendable request in notify.handle(request) })]
            + (simulator == nil ? [] : [("/simulator/devices", { @Sendable request in routes.handle(request) })])
        let router = APIRouter(methods: methods, store: store, metrics: metrics, logger: logger.with(label: "islet.api"), now: clock,
                               extraRoutes: extraRoutes,
                               limits: configuration.rateLimits, readsWait: configuration.location.isNetworked,
                               healthDetails: { ["node": .string(node.id.rawValue), "liveness": .bool(delivery?.nodeIsAlive ?? true)] })
        self.router = router
        let consoleStore = storage.console
        let consoleEvents = ConsoleEvents(store: consoleStore, logger: logger.with(label: "islet.console"), now: clock)
        self.consoleEvents = consoleEvents
        let console = ConsoleRouter(api: router, applications: store, store: consoleStore, messages: messages, events: consoleEvents,
                                    simulator: simulator == nil ? nil : { @Sendable request, application in routes.handle(request, as: application) },
                                    logger: logger.with(label: "islet.console"), now: clock)
        self.console = console
        self.http = HTTPServer(configuration: configuration.http, handler: ServerRoutes(api: router, console: console, metrics: metrics))
        self.prefixRoutes = (simulator == nil ? [] : ["/simulator/devices"]) + [ConsoleRouter.prefix, PushwooshNotifyRoute.path]
        let operatorMetrics = OperatorMetrics(delivery: delivery, messages: messages, client: client, now: clock)
        metrics.addCollector { operatorMetrics.render() }
    }

    /// The simulator on 127.0.0.1 with its self-signed certificate, made on first run beside the database,
    /// where this server trusts it (issue 6).
    static func startSimulator(_ configuration: ServerConfiguration, wiring: SimulatorWiring, logger: Logger, port: Int = 0,
                               sink: Bool = false, faults: SimulatorFaults = SimulatorFaults()) throws
        -> (simulator: APNsSimulator, certificate: String) {
        let directory = URL(fileURLWithPath: configuration.location.localDirectory).appendingPathComponent("simulator")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificate = directory.appendingPathComponent("apns-simulator.crt").path
        let key = directory.appendingPathComponent("apns-simulator.key").path
        if !FileManager.default.fileExists(atPath: certificate) || !FileManager.default.fileExists(atPath: key) {
            try TLSContext.writeSelfSigned(certificate: certificate, key: key)
        }
        let simulator = try APNsSimulator(
            store: wiring.simulated, credentials: { wiring.credential(keyID: $0) },
            report: { wiring.report($0, hwid: $1, activityID: $2, token: $3) },
            decoder: { wiring.decodingError($0, attributesType: $1, contentState: $2, attributes: $3) },
            fcmAccounts: { wiring.fcmAccount(keyID: $0) },
            tls: try TLSContext(serverCertificate: certificate, key: key), port: port, faults: faults, sink: sink)
        logger.info("APNs simulator listening", ["address": "127.0.0.1", "port": .int(Int64(simulator.port)), "sandbox_port": .int(Int64(simulator.sandboxPort)),
                                                 "certificate": .string(certificate)])
        return (simulator, certificate)
    }

    /// Starts listening; returns the bound port. Refuses to start when stored APNs keys are sealed with a
    /// master key this server was not given.
    @discardableResult
    public func start() throws -> Int {
        if case .sqlite(let path) = configuration.location {
            let lock = try SQLiteServerLock(databasePath: path)
            serverLock.withLock { $0 = lock }
        }
        do {
            return try startServices()
        } catch {
            serverLock.withLock { $0?.release(); $0 = nil }
            throw error
        }
    }

    private func startServices() throws -> Int {
        // The demo's server token is printed in every document: with Apple's APNs it would let anyone push to the
        // demo application's devices, and a database made with the simulator may be carried over to production.
        if configuration.apns == .apple, let demo = try store.token(hash: Credentials.hash(Self.demoAPIToken)),
           demo.application == Self.demoCode, demo.kind == .api, !demo.isRevoked {
            throw StartRefusal(message: Self.demoTokenRefusal)
        }
        let keys = try store.checkAPNsKeys()
        if configuration.masterKey == nil && configuration.apns == .apple {
            logger.warning("APNs keys are stored unencrypted: set ISLET_MASTER_KEY or --master-key-file (docs/PRODUCTION.md)", ["plain_keys": .int(Int64(keys.plain))])
        } else if configuration.masterKey != nil && keys.plain > 0 {
            logger.warning("some APNs keys are stored unencrypted; seal them with: islet app rotate-master-key", ["plain_keys": .int(Int64(keys.plain))])
        }
        if let delivery {
            // The simulator's phones live in this process: it runs alone, and no node joins it (issue 14). The
            // node's liveness session refuses either, before any work is claimed (PostgresNodeSession).
            try delivery.start()
        } else {
            logger.warning("no APNs transport is configured: accepted messages are stored and wait to be sent")
        }
        retention.start()
        consoleEvents.start()
        do {
            try http.start()
        } catch {
            // Nothing half-started stays behind: the services that did start stop again.
            stopServices(deadline: .now + .seconds(3))
            throw error
        }
        logger.info("listening", ["address": .string(configuration.listen.host), "port": .int(Int64(http.port))])
        return http.port
    }

    public var port: Int { http.port }

    /// Stops accepting, lets in-flight requests finish within the grace period, and stops.
    @discardableResult
    public func shutdown() -> Bool {
        logger.info("shutting down", ["in_flight": .int(Int64(http.requestsInFlight))])
        let graceEnd = ContinuousClock.now + configuration.shutdownGracePeriod
        let drained = http.shutdown(gracePeriod: configuration.shutdownGracePeriod)
        if !drained {
            logger.warning("requests were still being handled at the shutdown deadline; they were answered 503 (outcome unknown)")
        }
        // Delivery gets at least a few seconds even when draining HTTP took the whole grace period: the
        // batches on the wire must be recorded, or a restart sends them again.
        stopServices(deadline: max(graceEnd, ContinuousClock.now + .seconds(3)))
        simulator?.stop()
        serverLock.withLock { $0?.release(); $0 = nil }
        logger.info("stopped", ["drained": .bool(drained)])
        return drained
    }

    /// Stops the background services by `deadline`: the pruner first (it stops between two small batches and
    /// never holds up delivery's share), then delivery, whose batches on the wire the APNs client answers at
    /// once (not sent, or unknown), so workers record them as retries or unconfirmed starts; nothing is lost.
    private func stopServices(deadline: ContinuousClock.Instant) {
        consoleEvents.shutdown(deadline: min(deadline, ContinuousClock.now + .seconds(1)))
        if !retention.shutdown(deadline: min(deadline, ContinuousClock.now + .seconds(1))) {
            logger.warning("the retention pruner was still in a batch at shutdown; it ends with the process")
        }
        let client = self.client, fcm = self.fcm
        let stopped = delivery?.shutdown(deadline: deadline, unblock: {
            client?.shutdown(deadline: deadline)
            fcm?.shutdown(deadline: deadline)
        }) ?? true
        client?.shutdown(deadline: deadline)
        fcm?.shutdown(deadline: deadline)
        if !stopped { logger.warning("delivery workers were still busy at the shutdown deadline; their work resumes at the next start") }
    }

    /// The demo application's fixed code and server token: those of the reference documents' examples.
    public static let demoCode = ApplicationCode("XXXXX-XXXXX")!
    public static let demoAPIToken = "SECRET_API_TOKEN"
    /// Why a server with Apple's APNs does not start on a database whose demo token still works.
    static let demoTokenRefusal = """
        the demo application \(demoCode) still has its public server API token \(demoAPIToken), which every copy of the \
        documentation prints: with --apns apple anyone could push with it. Revoke it first (islet app token revoke \
        \(demoCode) \(demoAPIToken)), or serve Apple's APNs from a new database
        """

    /// A reason the server does not start, said as it is.
    struct StartRefusal: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// Creates the demo application when the database is empty, the APNs side is the simulator and
    /// the server listens on loopback only; never otherwise, since its token is public.
    /// The demo's simulated Android phone.
    public static let demoAndroidPhone = "android_phone"

    public func createDemoIfEligible() throws -> ApplicationAdmin.Created? {
        guard configuration.apns == .simulator, configuration.listen.isLoopback, try store.hasNoApplications() else { return nil }
        let created = try ApplicationAdmin(store: store, audit: configuration.auditLog, actor: "islet serve (demo)").create(
            name: "Food Delivery (demo)", bundleID: "com.example.fooddelivery",
            code: Self.demoCode, apiTokenSecret: Self.demoAPIToken)
        // The reference examples' devices and filter, as simulated iPhones (issue 6), when the simulator runs.
        guard simulator != nil else {
            logger.info("created the demo application", ["application": .string(Self.demoCode.rawValue)])
            return created
        }
        for (hwid, version) in [("first_third", "17.4"), ("second_device", "18.1")] {
            _ = try simulatorWiring.addDevice(application: Self.demoCode, hwid: hwid, iosVersion: version, locked: false,
                                              attributesTypes: [], tags: [("Demo", .string("food-delivery"))])
        }
        // Issue 46: an Android 16 phone beside them, which gets the same starts and updates as Live Updates.
        _ = try simulatorWiring.addAndroidDevice(application: Self.demoCode, hwid: Self.demoAndroidPhone, androidVersion: "16",
                                                 tags: [("Demo", .string("food-delivery"))])
        let types = try devices.tagTypes(in: Self.demoCode)
        try devices.createFilter(try FilterDefinition.parse(name: "FILTER_NAME_1", join: .and, conditions: [["Demo", "EQ", "food-delivery"]],
                                                            tagTypes: types), in: Self.demoCode, at: Date())
        logger.info("created the demo application", ["application": .string(Self.demoCode.rawValue)])
        return created
    }
}
