import Foundation
import IsletCore

// `islet-bench devices [--count N] [--database PATH]` and
// `islet-bench apns [--pushes N] [--batch N] [--senders N] [--sink-threads N] [--h2load-requests N] [--aioapns-pushes N] [--python PATH]`:
// `islet-bench e2e [--devices N] [--clients N]`, `islet-bench register --database PATH|URL[,PATH|URL…] [--devices N] [--clients N]`:
// see BENCHMARKS.md. `islet-bench apns-sink` is the sink `apns` starts as its child.
let usage = """
    usage: islet-bench devices [--count N] [--database PATH|URL] [--tokens varied|shared-prefix] [--reuse yes]
           islet-bench apns [--pushes N] [--batch N] [--senders N] [--sink-threads N] [--h2load-requests N] [--aioapns-pushes N] [--python PATH]
           islet-bench e2e [--devices N] [--clients N] [--probes N] [--platform ios|android]
           islet-bench register --database PATH|URL[,PATH|URL...] [--devices N] [--clients N] [--threads N]
           islet-bench updates [--activities N] [--clients N] [--seconds N] [--rate N] [--history N] [--event update|start] [--database PATH|URL] [--nodes N [--rotate-nodes yes]]
           islet-bench cluster [--devices N] [--nodes N,N...] [--database URL]

    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data(message.utf8))
    exit(code)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first, ["devices", "apns", "apns-sink", "e2e", "register", "updates", "cluster"].contains(command) else { fail(usage, code: 64) }
arguments.removeFirst()
var options: [String: String] = [:]
while let option = arguments.first {
    arguments.removeFirst()
    guard option.hasPrefix("--"), let value = arguments.first else { fail("islet-bench: \(option) needs a value\n" + usage, code: 64) }
    arguments.removeFirst()
    options[option] = value
}

/// Takes an option out of `options`; what is left at the end is unknown.
@MainActor func take(_ name: String) -> String? { options.removeValue(forKey: name) }
@MainActor func number(_ name: String, _ fallback: Int) -> Int {
    guard let text = take(name) else { return fallback }
    guard let value = Int(text.replacingOccurrences(of: "_", with: "")), value > 0 else { fail("islet-bench: \(name) wants a positive number\n", code: 64) }
    return value
}

do {
    switch command {
    case "devices":
        var benchmark = DeviceBenchmark(count: number("--count", 1_000_000), path: take("--database") ?? "var/bench-devices.sqlite")
        if let shape = take("--tokens") {
            guard shape == "varied" || shape == "shared-prefix" else { fail("islet-bench: --tokens is varied or shared-prefix\n", code: 64) }
            benchmark.sharedPrefix = shape == "shared-prefix"
        }
        if let reuse = take("--reuse") { benchmark.reuse = reuse == "yes" }
        if let unknown = options.keys.first { fail("islet-bench: unknown option \(unknown)\n" + usage, code: 64) }
        try benchmark.run()
    case "apns":
        var benchmark = APNsBenchmark()
        benchmark.pushes = number("--pushes", benchmark.pushes)
        benchmark.batch = number("--batch", benchmark.batch)
        benchmark.senders = number("--senders", benchmark.senders)
        benchmark.sinkThreads = number("--sink-threads", benchmark.sinkThreads)
        if options["--h2load-requests"] != nil { benchmark.h2loadRequests = number("--h2load-requests", benchmark.pushes) }
        benchmark.aioapnsPushes = number("--aioapns-pushes", benchmark.aioapnsPushes)
        benchmark.python = take("--python") ?? benchmark.python
        if let unknown = options.keys.first { fail("islet-bench: unknown option \(unknown)\n" + usage, code: 64) }
        try benchmark.run()
    case "e2e":
        var benchmark = EndToEndBenchmark()
        benchmark.devices = number("--devices", benchmark.devices)
        benchmark.clients = number("--clients", benchmark.clients)
        benchmark.probes = number("--probes", benchmark.probes)
        switch take("--platform") ?? "ios" {
        case "ios": benchmark.android = false
        case "android": benchmark.android = true
        case let other: fail("islet-bench: --platform must be ios or android, got \(other)\n" + usage, code: 64)
        }
        if let unknown = options.keys.first { fail("islet-bench: unknown option \(unknown)\n" + usage, code: 64) }
        try benchmark.run()
    case "register":
        var benchmark = RegisterBenchmark()
        benchmark.databases = (take("--database") ?? "var/bench-register.sqlite").split(separator: ",").map(String.init)
        benchmark.devices = number("--devices", benchmark.devices)
        benchmark.clients = number("--clients", benchmark.clients)
        if options["--threads"] != nil { benchmark.threads = number("--threads", 16) }
        if let unknown = options.keys.first { fail("islet-bench: unknown option \(unknown)\n" + usage, code: 64) }
        try benchmark.run()
    case "updates":
        var benchmark = UpdatesBenchmark()
        benchmark.activities = number("--activities", benchmark.activities)
        benchmark.clients = number("--clients", benchmark.clients)
        benchmark.seconds = number("--seconds", benchmark.seconds)
        if options["--rate"] != nil { benchmark.rate = number("--rate", 1) }
        benchmark.database = take("--database")
        if options["--nodes"] != nil { benchmark.nodes = number("--nodes", 1) }
        if let rotate = take("--rotate-nodes") {
            guard rotate == "yes" || rotate == "no" else { fail("islet-bench: --rotate-nodes is yes or no\n", code: 64) }
            benchmark.rotateNodes = rotate == "yes"
        }
        guard benchmark.nodes == 1 || benchmark.database.map({ $0.hasPrefix("postgres") }) == true else {
            fail("islet-bench: --nodes above 1 needs a PostgreSQL --database\n", code: 64)
        }
        if options["--history"] != nil { benchmark.history = number("--history", 1) }
        if let event = take("--event") {
            guard let chosen = LiveActivityEvent(rawValue: event), chosen != .end else { fail("islet-bench: --event is update or start\n", code: 64) }
            benchmark.event = chosen
        }
        if let unknown = options.keys.first { fail("islet-bench: unknown option \(unknown)\n" + usage, code: 64) }
        try benchmark.run()
    case "cluster":
        var benchmark = ClusterBenchmark()
        benchmark.devices = number("--devices", benchmark.devices)
        if let nodes = take("--nodes") {
            let counts = nodes.split(separator: ",").compactMap { Int($0) }
            guard !counts.isEmpty, counts.allSatisfy({ (1...16).contains($0) }) else { fail("islet-bench: --nodes wants counts from 1 to 16, like 1,3\n", code: 64) }
            benchmark.nodeCounts = counts
        }
        benchmark.url = take("--database")
        if let unknown = options.keys.first { fail("islet-bench: unknown option \(unknown)\n" + usage, code: 64) }
        try benchmark.run()
    default:
        let threads = number("--threads", 1)
        guard let certificate = take("--certificate"), let key = take("--key") else { fail("islet-bench apns-sink: --certificate and --key\n", code: 64) }
        try APNsBenchmark.runSink(threads: threads, certificate: certificate, key: key)
    }
} catch {
    fail("islet-bench: \(error)\n", code: 1)
}
