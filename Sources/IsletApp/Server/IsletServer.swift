import Foundation
import IsletAPI
import IsletCore
import IsletHTTP
import IsletSQLite
import IsletStore

/// The composition root of `islet serve`: opens storage, wires the API to the HTTP server, runs, stops.
public final class IsletServer: Sendable {
    public let configuration: ServerConfiguration
    public let store: any ApplicationStore
    public let devices: any DeviceStore
    public let metrics = Metrics()
    private let http: HTTPServer
    private let logger: Logger

    public init(configuration: ServerConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let database = try SQLiteDatabase(path: configuration.databasePath)
        self.store = SQLiteApplicationStore(database: database)
        self.devices = SQLiteDeviceStore(database: database)
        let methods = [ApplicationMethods.getApplication] + DeviceMethods(store: devices).all + FilterMethods(store: devices).all
        let router = APIRouter(methods: methods, store: store, metrics: metrics, logger: logger.with(label: "islet.api"))
        self.http = HTTPServer(configuration: configuration.http, handler: router)
    }

    /// Starts listening; returns the bound port.
    @discardableResult
    public func start() throws -> Int {
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
