import Foundation
import Testing
import IsletCore
import IsletStore
@testable import IsletSQL
import IsletTestPeers

private let shop = ApplicationCode("SHOPA-00001")!
private let other = ApplicationCode("OTHER-00002")!
private let now = Date(timeIntervalSince1970: 1_800_000_000)

/// Values chosen to break SQL built by string pasting: quotes, comment markers, LIKE wildcards,
/// placeholders of either engine, case and trailing-space twins, non-ASCII.
private let hostileStrings = ["en", "EN", "en ", "", "pt", "o'brien", "\" OR 1=1 --", "'; DROP TABLE devices; --", "%", "_",
                              "ç", "日本", "a\\b", "NULL", "?", "$1", "Lisbon"]
private let integers: [Int64] = [-1, 0, 5, 10, 20, 9_007_199_254_740_993, Int64.max]
private let versions = ["16.4", "17", "17.2", "17.10", "17.10.1", "999.999.999"]
/// Dates as seconds since 1970: before it, at it, minutes apart, a leap day, far ahead.
private let dates: [Int64] = [-86_400, 0, 1_800_000_000, 1_800_000_060, 1_709_164_800, 253_402_300_740]
/// Custom tags and their types; one name is itself hostile.
private let customTags: [(name: String, type: TagType)] = [("Level", .integer), ("City", .string), ("Sports", .list), ("it's \"odd\"", .string),
                                                           ("Done", .boolean), ("Due", .date)]

/// One device as the oracle sees it.
private struct ModelDevice {
    let hwid: String
    let registered: Bool
    let language: String?
    let timezone: String?
    let os: String?
    let user: String?
    let tags: [String: TagValue]
    var platform = DevicePlatform.ios
}

/// What a condition means, written from the documentation (X1) and independent of the SQL: NOTEQ and
/// NOTIN match a device that lacks the value; a list tag matches when any element does.
private func matches(_ condition: FilterCondition, _ device: ModelDevice) -> Bool {
    func compare<T: Comparable>(_ stored: [T], _ values: [T]) -> Bool {
        switch condition.op {
        case .eq, .in: stored.contains { values.contains($0) }
        case .notEq, .notIn: !stored.contains { values.contains($0) }
        case .gte: stored.contains { $0 >= values[0] }
        case .lte: stored.contains { $0 <= values[0] }
        default: stored.contains { values[0] <= $0 && $0 <= values[1] }
        }
    }
    let texts = condition.values.compactMap { if case .text(let s) = $0 { s } else { nil } }
    let numbers = condition.values.compactMap { scalar -> Int64? in
        switch scalar {
        case .integer(let i): i
        case .version(let key, _): key
        case .boolean(let b): b ? 1 : 0
        case .date(let seconds, _): seconds
        case .text: nil
        }
    }
    switch condition.builtIn {
    case .language?: return compare([device.language].compactMap { $0 }, texts)
    case .timezone?: return compare([device.timezone].compactMap { $0 }, texts)
    case .userID?: return compare([device.user].compactMap { $0 }, texts)
    case .osVersion?: return compare([device.os.flatMap(VersionKey.make)].compactMap { $0 }, numbers)
    case .platform?: return compare([device.platform.rawValue], texts)
    default:
        switch device.tags[condition.tag] {
        case .string(let s)?: return compare([s], texts)
        case .list(let list)?: return compare(list, texts)
        case .integer(let i)?, .date(let i)?: return compare([i], numbers)
        case .boolean(let b)?: return compare([b ? Int64(1) : 0], numbers)
        case nil: return compare([String](), texts) && compare([Int64](), numbers)
        }
    }
}

private extension RandomNumberGenerator {
    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
    mutating func maybe<T>(_ items: [T]) -> T? { Bool.random(using: &self) ? pick(items) : nil }
    mutating func some<T>(_ items: [T], max: Int) -> [T] { (0..<Int.random(in: 1...max, using: &self)).map { _ in pick(items) } }
}

@Suite("Filters compiled to SQL select what they say, for any values (X1), on both engines")
struct FilterPropertyTests {
    /// Random filters over random devices with hostile values, compiled to SQL and run, against the oracle
    /// above: the same devices, page by page, and none of another application's.
    @Test(arguments: Engine.allCases) func randomFiltersSelectWhatAnOracleSays(_ engine: Engine) throws {
        var random = SeededRandom(seed: 0x15_1e7)
        let s = try DeviceFixture(engine)
        var model: [ModelDevice] = []
        for n in 0..<40 {
            var tags: [String: TagValue] = [:]
            for (name, type) in customTags where Bool.random(using: &random) {
                switch type {
                case .integer: tags[name] = .integer(random.pick(integers))
                case .boolean: tags[name] = .boolean(Bool.random(using: &random))
                case .date: tags[name] = .date(random.pick(dates))
                case .list: tags[name] = .list(Array(Set(random.some(hostileStrings, max: 3))).sorted())
                default: tags[name] = .string(random.pick(hostileStrings))
                }
            }
            var device = ModelDevice(hwid: "h\(n)", registered: n % 9 != 8, language: random.maybe(hostileStrings),
                                     timezone: random.maybe(hostileStrings), os: random.maybe(versions + ["abc", "17.2.x"]),
                                     user: random.maybe(hostileStrings), tags: tags)
            device.platform = random.pick(DevicePlatform.all)
            for app in [shop, other] {
                _ = try s.devices.registerDevice(DeviceRegistration(hwid: device.hwid, pushToken: String(format: "%064x", n + (app == shop ? 0 : 1000)),
                                                                language: device.language, timezone: device.timezone,
                                                                osVersion: device.os, userID: device.user, platform: device.platform),
                                             tags: tags.sorted { $0.key < $1.key }.map { ($0.key, .set($0.value)) }, in: app, at: now)
            }
            if !device.registered { #expect(try s.devices.unregisterDevice(hwid: device.hwid, in: shop, at: now)) }
            model.append(device)
        }
        let tagTypes = try s.devices.tagTypes(in: shop)
        #expect(tagTypes.count == customTags.count, "every custom tag was set by some device")
        let tags: [(name: String, type: TagType)] = customTags + BuiltInTag.all.map { ($0.name, $0.type) }
        var nonEmpty = 0, partial = 0
        for round in 0..<150 {
            var conditions: [JSONValue] = []
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let (name, type) = random.pick(tags)
                let ordered = type == .integer || type == .version || type == .date
                let op = random.pick(ordered ? ConditionOperator.all : [.eq, .notEq, .in, .notIn])
                func value() -> JSONValue {
                    switch type {
                    case .integer: .int(random.pick(integers))
                    case .version: .string(random.pick(versions))
                    case .boolean: .bool(Bool.random(using: &random))
                    case .date: .string(TagDate.text(random.pick(dates)))
                    default: name == BuiltInTag.platform.name ? .string(random.pick(DevicePlatform.all).rawValue) : .string(random.pick(hostileStrings))
                    }
                }
                let operand: JSONValue
                switch op {
                case .in, .notIn: operand = .array((0..<Int.random(in: 1...4, using: &random)).map { _ in value() })
                case .between:
                    let pair = [value(), value()]
                    let key = { (v: JSONValue) in v.intValue ?? VersionKey.make(v.stringValue ?? "") ?? TagDate.parse(v.stringValue ?? "") ?? 0 }
                    operand = .array(key(pair[0]) <= key(pair[1]) ? pair : pair.reversed())
                default: operand = value()
                }
                conditions.append([.string(name), .string(op.rawValue), operand])
            }
            let join = random.pick(FilterJoin.all)
            let filter = try FilterDefinition.parse(name: "f\(round)", join: join, conditions: .array(conditions), tagTypes: tagTypes)
            let expected = model.filter { device in
                device.registered && (join == .and ? filter.conditions.allSatisfy { matches($0, device) } : filter.conditions.contains { matches($0, device) })
            }.map(\.hwid)

            let all = try s.devices.targets(.filter(filter), in: shop, attributesType: nil, afterID: 0, limit: 1000)
            #expect(all.map(\.hwid).sorted() == expected.sorted(), "\(join.rawValue) \(JSONValue.array(conditions).jsonText)")
            // Paged in threes, as a fan-out reads it: the same devices, in id order, each once.
            var paged: [Device] = []
            while true {
                let after = paged.last?.id ?? 0
                let page = try s.devices.targets(.filter(filter), in: shop, attributesType: nil, afterID: after, limit: 3)
                guard let first = page.first else { break }
                guard first.id > after else { Issue.record("a page repeated device \(first.id)"); break }
                paged += page
            }
            #expect(paged.map(\.id) == all.map(\.id).sorted(), "paged: \(JSONValue.array(conditions).jsonText)")
            if !expected.isEmpty { nonEmpty += 1 }
            if !expected.isEmpty && expected.count < model.count(where: \.registered) { partial += 1 }
        }
        #expect(try s.devices.device(hwid: "h0", in: shop) != nil, "no value dropped a table")
        // The cases must discriminate: most filters pick some devices but not all.
        #expect(nonEmpty > 60 && partial > 40, "\(nonEmpty) non-empty, \(partial) partial")
    }
}
