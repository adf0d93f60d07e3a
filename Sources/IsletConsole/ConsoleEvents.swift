import Foundation
import IsletCore
import IsletHTTP
import IsletStore
import Synchronization

/// Tells open console pages, over Server-Sent Events, when an application's activities or messages change, so
/// lists and lock screens refresh themselves (issue 17). Changes are read from the database, so a page sees
/// what any node accepted or delivered; the database is read only while some page listens.
/// Lifecycle: `start()`, then `shutdown(deadline:)`, which every wait honours.
public final class ConsoleEvents: Sendable {
    let store: any ConsoleStore
    let logger: Logger
    let now: @Sendable () -> Date
    let interval: Duration
    let heartbeat: Duration

    private struct Subscriber {
        let application: ApplicationCode
        let stream: HTTPEventStream
    }
    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        var stopping = false
        var running = false
        /// The newest message seen, and when changes were last read; nil while nobody listens.
        var lastMessage: Int64?
        var lastLook = Date.distantPast
        var lastHeartbeat = ContinuousClock.now
    }
    private let state = Mutex(State())
    private let condition = NSCondition()

    public init(store: any ConsoleStore, logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
                interval: Duration = .seconds(1), heartbeat: Duration = .seconds(15)) {
        self.store = store
        self.logger = logger
        self.now = now
        self.interval = interval
        self.heartbeat = heartbeat
    }

    /// Pages listening now.
    public var listeners: Int { state.withLock { $0.subscribers.count } }

    /// Adds a page listening for `application`'s changes; it hears `ready` at once, then `change` events.
    public func subscribe(_ stream: HTTPEventStream, application: ApplicationCode) {
        // Browsers reconnect by themselves after `retry` milliseconds if the stream ends (a restart, a proxy timeout).
        stream.send("retry: 3000\nevent: ready\ndata: {\"application\":\"\(application.rawValue)\"}\n\n")
        let id = state.withLock { state -> UInt64? in
            guard !state.stopping else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = Subscriber(application: application, stream: stream)
            return state.nextID
        }
        guard let id else { return stream.finish() }
        stream.onClose { [weak self] in self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
    }

    public func start() {
        state.withLock { $0.running = true }
        let thread = Thread { [self] in
            defer { state.withLock { $0.running = false } }
            while !state.withLock({ $0.stopping }) {
                look()
                wait(interval)
            }
        }
        thread.name = "islet-console-events"
        thread.start()
    }

    /// One look at the database: a `change` event to each page whose application changed since the last look,
    /// and a comment line now and then, which keeps proxies from closing an idle stream and finds gone clients.
    public func look() {
        let listening = state.withLock { state -> [Subscriber] in
            if state.subscribers.isEmpty { state.lastMessage = nil }
            return Array(state.subscribers.values)
        }
        guard !listening.isEmpty else { return }
        let lookedAt = now()
        let (last, since) = state.withLock { ($0.lastMessage, $0.lastLook) }
        do {
            // The first look only finds where the messages stand: pages fetched their data when they subscribed.
            let changes = try store.consoleChanges(afterMessage: last ?? Int64.max, finishedSince: last == nil ? lookedAt : since.addingTimeInterval(-1))
            state.withLock {
                $0.lastMessage = changes.lastMessage
                $0.lastLook = lookedAt
            }
            for subscriber in listening where changes.applications.contains(subscriber.application) {
                subscriber.stream.send("event: change\ndata: {\"application\":\"\(subscriber.application.rawValue)\"}\n\n")
            }
        } catch {
            logger.warning("console: could not read changes; trying again", ["error": .string("\(error)")])
        }
        let beat = state.withLock { state -> Bool in
            guard ContinuousClock.now - state.lastHeartbeat >= heartbeat else { return false }
            state.lastHeartbeat = ContinuousClock.now
            return true
        }
        if beat { for subscriber in listening { subscriber.stream.send(": keep-alive\n\n") } }
    }

    /// Stops looking and ends every open stream; true when the thread ended by `deadline`.
    @discardableResult
    public func shutdown(deadline: ContinuousClock.Instant = .now + .seconds(5)) -> Bool {
        condition.lock()
        let open = state.withLock { state -> [Subscriber] in
            state.stopping = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        condition.broadcast()
        condition.unlock()
        for subscriber in open { subscriber.stream.finish() }
        while state.withLock({ $0.running }) && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.005) }
        return !state.withLock { $0.running }
    }

    private func wait(_ duration: Duration) {
        let until = Date().addingTimeInterval(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while !state.withLock({ $0.stopping }) && Date() < until { _ = condition.wait(until: until) }
    }
}
