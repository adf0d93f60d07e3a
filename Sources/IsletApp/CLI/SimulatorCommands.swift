import Foundation
import IsletAPI
import IsletCore
import IsletHTTP2
import IsletSimulator
import IsletSQLite
import IsletStore

/// `islet simulator`: the APNs + device simulator on its own, and its simulated devices.
struct SimulatorCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "simulator", abstract: "Run the APNs simulator on its own and manage simulated devices.",
        discussion: "islet serve --apns simulator (the default) runs the same simulator inside the server.",
        subcommands: [SimulatorRunCommand.self, SimulatorDeviceCommand.self, SimulatorShowCommand.self])
}

/// What simulator commands share: the database and the wiring to Islet's stores.
private func wiring(_ arguments: ParsedArguments) throws -> SimulatorWiring {
    let storage = try Common.openStorage(arguments)
    return SimulatorWiring(applications: storage.applications(masterKey: nil), devices: storage.devices,
                           simulated: storage.simulated, schemas: storage.schemas)
}

struct SimulatorRunCommand: CLICommand {
    static let spec = CommandSpec(
        name: "run", abstract: "Serve the simulated APNs (HTTP/2 over TLS) until SIGTERM or SIGINT.",
        discussion: """
            Point Islet at it with: islet serve --apns apple --apns-url https://127.0.0.1:<port> --apns-ca <certificate>.
            The self-signed certificate is made on first run beside the database (simulator/apns-simulator.crt).
            """,
        options: [
            OptionSpec(name: "--listen", valueName: "host:port", help: "Address to listen on.", defaultValue: "127.0.0.1:2197"),
            Common.database,
            OptionSpec.flag("--sink", "Answer 200 to everything at once, checking nothing (benchmarks)."),
            OptionSpec(name: "--fail-429", valueName: "share", help: "Share of pushes answered 429 TooManyRequests (0 to 1)."),
            OptionSpec(name: "--fail-503", valueName: "share", help: "Share of pushes answered 503 ServiceUnavailable (0 to 1)."),
            OptionSpec(name: "--latency-ms", valueName: "ms", help: "Delay before each answer."),
            OptionSpec(name: "--goaway-every", valueName: "n", help: "Send GOAWAY after every N requests of a connection."),
            OptionSpec(name: "--drop-every", valueName: "n", help: "Drop the connection at every Nth request."),
        ])

    let arguments: ParsedArguments
    let listen: ListenAddress
    let faults: SimulatorFaults

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        let text = arguments.value("--listen") ?? "127.0.0.1:2197"
        guard let listen = ListenAddress(text) else { throw CLIError.usage("--listen: '\(text)' is not HOST:PORT") }
        self.listen = listen
        var faults = SimulatorFaults()
        func share(_ name: String) throws -> Double {
            guard let text = arguments.value(name) else { return 0 }
            guard let value = Double(text), (0...1).contains(value) else { throw CLIError.usage("\(name): '\(text)' is not a share from 0 to 1") }
            return value
        }
        func count(_ name: String) throws -> Int? {
            guard let text = arguments.value(name) else { return nil }
            guard let value = Int(text), value > 0 else { throw CLIError.usage("\(name): '\(text)' is not a positive whole number") }
            return value
        }
        faults.tooManyRequests = try share("--fail-429")
        faults.unavailable = try share("--fail-503")
        faults.latency = .milliseconds(try count("--latency-ms") ?? 0)
        faults.goAwayEvery = try count("--goaway-every")
        faults.dropEvery = try count("--drop-every")
        self.faults = faults
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let logger = Logger(label: "islet.simulator", sink: { context.standardError($0 + "\n") })
        let stop = SignalWaiter(signals: [SIGTERM, SIGINT])
        let wiring = try wiring(arguments)
        let configuration = ServerConfiguration(listen: listen, database: Common.databaseSetting(arguments))
        let simulator: APNsSimulator
        do {
            simulator = try IsletServer.startSimulator(configuration, wiring: wiring, logger: logger, port: listen.port, sink: arguments.flag("--sink"),
                                                       faults: faults).simulator
        } catch {
            throw CLIError.failure("cannot start the simulator: \(error)")
        }
        _ = stop.wait()
        simulator.stop()
        return 0
    }
}

struct SimulatorDeviceCommand: CLIGroup {
    static let spec = CommandSpec(name: "device", abstract: "Add simulated iPhones and change their state.",
                                  subcommands: [SimulatorDeviceAddCommand.self, SimulatorDeviceSetCommand.self])
}

struct SimulatorDeviceAddCommand: CLICommand {
    static let spec = CommandSpec(
        name: "add", abstract: "Add a simulated iPhone or Android phone and register it with Islet, as the Pushwoosh SDK would.",
        options: [
            OptionSpec(name: "--application", valueName: "code", help: "The application it runs.", required: true),
            OptionSpec(name: "--hwid", valueName: "id", help: "Its HWID.", required: true),
            OptionSpec(name: "--platform", valueName: "ios|android", help: "An iPhone, or an Android phone that gets Live Updates through the simulated FCM.",
                       defaultValue: "ios"),
            OptionSpec(name: "--ios", valueName: "version", help: "Its iOS version; 17.2+ has push-to-start.", defaultValue: "17.4"),
            OptionSpec(name: "--android", valueName: "version", help: "An Android phone's release; 16+ shows Live Updates.", defaultValue: "16"),
            OptionSpec(name: "--attributes-type", valueName: "type", help: "Register its push-to-start token for this type only."),
            OptionSpec.flag("--locked", "Start locked: priority-5 updates show on unlock."),
            OptionSpec.flag("--frequent-updates", "The app's More Frequent Updates are on: a larger priority-10 budget (A7)."),
            Common.database, Common.json,
        ])

    let arguments: ParsedArguments
    let application: ApplicationCode

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        application = try Common.applicationCode(arguments.value("--application")!)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let wiring = try wiring(arguments)
        do {
            switch arguments.value("--platform") ?? "ios" {
            case "ios": break
            case "android":
                for option in ["--ios", "--attributes-type", "--locked", "--frequent-updates"] where arguments.value(option) != nil || arguments.flag(option) {
                    throw CLIError.usage("\(option) is for iPhones; an Android phone takes --android")
                }
                let device = try wiring.addAndroidDevice(application: application, hwid: arguments.value("--hwid")!,
                                                         androidVersion: arguments.value("--android") ?? "16")
                if arguments.flag("--json") {
                    Common.printJSON(device.json(now: Date(), withLog: false), context)
                } else {
                    context.print("Added simulated Android phone \(device.hwid) (Android \(device.iosVersion)) to \(application); FCM token \(device.pushToken)")
                }
                return 0
            case let other:
                throw CLIError.usage("--platform: must be ios or android, got '\(other)'")
            }
            if arguments.value("--android") != nil { throw CLIError.usage("--android is for Android phones (--platform android)") }
            _ = try wiring.signingKey(for: application)   // a simulated application signs with a key made for it
            let device = try wiring.addDevice(application: application, hwid: arguments.value("--hwid")!,
                                              iosVersion: arguments.value("--ios") ?? "17.4", locked: arguments.flag("--locked"),
                                              attributesTypes: arguments.value("--attributes-type").map { [$0] } ?? [],
                                              frequentUpdates: arguments.flag("--frequent-updates") ? true : nil)
            if arguments.flag("--json") {
                Common.printJSON(device.json(now: Date(), withLog: false), context)
            } else {
                context.print("Added simulated iPhone \(device.hwid) (iOS \(device.iosVersion)) to \(application); push token \(device.pushToken)")
            }
            return 0
        } catch let error as APIError {
            throw CLIError.failure(error.message)
        }
    }
}

struct SimulatorDeviceSetCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set", abstract: "Lock, unlock or uninstall the app on a simulated iPhone.",
        arguments: [ArgumentSpec(name: "hwid", help: "The device's HWID.")],
        options: [
            OptionSpec(name: "--application", valueName: "code", help: "The application it runs.", required: true),
            OptionSpec(name: "--state", valueName: "locked|unlocked|uninstalled", help: "What to make it.", required: true),
            Common.database,
        ])

    let arguments: ParsedArguments
    let application: ApplicationCode
    let state: SimulatedDevice.Setting

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        application = try Common.applicationCode(arguments.value("--application")!)
        let text = arguments.value("--state")!
        guard let state = SimulatedDevice.Setting(rawValue: text) else {
            throw CLIError.usage("--state: '\(text)' is not one of locked, unlocked, uninstalled")
        }
        self.state = state
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let wiring = try wiring(arguments)
        let hwid = arguments.argument(0)
        let found: Void? = try APNsSimulator.withDevice(wiring.simulated, application, hwid) { device in device.apply(state, now: Date()) }
        guard found != nil else { throw CLIError.failure("no simulated device '\(hwid)' in \(application)") }
        context.print("\(hwid) is now \(state.rawValue).")
        return 0
    }
}

struct SimulatorShowCommand: CLICommand {
    static let spec = CommandSpec(
        name: "show", abstract: "Show a simulated iPhone's lock screen and the pushes it received.",
        arguments: [ArgumentSpec(name: "hwid", help: "The device's HWID.")],
        options: [Common.database, Common.json])

    let arguments: ParsedArguments
    init(_ arguments: ParsedArguments, context: CLIContext) throws { self.arguments = arguments }

    func run(_ context: CLIContext) throws -> Int32 {
        let hwid = arguments.argument(0)
        guard let device = try wiring(arguments).allDevices().first(where: { $0.hwid == hwid }) else {
            throw CLIError.failure("no simulated device '\(hwid)'")
        }
        let now = Date()
        if arguments.flag("--json") {
            Common.printJSON(device.json(now: now, withLog: true), context)
            return 0
        }
        context.print("\(device.hwid) — iOS \(device.iosVersion), \(device.locked ? "locked" : "unlocked")\(device.uninstalledAt != nil ? ", app uninstalled" : "")")
        let screen = device.lockScreen(now: now).arrayValue ?? []
        context.print(screen.isEmpty ? "Lock screen: empty" : "Lock screen:")
        for card in screen.compactMap(\.objectValue) {
            var flags: [String] = []
            if card["ended"] == true { flags.append("ended") }
            if card["stale"] == true { flags.append("stale") }
            if card["waiting_for_unlock"] == true { flags.append("update waiting for unlock") }
            context.print("  [\(card["activity_id"]?.stringValue ?? "")] \(card["content_state"]?.jsonText ?? "")\(flags.isEmpty ? "" : "  (\(flags.joined(separator: ", ")))")")
        }
        for alert in device.alerts.suffix(5) { context.print("Notification: \(alert)") }
        context.print("Pushes received: \(device.log.count)")
        for push in device.log.suffix(10) {
            let at = Date(timeIntervalSince1970: push.at).formatted(.iso8601)
            context.print("  \(at) \(push.pushType) \(push.event ?? "-") priority \(push.priority)\(push.dropped.map { " — dropped: \($0)" } ?? "")")
        }
        return 0
    }
}
