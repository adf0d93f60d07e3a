import Foundation
import IsletCore
import IsletDelivery
import IsletHTTP2

/// The connections to one APNs endpoint for one (application, environment), with the pushes waiting
/// for a stream. Apple's rules (A6): one stream per connection until a request with a valid token
/// succeeded, then up to the server's SETTINGS_MAX_CONCURRENT_STREAMS (capped).
///
/// A push is sent again only when APNs provably did not process it (REFUSED_STREAM, a stream above a
/// GOAWAY's last stream, bytes never written); one whose answer was lost is reported `.unknown` to the
/// caller, who decides. A connection idle for a while is checked with a PING before it carries a push,
/// so a connection that died silently never holds one.
///
/// Loop-confined: every method runs on the client's event loop thread (asserted in debug builds).
final class ConnectionPool: H2ConnectionDelegate {
    final class Member {
        let connection: H2Connection
        /// Streams in flight, with the connection's `bytesGathered` when each was submitted.
        var inFlight: [Int32: (pending: PendingPush, mark: Int)] = [:]
        /// A request with a valid token succeeded on it: it may use the server's full stream limit.
        var trusted = false
        /// No new streams: GOAWAY received, stream ids used up, or closing.
        var draining = false
        /// TLS and HTTP/2 came up; a connection that never did counts as a failed connect.
        var opened = false
        /// A PING is out and unanswered since then.
        var pingSentAt: ContinuousClock.Instant?
        /// When the connect began: TCP and TLS must be done within `connectTimeout`.
        let createdAt = ContinuousClock.now

        init(_ connection: H2Connection) { self.connection = connection }

        /// Some bytes of the stream submitted at `mark` left the process: APNs may have processed it.
        func mayHaveReachedAPNs(_ mark: Int) -> Bool { connection.bytesWritten > mark }
    }

    let name: String
    let host: String
    let port: Int
    unowned let state: ClientState
    private var members: [ObjectIdentifier: Member] = [:]
    /// Pushes waiting for a stream: those of small messages (an update to a few phones, a retry) go before
    /// a fan-out's, which may be thousands deep (head-of-line: an update behind two fan-outs waited ~200 ms).
    private var queue = WaitingPushes()
    private var failedConnects = 0
    private var reconnectTimer: Int?
    /// The one timer of this pool: deadlines, keep-alive PINGs, PING timeouts. Never more than one.
    private var sweepTimer: Int?
    private var lastConnectError = ""
    private var pumpQueued = false
    /// The client is stopping: nothing new is opened or sent.
    private var stopped = false
    /// `authorization` for the provider token in use, built once per token.
    private var authorization = (token: "", header: "")

    init(name: String, host: String, port: Int, state: ClientState) {
        self.name = name
        self.host = host
        self.port = port
        self.state = state
    }

    var configuration: APNsClientConfiguration { state.configuration }
    var connectionCount: Int { members.count }
    var queued: Int { queue.count }
    var inFlight: Int { members.values.reduce(0) { $0 + $1.inFlight.count } }

    func enqueue(_ pending: PendingPush) {
        state.loop.preconditionInLoop()
        queue.add(pending)
        pumpSoon()
    }

    private func capacity(_ member: Member, now: ContinuousClock.Instant) -> Int {
        guard member.connection.isOpen, !member.draining, !needsCheck(member, now: now) else { return 0 }
        let limit = member.trusted ? min(member.connection.peerMaxStreams, configuration.maximumStreams) : 1
        return Int(limit) - member.inFlight.count
    }

    /// Quiet for a while with nothing in flight: prove it alive with a PING before trusting it with a push.
    private func needsCheck(_ member: Member, now: ContinuousClock.Instant) -> Bool {
        member.pingSentAt != nil || (member.inFlight.isEmpty && now - member.connection.lastReceived > configuration.checkAfterIdle)
    }

    /// Pumps once at the end of the loop's turn, for all the pushes enqueued or answered in it.
    private func pumpSoon() {
        guard !pumpQueued else { return }
        pumpQueued = true
        state.loop.atEndOfTurn { [weak self] in
            if let self, self.pumpQueued { self.pump() }
        }
    }

    /// Moves waiting pushes onto streams, checking idle connections and opening new ones as needed.
    private func pump() {
        state.loop.preconditionInLoop()
        pumpQueued = false
        guard !stopped else { return }
        let now = ContinuousClock.now
        for member in members.values where queue.count > 0 {
            if member.connection.isOpen, !member.draining, member.pingSentAt == nil, needsCheck(member, now: now) {
                member.pingSentAt = now
                member.connection.ping()
                continue
            }
            var room = capacity(member, now: now)
            while room > 0, let pending = queue.next() {
                switch submit(pending, on: member) {
                case .submitted: room -= 1
                case .completed: break
                case .connectionFull:
                    // nghttp2 refused a new stream (ids used up, or the session is ending): put it back
                    // first in line and move on to another connection.
                    queue.putBack(pending)
                    member.draining = true
                    if member.inFlight.isEmpty { member.connection.close(reason: "no more streams") }
                    room = 0
                }
            }
        }
        let usable = members.values.filter { !$0.draining && !$0.connection.isClosed }
        let connecting = usable.contains { !$0.connection.isOpen }
        let saturated = usable.allSatisfy { $0.trusted && capacity($0, now: now) == 0 && $0.pingSentAt == nil }
        if queue.count > 0, reconnectTimer == nil, !connecting, usable.count < configuration.connectionsPerPool,
           usable.isEmpty || saturated {
            openConnection()
        }
        armSweep()
    }

    private enum SubmitResult { case submitted, completed, connectionFull }

    private func submit(_ pending: PendingPush, on member: Member) -> SubmitResult {
        if let writeBy = pending.writeBy, ContinuousClock.now >= writeBy {
            pending.complete(.notSent("not written before its sender's claim ran out"))
            return .completed
        }
        // Credentials change while a push waits for a stream (a key replaced, a token expired): not in hand now, it
        // goes back to be parked (or answered), and this connection takes the next.
        guard case .ready(let token) = state.credentials.status(of: pending.push.application) else {
            state.dispatch(pending)
            return .completed
        }
        pending.token = token
        let push = pending.push
        if authorization.token != token { authorization = (token, "bearer \(token)") }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(11)
        headers += [(":method", push.method), (":scheme", "https"), (":path", push.path), (":authority", host),
                    ("authorization", authorization.header)]
        headers += push.headers
        headers.append(("content-length", String(push.payload.count)))
        let mark = member.connection.bytesGathered
        guard let stream = member.connection.submitRequest(H2Message(headers: headers, body: push.payload)) else {
            return .connectionFull
        }
        member.inFlight[stream] = (pending, mark)
        return .submitted
    }

    /// What `h2StreamClosed` reads of a response; APNs' other headers (and a stand-in's `server`, `date`...) are dropped unread.
    static let headersRead = [":status", "retry-after", "apns-channel-id", "apns-unique-id"]

    private func openConnection() {
        do {
            let connection = try H2Connection.connect(loop: state.loop, host: host, port: port, tls: state.tls, delegate: self)
            connection.keptHeaders = Self.headersRead
            members[ObjectIdentifier(connection)] = Member(connection)
        } catch {
            connectFailed("\(error)")
        }
    }

    private func connectFailed(_ reason: String) {
        failedConnects += 1
        lastConnectError = reason
        let first = configuration.reconnectDelays.first, maximum = configuration.reconnectDelays.maximum
        var delay = first * Int(1 << min(failedConnects - 1, 16))
        if delay > maximum { delay = maximum }
        delay = delay * Double.random(in: 0.5...1.0)   // jitter, so many clients do not reconnect in step
        state.logger.warning("APNs connection failed; retrying", ["pool": .string(name), "reason": .string(reason),
                                                                  "retry_in_ms": .int(Int64(delay / .milliseconds(1)))])
        // Twice in a row with no connection: the waiting pushes go back to their sender, who retries
        // them on its own schedule, rather than each waiting out its whole deadline here.
        if failedConnects >= 2 { failQueued(.notSent("cannot connect to APNs: \(reason)")) }
        if let reconnectTimer { state.loop.cancelTimer(reconnectTimer) }
        reconnectTimer = state.loop.schedule(after: delay) { [weak self] in
            self?.reconnectTimer = nil
            self?.pump()
        }
    }

    private func failQueued(_ outcome: PushOutcome) {
        for pending in queue.removeAll() { pending.complete(outcome) }
    }

    /// A stream that ended without an answer: sent again when APNs provably did not process it,
    /// otherwise reported unknown.
    private func unanswered(_ pending: PendingPush, refused: Bool, written: Bool, reason: String) {
        if refused || !written {
            pending.resends += 1
            if pending.resends > configuration.maximumResends {
                pending.complete(.notSent("\(reason) \(pending.resends) times"))
            } else {
                queue.add(pending)
            }
        } else {
            pending.complete(.unknown(reason))
        }
    }

    // MARK: H2ConnectionDelegate

    func h2Ready(_ connection: H2Connection) {
        members[ObjectIdentifier(connection)]?.opened = true
        failedConnects = 0
        lastConnectError = ""
        pump()
    }

    func h2Settings(_ connection: H2Connection) { pump() }

    func h2PingAcknowledged(_ connection: H2Connection) {
        members[ObjectIdentifier(connection)]?.pingSentAt = nil
        pump()
    }

    func h2GoAway(_ connection: H2Connection, lastStream: Int32) {
        // Streams above lastStream were never processed; nghttp2 closes them with REFUSED_STREAM.
        guard let member = members[ObjectIdentifier(connection)] else { return }
        member.draining = true
        if member.inFlight.isEmpty { connection.close(reason: "GOAWAY") }
        pumpSoon()
    }

    func h2StreamClosed(_ connection: H2Connection, stream: Int32, response: H2Message?, errorCode: UInt32) {
        guard let member = members[ObjectIdentifier(connection)], let (pending, mark) = member.inFlight.removeValue(forKey: stream) else { return }
        defer {
            // A connection that went away is closed once its last stream is answered.
            if member.draining && member.inFlight.isEmpty && !connection.isClosed { connection.close(reason: "drained") }
            pumpSoon()
        }
        guard let response, let status = response.header(":status").flatMap(Int.init) else {
            let refused = errorCode == H2ErrorCode.refusedStream
            unanswered(pending, refused: refused, written: member.mayHaveReachedAPNs(mark),
                       reason: refused ? "REFUSED_STREAM" : "connection lost before APNs answered")
            return
        }
        var reason: APNsReason?, timestamp: Int64?
        if !response.body.isEmpty, let body = try? JSONParser.parse(response.body).objectValue {
            reason = body["reason"]?.stringValue.map { APNsReason($0) }
            timestamp = body["timestamp"]?.intValue
        }
        let retryAfter = response.header("retry-after").flatMap(Int.init).map { Duration.seconds(max(0, $0)) }
        var outcome = PushOutcome(status: status, reason: reason, timestamp: timestamp, retryAfter: retryAfter)
        if pending.push.route != .device {
            outcome.management = ManagementResponse(channelID: response.header("apns-channel-id"), uniqueID: response.header("apns-unique-id"),
                                                    body: response.body)
        }
        switch outcome.verdict {
        case .delivered:
            member.trusted = true
            pending.complete(outcome)
        case .refreshProviderToken:
            if !pending.renewedToken, let token = pending.token, state.credentials.expire(token, of: pending.push.application) {
                pending.renewedToken = true
                state.dispatch(pending)
            } else {
                pending.complete(outcome)
            }
        case .invalidProviderToken:
            state.credentials.markInvalid(pending.push.application)
            pending.complete(outcome)
        default:
            // A push APNs answered with a valid token still proves the connection is authenticated.
            if status != 403 { member.trusted = true }
            pending.complete(outcome)
        }
    }

    func h2Closed(_ connection: H2Connection, reason: String) {
        guard let member = members.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        for (_, flight) in member.inFlight.sorted(by: { $0.key < $1.key }) {
            unanswered(flight.pending, refused: false, written: member.mayHaveReachedAPNs(flight.mark),
                       reason: "connection lost before APNs answered: \(reason)")
        }
        member.inFlight = [:]
        if !member.opened { connectFailed(reason) }
        pump()
    }

    // MARK: Deadlines and keep-alive

    /// Keeps exactly one sweep timer while there is anything to watch.
    private func armSweep() {
        guard sweepTimer == nil, !members.isEmpty || queue.count > 0 else { return }
        sweepTimer = state.loop.schedule(after: configuration.sweepInterval) { [weak self] in
            guard let self else { return }
            self.sweepTimer = nil
            self.sweep()
        }
    }

    /// Fails pushes past their deadline, PINGs idle connections and closes those that do not answer.
    private func sweep() {
        let now = ContinuousClock.now
        for pending in queue.removeAll(where: { $0.deadline <= now }) {
            pending.complete(.notSent(lastConnectError.isEmpty ? "no connection to APNs in time" : "no connection to APNs in time: \(lastConnectError)"))
        }
        for member in Array(members.values) {
            for (stream, flight) in member.inFlight where flight.pending.deadline <= now {
                member.inFlight[stream] = nil
                member.connection.resetStream(stream, errorCode: H2ErrorCode.cancel)
                flight.pending.complete(member.mayHaveReachedAPNs(flight.mark) ? .unknown("no answer from APNs in time")
                                                                              : .notSent("not written to APNs in time"))
            }
            if member.draining && member.inFlight.isEmpty && member.connection.isOpen { member.connection.close(reason: "drained") }
            guard member.connection.isOpen else {
                if !member.connection.isClosed && now - member.createdAt > configuration.connectTimeout {
                    member.connection.close(reason: "no TCP and TLS connection within \(configuration.connectTimeout)")
                }
                continue
            }
            if let sent = member.pingSentAt {
                if now - sent > configuration.pingTimeout { member.connection.close(reason: "no answer to PING") }
            } else if now - member.connection.lastReceived > configuration.pingAfter {
                member.pingSentAt = now
                member.connection.ping()
            }
        }
        pump()
    }

    /// Answers everything still waiting or in flight and closes the connections: the client is stopping.
    func shutdown() {
        stopped = true
        failQueued(.notSent("the APNs client is shutting down"))
        for member in Array(members.values) {
            let flights = member.inFlight
            member.inFlight = [:]
            for (_, flight) in flights {
                flight.pending.complete(member.mayHaveReachedAPNs(flight.mark) ? .unknown("the APNs client is shutting down")
                                                                              : .notSent("the APNs client is shutting down"))
            }
            member.connection.close(reason: "client shutting down")
        }
        members = [:]
        if let sweepTimer { state.loop.cancelTimer(sweepTimer) }
        if let reconnectTimer { state.loop.cancelTimer(reconnectTimer) }
        sweepTimer = nil
        reconnectTimer = nil
    }
}

/// The pool's waiting pushes in two lanes, each first in, first out: small messages' pushes, then bulk ones.
struct WaitingPushes {
    /// One lane: taken from by an index (O(1)), compacted once most of it is taken.
    private struct Lane {
        var items: [PendingPush] = []
        var head = 0
        var count: Int { items.count - head }

        mutating func popFirst() -> PendingPush? {
            guard head < items.count else { return nil }
            defer {
                head += 1
                if head == items.count {
                    items = []
                    head = 0
                } else if head > 1024, head * 2 > items.count {
                    items.removeFirst(head)
                    head = 0
                }
            }
            return items[head]
        }

        mutating func pushFront(_ pending: PendingPush) {
            if head > 0 {
                head -= 1
                items[head] = pending
            } else {
                items.insert(pending, at: 0)
            }
        }

        mutating func removeAll(where matches: (PendingPush) -> Bool) -> [PendingPush] {
            var taken: [PendingPush] = [], kept: [PendingPush] = []
            for pending in items[head...] {
                if matches(pending) { taken.append(pending) } else { kept.append(pending) }
            }
            items = kept
            head = 0
            return taken
        }
    }

    private var small = Lane()
    private var bulk = Lane()

    var count: Int { small.count + bulk.count }

    mutating func add(_ pending: PendingPush) {
        if pending.bulk { bulk.items.append(pending) } else { small.items.append(pending) }
    }

    /// The next push to send: the small lane's first, else the bulk lane's.
    mutating func next() -> PendingPush? { small.popFirst() ?? bulk.popFirst() }

    /// A push `next()` gave that could not go: first in its lane again.
    mutating func putBack(_ pending: PendingPush) {
        if pending.bulk { bulk.pushFront(pending) } else { small.pushFront(pending) }
    }

    /// Takes out the waiting pushes that match, keeping the others in order.
    mutating func removeAll(where matches: (PendingPush) -> Bool = { _ in true }) -> [PendingPush] {
        small.removeAll(where: matches) + bulk.removeAll(where: matches)
    }
}
