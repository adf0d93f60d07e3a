import Foundation
import IsletCore
import IsletDelivery
import Synchronization

/// Where Android pushes go, and how (issue 46): FCM's address (any FCM stand-in with `baseURL`) and a CA file to trust
/// for it and for the service accounts' token endpoints.
public struct FCMTransportConfiguration: Sendable {
    public var baseURL: String
    public var caFile: String?
    /// How long a service account read from the store is trusted before it is read again (a replaced key takes effect).
    public var accountRefresh: Duration

    public init(baseURL: String = FCMClient.defaultBaseURL, caFile: String? = nil, accountRefresh: Duration = .seconds(60)) {
        self.baseURL = baseURL
        self.caFile = caFile
        self.accountRefresh = accountRefresh
    }
}

/// Sends Android pushes through FCM HTTP v1 (issue 46), each with its application's service account: one `FCMClient`
/// per account, made when it is first needed and again when the stored key changes. A push whose application has no
/// account, or an account that cannot be used, is answered at once and not retried (`NoFCMServiceAccount`,
/// `FCMServiceAccountInvalid`). `send` blocks its caller (a delivery worker's thread); every wait honours its deadline.
public final class FCMTransport: PushTransport, Sendable {
    /// The key JSON of an application's service account; nil when it has none.
    public typealias AccountLookup = @Sendable (ApplicationCode) throws -> String?

    /// An application's client as last read.
    struct Entry {
        let keyJSON: String?
        let client: FCMClient?
        /// Why the key could not be used.
        let problem: String?
        let readAt: ContinuousClock.Instant
        /// The key could not be read at all (the store away, a master key missing): nothing is known of it yet.
        var unreadable = false
    }

    private let configuration: FCMTransportConfiguration
    private let lookup: AccountLookup
    private let logger: Logger
    private let entries = Mutex<[ApplicationCode: Entry]>([:])
    /// Clients whose key was replaced: stopped at shutdown, as a send may still be using them.
    private let retired = Mutex<[FCMClient]>([])
    private let stopped = Atomic<Bool>(false)

    public init(configuration: FCMTransportConfiguration, accounts: @escaping AccountLookup, logger: Logger) {
        self.configuration = configuration
        lookup = accounts
        self.logger = logger
    }

    /// FCM's answer for `push`, one outcome each in order; pushes of other applications go at once, side by side.
    public func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome] {
        guard !stopped.load(ordering: .relaxed) else { return pushes.map { _ in .notSent("the FCM transport is shutting down") } }
        var outcomes = [PushOutcome?](repeating: nil, count: pushes.count)
        let groups = Dictionary(grouping: pushes.indices, by: { pushes[$0].application })
        let now = Date()
        var work: [(client: FCMClient, indices: [Int])] = []
        for (application, indices) in groups {
            let entry = client(for: application)
            guard let client = entry.client else {
                for index in indices {
                    // The store away (or the key sealed with another master key): not sent, so tried again later.
                    if entry.unreadable {
                        outcomes[index] = .fcm(status: 0, error: nil, retryAfter: nil, fate: .notSent, detail: entry.problem)
                        continue
                    }
                    let error = FCMError.unknown(entry.keyJSON == nil ? "NoFCMServiceAccount" : "FCMServiceAccountInvalid")
                    outcomes[index] = .fcm(status: 403, error: error, retryAfter: nil, fate: .answered, detail: entry.problem)
                }
                continue
            }
            work.append((client, indices))
        }
        // Each application's messages on a thread of their own but the first's, which goes on this one.
        let answers = Mutex<[(Int, PushOutcome)]>([])
        let group = DispatchGroup()
        @Sendable func sending(_ client: FCMClient, _ indices: [Int]) {
            let sent = client.send(indices.map { Self.message(pushes[$0], now: now) }, deadline: deadline)
            answers.withLock { $0 += zip(indices, sent.map(Self.outcome)) }
        }
        for (client, indices) in work.dropFirst() {
            group.enter()
            Thread.detachNewThread {
                sending(client, indices)
                group.leave()
            }
        }
        if let (client, indices) = work.first { sending(client, indices) }
        let remaining = deadline + .seconds(1) - .now
        _ = group.wait(timeout: .now() + .milliseconds(Int(max(0, remaining / .milliseconds(1)))))
        for (index, outcome) in answers.withLock({ $0 }) { outcomes[index] = outcome }
        return outcomes.map { $0 ?? .unknown("no answer from FCM before the deadline") }
    }

    /// The FCM message of an Android push: its token, its stored `data`, as `ttl` what is left of its life, and a Live
    /// Update's id as its `collapse_key`, so a phone that was offline gets the activity's latest state, not each one
    /// that waited (an end, last, still dismisses it).
    static func message(_ push: Push, now: Date) -> FCMMessage {
        let data = (try? JSONParser.parse(push.payload))?.objectValue ?? [:]
        let ttl = push.expiration.map { Duration.seconds(max(0, $0 - Int64(now.timeIntervalSince1970))) }
        let id = data["pw_live"]?.stringValue.flatMap { (try? JSONParser.parse(Array($0.utf8)))?.objectValue?["id"]?.stringValue }
        return FCMMessage(token: push.deviceToken, data: data, timeToLive: ttl, collapseKey: id)
    }

    static func outcome(_ answer: FCMOutcome) -> PushOutcome {
        .fcm(status: answer.status, error: answer.error, retryAfter: answer.retryAfter, fate: answer.fate, detail: answer.detail)
    }

    /// The application's client: the one in hand while its key was read lately, else the key read again (and a new
    /// client made if it changed).
    func client(for application: ApplicationCode) -> Entry {
        let previous = entries.withLock { $0[application] }
        if let previous, ContinuousClock.now - previous.readAt < configuration.accountRefresh { return previous }
        let json: String?
        do {
            json = try lookup(application)
        } catch {
            // The store is away: keep what was in hand, and look again on the next push.
            if let previous { return previous }
            var entry = Entry(keyJSON: nil, client: nil, problem: "could not read the FCM service account: \(error)", readAt: .now)
            entry.unreadable = true
            return entry
        }
        if let previous, previous.keyJSON == json {
            let entry = Entry(keyJSON: json, client: previous.client, problem: previous.problem, readAt: .now)
            entries.withLock { $0[application] = entry }
            return entry
        }
        var entry = Entry(keyJSON: json, client: nil, problem: json == nil ? "the application has no FCM service account (islet app set-fcm)" : nil, readAt: .now)
        if let json {
            do {
                let signer = try ServiceAccountSigner(try ServiceAccount(json: Array(json.utf8)))
                entry = Entry(keyJSON: json, client: try FCMClient(signer: signer, baseURL: configuration.baseURL, caFile: configuration.caFile),
                              problem: nil, readAt: .now)
            } catch {
                logger.error("the application's FCM service account cannot be used; its Android pushes fail", [
                    "application": .string(application.rawValue), "error": .string("\(error)"),
                ])
                entry = Entry(keyJSON: json, client: nil, problem: "\(error)", readAt: .now)
            }
        }
        let replaced = entries.withLock { entries -> FCMClient? in
            let old = entries[application]?.client
            entries[application] = entry
            return old
        }
        if let replaced { retired.withLock { $0.append(replaced) } }
        return entry
    }

    /// Stops every client's connections and loop by `deadline`.
    public func shutdown(deadline: ContinuousClock.Instant = .now + .seconds(5)) {
        stopped.store(true, ordering: .relaxed)
        let clients = entries.withLock { entries in entries.values.compactMap(\.client) } + retired.withLock { $0 }
        for client in clients { client.shutdown(deadline: deadline) }
    }
}
