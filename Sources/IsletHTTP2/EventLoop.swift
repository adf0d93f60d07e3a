import CEpoll
import Foundation
import Synchronization

/// Something an event loop calls when its file descriptor is ready.
protocol LoopHandler: AnyObject {
    func ready(_ events: UInt32)
}

/// One thread running epoll: sockets, timers, and tasks handed over from other threads.
///
/// `@unchecked Sendable`: `handlers` and `timers` are touched only on the loop's own thread (asserted
/// with `preconditionInLoop` in debug builds); other threads reach the loop through `execute`, whose
/// queue is behind a mutex.
public final class EventLoop: @unchecked Sendable {
    private let epoll: Int32
    private let wake: Int32
    private let queue = Mutex<[@Sendable () -> Void]>([])
    /// Set, under its lock, as `stop` closes the wake-up descriptor: a task handed over later (a thread of another
    /// part finishing after the loop stopped) must not signal a descriptor number the process may have reused.
    private let closed = Mutex(false)
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private var handlers: [Int32: any LoopHandler] = [:]
    private var timers = TimerHeap()
    /// The loop's thread, set before the thread runs anything.
    private let thread = Mutex<pthread_t?>(nil)
    /// Work to run once the current turn's events, tasks and timers are handled (loop thread only).
    private var endOfTurn: [() -> Void] = []
    /// Where the loop's connections read TLS records into, one read at a time (nghttp2 consumes the
    /// bytes before the read returns); loop thread only.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 16)
    /// A connection of this loop is reading into `readBuffer` (nghttp2 callbacks may be running).
    var receiving = false
    private let name: String

    public init(name: String) {
        // A peer that closes while we write must be an error return, not a process-killing SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        self.name = name
        epoll = islet_epoll_create()
        wake = islet_eventfd()
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_ADD), wake, UInt32(ISLET_EPOLLIN))
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            // Named through the kernel (15 bytes kept), for ps and perf: Foundation's Thread.name does not reach it.
            try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            self.thread.withLock { $0 = pthread_self() }
            started.signal()
            run()
        }
        thread.start()
        started.wait()
    }

    deinit { readBuffer.deallocate() }

    /// Runs `task` on the loop thread, soon.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        queue.withLock { $0.append(task) }
        closed.withLock { closed in
            if !closed { islet_eventfd_signal(wake) }
        }
    }

    /// `stop` was called: tasks handed over now may never run.
    public var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// True on the loop's own thread.
    public var inLoop: Bool {
        guard let loopThread = thread.withLock({ $0 }) else { return false }
        return pthread_equal(loopThread, pthread_self()) != 0
    }

    /// Traps in debug builds when called off the loop's thread: loop-confined state must never be
    /// touched from elsewhere (the check swift-nio's `preconditionInEventLoop` makes).
    @inline(__always)
    public func preconditionInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "\(name): called off its event loop thread", file: file, line: line)
    }

    /// Stops the loop after its current turn and waits, until `deadline`, for the thread to end.
    /// Returns false when the thread was still busy at the deadline (its resources are then left open).
    @discardableResult
    public func stop(deadline: ContinuousClock.Instant = .now + .seconds(10)) -> Bool {
        precondition(!inLoop, "an event loop cannot wait for itself to stop")
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return true }
        islet_eventfd_signal(wake)
        guard Self.wait(finished, until: deadline) else { return false }
        closed.withLock { closed in
            closed = true
            close(epoll)
            close(wake)
        }
        return true
    }

    /// Runs `body` on the loop and waits for its result until `deadline`; nil if the loop did not get to it.
    public func submitAndWait<T: Sendable>(deadline: ContinuousClock.Instant = .now + .seconds(5), _ body: @escaping @Sendable () -> T) -> T? {
        if inLoop { return body() }
        guard !stopping.load(ordering: .acquiring) else { return nil }
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        execute {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard Self.wait(done, until: deadline) else { return nil }
        return result.withLock { $0 }
    }

    /// Waits for `semaphore` until `deadline` on the continuous clock; false when the deadline came first.
    private static func wait(_ semaphore: DispatchSemaphore, until deadline: ContinuousClock.Instant) -> Bool {
        let remaining = deadline - .now
        let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
        return semaphore.wait(timeout: .now() + max(0, seconds)) == .success
    }

    /// Timers waiting to fire (loop thread only): stays small on an idle loop.
    public var scheduledTimers: Int {
        preconditionInLoop()
        return timers.count
    }

    // MARK: Loop thread only (timers are public for loop-confined users such as connection pools)

    func register(_ fd: Int32, events: UInt32, handler: any LoopHandler) {
        preconditionInLoop()
        handlers[fd] = handler
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_ADD), fd, events)
    }

    func modify(_ fd: Int32, events: UInt32) {
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_MOD), fd, events)
    }

    func unregister(_ fd: Int32) {
        preconditionInLoop()
        handlers[fd] = nil
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_DEL), fd, 0)
    }

    /// Runs `body` on the loop thread after `delay`; returns an id for `cancelTimer`.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> Int {
        preconditionInLoop()
        return timers.add(ContinuousClock.now + delay, body)
    }

    /// Runs `body` on the loop thread at the end of the current turn, after its events, tasks and
    /// timers: what a turn submits to a connection goes out together (one TLS record, one write).
    public func atEndOfTurn(_ body: @escaping () -> Void) {
        preconditionInLoop()
        endOfTurn.append(body)
    }

    public func cancelTimer(_ id: Int) {
        preconditionInLoop()
        timers.cancel(id)
    }

    private func run() {
        var fds = [Int32](repeating: 0, count: 256)
        var events = [UInt32](repeating: 0, count: 256)
        while !stopping.load(ordering: .acquiring) {
            var timeout: Int32 = 1000
            if let first = timers.nextDeadline() {
                let wait = first - ContinuousClock.now
                // Rounded up: a timer less than a millisecond away must not make the wait 0 and the loop spin.
                let milliseconds = wait.components.seconds * 1000 + (wait.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
                timeout = Int32(max(0, min(1000, milliseconds)))
            }
            let count = islet_epoll_wait(epoll, &fds, &events, 256, timeout)
            for index in 0..<max(0, Int(count)) {
                if fds[index] == wake {
                    islet_eventfd_drain(wake)
                } else {
                    handlers[fds[index]]?.ready(events[index])
                }
            }
            for task in queue.withLock({ tasks -> [@Sendable () -> Void] in defer { tasks = [] }; return tasks }) { task() }
            let now = ContinuousClock.now
            // Only timers due at the start of this pass: one that re-arms itself with no delay waits a turn.
            while let body = timers.popDue(now) { body() }
            while !endOfTurn.isEmpty {
                let work = endOfTurn
                endOfTurn = []
                for body in work { body() }
            }
        }
        for handler in handlers.values { (handler as? H2Connection)?.close(reason: "event loop stopped") }
        (handlers.values.compactMap { $0 as? H2Listener }).forEach { $0.close() }
        endOfTurn = []
        timers.removeAll()
        finished.signal()
    }
}
