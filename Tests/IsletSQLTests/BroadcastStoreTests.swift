import Foundation
import Testing
import IsletCore
import IsletStore
@testable import IsletSQL

private let app = ApplicationCode("SHOPA-00001")!
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)

/// X5 in the store, on both engines: channel records, and broadcasts queued per environment, claimed,
/// recorded, retried and pruned.
@Suite("Broadcast channels and broadcasts in the store (X5), on both engines")
struct BroadcastStoreTests {
    func database(_ engine: Engine) throws -> EngineDatabase {
        let db = try engine.open()
        try db.applications().createApplication(Application(code: app, name: "x", bundleID: "com.example.x", createdAt: t0), tokens: [], apnsKey: nil)
        return db
    }

    @Test(arguments: Engine.allCases) func channelRecordsAreKeptPerNameAndEnvironment(_ engine: Engine) throws {
        let db = try database(engine)
        let record = ChannelRecord(name: "match-42", policy: .mostRecent, createdAt: t0, ids: [.production: "cA==", .sandbox: "cw=="])
        try db.channels.saveChannel(record, in: app)
        #expect(throws: StoreError(.conflict, "a channel named 'match-42' already exists")) { try db.channels.saveChannel(record, in: app) }
        try db.channels.saveChannel(ChannelRecord(name: "a", policy: .none, createdAt: t0, ids: [.sandbox: "YQ=="]), in: app)
        #expect(try db.channels.channel(named: "match-42", in: app) == record)
        #expect(try db.channels.channels(in: app, after: nil, limit: 1).map(\.name) == ["a"])
        #expect(try db.channels.channels(in: app, after: "a", limit: 5) == [record], "a page is whole records, both environments")
        #expect(try db.channels.channelCount(in: app, gateway: .sandbox) == 2 && db.channels.channelCount(in: app, gateway: .production) == 1)
        #expect(try db.channels.deleteChannel(named: "match-42", gateway: .production, in: app))
        #expect(try db.channels.channel(named: "match-42", in: app)?.ids == [.sandbox: "cw=="], "the record keeps what Apple still has")
        #expect(try db.channels.deleteChannel(named: "match-42", gateway: .sandbox, in: app))
        #expect(try db.channels.channel(named: "match-42", in: app) == nil)
    }

    @Test(arguments: Engine.allCases) func aBroadcastIsOneRequestPerEnvironmentClaimedRecordedAndPruned(_ engine: Engine) throws {
        let db = try database(engine)
        try db.channels.saveChannel(ChannelRecord(name: "none", policy: .none, createdAt: t0, ids: [.production: "cA==", .sandbox: "cw=="]), in: app)
        try db.channels.saveChannel(ChannelRecord(name: "kept", policy: .mostRecent, createdAt: t0, ids: [.production: "aw=="]), in: app)
        let expires = t0.addingTimeInterval(3600)
        #expect(throws: AcceptRefusal(index: 1, field: "channel", message: "no channel named 'gone' in this application (create it with createLiveActivityChannel)")) {
            try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "A", channel: "none", payload: [1], priority: 10, expiresAt: expires),
                                                NewBroadcast(code: "B", channel: "gone", payload: [2], priority: 10, expiresAt: expires)], in: app, at: t0)
        }
        #expect(try db.broadcasts.nextBroadcastDue() == nil, "all or none: the first was not kept either")
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "A", channel: "none", payload: [1], priority: 10, expiresAt: expires),
                                            NewBroadcast(code: "B", channel: "kept", payload: [2, 2], priority: 5, expiresAt: expires)], in: app, at: t0)
        #expect(try db.broadcasts.nextBroadcastDue() == t0)
        let due = try db.broadcasts.claimDueBroadcasts(at: t0, limit: 10, claimFor: 60)
        #expect(due.map(\.code) == ["A", "A", "B"] && Set(due.prefix(2).map(\.gateway)) == [.production, .sandbox])
        #expect(due.map(\.expiration) == [0, 0, Int64(expires.timeIntervalSince1970)], "0 on a channel that stores nothing")
        #expect(try db.broadcasts.claimDueBroadcasts(at: t0, limit: 10, claimFor: 60).isEmpty, "claimed")
        #expect(try db.broadcasts.nextBroadcastDue() == t0.addingTimeInterval(60), "a claim not recorded is due again")
        try db.broadcasts.recordBroadcasts([
            BroadcastResult(id: due[0].id, state: .sent, status: 200, reason: nil, uniqueID: "u1", nextAt: nil),
            BroadcastResult(id: due[1].id, state: .retrying, status: 503, reason: "ServiceUnavailable", uniqueID: nil, nextAt: t0.addingTimeInterval(2)),
            BroadcastResult(id: due[2].id, state: .failed, status: 400, reason: "ChannelNotRegistered", uniqueID: nil, nextAt: nil),
        ], at: t0)
        let details = try #require(try db.broadcasts.broadcastDetails(code: "A", in: app))
        #expect(details.channel == "none" && details.requests.map(\.state) == ["sent", "retrying"] && details.requests[0].uniqueID == "u1")
        #expect(details.requests[1].nextAttemptAt == t0.addingTimeInterval(2) && details.requests.allSatisfy { $0.attempts == 1 && $0.bytes == 1 })
        let retry = try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(2), limit: 10, claimFor: 60)
        #expect(retry.map(\.id) == [due[1].id] && retry[0].attempts == 1)
        // Retention: settled broadcasts go with the rest of the delivery records, whole.
        _ = try db.messages.pruneFinished(before: t0.addingTimeInterval(1), limit: 100)
        #expect(try db.broadcasts.broadcastDetails(code: "B", in: app) == nil)
        #expect(try db.broadcasts.broadcastDetails(code: "A", in: app)?.requests.map(\.state) == ["sent", "sending"],
                "one still going keeps its other environment's record")
    }

    /// The pruner deletes settled broadcasts older than its cutoff, oldest first, and stops at the first one young enough
    /// to keep: one written later with an older time waits for the pass after that one ages.
    @Test(arguments: Engine.allCases) func pruningStopsAtTheFirstBroadcastYoungEnoughToKeep(_ engine: Engine) throws {
        let db = try database(engine)
        try db.channels.saveChannel(ChannelRecord(name: "score", policy: .none, createdAt: t0, ids: [.production: "cA=="]), in: app)
        for (code, at) in [("OLD", t0), ("YOUNG", t0.addingTimeInterval(100)), ("LATE", t0)] {
            try db.broadcasts.acceptBroadcasts([NewBroadcast(code: code, channel: "score", payload: [1], priority: 10, expiresAt: at.addingTimeInterval(3600))],
                                               in: app, at: at)
            let claimed = try db.broadcasts.claimDueBroadcasts(at: at, limit: 10, claimFor: 60)
            try db.broadcasts.recordBroadcasts(claimed.map { BroadcastResult(id: $0.id, state: .sent, status: 200, reason: nil, uniqueID: "u", nextAt: nil) }, at: at)
        }
        _ = try db.messages.pruneFinished(before: t0.addingTimeInterval(50), limit: 100)
        #expect(try db.broadcasts.broadcastDetails(code: "OLD", in: app) == nil)
        #expect(try db.broadcasts.broadcastDetails(code: "YOUNG", in: app) != nil, "younger than the cutoff")
        #expect(try db.broadcasts.broadcastDetails(code: "LATE", in: app) != nil, "after the first young one: the next pass")
        _ = try db.messages.pruneFinished(before: t0.addingTimeInterval(150), limit: 100)
        #expect(try db.broadcasts.broadcastDetails(code: "YOUNG", in: app) == nil)
        #expect(try db.broadcasts.broadcastDetails(code: "LATE", in: app) == nil)
    }

    /// As pushes: past its expiry a broadcast is not sent, and an older one on a channel gives way to a newer.
    @Test(arguments: Engine.allCases) func aLateOrStaleBroadcastIsSettledAtTheClaimNotSent(_ engine: Engine) throws {
        let db = try database(engine)
        try db.channels.saveChannel(ChannelRecord(name: "score", policy: .mostRecent, createdAt: t0, ids: [.production: "cA=="]), in: app)
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "OLD", channel: "score", payload: [1], priority: 10, expiresAt: t0.addingTimeInterval(60))],
                                           in: app, at: t0)
        let first = try db.broadcasts.claimDueBroadcasts(at: t0, limit: 10, claimFor: 60)
        try db.broadcasts.recordBroadcasts([BroadcastResult(id: first[0].id, state: .retrying, status: 503, reason: nil, uniqueID: nil,
                                                            nextAt: t0.addingTimeInterval(5))], at: t0)
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "NEW", channel: "score", payload: [2], priority: 10, expiresAt: t0.addingTimeInterval(60))],
                                           in: app, at: t0.addingTimeInterval(1))
        #expect(try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(5), limit: 10, claimFor: 60).map(\.code) == ["NEW"])
        #expect(try db.broadcasts.broadcastDetails(code: "OLD", in: app)?.requests.map(\.state) == ["superseded"])
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "LATE", channel: "score", payload: [3], priority: 10, expiresAt: t0.addingTimeInterval(2))],
                                           in: app, at: t0)
        #expect(try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(3), limit: 10, claimFor: 60).isEmpty)
        #expect(try db.broadcasts.broadcastDetails(code: "LATE", in: app)?.requests.first?.state == "expired")
    }

    /// An end waiting for its retry still goes when an update follows it (the old card of a renewal must end, A8);
    /// a newer broadcast that failed, or one to the channel created anew under the name, supersedes nothing.
    @Test(arguments: Engine.allCases) func anEndIsNeverSupersededNorByAFailedOrOtherChannelsBroadcast(_ engine: Engine) throws {
        let db = try database(engine)
        try db.channels.saveChannel(ChannelRecord(name: "score", policy: .mostRecent, createdAt: t0, ids: [.production: "cA=="]), in: app)
        let end = Array(#"{"aps":{"event":"end","timestamp":1,"content-state":{}}}"#.utf8)
        let update = Array(#"{"aps":{"event":"update","timestamp":2,"content-state":{}}}"#.utf8)
        let expires = t0.addingTimeInterval(60)
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "END", channel: "score", payload: end, priority: 10, expiresAt: expires)], in: app, at: t0)
        let first = try db.broadcasts.claimDueBroadcasts(at: t0, limit: 10, claimFor: 60)
        try db.broadcasts.recordBroadcasts([BroadcastResult(id: first[0].id, state: .retrying, status: 429, reason: "TooManyRequests", uniqueID: nil,
                                                            nextAt: t0.addingTimeInterval(5))], at: t0)
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "UPD", channel: "score", payload: update, priority: 10, expiresAt: expires)], in: app, at: t0)
        #expect(try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(5), limit: 10, claimFor: 60).map(\.code) == ["UPD", "END"])

        // The channel deleted and created anew under its name: another id, another audience.
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "OLD", channel: "score", payload: update, priority: 10, expiresAt: expires)], in: app, at: t0)
        _ = try db.channels.deleteChannel(named: "score", gateway: .production, in: app)
        try db.channels.saveChannel(ChannelRecord(name: "score", policy: .mostRecent, createdAt: t0, ids: [.production: "bmV3"]), in: app)
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "NEW", channel: "score", payload: update, priority: 10, expiresAt: expires)], in: app, at: t0)
        let claimed = try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(6), limit: 10, claimFor: 60)
        #expect(claimed.map(\.code) == ["OLD", "NEW"] && claimed.map(\.channelID) == ["cA==", "bmV3"])
        // A newer one that failed leaves the older to go.
        try db.broadcasts.recordBroadcasts([BroadcastResult(id: claimed[0].id, state: .retrying, status: 503, reason: nil, uniqueID: nil,
                                                            nextAt: t0.addingTimeInterval(7)),
                                            BroadcastResult(id: claimed[1].id, state: .failed, status: 400, reason: "BadChannelId", uniqueID: nil,
                                                            nextAt: nil)], at: t0)
        try db.broadcasts.acceptBroadcasts([NewBroadcast(code: "BAD", channel: "score", payload: update, priority: 10, expiresAt: expires)], in: app, at: t0)
        let bad = try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(6), limit: 10, claimFor: 60)
        try db.broadcasts.recordBroadcasts([BroadcastResult(id: bad[0].id, state: .failed, status: 400, reason: "BadChannelId", uniqueID: nil, nextAt: nil)], at: t0)
        #expect(try db.broadcasts.claimDueBroadcasts(at: t0.addingTimeInterval(7), limit: 10, claimFor: 60).map(\.code) == ["OLD"])
    }
}
