import Foundation
import IsletAPI
import IsletCore
import IsletDelivery
import IsletHTTP
import IsletSQLite
import IsletStore

/// The composition root of `islet serve`: opens storage, wires the API to the HTTP server, runs, stops.
public final class IsletServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: any ApplicationStore
    public let devices: any DeviceStore
    public let messages: any MessageStore
    public let metrics = Metrics()
    /// Sends accepted messages; nil while no transport is configured (messages then wait, stored).
    public let delivery: DeliveryService?
    private let http: HTTPServer
    private let logger: Logger

    /// `clock` is the time every rule sees (schedules, timestamps); tests move it.
    public init(configuration: ServerConfiguration, logger: Logger, transport: (any PushTransport)? = nil,
                delivery deliveryConfiguration: DeliveryConfiguration = DeliveryConfiguration(),
                clock: @escaping @Sendable () -> Date = { Date() }) throws {
        self.configuration = configuration
        self.logger = logger
        let database = try SQLiteDatabase(path: configuration.databasePath)
        let store = SQLiteApplicationStore(database: database), devices = SQLiteDeviceStore(database: database)
        let messages = SQLiteMessageStore(database: database)
        self.store = store
        self.devices = devices
        self.messages = messages
        let delivery = transport.map {
            DeliveryService(messages: messages, devices: devices, applications: store, transport: $0,
                            configuration: deliveryConfiguration, logger: logger.with(label: "islet.delivery"), now: clock)
        }
        self.delivery = delivery
        let methods = [ApplicationMethods.getApplication] + DeviceMethods(store: devices).all + FilterMethods(store: devices).all
            + LiveActivityMethods(devices: devices, messages: messages, kick: { delivery?.kick() }).all
        let router = APIRouter(methods: methods, store: store, metrics: metrics, logger: logger.with(label: "islet.api"), now: clock)
        self.http = HTTPServer(configuration: configuration.http, handler: router)
    }

    /// Starts listening; returns the bound port.
    @discardableResult
    public func start() throws -> Int {
        if let delivery {
            try delivery.start()
        } else {
            logger.warning("no APNs transport is configured: accepted messages are stored and wait to be sent")
        }
        try http.start()
        logger.info("listening", ["address": .string(configuration.listen.host), "port": .int(Int64(http.port))])
        return http.port
    }

    public var port: Int { http.port }

    /// Stops accepting, lets in-flight requests finish within the grace period, and stops.
    @discardableResult
    public func shutdown() -> Bool {
        logger.info("shutting down", ["in_flight": .int(Int64(http.requestsInFlight))])
        let drained = http.shutdown(gracePeriod: configuration.shutdownGracePeriod)
        delivery?.shutdown()
        logger.info("stopped", ["drained": .bool(drained)])
        return drained
    }

    /// The demo application's fixed code and server token: those of the reference documents' examples.
    public static let demoCode = ApplicationCode("XXXXX-XXXXX")!
    public static let demoAPIToken = "SECRET_API_TOKEN"

    /// Creates the demo application when the database is empty, the APNs side is the simulator and
    /// the server listens on loopback only; never otherwise, since its token is public.
    public func createDemoIfEligible() throws -> ApplicationAdmin.Created? {
        guard configuration.apns == .simulator, configuration.listen.isLoopback, try store.hasNoApplications() else { return nil }
        let created = try ApplicationAdmin(store: store).create(
            name: "Food Delivery (demo)", bundleID: "com.example.fooddelivery",
            code: Self.demoCode, apiTokenSecret: Self.demoAPIToken)
        logger.info("created the demo application", ["application": .string(Self.demoCode.rawValue)])
        return created
    }
}
