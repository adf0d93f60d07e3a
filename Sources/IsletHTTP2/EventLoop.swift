import CEpoll
import Foundation
import Synchronization

/// Something an event loop calls when its file descriptor is ready.
protocol LoopHandler: AnyObject {
    func ready(_ events: UInt32)
}

/// One thread running epoll: sockets, timers, and tasks handed over from other threads.
///
/// `@unchecked Sendable`: `handlers` and `timers` are touched only on the loop's own thread; other
/// threads reach the loop through `execute`, whose queue is behind a mutex.
public final class EventLoop: @unchecked Sendable {
    private let epoll: Int32
    private let wake: Int32
    private let queue = Mutex<[@Sendable () -> Void]>([])
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private var handlers: [Int32: any LoopHandler] = [:]
    private var timers: [(deadline: ContinuousClock.Instant, id: Int, body: () -> Void)] = []
    private var nextTimer = 0
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
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    deinit { readBuffer.deallocate() }

    /// Runs `task` on the loop thread, soon.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        queue.withLock { $0.append(task) }
        islet_eventfd_signal(wake)
    }

    /// Stops the loop after its current turn and waits for the thread to end.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        islet_eventfd_signal(wake)
        finished.wait()
        close(epoll)
        close(wake)
    }

    // MARK: Loop thread only (timers are public for loop-confined users such as connection pools)

    func register(_ fd: Int32, events: UInt32, handler: any LoopHandler) {
        handlers[fd] = handler
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_ADD), fd, events)
    }

    func modify(_ fd: Int32, events: UInt32) {
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_MOD), fd, events)
    }

    func unregister(_ fd: Int32) {
        handlers[fd] = nil
        _ = islet_epoll_ctl(epoll, Int32(ISLET_EPOLL_DEL), fd, 0)
    }

    /// Runs `body` on the loop thread after `delay`; returns an id for `cancelTimer`.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> Int {
        nextTimer += 1
        let deadline = ContinuousClock.now + delay
        let index = timers.firstIndex { $0.deadline > deadline } ?? timers.endIndex
        timers.insert((deadline, nextTimer, body), at: index)
        return nextTimer
    }

    /// Runs `body` on the loop thread at the end of the current turn, after its events, tasks and
    /// timers: what a turn submits to a connection goes out together (one TLS record, one write).
    public func atEndOfTurn(_ body: @escaping () -> Void) {
        endOfTurn.append(body)
    }

    public func cancelTimer(_ id: Int) {
        timers.removeAll { $0.id == id }
    }

    private func run() {
        var fds = [Int32](repeating: 0, count: 256)
        var events = [UInt32](repeating: 0, count: 256)
        while !stopping.load(ordering: .acquiring) {
            var timeout: Int32 = 1000
            if let first = timers.first {
                let wait = first.deadline - ContinuousClock.now
                let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
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
            while let first = timers.first, first.deadline <= now {
                timers.removeFirst()
                first.body()
            }
            while !endOfTurn.isEmpty {
                let work = endOfTurn
                endOfTurn = []
                for body in work { body() }
            }
        }
        for handler in handlers.values { (handler as? H2Connection)?.close(reason: "event loop stopped") }
        (handlers.values.compactMap { $0 as? H2Listener }).forEach { $0.close() }
        endOfTurn = []
        finished.signal()
    }
}
