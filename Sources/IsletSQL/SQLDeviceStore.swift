import Foundation
import IsletCore
import IsletStore

/// Devices, tags, tokens and filters, in either engine. Filters are compiled to SQL, so audiences are
/// selected by the database with its indexes and read page by page (issue 3).
public struct SQLDeviceStore: DeviceStore {
    let database: any SQLDatabase

    /// How many tag names an application may have (new ones past it are skipped, named).
    let tagNames: TagNames

    public init(database: any SQLDatabase, tagNames: TagNames = .standard) {
        self.database = database
        self.tagNames = tagNames
    }

    // MARK: - Devices

    /// Takes a push token from the application's other HWIDs: one lookup in the whole-token index.
    var releasePushToken: String {
        "UPDATE devices SET push_token = NULL WHERE push_token = ?1 AND \(database.dialect.unindexed("application")) = ?2 AND hwid != ?3 RETURNING id, sandbox, platform"
    }

    /// What registerDevice and noteDevice set of a device that exists: what the call said, and what it left out as it was.
    static let factsKept = """
        language = COALESCE(excluded.language, devices.language), timezone = COALESCE(excluded.timezone, devices.timezone),
        os_version = COALESCE(excluded.os_version, devices.os_version),
        os_version_key = CASE WHEN excluded.os_version IS NULL THEN devices.os_version_key ELSE excluded.os_version_key END,
        user_id = COALESCE(excluded.user_id, devices.user_id)
        """

    /// The columns of a written device, as `device(_:_:)` reads them.
    static let returnedColumns = "id, hwid, push_token, sandbox, language, timezone, os_version, user_id, frequent_updates, platform, NULL AS push_to_start"

    public func registerDevice(_ registration: DeviceRegistration, tags: [(name: String, change: TagChange)],
                               in application: ApplicationCode, at date: Date) throws(StoreError) -> (device: Device, skipped: [SkippedTag]) {
        try database.write { (c) throws(StoreError) -> (device: Device, skipped: [SkippedTag]) in
            let app = SQLValue.text(application.rawValue)
            // A push token belongs to one app install: a device that re-registers under a new HWID takes it over.
            for released in try c.query(releasePushToken, [.text(registration.pushToken), app, .text(registration.hwid)]) {
                let platform = DevicePlatform(rawValue: released["platform"].text ?? "") ?? .ios
                try Self.recordToken(nil, .push, slot: platform.tokenSlot(gateway: released["sandbox"].bool ? .sandbox : .production),
                                     device: released["id"].int ?? 0, at: date, c)
            }
            // RETURNING gives the stored device in the same round trip (a network one on PostgreSQL).
            let stored = try c.query("""
                INSERT INTO devices (application, hwid, push_token, sandbox, language, timezone, os_version, os_version_key, user_id,
                                     frequent_updates, updated_at, platform)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (application, hwid) DO UPDATE SET
                    push_token = excluded.push_token, sandbox = excluded.sandbox, platform = excluded.platform, \(Self.factsKept),
                    frequent_updates = COALESCE(excluded.frequent_updates, devices.frequent_updates), updated_at = excluded.updated_at
                RETURNING \(Self.returnedColumns)
                """, [
                app, .text(registration.hwid), .text(registration.pushToken), .int(registration.gateway == .sandbox ? 1 : 0),
                Self.optional(registration.language), Self.optional(registration.timezone), Self.optional(registration.osVersion),
                registration.osVersion.flatMap(VersionKey.make).map { .int($0) } ?? .null, Self.optional(registration.userID),
                registration.frequentUpdates.map { .int($0 ? 1 : 0) } ?? .null, SQLValue.seconds(date), registration.platform.parameter,
            ])
            guard let row = stored.first else {
                throw StoreError(.io, "device \(registration.hwid) vanished while registering")
            }
            let device = Self.device(row, application)
            try Self.recordToken(registration.pushToken, .push, slot: registration.platform.tokenSlot(gateway: registration.gateway),
                                 device: device.id, at: date, c)
            return (device, try applyTags(tags, device: device.id, application: application, c))
        }
    }

    public func unregisterDevice(hwid: String, in application: ApplicationCode, at date: Date) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) in
            guard let device = try lockedDevice(hwid: hwid, app: application, c) else { return false }
            try c.run("UPDATE devices SET push_token = NULL, updated_at = ? WHERE id = ?", [SQLValue.seconds(date), .int(device.id)])
            try Self.recordToken(nil, .push, slot: device.platform.tokenSlot(gateway: device.gateway), device: device.id, at: date, c)
            try c.run("DELETE FROM push_to_start_tokens WHERE device = ?", [.int(device.id)])
            try c.run("UPDATE activity_tokens SET token = NULL, updated_at = ? WHERE device = ? AND token IS NOT NULL",
                      [SQLValue.seconds(date), .int(device.id)])
            try Self.recordRemovals(.pushToStart, device: device.id, at: date, c)
            try Self.recordRemovals(.update, device: device.id, at: date, c)
            return true
        }
    }

    public func device(hwid: String, in application: ApplicationCode) throws(StoreError) -> Device? {
        try database.withConnection { (c) throws(StoreError) in try Self.device(hwid: hwid, app: application, c) }
    }

    // MARK: - Tags

    @discardableResult
    public func noteDevice(_ note: DeviceNote, in application: ApplicationCode, at date: Date) throws(StoreError) -> Device {
        try database.write { (c) throws(StoreError) -> Device in
            let stored = try c.query("""
                INSERT INTO devices (application, hwid, push_token, sandbox, language, timezone, os_version, os_version_key, user_id,
                                     opened_at, updated_at)
                VALUES (?, ?, NULL, 0, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (application, hwid) DO UPDATE SET
                    \(Self.factsKept), opened_at = COALESCE(excluded.opened_at, devices.opened_at), updated_at = excluded.updated_at
                RETURNING \(Self.returnedColumns)
                """, [
                .text(application.rawValue), .text(note.hwid), Self.optional(note.language), Self.optional(note.timezone),
                Self.optional(note.osVersion), note.osVersion.flatMap(VersionKey.make).map { .int($0) } ?? .null, Self.optional(note.userID),
                note.appOpened ? SQLValue.seconds(date) : .null, SQLValue.seconds(date),
            ])
            guard let row = stored.first else { throw StoreError(.io, "device \(note.hwid) vanished while it was noted") }
            return Self.device(row, application)
        }
    }

    /// The device, locked to the commit; one not known yet is created without a push token (issue 45: the SDK's calls
    /// before `registerDevice`, or without it), and then locked by its creation.
    func knownDevice(hwid: String, app: ApplicationCode, at date: Date, _ c: any SQLConnection) throws(StoreError) -> Device {
        if let device = try lockedDevice(hwid: hwid, app: app, c) { return device }
        try c.run("INSERT INTO devices (application, hwid, push_token, sandbox, updated_at) VALUES (?, ?, NULL, 0, ?) ON CONFLICT (application, hwid) DO NOTHING",
                  [.text(app.rawValue), .text(hwid), SQLValue.seconds(date)])
        guard let device = try lockedDevice(hwid: hwid, app: app, c) else { throw StoreError(.io, "device \(hwid) vanished while it was created") }
        return device
    }

    public func setTags(_ tags: [(name: String, change: TagChange)], hwid: String, in application: ApplicationCode,
                        at date: Date) throws(StoreError) -> [SkippedTag] {
        try database.write { (c) throws(StoreError) -> [SkippedTag] in
            let device = try knownDevice(hwid: hwid, app: application, at: date, c)
            let skipped = try applyTags(tags, device: device.id, application: application, c)
            try c.run("UPDATE devices SET updated_at = ? WHERE id = ?", [SQLValue.seconds(date), .int(device.id)])
            return skipped
        }
    }

    public func tags(hwid: String, in application: ApplicationCode) throws(StoreError) -> [String: TagValue]? {
        try deviceWithTags(hwid: hwid, in: application)?.tags
    }

    public func deviceWithTags(hwid: String, in application: ApplicationCode) throws(StoreError) -> (device: Device, tags: [String: TagValue])? {
        // The device's columns on each of its tag rows (or on one row with no tag): a read of a device's tags is one
        // statement, where a device and then its tags were three round trips on PostgreSQL.
        let rows = try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT \(Self.deviceColumns), NULL AS push_to_start, t.name AS tag_name, t.value AS tag_value, y.type AS tag_type
                FROM devices d
                LEFT JOIN device_tags t ON t.device = d.id
                LEFT JOIN tag_types y ON y.application = d.application AND y.name = t.name
                WHERE d.application = ?1 AND d.hwid = ?2
                ORDER BY t.name, t.value
                """, [.text(application.rawValue), .text(hwid)])
        }
        guard let first = rows.first else { return nil }
        var tags: [String: TagValue] = [:]
        // A tag whose name has no type (none is stored so) is left out, as a join would.
        for row in rows {
            guard let name = row["tag_name"].text, let typeName = row["tag_type"].text else { continue }
            let type = TagType(rawValue: typeName) ?? .string
            let value = row["tag_value"]
            switch type {
            case .integer: tags[name] = .integer(value.int ?? 0)
            case .boolean: tags[name] = .boolean(value.int == 1)
            case .date: tags[name] = .date(value.int ?? 0)
            case .list:
                if case .list(let existing)? = tags[name] { tags[name] = .list(existing + [value.text ?? ""]) } else { tags[name] = .list([value.text ?? ""]) }
            default: tags[name] = .string(value.text ?? "")
            }
        }
        return (Self.device(first, application), tags)
    }

    /// The device's value of an integer or list tag (nil: none, or a tag of another type), as an operation reads it:
    /// an operation on a tag of another type is skipped whatever the device holds.
    static func tagValue(_ name: String, device: Int64, type: TagType?, _ dialect: SQLDialect, _ c: any SQLConnection) throws(StoreError) -> TagValue? {
        guard let type, type == .integer || type == .list else { return nil }
        let rows = try c.query("SELECT \(dialect.tagValue(integer: type == .integer)) AS value FROM device_tags t WHERE t.device = ? AND t.name = ? ORDER BY 1",
                               [.int(device), .text(name)])
        guard let first = rows.first else { return nil }
        return type == .list ? .list(rows.compactMap { $0["value"].text }) : first["value"].int.map { .integer($0) }
    }

    public func tagTypes(in application: ApplicationCode, named: Set<String>?) throws(StoreError) -> [String: TagType] {
        try database.withConnection { (c) throws(StoreError) in try SQLMessageStore.tagTypes(application, named: named, c) }
    }

    /// Replaces each named tag's values; a tag's type is fixed by the first value ever set for it, and a
    /// value of another type is skipped (the device keeps its old value) and returned.
    private func applyTags(_ tags: [(name: String, change: TagChange)], device: Int64, application: ApplicationCode,
                           _ c: any SQLConnection) throws(StoreError) -> [SkippedTag] {
        var skipped: [SkippedTag] = []
        // The application's tag names, counted once a call when it names a new one.
        var names: Int?
        for (name, change) in tags {
            let existing = try c.query("SELECT type FROM tag_types WHERE application = ? AND name = ?",
                                       [.text(application.rawValue), .text(name)]).first?["type"].text.flatMap(TagType.init(rawValue:))
            // An operation works on the device's value, read under the device's row lock (the caller's).
            var current: TagValue?
            switch change {
            case .increment, .append, .removeItems: current = try Self.tagValue(name, device: device, type: existing, database.dialect, c)
            case .set, .remove: break
            }
            let value: TagValue?
            switch change.apply(current: current, type: existing, listLimit: TagChange.maximumListItems) {
            case .skip(let why):
                skipped.append(SkippedTag(tag: name, why: why))
                continue
            case .store(let stored):
                value = stored
            }
            if value != nil, existing == nil {
                var count = names ?? 0
                if names == nil {
                    count = Int(try c.query("SELECT COUNT(*) AS names FROM tag_types WHERE application = ?", [.text(application.rawValue)])[0]["names"].int ?? 0)
                }
                if let refusal = tagNames.admit(name, names: count) {
                    names = count
                    skipped.append(refusal)
                    continue
                }
                names = count + 1
            }
            try c.run("DELETE FROM device_tags WHERE device = ? AND name = ?", [.int(device), .text(name)])
            guard let value else { continue }
            if existing == nil {
                // The first call to use a name fixes its type; another node's call fixing it at this moment goes first,
                // and this write runs again on the type it fixed.
                guard try c.run("INSERT INTO tag_types (application, name, type) VALUES (?, ?, ?) ON CONFLICT (application, name) DO NOTHING",
                                [.text(application.rawValue), .text(name), .text(value.type.rawValue)]) == 1 else {
                    throw StoreError(.busy, "tag \(name) was given its type by another write at this moment")
                }
            }
            let values: [SQLValue]
            switch value {
            case .string(let s): values = [.text(s)]
            case .integer(let i), .date(let i): values = [.int(i)]
            case .boolean(let b): values = [.int(b ? 1 : 0)]
            case .list(let list): values = Array(Set(list)).sorted().map { .text($0) }
            }
            for stored in values {
                let insert = database.dialect.insertTag(stored)
                try c.run(insert.sql, [.int(device), .text(name)] + insert.value)
            }
        }
        return skipped
    }

    // MARK: - Live Activity tokens

    public func setPushToStartToken(_ token: String?, attributesType: String, hwid: String, in application: ApplicationCode,
                                    at date: Date) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            let device = try knownDevice(hwid: hwid, app: application, at: date, c)
            if let token {
                try c.run("""
                    INSERT INTO push_to_start_tokens (device, attributes_type, token, updated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (device, attributes_type) DO UPDATE SET token = excluded.token, updated_at = excluded.updated_at
                    """, [.int(device.id), .text(attributesType), .text(token), SQLValue.seconds(date)])
            } else {
                try c.run("DELETE FROM push_to_start_tokens WHERE device = ? AND attributes_type = ?", [.int(device.id), .text(attributesType)])
            }
            try Self.recordToken(token, .pushToStart, slot: attributesType, device: device.id, at: date, c)
        }
    }

    public func setActivityToken(_ token: String?, activityID: String, hwid: String, in application: ApplicationCode,
                                 at date: Date, admit: (ActivityJoinFacts) throws -> Void) throws {
        try database.write(rethrowing: { c in
            let device = try knownDevice(hwid: hwid, app: application, at: date, c)
            if token != nil && !activityID.isEmpty {
                try admit(try joinFacts(activityID, device: device, application: application, c))
            }
            if activityID.isEmpty {
                // The SDK's stopLiveActivity() without an id: every activity on the device ended (D4).
                try c.run("UPDATE activity_tokens SET token = NULL, updated_at = ? WHERE device = ? AND token IS NOT NULL",
                          [SQLValue.seconds(date), .int(device.id)])
                try Self.recordRemovals(.update, device: device.id, at: date, c)
            } else {
                try c.run("""
                    INSERT INTO activity_tokens (device, activity_id, token, updated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (device, activity_id) DO UPDATE SET token = excluded.token, updated_at = excluded.updated_at
                    """, [.int(device.id), .text(activityID), Self.optional(token), SQLValue.seconds(date)])
                try Self.recordToken(token, .update, slot: activityID, device: device.id, at: date, c)
                if let token {
                    let activity = try linkActivity(activityID, device: device.id, application: application, at: date, c)
                    try catchUp(activity: activity, device: device.id, token: token, at: date, c)
                }
            }
        })
    }

    /// The facts D5 decides on, read in the reporting transaction: primary-key and index lookups only.
    private func joinFacts(_ activityID: String, device: Device, application: ApplicationCode,
                           _ c: any SQLConnection) throws(StoreError) -> ActivityJoinFacts {
        // Locked before the token row is written, as a start locks it before it ends a session's tokens: a start of a new
        // session on another node goes before this decision or after this report, never in between.
        guard let activity = try c.query("SELECT id FROM activities WHERE application = ? AND activity_id = ? \(database.dialect.forNoKeyUpdate)",
                                         [.text(application.rawValue), .text(activityID)]).first?["id"] else { return ActivityJoinFacts() }
        // The current session's start: a restart after an end addresses its own devices, not the last session's.
        let row = try c.query("""
            SELECT \(SQLMessageStore.currentStart(of: "?1")) AS start,
                   EXISTS (SELECT 1 FROM activity_devices WHERE activity = ?1 AND device = ?2) AS member
            """, [activity, .int(device.id)])[0]
        guard let start = row["start"].int else { return ActivityJoinFacts(known: true, isMember: row["member"].bool) }
        var targeted = try c.query("SELECT EXISTS (SELECT 1 FROM deliveries WHERE message = ? AND device = ?) AS targeted",
                                   [.int(start), .int(device.id)])[0]["targeted"].bool
        // A fan-out still under way has not recorded every device yet: a phone that got its push early may
        // report before its batch is recorded. Then the start's target itself says whether it is addressed.
        if !targeted, let pending = try c.query("SELECT target FROM messages WHERE id = ? AND state IN \([MessageState.pending, .sending].sqlList)",
                                                [.int(start)]).first, let text = pending["target"].text {
            let (condition, parameters) = sql(for: try SQLMessageStore.decodeTarget(text, application, c), app: .text(application.rawValue))
            targeted = try c.query("SELECT EXISTS (SELECT 1 FROM devices d WHERE d.id = ? AND d.application = ? AND (\(condition))) AS targeted",
                                   [.int(device.id), .text(application.rawValue)] + parameters)[0]["targeted"].bool
        }
        return ActivityJoinFacts(known: true, startedByIslet: true, isMember: row["member"].bool, targeted: targeted)
    }

    /// A device that reports an update token takes part in that activity: updates reach it (S8, U2).
    /// An activity the app started on its own (not through startLiveActivity) becomes known this way;
    /// an ended one stays ended, since ids are unique per session (reference docs).
    @discardableResult
    private func linkActivity(_ activityID: String, device: Int64, application: ApplicationCode, at date: Date,
                              _ c: any SQLConnection) throws(StoreError) -> Int64 {
        let activity = try c.query("""
            INSERT INTO activities (application, activity_id, state, updated_at, started_at) VALUES (?1, ?2, \(ActivityState.active.sql), ?3, ?3)
            ON CONFLICT (application, activity_id) DO UPDATE SET updated_at = excluded.updated_at,
                -- An activity known only from phones' reports, past its 8 hours (A8), has begun again on the reporting one.
                started_at = CASE WHEN (activities.started_at IS NULL OR activities.started_at <= excluded.started_at - \(Int(ActivityLifetime.running)))
                                       AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.activity = activities.id AND m.event = \(LiveActivityEvent.start.sql))
                                  THEN excluded.started_at ELSE activities.started_at END
            RETURNING id
            """, [.text(application.rawValue), .text(activityID), SQLValue.seconds(date)])[0]["id"]
        try c.run("""
            INSERT INTO activity_devices (activity, device, state) VALUES (?, ?, \(ActivityDeviceState.active.sql))
            ON CONFLICT (activity, device) DO UPDATE SET state = \(ActivityDeviceState.active.sql)
            """, [activity, .int(device)])
        return activity.int ?? 0
    }

    /// A reported update token proves the activity runs on the device: its start is confirmed, and if it
    /// missed the latest update or end (the token came late, or changed), that is sent again now,
    /// alert-free, with its original timestamp (issue 10).
    private func catchUp(activity: Int64, device: Int64, token: String, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        try c.run("""
            UPDATE deliveries SET state = \(DeliveryState.sent.sql), status = 200, next_at = NULL, reason = 'confirmed: the device reported its update token'
            WHERE device = ?1 AND state IN \([DeliveryState.unconfirmed, .retrying].sqlList)
              AND message IN (SELECT id FROM messages WHERE activity = ?2 AND event = \(LiveActivityEvent.start.sql))
            """, [.int(device), .int(activity)])
        let start = try SQLMessageStore.currentStart(activity, c) ?? 0
        guard let latest = try c.query("""
            SELECT id, state FROM messages WHERE activity = ? AND id > ? AND event IN \([LiveActivityEvent.update, .end].sqlList) AND state != \(MessageState.cancelled.sql)
            ORDER BY id DESC LIMIT 1
            """, [.int(activity), .int(start)]).first, let message = latest["id"].int else { return }
        let delivery = try c.query("SELECT state, token FROM deliveries WHERE message = ? AND device = ?", [.int(message), .int(device)]).first
        let needed = CatchUpRule.needed(
            latest: MessageState(rawValue: latest["state"].text ?? "") ?? .done,
            delivery: delivery.map { (DeliveryState(rawValue: $0["state"].text ?? "") ?? .failed, $0["token"].text) }, token: token)
        guard needed else { return }
        let now = Int64((date.timeIntervalSince1970 * 1000).rounded())
        try c.run("""
            INSERT INTO deliveries (message, device, push_type, status, reason, apns_id, attempts, at, state, next_at, token, copies, catch_up, expires_at)
            VALUES (?1, ?2, \(PushType.liveActivity.sql), 0, 'catching up: the device reported its update token after this message', NULL, 0, ?3, \(DeliveryState.retrying.sql), ?4, ?5, 0, 1, ?6)
            ON CONFLICT (message, device) DO UPDATE SET push_type = \(PushType.liveActivity.sql), state = \(DeliveryState.retrying.sql), next_at = excluded.next_at,
                token = excluded.token, catch_up = 1, reason = excluded.reason, expires_at = excluded.expires_at
            """, [.int(message), .int(device), SQLValue.seconds(date), .int(now), .text(token), .int(now + Int64(CatchUpRule.lifetime * 1000))])
    }

    /// A10: keeps a token change in the device's history, only when it is one: a push-to-start or update
    /// token that differs from its slot's last entry (an app reports the same tokens at every launch); a
    /// push token, or gateway, that differs from the device's last push entry.
    static func recordToken(_ token: String?, _ kind: DeviceTokenKind, slot: String, device: Int64, at date: Date,
                            _ c: any SQLConnection) throws(StoreError) {
        // The entry a change is measured against: the slot's last, or for the push token the device's last.
        let last = kind == .push ? "h.device = ?1 AND h.kind = ?2" : "h.device = ?1 AND h.kind = ?2 AND h.slot = ?3"
        let added = try c.run("""
            INSERT INTO token_history (device, kind, slot, token, at)
            SELECT ?1, ?2, ?3, CAST(?4 AS TEXT), ?5
            WHERE NOT EXISTS (SELECT 1 FROM (SELECT h.slot, h.token FROM token_history h WHERE \(last) ORDER BY h.id DESC LIMIT 1) l
                              WHERE l.slot = ?3 AND l.token IS NOT DISTINCT FROM CAST(?4 AS TEXT))
              AND (CAST(?4 AS TEXT) IS NOT NULL OR EXISTS (SELECT 1 FROM token_history h WHERE \(last)))
            """, [.int(device), .text(kind.rawValue), .text(slot), optional(token), SQLValue.seconds(date)])
        if added > 0 { try trimTokenHistory(device, c) }
    }

    /// A10: the removal of every token of `kind` the device still had in its history (unregistered, or
    /// every activity ended on it).
    static func recordRemovals(_ kind: DeviceTokenKind, device: Int64, at date: Date, _ c: any SQLConnection) throws(StoreError) {
        let added = try c.run("""
            INSERT INTO token_history (device, kind, slot, token, at)
            SELECT h.device, h.kind, h.slot, NULL, ?3 FROM token_history h
            WHERE h.device = ?1 AND h.kind = ?2 AND h.token IS NOT NULL
              AND h.id = (SELECT MAX(l.id) FROM token_history l WHERE l.device = h.device AND l.kind = h.kind AND l.slot = h.slot)
            """, [.int(device), .text(kind.rawValue), SQLValue.seconds(date)])
        if added > 0 { try trimTokenHistory(device, c) }
    }

    /// Keeps the device's last `DeviceHealth.historyKept` entries, and the latest of its push and push-to-start
    /// tokens whatever their age (a few slots; an update token's slot is an activity, one each).
    static func trimTokenHistory(_ device: Int64, _ c: any SQLConnection) throws(StoreError) {
        try c.run("""
            DELETE FROM token_history WHERE device = ?1
              AND id <= (SELECT id FROM token_history WHERE device = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
              AND id NOT IN (SELECT MAX(id) FROM token_history WHERE device = ?1 AND kind != \(DeviceTokenKind.update.sql) GROUP BY kind, slot)
            """, [.int(device), .int(Int64(DeviceHealth.historyKept))])
    }

    public func deviceHealth(hwid: String, in application: ApplicationCode, historyLimit: Int) throws(StoreError) -> DeviceHealthReport? {
        try database.withConnection { (c) throws(StoreError) -> DeviceHealthReport? in
            guard let device = try Self.device(hwid: hwid, app: application, c) else { return nil }
            let id = SQLValue.int(device.id)
            let pushToStart = try c.query("SELECT attributes_type, updated_at FROM push_to_start_tokens WHERE device = ? ORDER BY attributes_type", [id])
                .map { (attributesType: $0["attributes_type"].text ?? "", updatedAt: $0["updated_at"].date ?? .distantPast) }
            let activityTokens = try c.query("SELECT activity_id, token, updated_at FROM activity_tokens WHERE device = ? ORDER BY updated_at DESC, activity_id LIMIT ?",
                                             [id, .int(Int64(historyLimit))]).map { row in
                ActivityToken(activityID: row["activity_id"].text ?? "", token: row["token"].text, updatedAt: row["updated_at"].date ?? .distantPast)
            }
            let history = try c.query("SELECT kind, slot, token, at FROM token_history WHERE device = ? ORDER BY id DESC LIMIT ?",
                                      [id, .int(Int64(historyLimit))]).map { row in
                TokenChange(kind: DeviceTokenKind(rawValue: row["kind"].text ?? "") ?? .push, slot: row["slot"].text ?? "",
                            token: row["token"].text, at: row["at"].date ?? .distantPast)
            }
            // The device's push token or gateway last changed then (a re-registration of the same ones is no change).
            let pushTokenSince = try c.query("SELECT MAX(at) AS at FROM token_history WHERE device = ? AND kind = \(DeviceTokenKind.push.sql)", [id])[0]["at"]
            // The device's latest push-to-start pushes APNs accepted, and the app's first report of that activity's
            // update token since the start was accepted by Islet (the token history keeps it, even once ended).
            let starts = try c.query("""
                SELECT a.activity_id, d.at, m.channel_ids,
                       (SELECT MIN(h.at) FROM token_history h WHERE h.device = d.device AND h.kind = \(DeviceTokenKind.update.sql) AND h.slot = a.activity_id
                                                                AND h.token IS NOT NULL AND h.at >= m.created_at) AS reported_at
                FROM deliveries d
                JOIN messages m ON m.id = d.message
                JOIN activities a ON a.id = m.activity
                WHERE d.device = ? AND m.event = \(LiveActivityEvent.start.sql) AND d.push_type = \(PushType.liveActivity.sql) AND d.state = \(DeliveryState.sent.sql)
                ORDER BY d.message DESC LIMIT 20
                """, [id]).compactMap { row -> DeviceHealth.Start? in
                // A start that subscribed the device to a channel (X5) brings no update token to wait for.
                let ids = row["channel_ids"].text.map(SQLMessageStore.decode(channelIDs:))
                if BroadcastChannels.startsOnChannel(ids: ids, gateway: device.gateway, osVersion: device.osVersion) { return nil }
                return DeviceHealth.Start(activityID: row["activity_id"].text ?? "", acceptedAt: row["at"].date ?? .distantPast,
                                          tokenReportedAt: row["reported_at"].date)
            }
            // APNs refusing its tokens as foreign since its push token or gateway last changed.
            let rejections = try c.query("""
                SELECT reason, at FROM deliveries WHERE device = ? AND reason = 'BadDeviceToken' AND at >= ?
                ORDER BY message DESC LIMIT 5
                """, [id, .int(pushTokenSince.int ?? 0)]).map { DeviceHealth.Rejection(reason: $0["reason"].text ?? "", at: $0["at"].date ?? .distantPast) }
            let opened = try c.query("SELECT opened_at FROM devices WHERE id = ?", [id]).first?["opened_at"].date
            return DeviceHealthReport(
                device: device, pushTokenUpdatedAt: pushTokenSince.date, pushToStartTokens: pushToStart, activityTokens: activityTokens,
                history: history, facts: DeviceHealth.Facts(gateway: device.gateway, pushToStartTokens: pushToStart, starts: starts, rejections: rejections),
                appOpenedAt: opened)
        }
    }

    public func activityTokens(hwid: String, in application: ApplicationCode) throws(StoreError) -> [ActivityToken] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT a.activity_id, a.token, a.updated_at FROM activity_tokens a JOIN devices d ON d.id = a.device
                WHERE d.application = ? AND d.hwid = ? ORDER BY a.activity_id
                """, [.text(application.rawValue), .text(hwid)]).map { row in
                ActivityToken(activityID: row["activity_id"].text ?? "", token: row["token"].text,
                              updatedAt: row["updated_at"].date ?? Date(timeIntervalSince1970: 0))
            }
        }
    }

    // MARK: - Rows

    static let deviceColumns = "d.id, d.hwid, d.push_token, d.sandbox, d.language, d.timezone, d.os_version, d.user_id, d.frequent_updates, d.platform"

    /// `lock`: a locking clause (`SQLDialect.forNoKeyUpdate`), or none.
    static func device(hwid: String, app: ApplicationCode, lock: String = "", _ c: any SQLConnection) throws(StoreError) -> Device? {
        try c.query("SELECT \(deviceColumns), NULL AS push_to_start FROM devices d WHERE d.application = ? AND d.hwid = ? \(lock)",
                    [.text(app.rawValue), .text(hwid)]).first.map { device($0, app) }
    }

    /// The device, locked to the commit for a change of its tags or tokens: two calls for one device on two nodes
    /// take turns (a list tag's values are replaced, not merged; its token history keeps one order).
    func lockedDevice(hwid: String, app: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> Device? {
        try Self.device(hwid: hwid, app: app, lock: database.dialect.forNoKeyUpdate, c)
    }

    static func device(_ row: SQLRow, _ application: ApplicationCode) -> Device {
        Device(id: row["id"].int ?? 0, application: application, hwid: row["hwid"].text ?? "", pushToken: row["push_token"].text,
               gateway: row["sandbox"].bool ? .sandbox : .production, language: row["language"].text, timezone: row["timezone"].text,
               osVersion: row["os_version"].text, userID: row["user_id"].text, pushToStartToken: row["push_to_start"].text,
               frequentUpdates: row["frequent_updates"].int.map { $0 == 1 },
               platform: row["platform"].text.flatMap(DevicePlatform.init(rawValue:)) ?? .ios)
    }

    static func optional(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
}
