import Foundation
import Testing
import IsletCore

/// Every list answer is paged with `limit` and `cursor`, never silently cut (X1, X2, X4).
@Suite("Paged lists (X1, X2, X4)")
struct ListPagingTests {
    let world: LiveActivityWorld
    init() throws { world = try LiveActivityWorld() }

    /// Follows `next_cursor` from the first page to the last; the keys of `field` in order, and the page count.
    func walk(_ method: String, _ fields: JSONObject, list: String, key: String, limit: Int) throws -> (keys: [String], pages: Int) {
        var keys: [String] = [], cursor: JSONValue = .null, pages = 0
        repeat {
            var request = fields
            request["limit"] = .int(Int64(limit))
            if cursor != .null { request["cursor"] = cursor }
            let answer = try world.expectOK(world.server(method, request))
            let items = answer[list]?.arrayValue ?? []
            #expect(items.count <= limit)
            keys += items.compactMap { item in item.objectValue?[key].map { $0.stringValue ?? $0.intValue.map(String.init) ?? "" } }
            cursor = answer["next_cursor"] ?? .null
            pages += 1
        } while cursor != .null && pages < 20
        return (keys, pages)
    }

    @Test func filtersComeInNameOrderAPageAtATime() throws {
        let names = (1...7).map { "Z_FILTER_\($0)" }
        for name in names.shuffled() {
            _ = try world.expectOK(world.server("createFilter", ["name": .string(name), "conditions": [["Language", "EQ", "en"]]]))
        }
        let everything = try world.expectOK(world.server("listFilters", [:]))
        let all = (everything["filters"]?.arrayValue ?? []).compactMap { $0.objectValue?["name"]?.stringValue }
        #expect(all.count >= 7 && all == all.sorted() && everything["next_cursor"] == .null, "one page by default")
        let paged = try walk("listFilters", [:], list: "filters", key: "name", limit: 3)
        #expect(paged.keys == all, "each filter once, in order")
        #expect(paged.pages == (all.count + 2) / 3)
        for (value, message) in [(JSONValue.int(0), "limit: must be an integer from 1 to 1000"), (.int(1001), "limit: must be an integer from 1 to 1000"),
                                 (.string("3"), "limit: must be an integer, got string")] {
            let refused = try world.server("listFilters", ["limit": value])
            #expect(refused.status == 400 && refused.message == message, "\(String(describing: refused.message))")
        }
    }

    @Test func schemasArePagedByTypeAndTheVersionsOfOneByVersion() throws {
        for type in ["TypeC", "TypeA", "TypeB"] {
            var schema = foodDeliverySchema
            schema["attributes_type"] = .string(type)
            _ = try world.expectOK(world.server("setLiveActivitySchema", schema))
        }
        for _ in 0..<4 { _ = try world.expectOK(world.server("setLiveActivitySchema", foodDeliverySchema)) }
        let types = try walk("getLiveActivitySchemas", [:], list: "schemas", key: "attributes_type", limit: 2)
        #expect(types.keys == ["FoodDeliveryAttributes", "TypeA", "TypeB", "TypeC"] && types.pages == 2)
        let versions = try walk("getLiveActivitySchemas", ["attributes_type": "FoodDeliveryAttributes"], list: "schemas", key: "version", limit: 3)
        #expect(versions.keys == ["1", "2", "3", "4"] && versions.pages == 2)
        let refused = try world.server("getLiveActivitySchemas", ["attributes_type": "FoodDeliveryAttributes", "cursor": "TypeA"])
        #expect(refused.status == 400 && refused.message == "cursor: must be the next_cursor of a previous getLiveActivitySchemas answer")
    }
}
