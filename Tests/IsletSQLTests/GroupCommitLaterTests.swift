import Foundation
import Testing
import IsletSQL
import IsletStore
import Synchronization

/// Writes that do not wait (`GroupCommit.writeLater`, an API call whose connection waits suspended): they join the
/// groups of the writes that wait, keep their own outcomes, and are led by a thread of the group commit's own when no
/// waiting writer leads.
@Suite("Group commit: writes that do not wait")
struct GroupCommitLaterTests {
    struct Refused: Error, Equatable { let n: Int }

    /// Waits for `condition` with a deadline; the expectation after it says what did not happen.
    static func waitFor(_ condition: () -> Bool) {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
    }

    @Test(arguments: Engine.allCases) func writesThatDoNotWaitKeepTheirOwnOutcomesBesideWritesThatDo(_ engine: Engine) throws {
        let db = try engine.open()
        let database = db.database
        _ = try database.withConnection { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('LATER-00001', 'l', 'com.example.l', 0)")
        }
        let outcomes = Mutex<[Int: Result<Int, Refused>]>([:])
        @Sendable func insert(_ n: Int, _ c: any SQLConnection) throws -> Int {
            try c.run("INSERT INTO filters (application, name, operator, conditions, created_at) VALUES ('LATER-00001', ?, 'AND', '[]', 0)", [.text("f\(n)")])
            if n % 5 == 0 { throw Refused(n: n) }   // after its insert: the insert must not survive
            return n * 10
        }
        @Sendable func record(_ n: Int, _ result: Result<Int, any Error>) {
            outcomes.withLock { $0[n] = result.mapError { ($0 as? Refused) ?? Refused(n: -1) } }
        }
        for n in 0..<40 {
            if n % 2 == 0 {
                database.inWriteTransaction(reading: nil, { c, _ in try insert(n, c) }, then: { record(n, $0) })
            } else {
                Thread { record(n, Result { try database.write(rethrowing: { c in try insert(n, c) }) }) }.start()
            }
        }
        Self.waitFor { outcomes.withLock { $0.count } == 40 }
        let got = outcomes.withLock { $0 }
        #expect(got.count == 40, "every write answered")
        for n in 0..<40 {
            #expect(got[n] == (n % 5 == 0 ? .failure(Refused(n: n)) : .success(n * 10)), "write \(n): its own outcome")
        }
        let stored = try database.withConnection { (c) throws(StoreError) in
            Set(try c.query("SELECT name FROM filters").compactMap { $0["name"].text })
        }
        #expect(stored == Set((0..<40).filter { $0 % 5 != 0 }.map { "f\($0)" }))
    }

    /// The lead passes both ways: from a group led for writes that do not wait to a writer that waits, and back.
    @Test func theLeadPassesBetweenWritesThatWaitAndWritesThatDoNot() throws {
        let commit = GroupCommit(budget: .seconds(600))
        let connection = GroupCommitTests.NullConnection()
        let order = Mutex<[String]>([])
        let answered = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0)
        let transaction: @Sendable (_ group: (any SQLConnection) throws -> Void) throws -> Void = { group in try group(connection) }
        func later(_ name: String, holding: Bool = false) {
            commit.writeLater(reading: nil, { _, _ in
                order.withLock { $0.append(name) }
                if holding { release.wait() }
                return name
            }, transaction: transaction, then: { result in answered.withLock { $0.append((try? result.get()) ?? "failed \(name)") } })
        }
        func waiting(_ name: String, holding: Bool = false) {
            Thread {
                let result = try? commit.write({ _ in
                    order.withLock { $0.append(name) }
                    if holding { release.wait() }
                    return name
                }, transaction: transaction)
                answered.withLock { $0.append(result ?? "failed \(name)") }
            }.start()
        }
        // A write that does not wait leads (on the group commit's thread) and holds its group; a waiting writer queues.
        later("later 1", holding: true)
        Self.waitFor { order.withLock { $0 } == ["later 1"] }
        waiting("waits 1", holding: true)
        Self.waitFor { commit.waiting == 1 }
        release.signal()
        // The waiting writer was given the lead: its body runs in the next group, on its own thread.
        Self.waitFor { order.withLock { $0 } == ["later 1", "waits 1"] }
        #expect(order.withLock { $0 } == ["later 1", "waits 1"])
        #expect(answered.withLock { $0 } == ["later 1"])
        // While it holds its group, a write that does not wait queues; the lead comes back to the group commit's thread.
        later("later 2")
        Self.waitFor { commit.waiting == 1 }
        release.signal()
        Self.waitFor { answered.withLock { $0.count } == 3 }
        #expect(order.withLock { $0 } == ["later 1", "waits 1", "later 2"])
        #expect(Set(answered.withLock { $0 }) == ["later 1", "waits 1", "later 2"])
        #expect(commit.waiting == 0)
    }

    /// A write that does not wait answers with its error when its group's transaction cannot begin.
    @Test func aWriteThatDoesNotWaitGetsItsGroupsFailure() throws {
        let commit = GroupCommit()
        let outcome = Mutex<Result<Int, any Error>?>(nil)
        commit.writeLater(reading: nil, { _, _ in 1 }, transaction: { _ in throw Refused(n: 7) }, then: { result in outcome.withLock { $0 = result } })
        Self.waitFor { outcome.withLock { $0 } != nil }
        let result = outcome.withLock { $0 }
        #expect(throws: Refused(n: 7)) { try result?.get() }
    }
}
