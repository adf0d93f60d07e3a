import Foundation

// `islet-bench devices [--count N] [--database PATH]`: see BENCHMARKS.md.
var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.first == "devices" else {
    FileHandle.standardError.write(Data("usage: islet-bench devices [--count N] [--database PATH]\n".utf8))
    exit(64)
}
arguments.removeFirst()
var count = 1_000_000
var path = "var/bench-devices.sqlite"
while let option = arguments.first {
    arguments.removeFirst()
    guard let value = arguments.first else { break }
    arguments.removeFirst()
    switch option {
    case "--count": count = Int(value) ?? count
    case "--database": path = value
    default:
        FileHandle.standardError.write(Data("islet-bench: unknown option \(option)\n".utf8))
        exit(64)
    }
}
do {
    try DeviceBenchmark(count: count, path: path).run()
} catch {
    FileHandle.standardError.write(Data("islet-bench: \(error)\n".utf8))
    exit(1)
}
