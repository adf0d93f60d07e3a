import Foundation
import IsletCore

/// A fixed set of threads for handlers that wait (a durable commit, a database across the network), so the
/// few connection threads keep serving other requests meanwhile, and enough requests wait at once for
/// group commit to share one sync among them.
final class WorkerPool: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var stopping = false
    private var running = 0

    let size: Int
    private let name: String

    init(threads: Int, name: String) {
        precondition(threads > 0, "a worker pool needs at least one thread")
        self.size = threads
        self.name = name
    }

    /// Starts the threads; idle, they sleep on a condition and use no CPU.
    func start() {
        condition.lock()
        defer { condition.unlock() }
        precondition(running == 0 && !stopping, "a worker pool starts once")
        for index in 0..<size {
            let thread = Thread { [self] in
                // Named through the kernel (15 characters kept), for ps and perf; Foundation's Thread.name
                // may not reach the kernel when the thread runs before its creator recorded it.
                try? "\(name)-\(index)".write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
                work()
            }
            thread.stackSize = 512 << 10
            running += 1
            thread.start()
        }
    }

    /// Queues `job`; false once the pool is stopping (the caller answers by itself).
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Stops taking jobs, lets queued and running ones finish until `deadline`, and reports whether every
    /// thread has ended. A job still running at the deadline keeps its thread until it returns.
    @discardableResult
    func shutdown(deadline: ContinuousClock.Instant) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        stopping = true
        condition.broadcast()
        return condition.wait(while: { running > 0 }, until: deadline)
    }

    private func work() {
        condition.lock()
        while true {
            if head < jobs.count {
                let job = jobs[head]
                head += 1
                // Taken jobs (and the requests they hold) go once the queue empties, or once they are most of it
                // under a load that never lets it empty.
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 64 && head * 2 >= jobs.count {
                    jobs.removeFirst(head)
                    head = 0
                }
                condition.unlock()
                job()
                condition.lock()
            } else if stopping {
                break
            } else {
                condition.wait()
            }
        }
        running -= 1
        condition.broadcast()
        condition.unlock()
    }
}
