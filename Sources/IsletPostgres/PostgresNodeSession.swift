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
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var nextAttempt = ContinuousClock.now
    private let alive = Atomic<Bool>(false)
    /// A pipe whose read end a wait also polls: `interrupt()` ends the wait at once (shutdown).
    private let wakeUp: (read: Int32, write: Int32)

    /// Opens the session and takes node `number`'s lock; throws if another process holds it.
    public init(url: String, number: Int) throws(StoreError) {
        self.url = url
        self.origin = PostgresDatabase.redacted(url)
        self.number = number
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

    private func open() throws(StoreError) {
        let connection = try PostgresConnection(url: url, origin: origin)
        let locked = try connection.query("SELECT pg_try_advisory_lock(\(SQLDialect.nodeLockClass), CAST(? AS INTEGER)) AS locked", [.int(Int64(number))])
        guard locked.first?["locked"].bool == true else {
            throw StoreError(.conflict, "node number \(number) is held by another running process on \(origin): two nodes run with one --node-id")
        }
        let channel = try connection.query("SELECT \(SQLDialect.workChannel) AS channel")[0]["channel"].text ?? "islet"
        try connection.execute("LISTEN \"\(channel.replacingOccurrences(of: "\"", with: "\"\""))\"")
        self.connection = connection
        alive.store(true, ordering: .relaxed)
    }

    public var isAlive: Bool { alive.load(ordering: .relaxed) }

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
                return true   // work may have been accepted while the session was down
            } catch {
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
