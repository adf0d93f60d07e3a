import Foundation
import IsletCore
import IsletDelivery
import IsletHTTP2

/// The connections to one APNs endpoint for one (application, environment), with the pushes waiting
/// for a stream. Apple's rules (A6): one stream per connection until a request with a valid token
/// succeeded, then up to the server's SETTINGS_MAX_CONCURRENT_STREAMS (capped); GOAWAY, REFUSED_STREAM
/// and lost connections put the affected pushes back in the queue for a new connection.
///
/// Loop-confined: every method runs on the client's event loop thread.
final class ConnectionPool: H2ConnectionDelegate {
    final class Member {
        let connection: H2Connection
        var inFlight: [Int32: PendingPush] = [:]
        /// A request with a valid token succeeded on it: it may use the server's full stream limit.
        var trusted = false
        var draining = false
        /// TLS and HTTP/2 came up; a connection that never did counts as a failed connect.
        var opened = false
        var pingSentAt: ContinuousClock.Instant?

        init(_ connection: H2Connection) { self.connection = connection }
    }

    let name: String
    let host: String
    let port: Int
    unowned let state: ClientState
    private var members: [ObjectIdentifier: Member] = [:]
    private var queue: [PendingPush] = []
    private var queueHead = 0
    private var failedConnects = 0
    private var reconnectTimer: Int?
    private var sweepTimer: Int?
    private var lastConnectError = ""
    private var pumpQueued = false
    /// `authorization` for the provider token in use, built once per token.
    private var authorization = (token: "", header: "")

    init(name: String, host: String, port: Int, state: ClientState) {
        self.name = name
        self.host = host
        self.port = port
        self.state = state
    }

    var configuration: APNsClientConfiguration { state.configuration }
    private var waiting: Int { queue.count - queueHead }

    func enqueue(_ pending: PendingPush) {
        pending.deadline = ContinuousClock.now + configuration.requestTimeout
        queue.append(pending)
        pumpSoon()
    }

    private func capacity(_ member: Member) -> Int {
        guard member.connection.isOpen, !member.draining else { return 0 }
        let limit = member.trusted ? min(member.connection.peerMaxStreams, configuration.maximumStreams) : 1
        return Int(limit) - member.inFlight.count
    }

    /// Pumps once at the end of the loop's turn, for all the pushes enqueued or answered in it.
    private func pumpSoon() {
        guard !pumpQueued else { return }
        pumpQueued = true
        state.loop.atEndOfTurn { [weak self] in
            if let self, self.pumpQueued { self.pump() }
        }
    }

    /// Moves waiting pushes onto streams, opening connections as needed.
    private func pump() {
        pumpQueued = false
        for member in members.values where waiting > 0 {
            var room = capacity(member)
            while room > 0, waiting > 0 {
                let pending = queue[queueHead]
                queueHead += 1
                if submit(pending, on: member) { room -= 1 }
            }
        }
        if queueHead > 1024, queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        let usable = members.values.filter { !$0.draining && !$0.connection.isClosed }
        let connecting = usable.contains { !$0.connection.isOpen }
        if waiting > 0, reconnectTimer == nil, !connecting, usable.count < configuration.connectionsPerPool
            || (usable.allSatisfy { capacity($0) == 0 && $0.trusted } && usable.count < configuration.connectionsPerPool) {
            openConnection()
        }
        if sweepTimer == nil, !members.isEmpty || waiting > 0 { scheduleSweep() }
    }

    private func submit(_ pending: PendingPush, on member: Member) -> Bool {
        guard let key = state.signingKey(for: pending.push.application),
              let token = state.tokens.token(for: key, now: state.now()) else {
            pending.complete(PushOutcome(status: 403, reason: "NoAPNsKey"))
            return false
        }
        pending.token = token
        let push = pending.push
        if authorization.token != token { authorization = (token, "bearer \(token)") }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(10)
        headers += [(":method", "POST"), (":scheme", "https"), (":path", push.path), (":authority", host),
                    ("authorization", authorization.header)]
        headers += push.headers
        headers.append(("content-length", String(push.payload.count)))
        guard let stream = member.connection.submitRequest(H2Message(headers: headers, body: push.payload)) else {
            queue.append(pending)
            return false
        }
        member.inFlight[stream] = pending
        return true
    }

    private func openConnection() {
        do {
            let connection = try H2Connection.connect(loop: state.loop, host: host, port: port, tls: state.tls, delegate: self)
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
                                                                  "retry_in_ms": .int(Int64(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000))])
        reconnectTimer = state.loop.schedule(after: delay) { [weak self] in
            self?.reconnectTimer = nil
            self?.pump()
        }
    }

    /// Puts a push back in line for another connection, or gives up after `connectionAttempts` sends
    /// that may have reached APNs. A refused stream (REFUSED_STREAM, or above a GOAWAY's last stream)
    /// was never processed, so it is always safe to send again; its deadline still bounds it.
    private func retry(_ pending: PendingPush, reason: String, processed: Bool) {
        if processed { pending.connectionAttempts += 1 }
        if pending.connectionAttempts >= configuration.connectionAttempts {
            pending.complete(PushOutcome(status: 0, reason: reason))
        } else {
            queue.append(pending)
        }
    }

    // MARK: H2ConnectionDelegate

    func h2Ready(_ connection: H2Connection) {
        members[ObjectIdentifier(connection)]?.opened = true
        failedConnects = 0
        pump()
    }

    func h2Settings(_ connection: H2Connection) { pump() }

    func h2GoAway(_ connection: H2Connection, lastStream: Int32) {
        // Streams above lastStream were never processed; nghttp2 closes them with REFUSED_STREAM.
        members[ObjectIdentifier(connection)]?.draining = true
        pump()
    }

    func h2StreamClosed(_ connection: H2Connection, stream: Int32, response: H2Message?, errorCode: UInt32) {
        guard let member = members[ObjectIdentifier(connection)], let pending = member.inFlight.removeValue(forKey: stream) else { return }
        defer {
            // A connection that went away is closed once its last stream is answered.
            if member.draining && member.inFlight.isEmpty { connection.close(reason: "drained after GOAWAY") }
        }
        guard let response, let status = response.header(":status").flatMap(Int.init) else {
            let refused = errorCode == H2ErrorCode.refusedStream
            retry(pending, reason: refused ? "REFUSED_STREAM" : "connection lost", processed: !refused)
            pumpSoon()
            return
        }
        var reason: String?, timestamp: Int64?
        if !response.body.isEmpty, let body = try? JSONParser.parse(response.body).objectValue {
            reason = body["reason"]?.stringValue
            timestamp = body["timestamp"]?.intValue
        }
        let outcome = PushOutcome(status: status, reason: reason, timestamp: timestamp)
        switch outcome.action {
        case .delivered:
            member.trusted = true
            pending.complete(outcome)
        case .refreshProviderToken:
            if !pending.renewedToken, let key = state.signingKey(for: pending.push.application), let token = pending.token,
               state.tokens.expire(token, for: key, now: state.now()) {
                pending.renewedToken = true
                queue.append(pending)
            } else {
                pending.complete(outcome)
            }
        case .invalidProviderToken:
            state.markInvalid(pending.push.application)
            pending.complete(outcome)
        default:
            // A push APNs answered with a valid token still proves the connection is authenticated.
            if status != 403 { member.trusted = true }
            pending.complete(outcome)
        }
        pumpSoon()
    }

    func h2Closed(_ connection: H2Connection, reason: String) {
        guard let member = members.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        for (_, pending) in member.inFlight.sorted(by: { $0.key < $1.key }) {
            retry(pending, reason: "connection lost: \(reason)", processed: true)
        }
        member.inFlight = [:]
        if !member.opened { connectFailed(reason) }
        pump()
    }

    // MARK: Timeouts and keep-alive

    private func scheduleSweep() {
        sweepTimer = state.loop.schedule(after: .seconds(1)) { [weak self] in
            guard let self else { return }
            self.sweepTimer = nil
            self.sweep()
            if !self.members.isEmpty || self.waiting > 0 { self.scheduleSweep() }
        }
    }

    /// Fails requests past their deadline, PINGs idle connections and closes the ones that never answer.
    private func sweep() {
        let now = ContinuousClock.now
        var kept: [PendingPush] = []
        for pending in queue[queueHead...] {
            if pending.deadline <= now {
                let why = lastConnectError.isEmpty ? "timed out" : "timed out; last connection error: \(lastConnectError)"
                pending.complete(PushOutcome(status: 0, reason: why))
            } else {
                kept.append(pending)
            }
        }
        queue = kept
        queueHead = 0
        for member in Array(members.values) {
            for (stream, pending) in member.inFlight where pending.deadline <= now {
                member.inFlight[stream] = nil
                member.connection.resetStream(stream, errorCode: H2ErrorCode.cancel)
                pending.complete(PushOutcome(status: 0, reason: "timed out"))
            }
            guard member.connection.isOpen else { continue }
            let idle = now - member.connection.lastActivity
            if let sent = member.pingSentAt, member.connection.lastActivity < sent, now - sent > configuration.pingAfter {
                member.connection.close(reason: "no answer to PING")
            } else if idle > configuration.pingAfter && member.pingSentAt.map({ member.connection.lastActivity > $0 }) ?? true {
                member.pingSentAt = now
                member.connection.ping()
            }
        }
        pump()
    }
}
