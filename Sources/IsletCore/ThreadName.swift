import Foundation

/// Names the calling thread for `ps`, `top -H`, perf and gdb, through the kernel, which keeps 15 bytes. On Linux,
/// Foundation's `Thread.name` set before `start()` never reaches the kernel, and `Thread.current.name` reads the kernel's.
public func nameCurrentThread(_ name: String) {
    try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
}
