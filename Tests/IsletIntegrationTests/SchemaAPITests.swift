import Foundation
import Testing
import IsletCore
import IsletStore

/// The reference example's FoodDeliveryAttributes, published as a schema (X2).
let foodDeliverySchema: JSONObject = [
    "attributes_type": "FoodDeliveryAttributes",
    "content_state": ["status": "string", "estimatedTime": "string", "emoji": "string?"],
    "attributes": [:],
    "description": "Food delivery order",
]

@Suite("Live Activity schemas over HTTP (X2)")
struct SchemaAPITests {
    let world: LiveActivityWorld
    init() throws { world = try LiveActivityWorld() }

    func start(_ contentState: JSONValue, id: String = "ORDER_1") throws -> RawHTTPResponse {
        try world.server("startLiveActivity", ["notifications": [.object(startNotification(activity: ["content-state": contentState], id: id))]])
    }

    @Test func aStartTheAppCouldNotDecodeIsRefusedNamingTheField() throws {
        #expect(try world.expectOK(try world.server("setLiveActivitySchema", foodDeliverySchema))["version"] == 1)
        let refused = try start(["status": "Third", "estimatedTime": 37])
        #expect(refused.status == 400)
        #expect(refused.message == "notifications[0].live_activity.content-state.estimatedTime: expected string, got number")
        let missing = try start(["status": "Third"])
        #expect(missing.message == "notifications[0].live_activity.content-state.estimatedTime: missing")
        let accepted = try world.expectOK(try start(["status": "Third", "estimatedTime": "37 min", "driver": "Ana"]))
        #expect(accepted["warnings"] == ["notifications[0].live_activity.content-state.driver: unknown field; the app's Codable type ignores it"])
    }

    @Test func updatesAreCheckedAgainstTheVersionTheActivityStartedWith() throws {
        _ = try world.server("setLiveActivitySchema", foodDeliverySchema)
        _ = try world.waitUntilSent(try world.messageCodes(try start(["status": "Third", "estimatedTime": "37 min"])))
        var v2 = foodDeliverySchema
        v2["content_state"] = ["status": "string", "minutes": "integer"]
        #expect(try world.expectOK(try world.server("setLiveActivitySchema", v2))["version"] == 2)

        let update = { (state: JSONValue) in
            try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(activity: ["content-state": state]))]])
        }
        #expect(try update(["status": "Close", "estimatedTime": "5 min"]).status == 200, "version 1 still applies to this activity")
        #expect(try world.expectOK(try world.server("getLiveActivity", ["live_activity_id": "ORDER_1"]))["live_activity"]?.objectValue?["schema_version"] == 1,
                "getLiveActivity says which version applies (the console builds its update form from it)")
        #expect(try update(["status": "Close"]).message == "notifications[0].live_activity.content-state.estimatedTime: missing")
        // A new activity starts with version 2.
        #expect(try start(["status": "Third", "estimatedTime": "37 min"], id: "ORDER_2").message == "notifications[0].live_activity.content-state.minutes: missing")
    }

    /// An application with no schema has its updates offered to the store unchecked (no read of the activity's schema
    /// first). Once it saves one, an update of an activity started with it is still checked: the store refuses the
    /// unchecked update, and the API checks it and offers it again.
    @Test func anUpdateIsCheckedEvenWhenItsApplicationHadNoSchemaAMomentAgo() throws {
        let update = { (id: String, state: JSONValue) in
            try world.server("updateLiveActivity", ["notifications": [.object(updateNotification(activity: ["content-state": state], id: id))]])
        }
        _ = try world.waitUntilSent(try world.messageCodes(try start(["anything": 1])))
        #expect(try update("ORDER_1", ["anything": 2]).status == 200, "no schema, nothing to check")
        _ = try world.server("setLiveActivitySchema", foodDeliverySchema)
        _ = try world.waitUntilSent(try world.messageCodes(try start(["status": "Third", "estimatedTime": "37 min"], id: "ORDER_2")))
        #expect(try update("ORDER_2", ["status": "Close"]).message == "notifications[0].live_activity.content-state.estimatedTime: missing")
        let accepted = try world.expectOK(try update("ORDER_2", ["status": "Close", "estimatedTime": "5 min", "driver": "Ana"]))
        #expect(accepted["warnings"] == ["notifications[0].live_activity.content-state.driver: unknown field; the app's Codable type ignores it"])
        #expect(try update("ORDER_1", ["anything": 3]).status == 200, "an activity started before the schema still has none")
    }

    @Test func schemasAreListedVersionedAndDeleted() throws {
        _ = try world.server("setLiveActivitySchema", foodDeliverySchema)
        _ = try world.server("setLiveActivitySchema", foodDeliverySchema)
        let listed = try world.expectOK(try world.server("getLiveActivitySchemas", [:]))["schemas"]?.arrayValue
        #expect(listed?.count == 1)
        #expect(listed?.first?.objectValue?["version"] == 2)
        #expect(listed?.first?.objectValue?["content_state"] == foodDeliverySchema["content_state"])
        let versions = try world.expectOK(try world.server("getLiveActivitySchemas", ["attributes_type": "FoodDeliveryAttributes"]))["schemas"]?.arrayValue
        #expect(versions?.count == 2)
        #expect(try world.server("deleteLiveActivitySchema", ["attributes_type": "FoodDeliveryAttributes"]).status == 200)
        #expect(try start(["anything": 1]).status == 200, "without a schema nothing is checked")
        #expect(try world.server("deleteLiveActivitySchema", ["attributes_type": "FoodDeliveryAttributes"]).message
                == "attributes_type: no schema for 'FoodDeliveryAttributes' in this application")
    }

    @Test(arguments: [
        (#"{"attributes_type": "T"}"#, "content_state: is required: an object of field: type"),
        (#"{"attributes_type": "T", "content_state": {"a": "text"}}"#, "content_state.a: unknown type 'text'; use string, number, integer, boolean, date, object or array, with ? when optional"),
        (#"{"content_state": {}}"#, "attributes_type: is required"),
        (#"{"attributes_type": "T", "content_state": {}, "attributes": {"a": 1}}"#, "attributes.a: must be a type name, an object of fields or [elementType], got number"),
        // Issue 44: each call keeps a version, so what it names is bounded.
        (#"{"attributes_type": "\#(String(repeating: "T", count: 257))", "content_state": {}}"#,
         "attributes_type: must be at most 256 characters (the name of the app's ActivityAttributes type), got 257"),
        (#"{"attributes_type": "T", "content_state": {}, "description": "\#(String(repeating: "é", count: 4097))"}"#,
         "description: must be at most 4096 characters, got 4097"),
    ])
    func badSchemasAreRefused(body: String, message: String) throws {
        let response = try world.server("setLiveActivitySchema", try #require(try JSONParser.parse(body).objectValue))
        #expect(response.status == 400)
        #expect(response.message == message)
    }
}

@Suite("Schemas in the simulator (X2, issue 6)")
struct SimulatorSchemaTests {
    @Test func aSimulatedDeviceDropsWhatItsAppCannotDecode() throws {
        let running = try RunningServer(demo: true)
        func post(_ method: String, _ request: JSONObject) throws -> RawHTTPResponse {
            try call(running.port, method, (["application": "XXXXX-XXXXX", "auth": "SECRET_API_TOKEN"] as JSONObject).merging(request))
        }
        func sent(_ response: RawHTTPResponse) throws {
            let code = try #require(response.json?.objectValue?["response"]?.objectValue?["Messages"]?.arrayValue?.first?.stringValue, "\(response.message ?? "")")
            #expect(try eventually { try running.server.messages.messageDetails(code: code, in: ApplicationCode("XXXXX-XXXXX")!)?.state == .done })
        }
        var start = startNotification(["devices": ["first_third"]])
        start["title"] = "Order"
        try sent(try post("startLiveActivity", ["notifications": [.object(start)]]))
        // The app now ships a ContentState Islet did not check this activity against (no schema when it started).
        _ = try post("setLiveActivitySchema", foodDeliverySchema)
        try sent(try post("updateLiveActivity", ["notifications": [.object(updateNotification(activity: ["content-state": ["status": 1]]))]]))
        let device = try request(running.port, method: "GET", "/simulator/devices/first_third", headers: ["Authorization": "Token SECRET_API_TOKEN"]).json?.objectValue
        let dropped = device?["log"]?.arrayValue?.last?.objectValue?["dropped"]?.stringValue
        #expect(dropped == "unable to decode: content-state.estimatedTime: missing")
        #expect(device?["lock_screen"]?.arrayValue?.first?.objectValue?["content_state"] == ["status": "Third", "estimatedTime": "37 min"],
                "the lock screen keeps what it showed")
    }
}
