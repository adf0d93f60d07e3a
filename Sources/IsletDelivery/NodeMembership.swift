import Foundation
import IsletCore
import IsletStore
import Synchronization

/// The leases this node's workers hold, each with the local instant it is safe until: a worker sends the
/// next batch of a claim only before then (issue 14). The instant is measured from before the claim or
/// renewal left this process, so it never runs past the expiry the database set.
public final class LeaseKeeper: Sendable {
    /// Each lease held, with the instant it is safe until; nil once it was found rescued (never renewed again).
    private let deadlines = Mutex<[Int64: ContinuousClock.Instant?]>([:])
    /// Subtracted from a lease's duration: room for clock-rate drift and the send that follows a check.
    let margin: Duration
    let duration: Duration

    init(duration: Duration) {
        self.duration = duration
        margin = min(.seconds(1), duration / 5)
    }

    /// A claim made at `claimedAt` (read before the claim began) took `lease`.
    func add(_ lease: Int64, claimedAt: ContinuousClock.Instant) {
        deadlines.withLock { $0[lease] = .some(claimedAt + duration - margin) }
    }

    func remove(_ lease: Int64) { _ = deadlines.withLock { $0.removeValue(forKey: lease) } }

    /// The instant the lease is safe until (the past once it was lost): nothing of it is written after that.
    func deadline(_ lease: Int64) -> ContinuousClock.Instant {
        (deadlines.withLock { $0[lease] ?? nil }) ?? .now - .seconds(1)
    }

    /// True while the lease is surely still this node's.
    func isValid(_ lease: Int64) -> Bool { ContinuousClock.now < deadline(lease) }

    /// The leases to renew: held and not known lost.
    var held: Set<Int64> { Set(deadlines.withLock { $0.compactMap { $0.value == nil ? nil : $0.key } }) }

    /// A renewal sent at `sentAt` came to `renewal`: its renewed leases run on from then, its gone ones were
    /// rescued and are lost now. Returns how many this node lost.
    func apply(_ renewal: LeaseRenewal, sentAt: ContinuousClock.Instant) -> Int {
        deadlines.withLock { deadlines in
            var lost = 0
            for lease in renewal.renewed where deadlines[lease] != nil { deadlines[lease] = .some(sentAt + duration - margin) }
            for lease in renewal.gone where deadlines[lease] != nil {
                deadlines[lease] = .some(nil)
                lost += 1
            }
            return lost
        }
    }
}

/// This process as a node of the cluster sharing its database (issue 14): it joins (freeing what a previous
/// run left claimed), holds its liveness session, renews its leases, rescues the leases of nodes that are
/// gone, wakes the delivery workers when work is accepted on another node, and leaves on shutdown.
final class NodeMembership: Sendable {
    let cluster: any ClusterStore
    let node: NodeInfo
    let leases: LeaseKeeper
    let metrics: DeliveryMetrics
    let logger: Logger
    let now: @Sendable () -> Date
    private let openSession: (@Sendable (Int) throws -> any NodeSession)?
    private let session = Mutex<(any NodeSession)?>(nil)
    /// Set once by `stop`.
    private let stopRequested = Mutex(false)
    private let threads = ServiceThreads()
    private let idle = NSCondition()
    /// How often leases are renewed and dead nodes looked for.
    let tick: Duration
    /// Nodes running on the database, this one included, as counted at the last heartbeat (at least 1).
    private let running = Atomic<Int>(1)

    init(cluster: any ClusterStore, node: NodeInfo, leaseDuration: Duration, session: (@Sendable (Int) throws -> any NodeSession)?,
         metrics: DeliveryMetrics, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.cluster = cluster
        self.node = node
        self.leases = LeaseKeeper(duration: leaseDuration)
        self.openSession = session
        self.metrics = metrics
        self.logger = logger
        self.now = now
        tick = min(.seconds(1), leaseDuration / 4)
    }

    /// The lease every claim of this node asks for.
    var claimLease: ClaimLease { ClaimLease(owner: node.id, duration: leases.duration.timeInterval) }

    /// Takes the node's liveness lock, then joins (freeing what its previous run held); throws when another
    /// process runs with this node id, having changed nothing of that process's.
    func join() throws {
        let number = try cluster.register(node, at: now())
        if let openSession {
            do {
                let opened = try openSession(number)
                session.withLock { $0 = opened }
            } catch let refused as NodeRefusal {
                // It held the node's own lock before it was refused: no process runs with this id, so the row says
                // stopped rather than leave a node that looks gone in `islet cluster status`.
                try? cluster.leave(node.id, at: now())
                throw refused
            }
        }
        do {
            _ = try cluster.join(node, at: now())
        } catch {
            session.withLock { $0?.close(); $0 = nil }
            throw error
        }
        logger.info("joined the cluster", ["node": .string(node.id.rawValue), "number": .int(Int64(number))])
        countRunningNodes()
    }

    /// Nodes running on the database, this one included (at least 1), as of the last heartbeat.
    var runningNodes: Int { running.load(ordering: .relaxed) }

    /// Counts the nodes that beat in the last three heartbeats and have not stopped (a node frozen or cut off counts
    /// until then). A failed read keeps the last count.
    private func countRunningNodes() {
        guard let nodes = try? cluster.nodes(since: now().addingTimeInterval(-3 * Self.heartbeat.timeInterval)) else { return }
        let count = nodes.filter { $0.stoppedAt == nil && $0.alive != false }.count
        running.store(max(1, count), ordering: .relaxed)
    }

    /// How often the node says it runs (`islet cluster status`) and counts the nodes running.
    static let heartbeat: Duration = .seconds(5)

    /// Runs the node's thread: `wake` is called when another node accepted work or a rescue freed some.
    func start(wake: @escaping @Sendable () -> Void) {
        threads.start("islet-node") { [self] in run(wake: wake) }
    }

    private var stopping: Bool { stopRequested.withLock { $0 } }

    /// How long this node must have reached the database without a break before it rescues other nodes' leases: a
    /// lease. After a failover or a database restart every node's session ended at once, and the new server holds
    /// none of their locks until each node is back: a node back first would take every other node for gone, and
    /// their work in flight, whose answers they still hold, would be sent again. Within a lease they are back,
    /// take their locks again, renew their leases (expired or not, while no one rescued them) and record what they
    /// sent; past it, a node not back is gone, and its leases run out by then anyway.
    var rescueGrace: Duration { leases.duration }

    private func run(wake: @Sendable () -> Void) {
        var nextTick = ContinuousClock.now
        var nextHeartbeat = ContinuousClock.now + Self.heartbeat
        var reported: String?
        // Since when the node reached the database at every tick (its session up, its renewals and rescues done).
        var reachableSince: ContinuousClock.Instant? = .now
        while !stopping {
            let wait = min(max(.zero, nextTick - .now), .milliseconds(250))
            if let session = session.withLock({ $0 }) {
                if session.waitForWork(timeout: wait) { wake() }
                // Said once a cause: while the session is down the node claims nothing (`isAlive`).
                let failure = session.reopenFailure
                if let failure, failure != reported {
                    logger.warning("the liveness session could not be opened again; this node claims no work until it is", ["error": .string(failure)])
                }
                reported = failure
            } else {
                idle.lock()
                if !stopping { _ = idle.wait(until: Date().addingTimeInterval(wait.timeInterval)) }
                idle.unlock()
            }
            guard !stopping, ContinuousClock.now >= nextTick else { continue }
            nextTick = .now + tick
            if renew() && isAlive {
                reachableSince = reachableSince ?? .now
            } else {
                reachableSince = nil
            }
            if let since = reachableSince, ContinuousClock.now - since >= rescueGrace, !rescue(wake: wake) { reachableSince = nil }
            if ContinuousClock.now >= nextHeartbeat {
                nextHeartbeat = .now + Self.heartbeat
                do { try cluster.heartbeat(node.id, at: now()) } catch { logger.warning("cluster heartbeat failed", ["error": .string("\(error)")]) }
                countRunningNodes()
            }
        }
    }

    /// Renews the leases held; false when the database could not be reached (`unreachable`).
    private func renew() -> Bool {
        let asked = leases.held
        guard !asked.isEmpty else { return true }
        let sentAt = ContinuousClock.now
        do {
            let lost = leases.apply(try cluster.renew(asked, of: node.id, for: leases.duration.timeInterval), sentAt: sentAt)
            if lost > 0 {
                logger.warning("leases were rescued by another node; their work is theirs now", ["leases": .int(Int64(lost))])
            }
            return true
        } catch {
            // Not renewed: the local deadlines run on, and workers stop sending when they pass.
            logger.warning("lease renewal failed", ["error": .string("\(error)")])
            return !Self.unreachable(error)
        }
    }

    /// Frees the work of leases that expired or whose node is gone; false when the database could not be reached
    /// (`unreachable`).
    private func rescue(wake: @Sendable () -> Void) -> Bool {
        do {
            let report = try cluster.rescue(at: now())
            guard !report.isEmpty else { return true }
            metrics.count { counts in
                counts.rescuedLeases += report.leases
                counts.rescuedJobs += report.jobs
                counts.rescuedDeliveries += report.deliveries
            }
            logger.warning("rescued work of leases that expired or whose node is gone", [
                "leases": .int(Int64(report.leases)), "jobs": .int(Int64(report.jobs)), "deliveries": .int(Int64(report.deliveries)),
            ])
            wake()
            return true
        } catch {
            logger.warning("lease rescue failed", ["error": .string("\(error)")])
            return !Self.unreachable(error)
        }
    }

    /// The database could not be reached (or failed), as opposed to a row another transaction held (`.busy`).
    static func unreachable(_ error: any Error) -> Bool { (error as? StoreError)?.code != .busy }

    /// Whether the liveness session holds its lock (always true without one: SQLite's single server).
    var isAlive: Bool { session.withLock { $0 }?.isAlive ?? true }

    /// Stops the thread (within `deadline`), leaves the cluster and closes the session.
    func stop(deadline: ContinuousClock.Instant) {
        stopRequested.withLock { $0 = true }
        idle.lock()
        idle.broadcast()
        idle.unlock()
        session.withLock { $0 }?.interrupt()
        threads.waitForExit(by: deadline)
        do { try cluster.leave(node.id, at: now()) } catch { logger.warning("could not leave the cluster cleanly", ["error": .string("\(error)")]) }
        session.withLock { $0?.close(); $0 = nil }
    }
}
