import Foundation
import Testing
import IsletSQL
import IsletStore
import Synchronization

/// The pool bounds how many connections are open (each is a PostgreSQL server process): callers beyond the
/// bound wait for one to come back, and fail with a clear error when none does in time.
@Suite("Connection pool bounds")
struct ConnectionPoolTests {
    /// A connection that only counts itself; the pool never looks inside.
    final class CountedConnection: SQLConnection, @unchecked Sendable {
        static let opened = Atomic<Int>(0)
        init() { Self.opened.add(1, ordering: .relaxed) }
        func execute(_ sql: String) throws(StoreError) {}
        func run(_ sql: String, _ parameters: [SQLValue]) throws(StoreError) -> Int { 0 }
        func query(_ sql: String, _ parameters: [SQLValue], planning: SQLPlanning) throws(StoreError) -> [SQLRow] { [] }
        func inTransaction<T>(_ body: () throws -> T) throws -> T { try body() }
    }

    // Synchronous, with a thread of its own for the waiter: other suites may keep the cooperative threads
    // busy for seconds, which must not decide whether the waiter waits.
    @Test func aCallerBeyondTheBoundWaitsForAConnectionToComeBack() throws {
        let opened = Atomic<Int>(0)
        let pool = SQLConnectionPool<CountedConnection>(maximumIdle: 1, maximumOpen: 1, waitLimit: .seconds(60),
                                                        connect: { () throws(StoreError) in opened.add(1, ordering: .relaxed); return CountedConnection() })
        let first = try pool.checkOut()
        let got = Mutex<Result<CountedConnection, StoreError>?>(nil)
        Thread { let result = Result { () throws(StoreError) in try pool.checkOut() }; got.withLock { $0 = result } }.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while pool.waitingCallers == 0 && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.002) }
        #expect(pool.waitingCallers == 1, "the second caller waits while the only connection is out")
        #expect(got.withLock { $0 } == nil)
        pool.checkIn(first)
        let end = ContinuousClock.now + .seconds(10)
        while got.withLock({ $0 }) == nil && ContinuousClock.now < end { Thread.sleep(forTimeInterval: 0.002) }
        let second = try #require(try got.withLock { $0 }?.get())
        #expect(second === first, "the waiter reuses the returned connection")
        #expect(opened.load(ordering: .relaxed) == 1, "never more than one open")
    }

    @Test func noConnectionComingBackFailsWithTheBoundInTheMessage() throws {
        let pool = SQLConnectionPool<CountedConnection>(maximumIdle: 2, maximumOpen: 2, waitLimit: .milliseconds(50),
                                                        connect: { () throws(StoreError) in CountedConnection() })
        let held = [try pool.checkOut(), try pool.checkOut()]
        do {
            _ = try pool.checkOut()
            Issue.record("a third checkout succeeded beyond the bound of 2")
        } catch {
            #expect(error.message.contains("all 2 in use"), "\(error.message)")
        }
        pool.checkIn(held[0])
        #expect(try pool.checkOut() === held[0])
    }

    @Test func aConnectionThatCannotGoBackFreesItsPlace() throws {
        let pool = SQLConnectionPool<CountedConnection>(maximumIdle: 1, maximumOpen: 1, waitLimit: .milliseconds(50),
                                                        connect: { () throws(StoreError) in CountedConnection() },
                                                        reusable: { _ in false })
        let first = try pool.checkOut()
        pool.checkIn(first)   // dropped, not kept
        let second = try pool.checkOut()
        #expect(second !== first, "a dropped connection is replaced by a new one")
    }

    /// The connection a write ran on, as the pool gave it to the group.
    private func writersConnection(_ pool: SQLConnectionPool<CountedConnection>) throws -> CountedConnection {
        try pool.inWriteTransaction { connection in try #require(connection as? CountedConnection) }
    }

    @Test func writesKeepOneConnectionThatReadersDoNotTake() throws {
        let pool = SQLConnectionPool<CountedConnection>(maximumIdle: 4, maximumOpen: 4, waitLimit: .milliseconds(50), keepsWriterApart: true,
                                                        connect: { () throws(StoreError) in CountedConnection() })
        let writer = try writersConnection(pool)
        let reader = try pool.checkOut()
        #expect(reader !== writer, "a reader gets a connection of its own while the writers' is free")
        pool.checkIn(reader)
        #expect(try writersConnection(pool) === writer, "the next group writes on the same connection")
        #expect(try pool.checkOut() === reader, "and readers keep theirs")
    }

    @Test func theWritersConnectionServesAReaderRatherThanLetItWait() throws {
        let pool = SQLConnectionPool<CountedConnection>(maximumIdle: 1, maximumOpen: 1, waitLimit: .milliseconds(50), keepsWriterApart: true,
                                                        connect: { () throws(StoreError) in CountedConnection() })
        let writer = try writersConnection(pool)
        let reader = try pool.checkOut()   // the bound is 1: waiting would fail after 50 ms
        #expect(reader === writer)
        pool.checkIn(reader)
        #expect(try writersConnection(pool) === writer, "back with the readers, it still serves the next write")
    }

    @Test func byDefaultTheWritersConnectionGoesBackToTheReaders() throws {
        // PostgreSQL's pool: no cache to keep, and a server restart should cost one failed call, not one a kind.
        let pool = SQLConnectionPool<CountedConnection>(maximumIdle: 4, maximumOpen: 4, waitLimit: .milliseconds(50),
                                                        connect: { () throws(StoreError) in CountedConnection() })
        let writer = try writersConnection(pool)
        #expect(try pool.checkOut() === writer)
    }
}
