import Foundation

/// The one shape of Islet's long-lived parts (delivery, retention, the console's events): started once, and
/// stopped by a deadline that every wait inside honours (docs/ARCHITECTURE.md, "Lifecycle").
public protocol Service: AnyObject, Sendable {
    func start() throws
    /// Stops the service; true when everything it runs had ended by `deadline`.
    @discardableResult
    func shutdown(deadline: ContinuousClock.Instant) -> Bool
}

/// The threads of one service: started by name, counted while they run, and waited for by a deadline without
/// polling. A service stops the same way each time: it raises its own stop flag, wakes its threads, and calls
/// `waitForExit(by:)`.
///
/// `@unchecked Sendable`: `running` is only touched under `condition`.
public final class ServiceThreads: @unchecked Sendable {
    private let condition = NSCondition()
    private var running = 0

    public init() {}

    /// Starts `body` on a thread named `name` (as `top` and `perf` show it).
    public func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        condition.lock()
        running += 1
        condition.unlock()
        let thread = Thread { [self] in
            nameCurrentThread(name)
            body()
            condition.lock()
            running -= 1
            if running == 0 { condition.broadcast() }
            condition.unlock()
        }
        thread.start()
    }

    /// Threads still running.
    public var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// Waits until every thread has ended or `deadline` passes; true when all have ended.
    @discardableResult
    public func waitForExit(by deadline: ContinuousClock.Instant) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return condition.wait(while: { running > 0 }, until: deadline)
    }
}
