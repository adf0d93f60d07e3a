import Foundation
import IsletSQL
import IsletStore
import Synchronization

/// A node's liveness session on PostgreSQL (issue 14): a connection of its own that holds the node's advisory
/// lock for as long as the process runs (the server releases it when the connection ends, kill -9 included)
/// and LISTENs for the work other nodes accept. Lost (a server restart), it reconnects at the next wait.
///
/// `@unchecked Sendable`: the connection is only touched under `lock`, by the node's thread.
public final class PostgresNodeSession: NodeSession, @unchecked Sendable {
    private let url: String
    private let origin: String
    private let number: Int
    /// This node delivers only where no other node runs (`--apns simulator`: its phones live in this process).
    private let sole: Bool
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var nextAttempt = ContinuousClock.now
    private let alive = Atomic<Bool>(false)
    /// A pipe whose read end a wait also polls: `interrupt()` ends the wait at once (shutdown).
    private let wakeUp: (read: Int32, write: Int32)

    /// Opens the session and takes node `number`'s lock; throws if another process holds it. `sole`: the node
    /// runs alone (the simulator's); it and every other node hold the delivery lock (`deliveryLockKey`), it
    /// exclusively and the others shared, so neither can join the other, whichever starts first or both at once.
    public init(url: String, number: Int, sole: Bool = false) throws {
        self.url = url
        self.origin = PostgresDatabase.redacted(url)
        self.number = number
        self.sole = sole
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw StoreError(.io, "cannot make the liveness session's wake-up pipe") }
        wakeUp = (ends[0], ends[1])
        do {
            try open()
        } catch {
            Glibc.close(ends[0])
            Glibc.close(ends[1])
            throw error
        }
    }

    deinit {
        Glibc.close(wakeUp.read)
        Glibc.close(wakeUp.write)
    }

    public func interrupt() {
        var byte: UInt8 = 1
        _ = write(wakeUp.write, &byte, 1)
    }

    /// The delivery lock's key beside the nodes' numbers (which start at 1).
    static let deliveryLockKey = 0

    private func open() throws {
        let connection = try PostgresConnection(url: url, origin: origin)
        let locked = try connection.query("SELECT pg_try_advisory_lock(\(SQLDialect.nodeLockClass), CAST(? AS INTEGER)) AS locked", [.int(Int64(number))])
        guard locked.first?["locked"].bool == true else {
            throw StoreError(.conflict, "node number \(number) is held by another running process on \(origin): two nodes run with one --node-id")
        }
        let delivery = try connection.query("SELECT \(sole ? "pg_try_advisory_lock" : "pg_try_advisory_lock_shared")(\(SQLDialect.nodeLockClass), \(Self.deliveryLockKey)) AS locked")
        guard delivery.first?["locked"].bool == true else {
            // Who holds it (a simulator node exclusively; any node, shared), named from the locks each node's session
            // holds. The connection closes with this error, and this node's locks with it.
            let others = try connection.query("""
                SELECT n.id, n.host, n.pid FROM nodes n
                WHERE n.number != ? AND EXISTS (
                    SELECT 1 FROM pg_locks a JOIN pg_locks b ON b.pid = a.pid
                    WHERE a.locktype = 'advisory' AND a.granted AND a.objsubid = 2 AND a.classid = CAST(\(SQLDialect.nodeLockClass) AS oid)
                      AND a.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND a.objid = \(Self.deliveryLockKey) \(sole ? "" : "AND a.mode = 'ExclusiveLock'")
                      AND b.locktype = 'advisory' AND b.granted AND b.objsubid = 2 AND b.classid = a.classid AND b.objid = CAST(n.number AS oid))
                ORDER BY n.number
                """, [.int(Int64(number))]).map { "\($0["id"].text ?? "?") (\($0["host"].text ?? "?"), pid \($0["pid"].int ?? 0))" }
            let named = others.isEmpty ? "another node" : "node " + others.joined(separator: ", node ")
            throw NodeRefusal(sole
                ? "--apns simulator runs on one node only, and \(named) is running on this database; with several nodes use --apns apple"
                : "\(named) runs with --apns simulator on this database, and its simulated phones live in that process: stop it, or run every node with --apns apple")
        }
        let channel = try connection.query("SELECT \(SQLDialect.workChannel) AS channel")[0]["channel"].text ?? "islet"
        try connection.execute("LISTEN \"\(channel.replacingOccurrences(of: "\"", with: "\"\""))\"")
        self.connection = connection
        alive.store(true, ordering: .relaxed)
    }

    public var isAlive: Bool { alive.load(ordering: .relaxed) }

    public var reopenFailure: String? { failureText.withLock { $0 } }
    private let failureText = Mutex<String?>(nil)

    public func waitForWork(timeout: Duration) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if connection == nil {
            guard ContinuousClock.now >= nextAttempt else {
                lock.unlock()
                Thread.sleep(forTimeInterval: timeout / .seconds(1))
                lock.lock()
                return false
            }
            nextAttempt = .now + .seconds(1)
            do {
                try open()
                failureText.withLock { $0 = nil }
                return true   // work may have been accepted while the session was down
            } catch {
                failureText.withLock { $0 = "\(error)" }
                return false
            }
        }
        do {
            return try connection?.waitForNotification(timeout: timeout, interrupt: wakeUp.read) ?? false
        } catch {
            connection = nil
            alive.store(false, ordering: .relaxed)
            return false
        }
    }

    public func close() {
        interrupt()
        lock.lock()
        defer { lock.unlock() }
        connection = nil   // ends the server's session: the lock goes with it
        alive.store(false, ordering: .relaxed)
    }
}
