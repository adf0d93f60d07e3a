import Foundation
import Synchronization
import Testing
import IsletAPI
import IsletCore
@testable import IsletHTTP
import IsletStore
@testable import IsletConsole

/// Which applications' pages hear `change` (issue 17), from the messages the store reports, without sockets.
@Suite("Console change events")
struct ConsoleEventsTests {
    /// A store whose messages the test writes: created (id, application) and finished (id, application, when).
    final class Messages: ConsoleStore, Sendable {
        let created = Mutex<[(id: Int64, application: ApplicationCode)]>([])
        let finished = Mutex<[(id: Int64, application: ApplicationCode, at: Date)]>([])

        func consoleChanges(afterMessage: Int64, open: [Int64]?) throws(StoreError) -> ConsoleChanges {
            let all = created.withLock { $0 }, done = finished.withLock { Set($0.map(\.id)) }
            let new = all.filter { $0.id > afterMessage }.sorted { $0.id < $1.id }
            // As the database answers: of the new ones and those asked about (nil: all unfinished), which finished.
            let asked = Set(new.map(\.id)).union(open ?? all.map(\.id).filter { !done.contains($0) })
            return ConsoleChanges(created: new, finished: all.filter { asked.contains($0.id) && done.contains($0.id) },
                                  open: asked.filter { !done.contains($0) }.sorted())
        }
        func lastMessageID() throws(StoreError) -> Int64 { created.withLock { $0.map(\.id).max() ?? 0 } }

        func createConsoleSession(_ session: ConsoleSession) throws(StoreError) {}
        func consoleSession(idHash: [UInt8], at date: Date) throws(StoreError) -> ConsoleSession? { nil }
        func deleteConsoleSession(idHash: [UInt8]) throws(StoreError) {}
        func deleteExpiredConsoleSessions(before date: Date) throws(StoreError) -> Int { 0 }
        func consolePassword() throws(StoreError) -> String? { nil }
        func setConsolePassword(_ record: String, at date: Date) throws(StoreError) {}
        func consoleOverview(of application: ApplicationCode, pushesSince: Date) throws(StoreError) -> ConsoleOverview { ConsoleOverview() }
        func activities(in application: ApplicationCode, state: ActivityState?, attributesType: String?, before: Int64,
                        limit: Int) throws(StoreError) -> [ActivitySummary] { [] }
        func messages(ofActivity activity: Int64, before: Int64, limit: Int) throws(StoreError) -> [MessageSummary] { [] }
        func devices(in application: ApplicationCode, hwidPrefix prefix: String, after: String, limit: Int) throws(StoreError) -> [DeviceSummary] { [] }
        func devices(in application: ApplicationCode, userID: String, limit: Int) throws(StoreError) -> [DeviceSummary] { [] }
    }

    let a = ApplicationCode("AAAAA-00001")!, b = ApplicationCode("BBBBB-00002")!
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aPageHearsOfNewAndFinishedMessagesOnceEach() throws {
        let store = Messages()
        store.created.withLock { $0 = [(1, a), (2, b)] }
        let events = ConsoleEvents(store: store, logger: .discard)
        #expect(try events.changedApplications(at: t0).isEmpty, "the first look only finds where things stand")
        store.created.withLock { $0.append((3, a)) }
        #expect(try events.changedApplications(at: t0 + 1) == [a])
        #expect(try events.changedApplications(at: t0 + 2).isEmpty, "each message once")
        store.finished.withLock { $0.append((2, b, t0 + 2)) }
        #expect(try events.changedApplications(at: t0 + 3) == [b])
        #expect(try events.changedApplications(at: t0 + 4).isEmpty, "a finish is told once though it is read again for a while")
    }

    /// A fan-out or a retry may finish long after its message was created, hundreds of messages later: still told.
    @Test func aMessageFinishingLongAfterItWasCreatedIsTold() throws {
        let store = Messages()
        store.created.withLock { $0 = [(1, a)] }
        let events = ConsoleEvents(store: store, logger: .discard)
        _ = try events.changedApplications(at: t0)
        store.created.withLock { $0 += (2...600).map { ($0, b) } }
        #expect(try events.changedApplications(at: t0 + 1) == [b])
        #expect(try events.changedApplications(at: t0 + 2).isEmpty)
        store.finished.withLock { $0.append((1, a, t0 + 3)) }
        #expect(try events.changedApplications(at: t0 + 3) == [a], "the open message was watched, not looked for by its id")
    }

    /// On PostgreSQL a message that took a lower id may commit after one with a higher id: it is still told.
    @Test func aMessageCommittedLateWithALowerIDIsNotMissed() throws {
        let store = Messages()
        store.created.withLock { $0 = [(10, a)] }
        let events = ConsoleEvents(store: store, logger: .discard)
        _ = try events.changedApplications(at: t0)
        store.created.withLock { $0.append((12, a)) }
        #expect(try events.changedApplications(at: t0 + 1) == [a])
        store.created.withLock { $0.append((11, b)) }
        #expect(try events.changedApplications(at: t0 + 2) == [b])
    }

    /// What happens right after a page subscribes is news to it, even before the first look.
    @Test func aMessageRightAfterSubscribingIsTold() throws {
        let store = Messages()
        store.created.withLock { $0 = [(1, a)] }
        let events = ConsoleEvents(store: store, logger: .discard, now: { [t0] in t0 })
        try events.subscribe(HTTPEventStream(), application: a, session: [1], signedIn: { true })
        store.created.withLock { $0.append((2, a)) }
        store.finished.withLock { $0.append((2, a, t0)) }
        #expect(try events.changedApplications(at: t0) == [a])
    }

    /// A page whose session ended (signed out, expired, token revoked) stops hearing anything at the next heartbeat.
    @Test func aStreamWhoseSessionEndedIsFinishedAtTheHeartbeat() throws {
        let signedIn = Atomic<Bool>(true)
        let events = ConsoleEvents(store: Messages(), logger: .discard, now: { [t0] in t0 }, heartbeat: .zero)
        let open = HTTPEventStream(), ended = HTTPEventStream()
        try events.subscribe(open, application: a, session: [1], signedIn: { true })
        try events.subscribe(ended, application: a, session: [2], signedIn: { signedIn.load(ordering: .acquiring) })
        events.look()
        #expect(ended.send(": still here\n\n"), "signed in: the stream stays")
        signedIn.store(false, ordering: .releasing)
        events.look()
        #expect(!ended.send(": gone\n\n"), "finished at the heartbeat after its session ended")
        #expect(open.send(": still here\n\n"))
    }

    /// Issue 44: each stream holds a connection of the server's; one session opening a thousand took every slot. A
    /// session holds at most so many, an application (all its sessions) so many; a stream that ends frees its place.
    @Test func aSessionAndAnApplicationHoldSoManyStreams() throws {
        let events = ConsoleEvents(store: Messages(), logger: .discard, now: { [t0] in t0 }, perSession: 2, perApplication: 3)
        let first = HTTPEventStream()
        try events.subscribe(first, application: a, session: [1], signedIn: { true })
        try events.subscribe(HTTPEventStream(), application: a, session: [1], signedIn: { true })
        #expect(throws: RateLimited(message: ConsoleCredentials.tooManyStreams(2, of: "this session"), retryAfter: 5)) {
            try events.subscribe(HTTPEventStream(), application: a, session: [1], signedIn: { true })
        }
        try events.subscribe(HTTPEventStream(), application: a, session: [2], signedIn: { true })
        #expect(throws: RateLimited(message: ConsoleCredentials.tooManyStreams(3, of: "application \(a.rawValue)"), retryAfter: 5)) {
            try events.subscribe(HTTPEventStream(), application: a, session: [3], signedIn: { true })
        }
        try events.subscribe(HTTPEventStream(), application: b, session: [3], signedIn: { true })
        #expect(events.listeners == 4)
        first.released()   // its connection closed
        #expect(events.listeners == 3, "a stream that ends frees its place")
        try events.subscribe(HTTPEventStream(), application: a, session: [1], signedIn: { true })
    }
}
