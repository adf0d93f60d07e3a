import Foundation

/// One `islet serve` process among those sharing a database (issue 14): letters, digits and `.-_:`, 1 to 64.
public struct NodeID: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String

    public init?(_ text: String) {
        guard (1...64).contains(text.utf8.count),
              text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || ".-_:".utf8.contains($0) })
        else { return nil }
        rawValue = text
    }

    /// `host-pid-xxxx`: unique per run, so a restarted node never takes a lease of its previous run for its own.
    public static func generated() -> NodeID {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "node"
        let safe = String(host.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "-" }.prefix(40))
        let suffix = String(UInt16.random(in: 0...UInt16.max), radix: 16)
        return NodeID("\(safe.isEmpty ? "node" : safe)-\(ProcessInfo.processInfo.processIdentifier)-\(suffix)")!
    }

    public var description: String { rawValue }
}

/// What a claim asks for: the node that will hold its lease, and for how long without a renewal.
public struct ClaimLease: Sendable, Equatable {
    public let owner: NodeID
    public let duration: TimeInterval

    public init(owner: NodeID, duration: TimeInterval) {
        self.owner = owner
        self.duration = duration
    }
}

/// A node as it registers itself.
public struct NodeInfo: Sendable, Equatable {
    public let id: NodeID
    public let host: String
    public let pid: Int
    public let version: String

    public init(id: NodeID, host: String, pid: Int, version: String) {
        self.id = id
        self.host = host
        self.pid = pid
        self.version = version
    }
}

/// A node as `islet cluster status` shows it.
public struct NodeStatus: Sendable, Equatable {
    public let info: NodeInfo
    /// Its number: the key of its liveness lock.
    public let number: Int
    public let startedAt: Date
    public let heartbeatAt: Date
    public let stoppedAt: Date?
    /// Its liveness session is up (PostgreSQL: its advisory lock is held); nil where the engine cannot tell.
    public let alive: Bool?
    /// Leases it holds, and the jobs, shards and retries they cover.
    public let leases: Int
    public let claimed: Int
    /// When its oldest lease runs out unless renewed.
    public let leaseUntil: Date?

    public init(info: NodeInfo, number: Int, startedAt: Date, heartbeatAt: Date, stoppedAt: Date?, alive: Bool?, leases: Int, claimed: Int,
                leaseUntil: Date?) {
        self.info = info
        self.number = number
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
        self.stoppedAt = stoppedAt
        self.alive = alive
        self.leases = leases
        self.claimed = claimed
        self.leaseUntil = leaseUntil
    }
}

/// What a renewal came to: the leases extended, and those gone (rescued: their work went to another node).
public struct LeaseRenewal: Sendable, Equatable {
    public var renewed: Set<Int64>
    public var gone: Set<Int64>

    public init(renewed: Set<Int64>, gone: Set<Int64>) {
        self.renewed = renewed
        self.gone = gone
    }
}

/// What one rescue freed: leases that expired or whose node is gone, and the work they covered.
public struct RescueReport: Sendable, Equatable {
    public var leases = 0
    public var jobs = 0
    public var deliveries = 0

    public init(leases: Int = 0, jobs: Int = 0, deliveries: Int = 0) {
        self.leases = leases
        self.jobs = jobs
        self.deliveries = deliveries
    }

    public var isEmpty: Bool { leases == 0 && jobs == 0 && deliveries == 0 }
}

/// The nodes sharing a database, the leases of their claims, and what they share (provider tokens).
///
/// A claim creates a lease (its id is the fencing token) that the claimed rows name. Every write of what
/// the claimed work came to holds the lease (its row locked to the commit) or fails with `.leaseLost`; a
/// rescue deletes the leases that expired or whose node's session ended, and frees the rows they covered.
public protocol ClusterStore: Sendable {
    /// The node's number (the key of its liveness lock), registering the node if it is new; changes nothing
    /// else, so a second process with a running node's id learns the number and is refused its lock.
    func register(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int
    /// Once the node holds its liveness lock (PostgreSQL): records this run and frees what a previous run of
    /// the node left claimed (on SQLite, where one server owns the file, every claim). Returns its number.
    func join(_ node: NodeInfo, at date: Date) throws(StoreError) -> Int
    /// Extends the leases the node still holds among `leases` by `duration` from the database's clock. A lease
    /// being ended at that moment is skipped, not waited for (neither in `renewed` nor in `gone`).
    func renew(_ leases: Set<Int64>, of owner: NodeID, for duration: TimeInterval) throws(StoreError) -> LeaseRenewal
    /// Records that the node is running (`islet cluster status`).
    func heartbeat(_ node: NodeID, at date: Date) throws(StoreError)
    /// Deletes leases that expired or whose node is gone, and frees the jobs, shards and retries they covered.
    func rescue(at date: Date) throws(StoreError) -> RescueReport
    /// A clean stop: the node's leases go (their work was given back) and it is marked stopped.
    func leave(_ node: NodeID, at date: Date) throws(StoreError)
    /// Every node that ran in the last `since` window, and the leases each holds.
    func nodes(since: Date) throws(StoreError) -> [NodeStatus]

    /// The provider token (JWT) named `name`, shared by every node: the stored one while it was issued after
    /// `issuedAfter` and not declared expired, else a new one from `sign(now)`, stored for the others, under
    /// the row's lock so nodes that ask at once make one token (A3: at most one new token per 20 minutes).
    func providerToken(named name: String, issuedAfter: Date, at date: Date, sign: (Date) -> String?) throws(StoreError)
        -> (token: String, issuedAt: Date)?
    /// APNs answered ExpiredProviderToken for `token`: the next `providerToken` call makes a new one, unless
    /// `token` was issued after `renewableBefore` (younger than 20 minutes) or was already replaced. True when
    /// the next call gives another token.
    func expireProviderToken(named name: String, token: String, renewableBefore: Date) throws(StoreError) -> Bool
}

/// A node's liveness session (PostgreSQL: a connection holding the node's advisory lock, that also listens
/// for work accepted anywhere). It ends with the process, however it ends.
public protocol NodeSession: AnyObject, Sendable {
    /// Waits up to `timeout` for a notification that work was accepted; true if one came. Reconnects (and
    /// takes the lock again) when the session was lost, false meanwhile.
    func waitForWork(timeout: Duration) -> Bool
    /// True while the liveness lock is held.
    var isAlive: Bool { get }
    /// Why the session, once lost, could not be opened again (nil while it is up).
    var reopenFailure: String? { get }
    /// Ends a wait in progress at once (shutdown).
    func interrupt()
    func close()
}

/// Why a node may not run beside the nodes running on its database (a simulator node runs alone), in words for
/// its operator. Thrown by a liveness session that took the node's own lock and then met another node's.
public struct NodeRefusal: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
