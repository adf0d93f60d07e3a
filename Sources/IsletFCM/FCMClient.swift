import Foundation
import IsletCore
import IsletHTTP2
import Synchronization

/// One FCM HTTP v1 message to one Android device: a Live Update (or an ordinary notification the Pushwoosh SDK shows),
/// sent as a high-priority data message (issue 46).
public struct FCMMessage: Sendable {
    /// The device's FCM registration token.
    public var token: String
    /// The message's `data`: string values only.
    public var data: JSONObject
    /// How long FCM keeps it for a device that is offline (`android.ttl`); FCM's default (four weeks) when nil.
    public var timeToLive: Duration?
    /// Messages of one key replace each other while they wait for an offline device (`android.collapse_key`).
    public var collapseKey: String?

    public init(token: String, data: JSONObject, timeToLive: Duration? = nil, collapseKey: String? = nil) {
        self.token = token
        self.data = data
        self.timeToLive = timeToLive
        self.collapseKey = collapseKey
    }

    public init(token: String, update: AndroidLiveUpdate, timeToLive: Duration? = nil, collapseKey: String? = nil) {
        self.init(token: token, data: JSONObject(update.data.map { (key: $0.key, value: JSONValue.string($0.value)) }),
                  timeToLive: timeToLive, collapseKey: collapseKey)
    }

    /// The request body: `{"message": {"token", "data", "android": {"priority": "HIGH", "ttl", "collapse_key"}}}`.
    public var body: [UInt8] {
        var android: [(key: String, value: JSONValue)] = [("priority", "HIGH")]
        if let timeToLive { android.append(("ttl", .string("\(timeToLive.components.seconds)s"))) }
        if let collapseKey { android.append(("collapse_key", .string(collapseKey))) }
        let message: JSONValue = ["message": ["token": .string(token), "data": .object(data), "android": .object(JSONObject(android))]]
        return message.jsonBytes
    }
}

/// Why an FCM client could not be set up: it names the setting and the rule.
public struct FCMClientError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// What FCM answered to one message, and what it means.
public struct FCMOutcome: Sendable, Equatable {
    /// The HTTP status; 0 when no answer came.
    public var status: Int
    public var error: FCMError?
    public var retryAfter: Duration?
    public var fate: PushFate
    /// Why no answer came, or the answer's message.
    public var detail: String?

    public var verdict: PushVerdict { .of(fcmStatus: status, error: error, fate: fate, retryAfter: retryAfter) }
}

/// Sends FCM HTTP v1 messages for one service account's project (issue 46): an OAuth2 access token from the account's
/// `token_uri` (an RS256 assertion traded for it, kept until five minutes before it expires), then one HTTP/2 stream a
/// message. An answer of 401 drops the token, and the messages it refused go once more with a new one.
///
/// `send` blocks its caller (a delivery worker) until every message is answered or the deadline passes; the HTTP/2
/// connections live on an event loop of the client's own, which nothing here blocks.
public final class FCMClient: Sendable {
    public let signer: ServiceAccountSigner
    private let loop: EventLoop
    private let fcm: H2Requests
    private let tokenEndpoint: H2Requests
    private let tokenPath: String
    private let sendPath: String
    private let authority: String
    private let tokenAuthority: String
    /// The access token in hand; `fetching` is held while one is asked for, so callers at once ask once.
    private let token = Mutex<AccessToken?>(nil)
    private let fetching = NSLock()
    /// The requests callers wait on now: answered at once at shutdown, so no caller waits out its deadline.
    private let waiting = Mutex<[ObjectIdentifier: Results]>([:])
    private let stopped = Atomic<Bool>(false)

    /// FCM's own address; `baseURL` points elsewhere (any FCM stand-in), and `caFile` trusts its certificate.
    public static let defaultBaseURL = "https://fcm.googleapis.com"

    public init(signer: ServiceAccountSigner, baseURL: String = FCMClient.defaultBaseURL, caFile: String? = nil) throws(FCMClientError) {
        guard let base = Self.origin(baseURL) else { throw FCMClientError(description: "FCM base URL: must be an https URL, got \(baseURL)") }
        guard let tokens = Self.origin(signer.account.tokenURI) else {
            throw FCMClientError(description: "service account key: token_uri must be an https URL, got \(signer.account.tokenURI)")
        }
        self.signer = signer
        let tls: TLSContext
        do {
            tls = try TLSContext(clientTrusting: caFile)
        } catch {
            throw FCMClientError(description: "FCM: \(error)")
        }
        loop = EventLoop(name: "islet-fcm")
        fcm = H2Requests(loop: loop, host: base.host, port: base.port, tls: tls)
        tokenEndpoint = H2Requests(loop: loop, host: tokens.host, port: tokens.port, tls: tls)
        authority = base.authority
        tokenAuthority = tokens.authority
        tokenPath = tokens.path.isEmpty ? "/" : tokens.path
        sendPath = base.path + "/v1/projects/\(signer.account.projectID)/messages:send"
    }

    /// An https URL's host, port (443 by default), `host[:port]` and path (without a trailing slash).
    static func origin(_ text: String) -> (host: String, port: Int, authority: String, path: String)? {
        guard let url = URL(string: text), url.scheme == "https", let host = url.host, !host.isEmpty else { return nil }
        let port = url.port ?? 443
        var path = url.path
        while path.hasSuffix("/") { path.removeLast() }
        return (host, port, port == 443 ? host : "\(host):\(port)", path)
    }

    /// Sends every message, at once; one outcome each, in order. A message with no answer by `deadline` is `.unknown`.
    public func send(_ messages: [FCMMessage], deadline: ContinuousClock.Instant) -> [FCMOutcome] {
        guard !messages.isEmpty else { return [] }
        var outcomes = sendOnce(messages, deadline: deadline, refreshingToken: false)
        // Refused for the token (it expired early, or was revoked): those go once more with a new one.
        let refused = outcomes.indices.filter { outcomes[$0].verdict == .refreshProviderToken }
        if !refused.isEmpty {
            let again = sendOnce(refused.map { messages[$0] }, deadline: deadline, refreshingToken: true)
            for (index, outcome) in zip(refused, again) { outcomes[index] = outcome }
        }
        return outcomes
    }

    private func sendOnce(_ messages: [FCMMessage], deadline: ContinuousClock.Instant, refreshingToken: Bool) -> [FCMOutcome] {
        guard !stopped.load(ordering: .acquiring) else {
            return messages.map { _ in FCMOutcome(status: 0, error: nil, retryAfter: nil, fate: .notSent, detail: "the FCM client stopped") }
        }
        let bearer: String
        switch accessToken(deadline: deadline, refresh: refreshingToken) {
        case .success(let token): bearer = token
        case .failure(let failure):
            return messages.map { _ in FCMOutcome(status: 0, error: nil, retryAfter: nil, fate: .notSent, detail: failure.description) }
        }
        let results = Results(count: messages.count)
        track(results)
        defer { untrack(results) }
        for (index, message) in messages.enumerated() {
            let request = H2Message(headers: [(":method", "POST"), (":scheme", "https"), (":authority", authority), (":path", sendPath),
                                              ("authorization", "Bearer \(bearer)"), ("content-type", "application/json")],
                                    body: message.body)
            fcm.request(request) { results.set(index, $0) }
        }
        let answered = results.wait(until: deadline)
        return answered.map { result in
            switch result {
            case .response(let response)?:
                let status = Int(response.header(":status") ?? "") ?? 0
                let error = (200..<300).contains(status) ? nil : FCMError.of(body: response.body)
                let retryAfter = response.header("retry-after").flatMap { retryAfterDuration($0, now: Date()) }
                return FCMOutcome(status: status, error: error, retryAfter: retryAfter, fate: .answered,
                                  detail: error == nil ? nil : String(decoding: response.body.prefix(512), as: UTF8.self))
            case .failed(let fate, let reason)?:
                return FCMOutcome(status: 0, error: nil, retryAfter: nil, fate: fate, detail: reason)
            case nil:
                return FCMOutcome(status: 0, error: nil, retryAfter: nil, fate: .unknown, detail: "no answer before the deadline")
            }
        }
    }

    /// The access token to send with: the one in hand while fresh, else a new one from the token endpoint.
    func accessToken(deadline: ContinuousClock.Instant, refresh: Bool) -> Result<String, ServiceAccountError> {
        let stale = refresh ? token.withLock { $0 } : nil
        fetching.lock()
        defer { fetching.unlock() }
        if let held = token.withLock({ $0 }), held.isFresh(at: Date()), held != stale { return .success(held.token) }
        guard let body = signer.tokenRequest(issuedAt: Date()) else { return .failure(ServiceAccountError(description: "FCM: could not sign the assertion")) }
        let request = H2Message(headers: [(":method", "POST"), (":scheme", "https"), (":authority", tokenAuthority), (":path", tokenPath),
                                          ("content-type", "application/x-www-form-urlencoded")], body: body)
        let results = Results(count: 1)
        track(results)
        defer { untrack(results) }
        tokenEndpoint.request(request) { results.set(0, $0) }
        switch results.wait(until: deadline)[0] {
        case .response(let response)?:
            let status = Int(response.header(":status") ?? "") ?? 0
            guard status == 200 else {
                return .failure(ServiceAccountError(description: "token endpoint \(signer.account.tokenURI) answered \(status): \(String(decoding: response.body.prefix(512), as: UTF8.self))"))
            }
            do {
                let fresh = try AccessToken.of(body: response.body, receivedAt: Date())
                token.withLock { $0 = fresh }
                return .success(fresh.token)
            } catch {
                return .failure(error)
            }
        case .failed(_, let reason)?:
            return .failure(ServiceAccountError(description: "token endpoint \(signer.account.tokenURI): \(reason)"))
        case nil:
            return .failure(ServiceAccountError(description: "token endpoint \(signer.account.tokenURI): no answer before the deadline"))
        }
    }

    /// Waits on `results` are answered at shutdown (`abandon`); one that starts after it is answered at once.
    private func track(_ results: Results) {
        waiting.withLock { $0[ObjectIdentifier(results)] = results }
        if stopped.load(ordering: .acquiring) { results.abandon("the FCM client stopped") }
    }

    private func untrack(_ results: Results) { _ = waiting.withLock { $0.removeValue(forKey: ObjectIdentifier(results)) } }

    /// Stops the connections and the loop (within `deadline`). Whoever waits for an answer gets one at once: a message on
    /// the wire may have reached FCM (`.unknown`: resent later, a Live Update is refreshed in place), the others were not
    /// sent; the caller records them so.
    public func shutdown(deadline: ContinuousClock.Instant = .now + .seconds(5)) {
        stopped.store(true, ordering: .releasing)
        for results in waiting.withLock({ Array($0.values) }) { results.abandon("the FCM client stopped before FCM answered") }
        _ = loop.submitAndWait(deadline: deadline) { [fcm, tokenEndpoint] in
            fcm.stop()
            tokenEndpoint.stop()
        }
        _ = loop.stop(deadline: deadline)
    }
}

/// Completions gathered from the loop for a caller that waits for them.
private final class Results: @unchecked Sendable {
    private let condition = NSCondition()
    private var results: [H2Result?]
    private var left: Int

    init(count: Int) {
        results = Array(repeating: nil, count: count)
        left = count
    }

    func set(_ index: Int, _ result: H2Result) {
        condition.lock()
        if results[index] == nil {
            results[index] = result
            left -= 1
        }
        condition.broadcast()
        condition.unlock()
    }

    /// Every request not answered yet as failed, now: whoever waits returns (the client is stopping).
    func abandon(_ reason: String) {
        condition.lock()
        for index in results.indices where results[index] == nil { results[index] = .failed(.unknown, reason) }
        left = 0
        condition.broadcast()
        condition.unlock()
    }

    /// What came by `deadline` (nil for what did not).
    func wait(until deadline: ContinuousClock.Instant) -> [H2Result?] {
        condition.lock()
        defer { condition.unlock() }
        while left > 0 {
            let remaining = deadline - .now
            guard remaining > .zero else { break }
            _ = condition.wait(until: Date().addingTimeInterval(remaining / .seconds(1)))
        }
        return results
    }
}
