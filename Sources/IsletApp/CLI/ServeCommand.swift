import Dispatch
import Foundation
import IsletAPI
import IsletAPNs
import IsletCore
import IsletDelivery
import IsletHTTP
import IsletSQLite
import IsletStore
import Synchronization

/// `islet serve`: run the API server until SIGTERM or SIGINT.
struct ServeCommand: CLICommand {
    static let spec = CommandSpec(
        name: "serve",
        abstract: "Run the Islet server.",
        discussion: """
            Serves the JSON API (POST /json/1.3/<method>), GET /healthz and GET /metrics. Logs are JSON lines
            on stderr. SIGTERM or SIGINT stops accepting connections, lets requests in flight finish, and exits 0.
            With --apns simulator on a loopback address and an empty database, a demo application
            XXXXX-XXXXX with server API token SECRET_API_TOKEN is created so the documented examples work.
            On an address other than loopback, --apns (or ISLET_APNS) must be given.
            """,
        options: [
            OptionSpec(name: "--listen", valueName: "host:port", help: "Address to listen on.",
                       environment: "ISLET_LISTEN", defaultValue: ServerConfiguration.defaultListen),
            Common.database,
            OptionSpec(name: "--apns", valueName: "simulator|apple", help: "Where pushes go; required off loopback.",
                       environment: "ISLET_APNS", defaultValue: "simulator"),
            OptionSpec(name: "--apns-url", valueName: "url", help: "APNs base URL replacing Apple's hosts.",
                       environment: "ISLET_APNS_URL"),
            OptionSpec(name: "--apns-ca", valueName: "file", help: "Extra CA certificate (PEM) to trust for APNs.",
                       environment: "ISLET_APNS_CA"),
            OptionSpec(name: "--fcm-url", valueName: "url", help: "FCM base URL replacing https://fcm.googleapis.com (Android Live Updates).",
                       environment: "ISLET_FCM_URL"),
            OptionSpec(name: "--fcm-ca", valueName: "file", help: "Extra CA certificate (PEM) to trust for FCM and service accounts' token_uri.",
                       environment: "ISLET_FCM_CA"),
            OptionSpec(name: "--connections-per-address", valueName: "n|off",
                       help: "Connections one client address (an IPv6 /64) may hold open at once; loopback (a proxy on this machine) is not counted.",
                       environment: "ISLET_CONNECTIONS_PER_ADDRESS", defaultValue: "128"),
            OptionSpec(name: "--receive-deadline-seconds", valueName: "n|off",
                       help: "A request's headers must arrive within n seconds of its first line, and its body within n seconds plus 1 s per 16 KiB; a client later is disconnected.",
                       environment: "ISLET_RECEIVE_DEADLINE_SECONDS", defaultValue: "10"),
            OptionSpec(name: "--device-rate-per-address", valueName: "n[/burst]|off",
                       help: "Device API calls a second from one client address.", environment: "ISLET_DEVICE_RATE_PER_ADDRESS",
                       defaultValue: RateLimits().devicePerAddress?.description),
            OptionSpec(name: "--device-rate-per-token", valueName: "n[/burst]|off",
                       help: "Device API calls a second with an application's device API tokens.", environment: "ISLET_DEVICE_RATE_PER_TOKEN",
                       defaultValue: RateLimits().devicePerToken?.description),
            OptionSpec(name: "--master-key-file", valueName: "file",
                       help: "Master key sealing APNs keys at rest (or ISLET_MASTER_KEY).", environment: "ISLET_MASTER_KEY_FILE"),
            OptionSpec(name: "--audit-log", valueName: "file|off",
                       help: "Audit log of admin actions (JSON lines, 0600); default: audit.log beside an SQLite database, var/audit.log with PostgreSQL.",
                       environment: "ISLET_AUDIT_LOG"),
            OptionSpec(name: "--phone-started-activities", valueName: "allow|refuse",
                       help: "Whether a device may define an activity Islet never started (D5).", environment: "ISLET_PHONE_STARTED_ACTIVITIES",
                       defaultValue: "allow"),
            OptionSpec(name: "--update-interval", valueName: "seconds",
                       help: "Least time between two updates of one activity; a burst in between goes as its latest state (A9). 0: every update at once.",
                       environment: "ISLET_UPDATE_INTERVAL", defaultValue: "1"),
            OptionSpec(name: "--push-to-start-per-minute", valueName: "n",
                       help: "Push-to-start pushes a device gets in a minute; more are held for the next free slot (A12). 0: no pacing.",
                       environment: "ISLET_PUSH_TO_START_PER_MINUTE", defaultValue: "10"),
            OptionSpec(name: "--tag-names-per-application", valueName: "n",
                       help: "Tag names an application may have; a new one past it is skipped and named in the answer (1 to 1000000).",
                       environment: "ISLET_TAG_NAMES_PER_APPLICATION", defaultValue: "1000"),
            OptionSpec(name: "--retention-days", valueName: "days|off",
                       help: "Keep finished messages and their delivery records this long.", environment: "ISLET_RETENTION_DAYS",
                       defaultValue: "30"),
            OptionSpec(name: "--delete-idle-channels", valueName: "days|off",
                       help: "Delete broadcast channels (at Apple's too) that no broadcast, update or start used for this long (X5).",
                       environment: "ISLET_DELETE_IDLE_CHANNELS", defaultValue: "off"),
            OptionSpec(name: "--node-id", valueName: "id",
                       help: "This node's name among the islet serve processes sharing the database (letters, digits, .-_:).",
                       environment: "ISLET_NODE_ID", defaultValue: "host-pid-random"),
            OptionSpec(name: "--lease-seconds", valueName: "seconds",
                       help: "How long a node's claim on work outlives its last renewal before another node takes it over.",
                       environment: "ISLET_LEASE_SECONDS", defaultValue: "10"),
            OptionSpec(name: "--server-rate-per-token", valueName: "n[/burst]|off",
                       help: "Server API calls a second with an application's server API tokens.", environment: "ISLET_SERVER_RATE_PER_TOKEN",
                       defaultValue: "off"),
        ])

    let configuration: ServerConfiguration
    let delivery: DeliveryConfiguration

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        let listenText = arguments.value("--listen") ?? ServerConfiguration.defaultListen
        guard let listen = ListenAddress(listenText) else {
            throw CLIError.usage("--listen: '\(listenText)' is not HOST:PORT with a numeric address and a port 0-65535")
        }
        // Off loopback the server is reachable by others: it must not silently send nothing to Apple (issue 12).
        guard arguments.value("--apns") != nil || listen.isLoopback else {
            throw CLIError.usage("--apns: \(listen) is not a loopback address, so say where pushes go: --apns apple (Apple's APNs) or --apns simulator (nothing reaches Apple)")
        }
        let apnsText = arguments.value("--apns") ?? "simulator"
        guard let apns = APNsMode(rawValue: apnsText) else {
            throw CLIError.usage("--apns: '\(apnsText)' is not one of simulator, apple")
        }
        var configuration = ServerConfiguration(
            listen: listen, database: Common.databaseSetting(arguments), apns: apns)
        if let url = arguments.value("--apns-url") {
            guard let components = URLComponents(string: url), components.scheme == "https", components.host?.isEmpty == false,
                  components.path.isEmpty || components.path == "/" else {
                throw CLIError.usage("--apns-url: '\(url)' is not an https://HOST[:PORT] URL")
            }
            configuration.apnsURL = url
        }
        if let ca = arguments.value("--apns-ca") {
            guard FileManager.default.isReadableFile(atPath: ca) else { throw CLIError.usage("--apns-ca: cannot read \(ca)") }
            configuration.apnsCA = ca
        }
        if let url = arguments.value("--fcm-url") {
            guard let components = URLComponents(string: url), components.scheme == "https", components.host?.isEmpty == false else {
                throw CLIError.usage("--fcm-url: '\(url)' is not an https://HOST[:PORT][/PATH] URL")
            }
            configuration.fcmURL = url
        }
        if let ca = arguments.value("--fcm-ca") {
            guard FileManager.default.isReadableFile(atPath: ca) else { throw CLIError.usage("--fcm-ca: cannot read \(ca)") }
            configuration.fcmCA = ca
        }
        configuration.masterKey = try Common.masterKey(arguments.environment, file: arguments.value("--master-key-file"))
        if let text = arguments.value("--phone-started-activities") {
            guard let value = PhoneStartedActivities(rawValue: text) else {
                throw CLIError.usage("--phone-started-activities: '\(text)' is not one of allow, refuse")
            }
            configuration.phoneStartedActivities = value
        }
        configuration.auditLogSetting = arguments.value("--audit-log")
        if let text = arguments.value("--update-interval") {
            guard let seconds = Double(text), UpdatePacing.allowed.contains(seconds) else {
                throw CLIError.usage("--update-interval: '\(text)' is not a number of seconds from 0 to 60")
            }
            configuration.updatePacing = UpdatePacing(interval: seconds)
        }
        if case let count?? = try Self.number(arguments, "--push-to-start-per-minute", in: PushToStartPacing.allowed) {
            configuration.pushToStartPacing = PushToStartPacing(perMinute: count)
        }
        if case let count? = try Self.number(arguments, "--connections-per-address", in: 1...1_000_000, allowsOff: true) {
            configuration.http.connectionsPerAddress = count
        }
        if case let seconds? = try Self.number(arguments, "--receive-deadline-seconds", in: 1...3600, of: "a number of seconds", allowsOff: true) {
            configuration.http.receiveDeadline = seconds.map { ReceiveDeadline(headers: .seconds($0)) }
        }
        if case let count?? = try Self.number(arguments, "--tag-names-per-application", in: TagNames.allowed) {
            configuration.tagNames = TagNames(limit: count)
        }
        if case let days? = try Self.number(arguments, "--retention-days", in: 1...3650, of: "a number of days", allowsOff: true) {
            configuration.retention.keep = days.map { .seconds($0 * 86_400) }
        }
        if case let days?? = try Self.number(arguments, "--delete-idle-channels", in: 1...3650, of: "a number of days", allowsOff: true) {
            configuration.retention.idleChannels = .seconds(days * 86_400)
        }
        for (option, keyPath) in [("--device-rate-per-address", \RateLimits.devicePerAddress), ("--device-rate-per-token", \RateLimits.devicePerToken),
                                  ("--server-rate-per-token", \RateLimits.serverPerToken)] {
            guard let text = arguments.value(option) else { continue }
            guard let limit = RateLimit.parse(text) else {
                throw CLIError.usage("\(option): '\(text)' is not a rate: N or N/BURST calls a second (N > 0), or off")
            }
            configuration.rateLimits[keyPath: keyPath] = limit
        }
        if let text = arguments.value("--node-id") {
            guard let node = NodeID(text) else {
                throw CLIError.usage("--node-id: '\(text.prefix(80))' is not 1 to 64 letters, digits, '.', '-', '_' or ':'")
            }
            configuration.node = node
        }
        var delivery = DeliveryConfiguration()
        if let text = arguments.value("--lease-seconds") {
            guard let seconds = Double(text), seconds >= 1, seconds <= 600 else {
                throw CLIError.usage("--lease-seconds: '\(text.prefix(40))' is not a number of seconds from 1 to 600")
            }
            delivery.lease = .milliseconds(Int(seconds * 1000))
        }
        self.delivery = delivery
        self.configuration = configuration
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let logger = Logger(label: "islet", sink: { context.standardError($0 + "\n") })
        // Signals are taken before anything starts, so an early SIGTERM still shuts down cleanly.
        let stop = SignalWaiter(signals: [SIGTERM, SIGINT])
        logger.info("starting", ["configuration": configuration.summary])
        let server: IsletServer
        let demo: ApplicationAdmin.Created?
        do {
            server = try IsletServer(configuration: configuration, logger: logger, delivery: delivery)
            demo = try server.createDemoIfEligible()
            try server.start()
        } catch {
            throw CLIError.failure("cannot start: \(error)")
        }
        if let demo { printDemo(demo, port: server.port, context) }
        let signal = stop.wait()
        logger.info("signal received", ["signal": .int(Int64(signal))])
        return server.shutdown() ? 0 : 1
    }

    /// The value of `option` when it is given (nil when not): a number in `range`, or where `allowsOff`, `off` (`.some(nil)`).
    private static func number(_ arguments: ParsedArguments, _ option: String, in range: ClosedRange<Int>, of what: String = "a number",
                               allowsOff: Bool = false) throws -> Int?? {
        guard let text = arguments.value(option) else { return .none }
        if allowsOff && text == "off" { return .some(nil) }
        guard let value = Int(text), range.contains(value) else {
            throw CLIError.usage("\(option): '\(text)' is not \(what) from \(range.lowerBound) to \(range.upperBound)\(allowsOff ? ", or off" : "")")
        }
        return .some(value)
    }

    private func printDemo(_ demo: ApplicationAdmin.Created, port: Int, _ context: CLIContext) {
        let base = "http://\(ListenAddress(host: configuration.listen.host, port: port))"
        context.print("""
            Islet demo application created (empty database, --apns simulator, loopback address):
              application code:  \(demo.application.code)
              server API token:  \(demo.apiToken.secret)
              device API token:  \(demo.deviceToken.secret)
            Try it:
              curl -s \(base)/json/1.3/getApplication -d '{"request":{"application":"\(demo.application.code)","auth":"\(demo.apiToken.secret)"}}'
            Simulated iPhones first_third and second_device, the Android phone android_phone and the filter FILTER_NAME_1 are
            ready for the reference examples; their lock screens (and the Android phone's shade):
              curl -s \(base)/simulator/devices/first_third -H 'Authorization: Token \(demo.apiToken.secret)'
            The console: \(base)/console (sign in with the server API token)
            """)
    }
}

/// Blocks until one of `signals` arrives; the signals' default actions are disabled while it exists.
final class SignalWaiter {
    /// The last signal received, shared with the dispatch handlers.
    private final class Received: Sendable {
        let number = Atomic<Int32>(0)
    }

    private let semaphore = DispatchSemaphore(value: 0)
    private let received = Received()
    private var sources: [any DispatchSourceSignal] = []

    init(signals: [Int32]) {
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [received, semaphore] in
                received.number.store(number, ordering: .releasing)
                semaphore.signal()
            }
            source.resume()
            sources.append(source)
        }
    }

    /// Waits for a signal and returns its number.
    func wait() -> Int32 {
        semaphore.wait()
        return received.number.load(ordering: .acquiring)
    }
}
