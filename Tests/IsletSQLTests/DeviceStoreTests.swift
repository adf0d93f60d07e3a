import Foundation
import Testing
import IsletCore
import IsletStore
@testable import IsletSQL
import IsletSQLite

private let shop = ApplicationCode("SHOPA-00001")!
private let other = ApplicationCode("OTHER-00002")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)

private func token(_ n: Int) -> String { String(format: "%064x", n) }

/// One test's database with two applications, and the helpers the device tests share.
struct DeviceFixture {
    let db: EngineDatabase
    let devices: SQLDeviceStore

    init(_ engine: Engine) throws {
        db = try engine.open()
        for code in [shop, other] {
            try db.applications().createApplication(Application(code: code, name: "x", bundleID: "com.example.x", createdAt: now),
                                                    tokens: [], apnsKey: nil)
        }
        devices = db.devices
    }

    @discardableResult
    func register(_ hwid: String, _ n: Int, app: ApplicationCode = shop, language: String? = "en", os: String? = nil,
                  user: String? = nil, tags: [(name: String, change: TagChange)] = []) throws -> Device {
        try devices.registerDevice(DeviceRegistration(hwid: hwid, pushToken: token(n), language: language, osVersion: os, userID: user),
                                   tags: tags, in: app, at: now).device
    }

    func hwids(_ selection: TargetSelection, app: ApplicationCode = shop) throws -> Set<String> {
        Set(try devices.targets(selection, in: app, attributesType: nil, afterID: 0, limit: 1000).map(\.hwid))
    }

    func filter(_ conditions: JSONValue, _ join: FilterJoin = .and) throws -> TargetSelection {
        .filter(try FilterDefinition.parse(name: "f", join: join, conditions: conditions, tagTypes: try devices.tagTypes(in: shop)))
    }

    func populate() throws {
        try register("a", 1, language: "en", os: "17.10", user: "u1", tags: [("Level", .integer(5)), ("Sports", .list(["ski", "golf"])), ("City", .string("Lisbon"))])
        try register("b", 2, language: "pt", os: "17.2", user: "u2", tags: [("Level", .integer(10)), ("Sports", .list(["golf"])), ("City", .string("Porto"))])
        try register("c", 3, language: "en", os: "16.4", tags: [("Level", .integer(20))])
        try register("d", 4, language: nil, os: nil)
    }
}

@Suite("Devices, tags, tokens and targeting (D1–D4, X1), on both engines")
struct DeviceStoreTests {
    @Test(arguments: Engine.allCases) func registrationIsAnUpsertThatKeepsWhatIsNotResent(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        let first = try s.register("h1", 1, language: "en", os: "17.2", user: "u1")
        let again = try s.devices.registerDevice(DeviceRegistration(hwid: "h1", pushToken: token(9), gateway: .sandbox), tags: [], in: shop, at: now).device
        #expect(again.id == first.id)
        #expect(again.pushToken == token(9))
        #expect(again.gateway == .sandbox)
        #expect(again.language == "en" && again.osVersion == "17.2" && again.userID == "u1", "the SDK omits os_version; keep it")
    }

    @Test(arguments: Engine.allCases) func aPushTokenMovesToTheDeviceThatRegistersItLast(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("old-install", 1)
        try s.register("new-install", 1)
        #expect(try s.devices.device(hwid: "old-install", in: shop)?.pushToken == nil)
        #expect(try s.hwids(.devices([token(1)])) == ["new-install"])
    }

    @Test(arguments: Engine.allCases) func unregisterClearsTokensAndTargeting(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 1)
        try s.devices.setPushToStartToken(token(100), attributesType: "", hwid: "h1", in: shop, at: now)
        try s.devices.setActivityToken(token(200), activityID: "A", hwid: "h1", in: shop, at: now)
        #expect(try s.devices.unregisterDevice(hwid: "h1", in: shop, at: now))
        #expect(try !s.devices.unregisterDevice(hwid: "nobody", in: shop, at: now))
        #expect(try s.devices.targets(.devices(["h1"]), in: shop, attributesType: nil, afterID: 0, limit: 10).map(\.pushToken) == [nil])
        #expect(try s.hwids(try s.filter([["Language", "EQ", "en"]])).isEmpty, "a filter's audience is registered devices")
        #expect(try s.devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [nil])
        try s.register("h1", 1)
        #expect(try s.devices.targets(.devices(["h1"]), in: shop, attributesType: "T", afterID: 0, limit: 10).first?.pushToStartToken == nil)
    }

    /// Issue 12: tokens sharing their first digits (these all start with 48 zeros) are found through the
    /// whole-token index, not by scanning every token with the same prefix.
    @Test(arguments: Engine.allCases) func pushTokensThatShareAPrefixAreFoundByTheWholeToken(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        for n in 1...40 { try s.register("h\(n)", n) }
        let plan: [String] = try s.db.database.withConnection { (c) throws(StoreError) -> [String] in
            switch engine {
            case .sqlite:
                return try c.query("EXPLAIN QUERY PLAN " + s.devices.releasePushToken, [.text(token(7)), .text(shop.rawValue), .text("h7")])
                    .compactMap { $0["detail"].text }
            case .postgresql:
                // 40 rows would be read whole; without that option the plan shows whether the index can serve the lookup.
                try c.execute("SET enable_seqscan = off")
                return try c.query("EXPLAIN SELECT id FROM devices WHERE push_token = '\(token(7))'").compactMap { $0["QUERY PLAN"].text }
            }
        }
        let index = engine == .sqlite ? "USING INDEX devices_by_push_token (push_token=?)" : "devices_by_push_token"
        #expect(plan.contains { $0.contains(index) }, "\(plan)")
        #expect(try s.devices.targets(.devices([token(37).uppercased()]), in: shop, attributesType: nil, afterID: 0, limit: 10).map(\.hwid) == ["h37"])
        try s.register("new", 37)
        #expect(try s.devices.device(hwid: "h37", in: shop)?.pushToken == nil, "the token moved to the new HWID")
        #expect(try s.devices.device(hwid: "h36", in: shop)?.pushToken == token(36))
    }

    /// Issue 45: what the app says before it registers (an app open, a User ID) is kept on a device known by its HWID,
    /// without a push token; noting a registered device changes only what it says, and a filter does not reach a device
    /// that never registered.
    @Test(arguments: Engine.allCases) func aNotedDeviceIsKnownWithoutAPushToken(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        let noted = try s.devices.noteDevice(DeviceNote(hwid: "early", language: "pt", timezone: "3600", osVersion: "17.4", appOpened: true),
                                             in: shop, at: now)
        #expect(noted.pushToken == nil && noted.language == "pt" && noted.timezone == "3600" && noted.osVersion == "17.4")
        #expect(try s.devices.deviceHealth(hwid: "early", in: shop, historyLimit: 5)?.appOpenedAt == now)
        try s.devices.noteDevice(DeviceNote(hwid: "early", userID: "ana"), in: shop, at: now.addingTimeInterval(60))
        let later = try #require(try s.devices.device(hwid: "early", in: shop))
        #expect(later.userID == "ana" && later.language == "pt", "nil leaves a field as it was")
        #expect(try s.devices.deviceHealth(hwid: "early", in: shop, historyLimit: 5)?.appOpenedAt == now, "not an app open")
        #expect(try s.hwids(try s.filter([["Language", "EQ", "pt"]])).isEmpty, "a filter's audience is registered devices")
        #expect(try s.hwids(.users(["ana"])) == ["early"], "named users include it, to be counted")

        let registered = try s.register("early", 7, language: nil)
        #expect(registered.pushToken == token(7) && registered.language == "pt" && registered.userID == "ana", "registering keeps what was said")
        try s.devices.noteDevice(DeviceNote(hwid: "early", language: "en", appOpened: true), in: shop, at: now.addingTimeInterval(120))
        let opened = try #require(try s.devices.device(hwid: "early", in: shop))
        #expect(opened.pushToken == token(7) && opened.language == "en", "a note keeps the push token")
        #expect(try s.devices.device(hwid: "early", in: other) == nil, "applications are apart")
    }

    @Test(arguments: Engine.allCases) func tagsMergeRemoveAndKeepTheirType(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 1, tags: [("Level", .integer(3)), ("Sports", .list(["ski", "golf", "ski"]))])
        #expect(try s.devices.setTags([("City", .string("Lisbon")), ("Level", nil)], hwid: "h1", in: shop, at: now) == [])
        #expect(try s.devices.tags(hwid: "h1", in: shop) == ["City": .string("Lisbon"), "Sports": .list(["golf", "ski"])])
        let skipped = try s.devices.setTags([("Other", .string("kept")), ("City", .integer(5))], hwid: "h1", in: shop, at: now)
        #expect(skipped == [SkippedTag(tag: "City", existing: .string, given: .integer)])
        #expect(try s.devices.tags(hwid: "h1", in: shop)?["Other"] == .string("kept"), "the rest of the call applies")
        #expect(try s.devices.tags(hwid: "h1", in: shop)?["City"] == .string("Lisbon"), "the clashing tag keeps its value")
        #expect(try s.devices.tags(hwid: "nobody", in: shop) == nil)
        // Issue 45: the SDK sets tags before it registers; the device is then known, without a push token.
        #expect(try s.devices.setTags([("City", .string("x"))], hwid: "nobody", in: shop, at: now) == [])
        #expect(try s.devices.tags(hwid: "nobody", in: shop) == ["City": .string("x")])
        #expect(try s.devices.device(hwid: "nobody", in: shop)?.pushToken == nil)
        #expect(try s.devices.tagTypes(in: shop) == ["Level": .integer, "Sports": .list, "City": .string, "Other": .string])
        #expect(try s.devices.tagTypes(in: other).isEmpty)
        #expect(try s.devices.tagTypes(in: shop, named: ["City", "Nope"]) == ["City": .string], "a filter reads the names it names only")
        #expect(try s.devices.tagTypes(in: shop, named: []).isEmpty)
    }

    /// Issue 45: the SDK's tag builders send booleans, dates (under a tag the operator typed as date) and operations,
    /// each applied to the device's value in the call's transaction.
    @Test(arguments: Engine.allCases) func booleansDatesAndOperationsAreStoredWithTheirType(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 1, tags: [("Score", .increment(3)), ("Topics", .append(["news"])), ("Vip", .set(.boolean(true)))])
        _ = try s.devices.setTagType(.date, of: "Due", in: shop, check: { _ in })
        #expect(try s.devices.setTags([("Score", .increment(2)), ("Topics", .append(["sport", "news"])), ("Due", .string("2026-12-04 18:30"))],
                                      hwid: "h1", in: shop, at: now) == [])
        #expect(try s.devices.tags(hwid: "h1", in: shop)
                == ["Score": .integer(5), "Topics": .list(["news", "sport"]), "Vip": .boolean(true), "Due": .date(1_796_409_000)])
        let skipped = try s.devices.setTags([("Due", .string("tomorrow")), ("Topics", .increment(1)), ("Score", .increment(Int64.max)),
                                             ("Topics", .removeItems(["news"])), ("Vip", .set(.boolean(false)))], hwid: "h1", in: shop, at: now)
        #expect(skipped == [SkippedTag(tag: "Due", why: .notADate("tomorrow")), SkippedTag(tag: "Topics", existing: .list, given: .integer),
                            SkippedTag(tag: "Score", why: .overflow)])
        #expect(try s.devices.tags(hwid: "h1", in: shop)
                == ["Score": .integer(5), "Topics": .list(["sport"]), "Vip": .boolean(false), "Due": .date(1_796_409_000)], "the rest applies")
        #expect(try s.devices.tagTypes(in: shop) == ["Score": .integer, "Topics": .list, "Vip": .boolean, "Due": .date])
        // Filters compare booleans and dates as their types.
        try s.register("h2", 2, tags: [("Vip", .set(.boolean(true))), ("Due", .set(.date(1_796_342_400)))])
        #expect(try s.hwids(try s.filter([["Vip", "EQ", true]])) == ["h2"])
        #expect(try s.hwids(try s.filter([["Vip", "NOTEQ", true]])) == ["h1"])
        #expect(try s.hwids(try s.filter([["Due", "GTE", "2026-12-04 12:00"]])) == ["h1"])
        #expect(try s.hwids(try s.filter([["Due", "BETWEEN", ["2026-12-04", "2026-12-04 23:59"]]])) == ["h1", "h2"])
    }

    /// Issue 44: the device API token is public, and every new tag name is kept for good and read by filters: an
    /// application has at most so many names. A new one past the limit is skipped and named; known names still take
    /// values, and other applications have limits of their own.
    @Test(arguments: Engine.allCases) func anApplicationHasAtMostSoManyTagNames(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        let limited = SQLDeviceStore(database: s.db.database, tagNames: TagNames(limit: 3))
        try s.register("h1", 1, tags: [("Level", .integer(3))])
        let skipped = try limited.setTags([("A", .string("a")), ("B", .integer(1)), ("C", .string("c")), ("Level", .integer(4)), ("D", nil)],
                                          hwid: "h1", in: shop, at: now)
        #expect(skipped == [SkippedTag(tag: "C", why: .tooManyNames(limit: 3))], "Level, A and B are the three; removing D adds no name")
        #expect(skipped.first?.warning == "tags.C: is a new tag name, and this application has 3, the most it may have (islet serve --tag-names-per-application); not stored")
        #expect(try s.devices.tags(hwid: "h1", in: shop) == ["Level": .integer(4), "A": .string("a"), "B": .integer(1)])
        #expect(try limited.setTags([("A", .string("again")), ("E", .string("e"))], hwid: "h1", in: shop, at: now)
                == [SkippedTag(tag: "E", why: .tooManyNames(limit: 3))])
        #expect(try s.devices.tags(hwid: "h1", in: shop)?["A"] == .string("again"))
        try s.register("o1", 2, app: other)
        #expect(try limited.setTags([("X", .string("x"))], hwid: "o1", in: other, at: now) == [], "another application's names are its own")
    }

    /// Issue 44: the operator fixes a tag's type (before any device, or over a wrong first value, deleting the values
    /// held only when asked) and deletes a tag; a refusal of `check` writes nothing.
    @Test(arguments: Engine.allCases) func theOperatorSetsATagsTypeAndDeletesATag(_ engine: Engine) throws {
        struct Refused: Error {}
        let s = try DeviceFixture(engine)
        try s.register("h1", 1, tags: [("Level", .string("three")), ("Sports", .list(["ski"]))])
        try s.register("h2", 2, tags: [("Level", .string("four"))])
        try s.register("o1", 3, app: other, tags: [("Level", .string("kept"))])
        #expect(try s.devices.tagSummaries(in: shop) == [TagSummary(name: "Level", type: .string, devices: 2),
                                                         TagSummary(name: "Sports", type: .list, devices: 1)])
        #expect(throws: Refused.self) {
            _ = try s.devices.setTagType(.integer, of: "Level", in: shop) { facts in
                #expect(facts == TagFacts(type: .string, devices: 2, filters: []))
                throw Refused()
            }
        }
        #expect(try s.devices.tags(hwid: "h1", in: shop)?["Level"] == .string("three"), "refused: nothing written")
        let changed = try s.devices.setTagType(.integer, of: "Level", in: shop) { _ in }
        #expect(changed.valuesDeleted == 2 && changed.before.type == .string)
        #expect(try s.devices.tags(hwid: "h1", in: shop) == ["Sports": .list(["ski"])], "the values of the old type are gone")
        #expect(try s.devices.setTags([("Level", .string("five")), ("Tier", .integer(1))], hwid: "h2", in: shop, at: now)
                == [SkippedTag(tag: "Level", existing: .integer, given: .string)], "the new type holds")
        #expect(try s.devices.tags(hwid: "o1", in: other)?["Level"] == .string("kept"), "another application's tag is its own")
        // Defined before any device sets it: the first value no longer decides.
        _ = try s.devices.setTagType(.list, of: "Topics", in: shop) { facts in #expect(facts == TagFacts(type: nil, devices: 0, filters: [])) }
        #expect(try s.devices.setTags([("Topics", .string("news"))], hwid: "h1", in: shop, at: now)
                == [SkippedTag(tag: "Topics", existing: .list, given: .string)])

        let filter = try FilterDefinition.parse(name: "Skiers", join: .and, conditions: [["Sports", "IN", ["ski"]]], tagTypes: ["Sports": .list])
        try s.devices.createFilter(filter, in: shop, at: now)
        #expect(throws: Refused.self) {
            _ = try s.devices.deleteTag("Sports", in: shop) { facts in
                #expect(facts.filters == ["Skiers"], "the filters naming it are facts of the decision")
                throw Refused()
            }
        }
        #expect(try s.devices.tags(hwid: "h1", in: shop)?["Sports"] == .list(["ski"]), "refused: kept")
        #expect(try s.devices.deleteFilter(named: "Skiers", in: shop))
        let deleted = try s.devices.deleteTag("Sports", in: shop) { facts in #expect(facts.filters.isEmpty) }
        #expect(deleted == TagFacts(type: .list, devices: 1, filters: []))
        #expect(try s.devices.tags(hwid: "h1", in: shop)?["Sports"] == nil)
        #expect(try s.devices.tagSummaries(in: shop).map(\.name) == ["Level", "Tier", "Topics"])
        #expect(try s.devices.deleteTag("Sports", in: shop) { _ in } == nil, "no such tag any more")
        #expect(try s.devices.setTags([("Sports", .string("golf"))], hwid: "h1", in: shop, at: now) == [], "the next value defines it again")
    }

    @Test(arguments: Engine.allCases) func activityTokensRotateEndOneOrEndAll(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 1)
        _ = try s.devices.setActivityToken(token(1), activityID: "A", hwid: "h1", in: shop, at: now)
        _ = try s.devices.setActivityToken(token(2), activityID: "A", hwid: "h1", in: shop, at: now)
        _ = try s.devices.setActivityToken(token(3), activityID: "B", hwid: "h1", in: shop, at: now)
        #expect(try s.devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [token(2), token(3)])
        _ = try s.devices.setActivityToken(nil, activityID: "A", hwid: "h1", in: shop, at: now)
        #expect(try s.devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [nil, token(3)])
        _ = try s.devices.setActivityToken(nil, activityID: "", hwid: "h1", in: shop, at: now)
        #expect(try s.devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [nil, nil])
    }

    @Test(arguments: Engine.allCases) func pushToStartTokenForTheTypeWinsOverTheGenericOne(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("typed", 1)
        try s.register("generic", 2)
        try s.register("none", 3)
        _ = try s.devices.setPushToStartToken(token(10), attributesType: "", hwid: "typed", in: shop, at: now)
        _ = try s.devices.setPushToStartToken(token(11), attributesType: "FoodDeliveryAttributes", hwid: "typed", in: shop, at: now)
        _ = try s.devices.setPushToStartToken(token(12), attributesType: "", hwid: "generic", in: shop, at: now)
        _ = try s.devices.setPushToStartToken(token(13), attributesType: "", hwid: "generic", in: shop, at: now)
        let found = try s.devices.targets(.devices(["typed", "generic", "none"]), in: shop, attributesType: "FoodDeliveryAttributes",
                                        afterID: 0, limit: 10)
        #expect(found.map(\.pushToStartToken) == [token(11), token(13), nil])
        let other = try s.devices.targets(.devices(["typed"]), in: shop, attributesType: "SportsAttributes", afterID: 0, limit: 10)
        #expect(other.first?.pushToStartToken == token(10))
    }

    @Test func sqliteKeepsTextWithANulByteWhole() throws {
        let s = try DeviceFixture(.sqlite)
        try s.register("a\u{0}b", 1)
        try s.register("a", 2)
        #expect(try s.devices.device(hwid: "a\u{0}b", in: shop)?.pushToken == token(1))
        #expect(try s.devices.device(hwid: "a", in: shop)?.pushToken == token(2))
    }

    /// PostgreSQL text cannot hold U+0000 (the API refuses it before storage, see JSONValue.nulPath): the
    /// engine refuses too, rather than cutting the text short, and writes nothing.
    @Test func postgresqlRefusesTextWithANulByteWhole() throws {
        let s = try DeviceFixture(.postgresql)
        #expect(throws: StoreError(.io, "PostgreSQL cannot store text with a NUL character")) { try s.register("a\u{0}b", 1) }
        #expect(try s.devices.device(hwid: "a", in: shop) == nil)
    }

    @Test(arguments: Engine.allCases) func devicesAreFoundByHWIDOrByPushTokenInAnyCase(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 0xabc)
        try s.register("h2", 2)
        try s.register("h3", 3)
        #expect(try s.hwids(.devices(["h1", token(2).uppercased(), "missing"])) == ["h1", "h2"])
    }

    @Test(arguments: Engine.allCases) func usersSelectEveryDeviceOfTheUser(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("phone", 1, user: "alice")
        try s.register("ipad", 2, user: "alice")
        try s.register("bob", 3, user: "bob")
        #expect(try s.hwids(.users(["alice"])) == ["phone", "ipad"])
    }

    @Test(arguments: Engine.allCases) func pagesThroughAnAudienceInIdOrder(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        for n in 0..<25 { try s.register("h\(n)", n + 1) }
        var seen: [String] = []
        var after: Int64 = 0
        while true {
            let page = try s.devices.targets(try s.filter([["Language", "EQ", "en"]]), in: shop, attributesType: nil, afterID: after, limit: 10)
            guard let last = page.last else { break }
            #expect(page.count <= 10)
            seen += page.map(\.hwid)
            after = last.id
        }
        #expect(seen.count == 25 && Set(seen).count == 25)
    }

    @Test(arguments: Engine.allCases) func applicationsNeverSeeEachOthersDevices(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 1, app: shop)
        try s.register("h1", 2, app: other)
        #expect(try s.hwids(.devices(["h1", token(1)]), app: other) == ["h1"])
        #expect(try s.devices.targets(.devices([token(1)]), in: other, attributesType: nil, afterID: 0, limit: 10).isEmpty)
        #expect(try s.devices.device(hwid: "h1", in: other)?.pushToken == token(2))
    }

    // MARK: Filters

    @Test(arguments: Engine.allCases, [
        (#"[["Language", "EQ", "en"]]"#, "AND", ["a", "c"]),
        (#"[["Language", "NOTEQ", "en"]]"#, "AND", ["b", "d"]),
        (#"[["Language", "IN", ["en", "pt"]]]"#, "AND", ["a", "b", "c"]),
        (#"[["Language", "NOTIN", ["en"]]]"#, "AND", ["b", "d"]),
        (#"[["Level", "EQ", 10]]"#, "AND", ["b"]),
        (#"[["Level", "NOTEQ", 10]]"#, "AND", ["a", "c", "d"]),
        (#"[["Level", "GTE", 10]]"#, "AND", ["b", "c"]),
        (#"[["Level", "LTE", 10]]"#, "AND", ["a", "b"]),
        (#"[["Level", "BETWEEN", [6, 20]]]"#, "AND", ["b", "c"]),
        (#"[["Level", "IN", [5, 20]]]"#, "AND", ["a", "c"]),
        (#"[["Level", "NOTIN", [5, 20]]]"#, "AND", ["b", "d"]),
        (#"[["Sports", "EQ", "ski"]]"#, "AND", ["a"]),
        (#"[["Sports", "IN", ["golf", "chess"]]]"#, "AND", ["a", "b"]),
        (#"[["Sports", "NOTIN", ["golf"]]]"#, "AND", ["c", "d"]),
        (#"[["City", "EQ", "Porto"]]"#, "AND", ["b"]),
        (#"[["OS Version", "GTE", "17.2"]]"#, "AND", ["a", "b"]),
        (#"[["OS Version", "GTE", "17.3"]]"#, "AND", ["a"]),
        (#"[["OS Version", "LTE", "17.2"]]"#, "AND", ["b", "c"]),
        (#"[["OS Version", "BETWEEN", ["16", "17.5"]]]"#, "AND", ["b", "c"]),
        (#"[["OS Version", "EQ", "17.10.0"]]"#, "AND", ["a"]),
        (#"[["User ID", "EQ", "u2"]]"#, "AND", ["b"]),
        (#"[["Language", "EQ", "en"], ["Level", "GTE", 10]]"#, "AND", ["c"]),
        (#"[["Language", "EQ", "pt"], ["Level", "GTE", 20]]"#, "OR", ["b", "c"]),
    ])
    func filtersSelectWhatTheirConditionsSay(engine: Engine, condition: (conditions: String, join: String, expected: [String])) throws {
        let (conditions, join, expected) = condition
        let s = try DeviceFixture(engine)
        try s.populate()
        #expect(try s.hwids(try s.filter(try JSONParser.parse(conditions), FilterJoin(rawValue: join)!)) == Set(expected))
    }

    @Test(arguments: Engine.allCases) func filtersAreStoredPerApplicationByName(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.populate()
        let filter = try FilterDefinition.parse(name: "English", join: .or, conditions: [["Language", "EQ", "en"], ["Level", "GTE", 10]],
                                                tagTypes: try s.devices.tagTypes(in: shop))
        try s.devices.createFilter(filter, in: shop, at: now)
        #expect(throws: StoreError(.conflict, "a filter named 'English' already exists")) { try s.devices.createFilter(filter, in: shop, at: now) }
        #expect(try s.devices.filter(named: "English", in: shop) == filter)
        #expect(try s.devices.filter(named: "English", in: other) == nil)
        #expect(try s.devices.filters(in: shop).map(\.name) == ["English"])
        #expect(try s.devices.deleteFilter(named: "English", in: shop))
        #expect(try !s.devices.deleteFilter(named: "English", in: shop))
    }

    @Test(arguments: Engine.allCases) func theTokenHistoryKeepsEachDevicesLastFiftyChanges(_ engine: Engine) throws {
        let s = try DeviceFixture(engine)
        try s.register("h1", 1)
        for n in 0..<60 {
            _ = try s.devices.setPushToStartToken(String(format: "%080x", n), attributesType: "", hwid: "h1", in: shop, at: now.addingTimeInterval(Double(n)))
            _ = try s.devices.setPushToStartToken(String(format: "%080x", n), attributesType: "", hwid: "h1", in: shop, at: now.addingTimeInterval(Double(n)))
        }
        let report = try #require(try s.devices.deviceHealth(hwid: "h1", in: shop, historyLimit: 100))
        #expect(report.history.count == 51, "the last 50 changes (a repeat is no change), and the push token's entry, its slot's latest")
        let pushToStart = report.history.filter { $0.kind == .pushToStart }
        #expect(pushToStart.count == 50 && pushToStart.first?.token == String(format: "%080x", 59) && pushToStart.last?.token == String(format: "%080x", 10))
        #expect(report.history.last?.kind == .push && report.history.last?.token == token(1), "kept however old")
    }

    /// Issue 18, point 4 (a start to one named phone, per order): named devices and users are found through their
    /// list, not by walking every device of the application; a filter's page still walks them in id order.
    @Test func namedDevicesAreFoundThroughTheirListNotByWalkingTheApplication() throws {
        let s = try DeviceFixture(.sqlite)
        let plan = { (selection: TargetSelection) throws -> [String] in
            let (sql, parameters) = s.devices.targetsQuery(selection, in: shop, attributesType: "T", afterID: 0, limit: 1000)
            return try s.db.database.withConnection { (c) throws(StoreError) in
                try c.query("EXPLAIN QUERY PLAN " + sql, parameters).compactMap { $0["detail"].text }
            }
        }
        for selection in [TargetSelection.devices(["h1", token(2)]), .users(["u1"])] {
            let steps = try plan(selection)
            #expect(steps.contains { $0.hasPrefix("SEARCH d USING INTEGER PRIMARY KEY") }, "\(selection): \(steps)")
            #expect(!steps.contains { $0.contains("devices_by_application") }, "\(selection): \(steps)")
        }
        let filter = try plan(try s.filter([["Language", "EQ", "en"]]))
        #expect(filter.contains { $0.contains("d USING") && $0.contains("devices_by_application") }, "\(filter)")
    }
}
