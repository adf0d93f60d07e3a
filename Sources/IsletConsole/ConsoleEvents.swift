import Foundation
import IsletAPI
import IsletCore
import IsletHTTP
import IsletStore
import Synchronization

/// Tells open console pages, over Server-Sent Events, when an application's activities or messages change, so
/// lists and lock screens refresh themselves (issue 17). Changes are read from the database, so a page sees
/// what any node accepted or delivered; the database is read only while some page listens.
/// Lifecycle: `start()`, then `shutdown(deadline:)`, which every wait honours.
public final class ConsoleEvents: Service {
    let store: any ConsoleStore
    let logger: Logger
    let now: @Sendable () -> Date
    let interval: Duration
    let heartbeat: Duration

    /// Messages are read again this far below the highest id seen: on PostgreSQL a transaction that took a
    /// lower id can commit after one that took a higher id.
    static let idLookback: Int64 = 256

    private struct Subscriber {
        let application: ApplicationCode
        /// The console session it listens for (the hash of its id, as stored).
        let session: [UInt8]
        let stream: HTTPEventStream
        /// Whether the page's session is still signed in (checked at each heartbeat).
        let signedIn: @Sendable () -> Bool
    }
    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        var stopping = false
        /// The highest message id seen; nil while nobody listens (the next look starts from where things stand).
        var highest: Int64?
        /// Messages already reported, created (above `highest - idLookback`) or finished (forgotten after a minute).
        var seenCreated: Set<Int64> = []
        var seenFinished: [Int64: Date] = [:]
        /// Messages seen unfinished, asked about at the next look; nil before the first.
        var open: [Int64]?
        var lastHeartbeat = ContinuousClock.now
    }
    private let state = Mutex(State())
    private let threads = ServiceThreads()
    private let condition = NSCondition()
    /// One reading of changes at a time (the look thread, and a page subscribing when nobody listened).
    private let reading = Mutex(())

    /// Streams open at once for one session (its tabs), and for one application (all its sessions): each holds one of
    /// the server's connections for as long as it is open.
    public let perSession: Int
    public let perApplication: Int

    public init(store: any ConsoleStore, logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
                interval: Duration = .seconds(1), heartbeat: Duration = .seconds(15), perSession: Int = 8, perApplication: Int = 64) {
        self.perSession = perSession
        self.perApplication = perApplication
        self.store = store
        self.logger = logger
        self.now = now
        self.interval = interval
        self.heartbeat = heartbeat
    }

    /// Pages listening now.
    public var listeners: Int { state.withLock { $0.subscribers.count } }

    /// Adds a page listening for `application`'s changes; it hears `ready` at once, then `change` events, until
    /// it goes, the server stops, or `signedIn` says its session ended.
    /// Refused (429 with `Retry-After`) when the session, or the application, has as many streams open as it may.
    public func subscribe(_ stream: HTTPEventStream, application: ApplicationCode, session: [UInt8],
                          signedIn: @escaping @Sendable () -> Bool) throws(RateLimited) {
        let admitted = state.withLock { state -> Result<UInt64?, RateLimited> in
            guard !state.stopping else { return .success(nil) }
            let open = state.subscribers.values
            if open.count(where: { $0.session == session }) >= perSession {
                return .failure(RateLimited(message: ConsoleCredentials.tooManyStreams(perSession, of: "this session"), retryAfter: 5))
            }
            if open.count(where: { $0.application == application }) >= perApplication {
                return .failure(RateLimited(message: ConsoleCredentials.tooManyStreams(perApplication, of: "application \(application.rawValue)"), retryAfter: 5))
            }
            state.nextID += 1
            state.subscribers[state.nextID] = Subscriber(application: application, session: session, stream: stream, signedIn: signedIn)
            return .success(state.nextID)
        }
        let id = try admitted.get()
        // Browsers reconnect by themselves after `retry` milliseconds if the stream ends (a restart, a proxy timeout).
        stream.send("retry: 3000\nevent: ready\ndata: {\"application\":\"\(application.rawValue)\"}\n\n")
        guard let id else { return stream.finish() }
        stream.onClose { [weak self] in self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        // Where things stand now: the page fetched its data just before, so whatever comes after is news to it.
        if state.withLock({ $0.highest == nil }) {
            do { _ = try changedApplications(at: now()) } catch { logger.warning("console: could not read changes", ["error": .string("\(error)")]) }
        }
    }

    public func start() {
        threads.start("islet-console") { [self] in
            while !state.withLock({ $0.stopping }) {
                look()
                wait(interval)
            }
        }
    }

    /// One look at the database: a `change` event to each page whose application changed since the last look,
    /// and now and then a comment line (which keeps proxies from closing an idle stream and finds gone clients)
    /// and a check that each page is still signed in.
    public func look() {
        let listening = state.withLock { state -> [Subscriber] in
            if state.subscribers.isEmpty { state.highest = nil }
            return Array(state.subscribers.values)
        }
        guard !listening.isEmpty else { return }
        do {
            let changed = try changedApplications(at: now())
            for subscriber in listening where changed.contains(subscriber.application) {
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
        guard beat else { return }
        for subscriber in listening {
            if subscriber.signedIn() { subscriber.stream.send(": keep-alive\n\n") } else { subscriber.stream.finish() }
        }
    }

    /// The applications with a message created or finished since the last look; the first look after nobody
    /// listened (done when a page subscribes) only finds where things stand.
    func changedApplications(at date: Date) throws -> Set<ApplicationCode> {
        try reading.withLock { _ throws in try readChanges(at: date) }
    }

    private func readChanges(at date: Date) throws -> Set<ApplicationCode> {
        let (highest, open) = state.withLock { ($0.highest, $0.open) }
        let baseline = highest == nil
        let floor = try highest ?? store.lastMessageID()
        let changes = try store.consoleChanges(afterMessage: max(0, floor - Self.idLookback), open: baseline ? nil : open ?? [])
        return state.withLock { state in
            var changed: Set<ApplicationCode> = []
            for message in changes.created where !state.seenCreated.contains(message.id) {
                state.seenCreated.insert(message.id)
                changed.insert(message.application)
            }
            for message in changes.finished where state.seenFinished[message.id] == nil {
                state.seenFinished[message.id] = date
                changed.insert(message.application)
            }
            let top = max(floor, changes.created.last?.id ?? floor)
            state.highest = top
            state.seenCreated = state.seenCreated.filter { $0 > top - Self.idLookback }
            state.seenFinished = state.seenFinished.filter { date.timeIntervalSince($0.value) <= 60 }
            state.open = changes.open
            return baseline ? [] : changed
        }
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
        return threads.waitForExit(by: deadline)
    }

    private func wait(_ duration: Duration) {
        let until = Date().addingTimeInterval(duration.timeInterval)
        condition.lock()
        defer { condition.unlock() }
        while !state.withLock({ $0.stopping }) && Date() < until { _ = condition.wait(until: until) }
    }
}
