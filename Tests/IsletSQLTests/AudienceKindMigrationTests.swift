import Foundation
import IsletCore
import IsletSQL
import IsletStore
import Testing

/// Version 23 (issue 43): claims tell a start to named devices by `messages.target_kind` and `named_devices`, not by
/// the JSON text of its target; the messages a database already holds get both from their stored target.
@Suite("Start audiences by kind and size (migration 23)")
struct AudienceKindMigrationTests {
    @Test(arguments: Engine.allCases) func storedStartsGetTheirAudienceKindAndSize(_ engine: Engine) throws {
        let db = try engine.open(migrateUpTo: 22)
        let now: Int64 = 1_800_000_000
        _ = try db.database.withConnection { (c) throws(StoreError) in
            try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES ('ABCDE-12345', 'Shop', 'com.example.shop', ?)", [.int(now)])
            for (id, activity) in [(1, "ORDER_1"), (2, "ORDER_2"), (3, "ORDER_3")] {
                try c.run("INSERT INTO activities (id, application, activity_id, state, updated_at) VALUES (?, 'ABCDE-12345', ?, 'active', ?)",
                          [.int(Int64(id)), .text(activity), .int(now)])
            }
            let messages: [(code: String, activity: Int64, event: String, target: String?)] = [
                ("named", 1, "start", #"{"devices":["phone-a","phone-b","phone-\"c\""]}"#),
                ("people", 2, "start", #"{"users":["u1"]}"#),
                ("filtered", 3, "start", #"{"filter":{"name":"f","operator":"AND","conditions":[]}}"#),
                ("update", 1, "update", nil),
            ]
            for m in messages {
                try c.run("""
                    INSERT INTO messages (code, application, activity, event, target, payload, priority, state, due_at, created_at, expires_at)
                    VALUES (?, 'ABCDE-12345', ?, ?, ?, ?, 10, 'done', 0, ?, 0)
                    """, [.text(m.code), .int(m.activity), .text(m.event), m.target.map { .text($0) } ?? .null, .blob([1]), .int(now)])
            }
            return 0
        }
        let upgraded = try db.reopen()
        #expect(try upgraded.schemaVersion() == SQLMigrations.latestVersion)
        let rows = try upgraded.withConnection { (c) throws(StoreError) in
            try c.query("SELECT code, target_kind, named_devices FROM messages ORDER BY id")
        }
        #expect(rows.map { $0["code"].text ?? "" } == ["named", "people", "filtered", "update"])
        #expect(rows.map { $0["target_kind"].text } == ["devices", "users", "filter", nil])
        #expect(rows.map { $0["named_devices"].int } == [3, nil, nil, nil], "three hwids, one with quotes in it")
    }

    @Test func aTargetNamesItsKindAndItsDevices() {
        #expect(TargetSelection.devices(["a", "b"]).kind == .devices && TargetSelection.devices(["a", "b"]).namedDevices == 2)
        #expect(TargetSelection.users(["u"]).kind == .users && TargetSelection.users(["u"]).namedDevices == nil)
    }
}

/// The stores spell these types' values in SQL as quoted literals (`WireValue.sql`): none may hold a quote.
@Suite("SQL spelling of typed values")
struct SQLSpellingTests {
    @Test func noSpelledValueHoldsAQuote() {
        let spelled: [[String]] = [
            MessageState.all.map(\.rawValue), DeliveryState.all.map(\.rawValue), ActivityState.all.map(\.rawValue),
            ActivityDeviceState.all.map(\.rawValue), LiveActivityEvent.all.map(\.rawValue), PushType.all.map(\.rawValue),
            DeviceTokenKind.all.map(\.rawValue), TargetKind.all.map(\.rawValue),
        ]
        for values in spelled {
            #expect(!values.isEmpty && values.allSatisfy { !$0.isEmpty && !$0.contains("'") && !$0.contains("\\") }, "\(values)")
        }
    }
}
