import Foundation
import Testing
import IsletCore
import IsletStore
@testable import IsletSQLite

private let shop = ApplicationCode("SHOPA-00001")!
private let other = ApplicationCode("OTHER-00002")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)

private func token(_ n: Int) -> String { String(format: "%064x", n) }

@Suite("SQLite devices, tags, tokens and targeting (D1–D4, X1)")
struct SQLiteDeviceStoreTests {
    let temporary = TemporaryDatabase()
    let devices: SQLiteDeviceStore

    init() throws {
        let database = try SQLiteDatabase(path: temporary.path)
        let applications = SQLiteApplicationStore(database: database)
        for code in [shop, other] {
            try applications.createApplication(Application(code: code, name: "x", bundleID: "com.example.x", createdAt: now), tokens: [], apnsKey: nil)
        }
        devices = SQLiteDeviceStore(database: database)
    }

    @discardableResult
    func register(_ hwid: String, _ n: Int, app: ApplicationCode = shop, language: String? = "en", os: String? = nil,
                  user: String? = nil, tags: [(name: String, value: TagValue?)] = []) throws -> Device {
        try devices.registerDevice(DeviceRegistration(hwid: hwid, pushToken: token(n), language: language, osVersion: os, userID: user),
                                   tags: tags, in: app, at: now).device
    }

    func hwids(_ selection: TargetSelection, app: ApplicationCode = shop) throws -> Set<String> {
        Set(try devices.targets(selection, in: app, attributesType: nil, afterID: 0, limit: 1000).map(\.hwid))
    }

    func filter(_ conditions: JSONValue, _ join: FilterJoin = .and) throws -> TargetSelection {
        .filter(try FilterDefinition.parse(name: "f", join: join, conditions: conditions, tagTypes: try devices.tagTypes(in: shop)))
    }

    @Test func registrationIsAnUpsertThatKeepsWhatIsNotResent() throws {
        let first = try register("h1", 1, language: "en", os: "17.2", user: "u1")
        let again = try devices.registerDevice(DeviceRegistration(hwid: "h1", pushToken: token(9), gateway: .sandbox), tags: [], in: shop, at: now).device
        #expect(again.id == first.id)
        #expect(again.pushToken == token(9))
        #expect(again.gateway == .sandbox)
        #expect(again.language == "en" && again.osVersion == "17.2" && again.userID == "u1", "the SDK omits os_version; keep it")
    }

    @Test func aPushTokenMovesToTheDeviceThatRegistersItLast() throws {
        try register("old-install", 1)
        try register("new-install", 1)
        #expect(try devices.device(hwid: "old-install", in: shop)?.pushToken == nil)
        #expect(try hwids(.devices([token(1)])) == ["new-install"])
    }

    @Test func unregisterClearsTokensAndTargeting() throws {
        try register("h1", 1)
        #expect(try devices.setPushToStartToken(token(100), attributesType: "", hwid: "h1", in: shop, at: now))
        #expect(try devices.setActivityToken(token(200), activityID: "A", hwid: "h1", in: shop, at: now))
        #expect(try devices.unregisterDevice(hwid: "h1", in: shop, at: now))
        #expect(try !devices.unregisterDevice(hwid: "nobody", in: shop, at: now))
        #expect(try devices.targets(.devices(["h1"]), in: shop, attributesType: nil, afterID: 0, limit: 10).map(\.pushToken) == [nil])
        #expect(try hwids(try filter([["Language", "EQ", "en"]])).isEmpty, "a filter's audience is registered devices")
        #expect(try devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [nil])
        try register("h1", 1)
        #expect(try devices.targets(.devices(["h1"]), in: shop, attributesType: "T", afterID: 0, limit: 10).first?.pushToStartToken == nil)
    }

    /// Issue 12: tokens sharing their first digits (these all start with 48 zeros) are found through the
    /// whole-token index, not by scanning every token with the same prefix.
    @Test func pushTokensThatShareAPrefixAreFoundByTheWholeToken() throws {
        for n in 1...40 { try register("h\(n)", n) }
        let plan = try devices.database.withConnection { (c) throws(StoreError) -> [SQLRow] in
            try c.query("EXPLAIN QUERY PLAN " + SQLiteDeviceStore.releasePushToken, [.text(token(7)), .text(shop.rawValue), .text("h7")])
        }.compactMap { $0.values.last?.text }
        #expect(plan.contains { $0.contains("USING INDEX devices_by_push_token (push_token=?)") }, "\(plan)")
        #expect(try devices.targets(.devices([token(37).uppercased()]), in: shop, attributesType: nil, afterID: 0, limit: 10).map(\.hwid) == ["h37"])
        try register("new", 37)
        #expect(try devices.device(hwid: "h37", in: shop)?.pushToken == nil, "the token moved to the new HWID")
        #expect(try devices.device(hwid: "h36", in: shop)?.pushToken == token(36))
    }

    @Test func tagsMergeRemoveAndKeepTheirType() throws {
        try register("h1", 1, tags: [("Level", .integer(3)), ("Sports", .list(["ski", "golf", "ski"]))])
        #expect(try devices.setTags([("City", .string("Lisbon")), ("Level", nil)], hwid: "h1", in: shop, at: now) == [])
        #expect(try devices.tags(hwid: "h1", in: shop) == ["City": .string("Lisbon"), "Sports": .list(["golf", "ski"])])
        let skipped = try devices.setTags([("Other", .string("kept")), ("City", .integer(5))], hwid: "h1", in: shop, at: now)
        #expect(skipped == [SkippedTag(tag: "City", existing: .string, given: .integer)])
        #expect(try devices.tags(hwid: "h1", in: shop)?["Other"] == .string("kept"), "the rest of the call applies")
        #expect(try devices.tags(hwid: "h1", in: shop)?["City"] == .string("Lisbon"), "the clashing tag keeps its value")
        #expect(try devices.setTags([("City", .string("x"))], hwid: "nobody", in: shop, at: now) == nil)
        #expect(try devices.tags(hwid: "nobody", in: shop) == nil)
        #expect(try devices.tagTypes(in: shop) == ["Level": .integer, "Sports": .list, "City": .string, "Other": .string])
        #expect(try devices.tagTypes(in: other).isEmpty)
    }

    @Test func activityTokensRotateEndOneOrEndAll() throws {
        try register("h1", 1)
        _ = try devices.setActivityToken(token(1), activityID: "A", hwid: "h1", in: shop, at: now)
        _ = try devices.setActivityToken(token(2), activityID: "A", hwid: "h1", in: shop, at: now)
        _ = try devices.setActivityToken(token(3), activityID: "B", hwid: "h1", in: shop, at: now)
        #expect(try devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [token(2), token(3)])
        _ = try devices.setActivityToken(nil, activityID: "A", hwid: "h1", in: shop, at: now)
        #expect(try devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [nil, token(3)])
        _ = try devices.setActivityToken(nil, activityID: "", hwid: "h1", in: shop, at: now)
        #expect(try devices.activityTokens(hwid: "h1", in: shop).map(\.token) == [nil, nil])
    }

    @Test func pushToStartTokenForTheTypeWinsOverTheGenericOne() throws {
        try register("typed", 1)
        try register("generic", 2)
        try register("none", 3)
        _ = try devices.setPushToStartToken(token(10), attributesType: "", hwid: "typed", in: shop, at: now)
        _ = try devices.setPushToStartToken(token(11), attributesType: "FoodDeliveryAttributes", hwid: "typed", in: shop, at: now)
        _ = try devices.setPushToStartToken(token(12), attributesType: "", hwid: "generic", in: shop, at: now)
        _ = try devices.setPushToStartToken(token(13), attributesType: "", hwid: "generic", in: shop, at: now)
        let found = try devices.targets(.devices(["typed", "generic", "none"]), in: shop, attributesType: "FoodDeliveryAttributes",
                                        afterID: 0, limit: 10)
        #expect(found.map(\.pushToStartToken) == [token(11), token(13), nil])
        let other = try devices.targets(.devices(["typed"]), in: shop, attributesType: "SportsAttributes", afterID: 0, limit: 10)
        #expect(other.first?.pushToStartToken == token(10))
    }

    @Test func textWithANulByteIsKeptWhole() throws {
        try register("a\u{0}b", 1)
        try register("a", 2)
        #expect(try devices.device(hwid: "a\u{0}b", in: shop)?.pushToken == token(1))
        #expect(try devices.device(hwid: "a", in: shop)?.pushToken == token(2))
    }

    @Test func devicesAreFoundByHWIDOrByPushTokenInAnyCase() throws {
        try register("h1", 0xabc)
        try register("h2", 2)
        try register("h3", 3)
        #expect(try hwids(.devices(["h1", token(2).uppercased(), "missing"])) == ["h1", "h2"])
    }

    @Test func usersSelectEveryDeviceOfTheUser() throws {
        try register("phone", 1, user: "alice")
        try register("ipad", 2, user: "alice")
        try register("bob", 3, user: "bob")
        #expect(try hwids(.users(["alice"])) == ["phone", "ipad"])
    }

    @Test func pagesThroughAnAudienceInIdOrder() throws {
        for n in 0..<25 { try register("h\(n)", n + 1) }
        var seen: [String] = []
        var after: Int64 = 0
        while true {
            let page = try devices.targets(try filter([["Language", "EQ", "en"]]), in: shop, attributesType: nil, afterID: after, limit: 10)
            guard let last = page.last else { break }
            #expect(page.count <= 10)
            seen += page.map(\.hwid)
            after = last.id
        }
        #expect(seen.count == 25 && Set(seen).count == 25)
    }

    @Test func applicationsNeverSeeEachOthersDevices() throws {
        try register("h1", 1, app: shop)
        try register("h1", 2, app: other)
        #expect(try hwids(.devices(["h1", token(1)]), app: other) == ["h1"])
        #expect(try devices.targets(.devices([token(1)]), in: other, attributesType: nil, afterID: 0, limit: 10).isEmpty)
        #expect(try devices.device(hwid: "h1", in: other)?.pushToken == token(2))
    }

    // MARK: Filters

    func populate() throws {
        try register("a", 1, language: "en", os: "17.10", user: "u1", tags: [("Level", .integer(5)), ("Sports", .list(["ski", "golf"])), ("City", .string("Lisbon"))])
        try register("b", 2, language: "pt", os: "17.2", user: "u2", tags: [("Level", .integer(10)), ("Sports", .list(["golf"])), ("City", .string("Porto"))])
        try register("c", 3, language: "en", os: "16.4", tags: [("Level", .integer(20))])
        try register("d", 4, language: nil, os: nil)
    }

    @Test(arguments: [
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
    func filtersSelectWhatTheirConditionsSay(conditions: String, join: String, expected: [String]) throws {
        try populate()
        #expect(try hwids(try filter(try JSONParser.parse(conditions), FilterJoin(rawValue: join)!)) == Set(expected))
    }

    @Test func filtersAreStoredPerApplicationByName() throws {
        try populate()
        let filter = try FilterDefinition.parse(name: "English", join: .or, conditions: [["Language", "EQ", "en"], ["Level", "GTE", 10]],
                                                tagTypes: try devices.tagTypes(in: shop))
        try devices.createFilter(filter, in: shop, at: now)
        #expect(throws: StoreError(.conflict, "a filter named 'English' already exists")) { try devices.createFilter(filter, in: shop, at: now) }
        #expect(try devices.filter(named: "English", in: shop) == filter)
        #expect(try devices.filter(named: "English", in: other) == nil)
        #expect(try devices.filters(in: shop).map(\.name) == ["English"])
        #expect(try devices.deleteFilter(named: "English", in: shop))
        #expect(try !devices.deleteFilter(named: "English", in: shop))
    }
}
