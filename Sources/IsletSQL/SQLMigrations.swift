import Foundation
import IsletCore
import IsletStore

/// The schema of both engines, as one ordered list of migrations recorded in `schema_migrations`: written
/// in SQLite's dialect, and translated for PostgreSQL by `sql(for:)`, so the engines cannot drift apart
/// and a version means the same tables in both.
///
/// Never edit a migration that has shipped; add a new one.
public enum SQLMigrations {
    struct Migration: Sendable {
        let version: Int
        let name: String
        let sql: String
        /// The engines it changes; on the others it only takes its version number (none changes a table).
        var engines: Set<SQLDialect.Engine> = [.sqlite, .postgresql]
        /// A step that SQL alone cannot write, run after `sql` on the same engines.
        var step: (@Sendable (any SQLConnection) throws(StoreError) -> Void)?
    }

    static let all: [Migration] = [
        Migration(version: 1, name: "applications and tokens", sql: """
            CREATE TABLE applications (
                code TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                created_at INTEGER NOT NULL
            ) STRICT;
            CREATE TABLE tokens (
                id TEXT PRIMARY KEY,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                kind TEXT NOT NULL CHECK (kind IN ('api', 'device')),
                hash BLOB NOT NULL UNIQUE,
                label TEXT NOT NULL DEFAULT '',
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            ) STRICT;
            CREATE INDEX tokens_by_application ON tokens (application, kind);
            """),
        Migration(version: 2, name: "APNs signing keys", sql: """
            CREATE TABLE apns_keys (
                application TEXT PRIMARY KEY REFERENCES applications(code) ON DELETE CASCADE,
                team_id TEXT NOT NULL,
                key_id TEXT NOT NULL,
                environment TEXT NOT NULL CHECK (environment IN ('production', 'sandbox', 'both')),
                pem TEXT NOT NULL,
                updated_at INTEGER NOT NULL
            ) STRICT;
            """),
        Migration(version: 3, name: "devices, tags, tokens and filters", sql: """
            CREATE TABLE devices (
                id INTEGER PRIMARY KEY,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                hwid TEXT NOT NULL,
                push_token TEXT,
                sandbox INTEGER NOT NULL DEFAULT 0,
                language TEXT,
                timezone TEXT,
                os_version TEXT,
                os_version_key INTEGER,
                user_id TEXT,
                updated_at INTEGER NOT NULL,
                UNIQUE (application, hwid)
            ) STRICT;
            -- Audiences are read in id order per application: (application, rowid) pages without sorting.
            CREATE INDEX devices_by_application ON devices (application);
            -- A 16-hex-digit prefix finds a token as well as the whole token would, in a quarter of the space.
            CREATE INDEX devices_by_push_token ON devices (substr(push_token, 1, 16));
            CREATE INDEX devices_by_user ON devices (user_id) WHERE user_id IS NOT NULL;
            CREATE TABLE tag_types (
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                name TEXT NOT NULL,
                type TEXT NOT NULL CHECK (type IN ('string', 'integer', 'list')),
                PRIMARY KEY (application, name)
            ) STRICT, WITHOUT ROWID;
            CREATE TABLE device_tags (
                device INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                name TEXT NOT NULL,
                value ANY NOT NULL,
                PRIMARY KEY (device, name, value)
            ) STRICT, WITHOUT ROWID;
            CREATE INDEX device_tags_by_value ON device_tags (name, value);
            CREATE TABLE push_to_start_tokens (
                device INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                attributes_type TEXT NOT NULL,
                token TEXT NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (device, attributes_type)
            ) STRICT, WITHOUT ROWID;
            CREATE TABLE activity_tokens (
                device INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                activity_id TEXT NOT NULL,
                token TEXT,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (device, activity_id)
            ) STRICT, WITHOUT ROWID;
            CREATE TABLE filters (
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                name TEXT NOT NULL,
                operator TEXT NOT NULL CHECK (operator IN ('AND', 'OR')),
                conditions TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (application, name)
            ) STRICT;
            """),
        Migration(version: 4, name: "activities, messages and deliveries", sql: """
            CREATE TABLE activities (
                id INTEGER PRIMARY KEY,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                activity_id TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('scheduled', 'active', 'ended')),
                attributes_type TEXT,
                name TEXT,
                content_state TEXT,
                updated_at INTEGER NOT NULL,
                UNIQUE (application, activity_id)
            ) STRICT;
            CREATE TABLE messages (
                id INTEGER PRIMARY KEY,
                code TEXT NOT NULL UNIQUE,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                activity INTEGER NOT NULL REFERENCES activities(id) ON DELETE CASCADE,
                event TEXT NOT NULL CHECK (event IN ('start', 'update', 'end')),
                target TEXT,
                attributes_type TEXT,
                payload BLOB NOT NULL,
                fallback_payload BLOB,
                priority INTEGER NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'done', 'cancelled')),
                due_at INTEGER NOT NULL,
                cursor INTEGER NOT NULL DEFAULT 0,
                claimed INTEGER NOT NULL DEFAULT 0,
                created_at INTEGER NOT NULL,
                finished_at INTEGER
            ) STRICT;
            CREATE INDEX messages_waiting ON messages (due_at, id) WHERE state IN ('pending', 'sending');
            CREATE INDEX messages_by_activity ON messages (activity, id);
            CREATE TABLE deliveries (
                message INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                device INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                push_type TEXT,
                status INTEGER NOT NULL,
                reason TEXT,
                apns_id TEXT,
                attempts INTEGER NOT NULL,
                at INTEGER NOT NULL,
                PRIMARY KEY (message, device)
            ) STRICT, WITHOUT ROWID;
            CREATE TABLE activity_devices (
                activity INTEGER NOT NULL REFERENCES activities(id) ON DELETE CASCADE,
                device INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                state TEXT NOT NULL CHECK (state IN ('active', 'token-dead')),
                PRIMARY KEY (activity, device)
            ) STRICT, WITHOUT ROWID;
            """),
        Migration(version: 5, name: "simulated devices", sql: """
            CREATE TABLE simulated_devices (
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                hwid TEXT NOT NULL,
                state TEXT NOT NULL,
                PRIMARY KEY (application, hwid)
            ) STRICT;
            """),
        Migration(version: 6, name: "Live Activity schemas", sql: """
            CREATE TABLE live_activity_schemas (
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                attributes_type TEXT NOT NULL,
                version INTEGER NOT NULL,
                content_state TEXT NOT NULL,
                attributes TEXT NOT NULL,
                description TEXT,
                created_at INTEGER NOT NULL,
                deleted_at INTEGER,
                PRIMARY KEY (application, attributes_type, version)
            ) STRICT;
            ALTER TABLE activities ADD COLUMN schema_version INTEGER;
            """),
        Migration(version: 7, name: "durable retries, expiry, superseded messages, unconfirmed starts and catch-up", sql: """
            ALTER TABLE deliveries ADD COLUMN state TEXT NOT NULL DEFAULT 'sent'
                CHECK (state IN ('sent', 'failed', 'skipped', 'retrying', 'sending', 'unconfirmed', 'superseded', 'expired'));
            UPDATE deliveries SET state = CASE WHEN push_type IS NULL THEN 'skipped' WHEN status = 200 THEN 'sent' ELSE 'failed' END;
            ALTER TABLE deliveries ADD COLUMN next_at INTEGER;
            ALTER TABLE deliveries ADD COLUMN token TEXT;
            ALTER TABLE deliveries ADD COLUMN copies INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE deliveries ADD COLUMN catch_up INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE deliveries ADD COLUMN expires_at INTEGER;
            CREATE INDEX deliveries_due ON deliveries (next_at) WHERE state IN ('retrying', 'unconfirmed');
            CREATE INDEX deliveries_owed ON deliveries (message) WHERE state IN ('retrying', 'unconfirmed');
            CREATE INDEX deliveries_by_device ON deliveries (device, message);
            ALTER TABLE messages ADD COLUMN expires_at INTEGER;
            UPDATE messages SET expires_at = due_at + 3600000;
            ALTER TABLE messages ADD COLUMN superseded_by INTEGER;
            """),
        Migration(version: 8, name: "fan-out shards", sql: """
            CREATE TABLE message_shards (
                message INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                shard INTEGER NOT NULL,
                after_id INTEGER NOT NULL,
                up_to INTEGER NOT NULL,
                cursor INTEGER NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'done')),
                claimed INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (message, shard)
            ) STRICT;
            CREATE INDEX message_shards_open ON message_shards (message) WHERE state != 'done';
            """),
        // A prefix index made tokens that share their first 16 digits (sequential or fake ones) cost a scan
        // of all of them per lookup; the whole token costs the same whatever the tokens look like (issue 12).
        Migration(version: 9, name: "whole push-token index", sql: """
            DROP INDEX devices_by_push_token;
            CREATE INDEX devices_by_push_token ON devices (push_token) WHERE push_token IS NOT NULL;
            """),
        // Retention finds the oldest finished messages without reading the others (issue 12).
        Migration(version: 10, name: "finished messages by age", sql: """
            CREATE INDEX messages_finished ON messages (finished_at) WHERE state IN ('done', 'cancelled');
            """),
        // A filter on a custom tag reads a page of devices in id order: this index gives PostgreSQL an
        // index-only merge join from the page's first device (4.0 → 1.6 ms a page over 500k devices).
        // SQLite probes its primary key per device, and would choose this index instead, 24% slower.
        Migration(version: 11, name: "custom tags by name and device", sql: """
            CREATE INDEX device_tags_by_name_device ON device_tags (name, device, number);
            """, engines: [.postgresql]),
        // Several nodes on one database (issue 14): a claim is a lease (its id is the fencing token) held by a
        // node; rows being sent name their lease, and a lease gone (expired, or its node's session ended) frees them.
        Migration(version: 12, name: "nodes, leases and shared provider tokens", sql: """
            CREATE TABLE nodes (
                id TEXT PRIMARY KEY,
                number INTEGER NOT NULL UNIQUE,
                host TEXT NOT NULL,
                pid INTEGER NOT NULL,
                version TEXT NOT NULL,
                started_at INTEGER NOT NULL,
                heartbeat_at INTEGER NOT NULL,
                stopped_at INTEGER
            ) STRICT;
            CREATE TABLE leases (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                owner TEXT NOT NULL,
                until_ms INTEGER NOT NULL,
                created_at INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX leases_by_owner ON leases (owner);
            ALTER TABLE messages ADD COLUMN lease INTEGER;
            CREATE INDEX messages_leased ON messages (lease) WHERE claimed = 1;
            ALTER TABLE message_shards ADD COLUMN lease INTEGER;
            ALTER TABLE deliveries ADD COLUMN lease INTEGER;
            CREATE INDEX deliveries_sending ON deliveries (lease) WHERE state = 'sending';
            CREATE TABLE provider_tokens (
                name TEXT PRIMARY KEY,
                token TEXT NOT NULL,
                issued_at INTEGER NOT NULL,
                expired INTEGER NOT NULL DEFAULT 0
            ) STRICT;
            """),
        // Apple's hourly budget of priority-10 updates (A7): each application's budget (NULL: the default),
        // what a device says of frequent updates (NULL: nothing yet), an activity's priority-10 updates of the
        // last hour, the priority an update goes at by kind of device, and the priority each push went at.
        // An activity's lifetime (A8): when its session started, and when an ended one leaves the lock screen.
        // Each device's token changes (A10): a row per new token (NULL: removed) of a slot, the push token's
        // slot being its gateway, a push-to-start token's its attributes type, an update token's its activity.
        // Updates and ends to send later (A11): held apart from the queue, they join it when due, in order then.
        // An end_date's end (`start` its start message, no payload yet) takes the activity's latest state then.
        Migration(version: 13, name: "update budgets, activity lifetimes, token history and scheduled updates", sql: """
            ALTER TABLE applications ADD COLUMN update_budget INTEGER;
            ALTER TABLE applications ADD COLUMN frequent_update_budget INTEGER;
            ALTER TABLE devices ADD COLUMN frequent_updates INTEGER;
            ALTER TABLE activities ADD COLUMN priority_ten_log TEXT;
            ALTER TABLE messages ADD COLUMN priority_standard INTEGER;
            ALTER TABLE messages ADD COLUMN priority_frequent INTEGER;
            ALTER TABLE deliveries ADD COLUMN priority INTEGER;
            ALTER TABLE activities ADD COLUMN started_at INTEGER;
            ALTER TABLE activities ADD COLUMN dismiss_at INTEGER;
            CREATE TABLE token_history (
                id INTEGER PRIMARY KEY,
                device INTEGER NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                kind TEXT NOT NULL CHECK (kind IN ('push', 'push-to-start', 'update')),
                slot TEXT NOT NULL,
                token TEXT,
                at INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX token_history_by_device ON token_history (device, kind, slot, id);
            CREATE TABLE scheduled_updates (
                id INTEGER PRIMARY KEY,
                code TEXT NOT NULL UNIQUE,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                activity INTEGER NOT NULL REFERENCES activities(id) ON DELETE CASCADE,
                start INTEGER,
                event TEXT NOT NULL CHECK (event IN ('update', 'end')),
                content_state TEXT,
                payload BLOB,
                priority INTEGER NOT NULL,
                dismissal_date INTEGER,
                due_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                created_at INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX scheduled_updates_due ON scheduled_updates (due_at);
            """),
        // An activity started with `renew` (A8): its session's start message, when it is renewed, and the
        // renewal's end once sent (the new start waits for it).
        Migration(version: 14, name: "activity renewals", sql: """
            CREATE TABLE activity_renewals (
                activity INTEGER PRIMARY KEY REFERENCES activities(id) ON DELETE CASCADE,
                start INTEGER NOT NULL,
                end_message INTEGER,
                due_at INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX activity_renewals_due ON activity_renewals (due_at);
            """),
        // Broadcast channels (X5): Islet's record of each channel name, one row per environment with Apple's
        // channel id; broadcasts, one row per environment, durable and retried like pushes (`next_at`: when
        // due, or when a claim that was not recorded runs out); and the simulator's own registry, as Apple's side.
        Migration(version: 15, name: "broadcast channels", sql: """
            CREATE TABLE channels (
                id INTEGER PRIMARY KEY,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                name TEXT NOT NULL,
                gateway TEXT NOT NULL CHECK (gateway IN ('production', 'sandbox')),
                apns_channel_id TEXT NOT NULL,
                storage_policy TEXT NOT NULL CHECK (storage_policy IN ('none', 'most_recent')),
                created_at INTEGER NOT NULL,
                UNIQUE (application, name, gateway)
            ) STRICT;
            ALTER TABLE messages ADD COLUMN channel_ids TEXT;
            CREATE TABLE broadcasts (
                id INTEGER PRIMARY KEY,
                code TEXT NOT NULL,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                channel TEXT NOT NULL,
                gateway TEXT NOT NULL,
                apns_channel_id TEXT NOT NULL,
                payload BLOB NOT NULL,
                priority INTEGER NOT NULL,
                expiration INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                state TEXT NOT NULL,
                status INTEGER,
                reason TEXT,
                unique_id TEXT,
                attempts INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                next_at INTEGER
            ) STRICT;
            CREATE INDEX broadcasts_due ON broadcasts (next_at) WHERE state IN ('pending', 'sending', 'retrying');
            CREATE INDEX broadcasts_by_code ON broadcasts (application, code);
            CREATE INDEX broadcasts_by_channel ON broadcasts (application, channel, gateway, id);
            CREATE TABLE simulated_channels (
                application TEXT NOT NULL,
                channel_id TEXT NOT NULL,
                storage_policy INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                last_payload BLOB,
                last_at INTEGER,
                PRIMARY KEY (application, channel_id)
            ) STRICT;
            """),
        // When each channel was last used (X5): a broadcast to it, an update broadcast along, a start on it. Channels
        // unused longer than a setting are deleted; a channel from before this column counts from its creation.
        // A broadcast is one row per environment of its code, whichever path writes it.
        Migration(version: 16, name: "channel use", sql: """
            ALTER TABLE channels ADD COLUMN last_used_at INTEGER;
            DROP INDEX broadcasts_by_code;
            CREATE UNIQUE INDEX broadcasts_once ON broadcasts (application, code, gateway);
            """),
        // The simulator finds the phone a push is for by its token, rather than reading every simulated phone; a
        // channel's kept message is kept until its apns-expiration (8 hours after it was sent at most); Apple keeps
        // each environment's channels apart, and so does the simulator.
        Migration(version: 17, name: "simulated device tokens", sql: """
            CREATE TABLE simulated_tokens (
                token TEXT PRIMARY KEY,
                application TEXT NOT NULL REFERENCES applications(code) ON DELETE CASCADE,
                hwid TEXT NOT NULL
            ) STRICT;
            CREATE INDEX simulated_tokens_by_device ON simulated_tokens (application, hwid);
            ALTER TABLE simulated_channels RENAME COLUMN last_at TO kept_until;
            ALTER TABLE simulated_channels ADD COLUMN gateway TEXT NOT NULL DEFAULT 'production';
            UPDATE simulated_channels SET kept_until = kept_until + 28800 WHERE kept_until IS NOT NULL;
            """),
        // The console (issue 17): its sessions (a revoked token or a deleted application ends them), the console
        // password, and the activity list newest first per application.
        Migration(version: 18, name: "console", sql: """
            CREATE TABLE console_sessions (
                id_hash BLOB PRIMARY KEY,
                application TEXT REFERENCES applications(code) ON DELETE CASCADE,
                token_id TEXT REFERENCES tokens(id) ON DELETE CASCADE,
                csrf_token TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
            CREATE TABLE console_password (
                singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                record TEXT NOT NULL,
                updated_at INTEGER NOT NULL
            ) STRICT;
            CREATE INDEX activities_by_application ON activities (application, id);
            """),
        // An activity's unfinished messages and its current start without reading its history: the claims'
        // "oldest unfinished of its activity", an update's superseding and its session's start look here, not
        // at every message the activity ever had (issue 18).
        Migration(version: 19, name: "unfinished messages and starts by activity", sql: """
            CREATE INDEX messages_unfinished ON messages (activity, id) WHERE state IN ('pending', 'sending');
            CREATE INDEX messages_starts ON messages (activity, id) WHERE event = 'start';
            """),
        // SQLite tests `CHECK (x IN ('a', 'b', 'c'))` of three values or more by building a temporary index of the
        // list each time a statement writes the row: about half the cost of writing a delivery record. The same
        // constraints written as `x = 'a' OR x = 'b' OR ...` are tested in place (`SQLiteCheckLists`). PostgreSQL
        // tests either form in place and keeps its own.
        Migration(version: 20, name: "constraints tested in place", sql: "", engines: [.sqlite], step: SQLiteCheckLists.rewriteTables),
        // A claim's end (after every record of its work) and the rescue's once-a-second check look for shards claimed
        // under a lease: with no index they read every shard ever made (each start by filter of an application past
        // 500,000 devices makes up to four, kept as long as its message), 1.8 ms at 40,000 shards against 1 µs.
        Migration(version: 21, name: "claimed shards by lease", sql: """
            CREATE INDEX message_shards_leased ON message_shards (lease) WHERE claimed = 1;
            """),
        // PostgreSQL checks a foreign key on insert by locking the row it names (FOR KEY SHARE), which writes that row:
        // each push's delivery record and started device locked its device twice, a heap page dirtied and WAL written
        // per lock. Islet writes these rows only with device ids it has just read, and never deletes a device, so the
        // checks guard nothing; a deletion (by hand) still takes the device's records with it, through a trigger that
        // names the tables of its own schema (an operator's psql may search another Islet's). A 1,000,000-device
        // fan-out: a quarter less WAL and PostgreSQL CPU, about 1.3 times the rate (BENCHMARKS.md). SQLite's checks are
        // index probes that lock nothing: kept.
        Migration(version: 22, name: "push records' devices checked by Islet, not by row locks", sql: """
            ALTER TABLE deliveries DROP CONSTRAINT deliveries_device_fkey;
            ALTER TABLE activity_devices DROP CONSTRAINT activity_devices_device_fkey;
            CREATE FUNCTION islet_device_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
            BEGIN
                DELETE FROM deliveries WHERE device = OLD.id;
                DELETE FROM activity_devices WHERE device = OLD.id;
                RETURN OLD;
            END
            $$;
            CREATE TRIGGER devices_take_their_push_records BEFORE DELETE ON devices FOR EACH ROW EXECUTE FUNCTION islet_device_deleted();
            """, engines: [.postgresql]),
        // Claims tell a start to named devices from one to a filter or users by columns of their own (issue 43), not by
        // the JSON text of its stored target; a start's target is read once here, for the messages already stored.
        Migration(version: 23, name: "start audiences by kind and size", sql: """
            ALTER TABLE messages ADD COLUMN target_kind TEXT;
            ALTER TABLE messages ADD COLUMN named_devices INTEGER;
            UPDATE messages SET target_kind = CASE
                    WHEN target LIKE '{"devices":%' THEN 'devices' WHEN target LIKE '{"users":%' THEN 'users' ELSE 'filter' END
                WHERE target IS NOT NULL;
            """, step: SQLMigrations.countNamedDevices),
        // The job queue apart from the messages' history (issue 43). Every claim and every finish changed a message's
        // state, claim or finish time, which four partial indexes of `messages` were keyed on: each such update wrote a
        // new entry in all eight of its indexes (PostgreSQL cannot update in place, "HOT", a row whose indexed columns
        // change), and the dead entries slowed the claims' look until a vacuum. Now a message's job is a row of
        // `message_queue` from its acceptance until it finishes: the looks, the "oldest unfinished of its activity" and
        // the claims' leases read its small indexes, and `messages` is indexed on columns that never change, so its
        // updates are written in place. What was in flight joins the queue with its claim.
        Migration(version: 24, name: "the job queue apart from the messages' history", sql: """
            CREATE TABLE message_queue (
                message INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
                activity INTEGER NOT NULL,
                due_at INTEGER NOT NULL,
                lease INTEGER
            ) STRICT;
            INSERT INTO message_queue (message, activity, due_at, lease)
                SELECT id, activity, due_at, CASE WHEN claimed = 1 THEN lease END FROM messages WHERE state IN ('pending', 'sending');
            CREATE INDEX message_queue_due ON message_queue (due_at, message);
            CREATE INDEX message_queue_by_activity ON message_queue (activity, message);
            CREATE INDEX message_queue_leased ON message_queue (lease) WHERE lease IS NOT NULL;
            DROP INDEX messages_waiting;
            DROP INDEX messages_unfinished;
            DROP INDEX messages_leased;
            DROP INDEX messages_finished;
            ALTER TABLE messages DROP COLUMN claimed;
            ALTER TABLE messages DROP COLUMN lease;
            CREATE INDEX messages_by_creation ON messages (application, created_at);
            """),
        // Room on each page for a message's updates (its claim, its finish) beside it, so they are written in place.
        Migration(version: 25, name: "room for messages' updates in place", sql: """
            ALTER TABLE messages SET (fillfactor = 85);
            """, engines: [.postgresql]),
        // Who may set a device's User ID (issue 44): NULL is the app (the device API), as before.
        Migration(version: 26, name: "who may set a device's user id", sql: """
            ALTER TABLE applications ADD COLUMN user_id_source TEXT CHECK (user_id_source IN ('app', 'server'));
            """),
        Migration(version: 27, name: "the SDK's app opens and push receipts", sql: """
            ALTER TABLE devices ADD COLUMN opened_at INTEGER;
            ALTER TABLE deliveries ADD COLUMN received_at INTEGER;
            ALTER TABLE deliveries ADD COLUMN opened_at INTEGER;
            """),
        Migration(version: 28, name: "Android devices", sql: """
            ALTER TABLE devices ADD COLUMN platform TEXT NOT NULL DEFAULT 'ios' CHECK (platform IN ('ios', 'android'));
            """),
        // Boolean and date tags (issue 45): the types a tag may have, one more check each engine spells its own way.
        Migration(version: 29, name: "boolean and date tags", sql: "", engines: [.sqlite], step: widenTagTypes),
        Migration(version: 30, name: "boolean and date tags", sql: """
            ALTER TABLE tag_types DROP CONSTRAINT tag_types_type_check;
            ALTER TABLE tag_types ADD CONSTRAINT tag_types_type_check CHECK (type IN ('string', 'integer', 'list', 'boolean', 'date'));
            """, engines: [.postgresql]),
        Migration(version: 31, name: "starts' entries that named no device", sql: """
            ALTER TABLE messages ADD COLUMN unknown_targets INTEGER;
            """),
        // As version 22 for devices: each accepted message locked its application's row (one row every writer of the
        // application shares, on every node) and its activity's, its job locked the message, and every delivery record
        // its message (each page of a fan-out the same row), a heap page dirtied and WAL written per lock. Islet writes
        // these rows only with ids it has just read or inserted, and deletes a message only after its job and its
        // records (retention), an activity or an application never: the checks guard nothing. A deletion by hand still
        // takes the rows with it, through triggers. SQLite keeps its keys (index probes that lock nothing), so every
        // test on it still checks the order in which Islet deletes.
        Migration(version: 32, name: "messages, jobs and push records checked by Islet, not by row locks", sql: """
            ALTER TABLE messages DROP CONSTRAINT messages_application_fkey;
            ALTER TABLE messages DROP CONSTRAINT messages_activity_fkey;
            ALTER TABLE message_queue DROP CONSTRAINT message_queue_message_fkey;
            ALTER TABLE deliveries DROP CONSTRAINT deliveries_message_fkey;
            CREATE FUNCTION islet_message_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
            BEGIN
                DELETE FROM message_queue WHERE message = OLD.id;
                DELETE FROM deliveries WHERE message = OLD.id;
                RETURN OLD;
            END
            $$;
            CREATE TRIGGER messages_take_their_jobs_and_records BEFORE DELETE ON messages FOR EACH ROW EXECUTE FUNCTION islet_message_deleted();
            CREATE FUNCTION islet_activity_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
            BEGIN
                DELETE FROM messages WHERE activity = OLD.id;
                RETURN OLD;
            END
            $$;
            CREATE TRIGGER activities_take_their_messages BEFORE DELETE ON activities FOR EACH ROW EXECUTE FUNCTION islet_activity_deleted();
            """, engines: [.postgresql]),
        // Issue 46: an application's FCM service account (its key JSON, sealed like an APNs key), and the FCM data of the
        // Live Update each start, update and end sends Android phones (NULL: the message reaches no Android phone, as
        // the messages made before this version and a renewal's end and start).
        Migration(version: 33, name: "Android Live Updates through FCM", sql: """
            CREATE TABLE fcm_accounts (
                application TEXT PRIMARY KEY REFERENCES applications(code) ON DELETE CASCADE,
                project_id TEXT NOT NULL,
                client_email TEXT NOT NULL,
                key_json TEXT NOT NULL,
                updated_at INTEGER NOT NULL
            ) STRICT;
            ALTER TABLE messages ADD COLUMN android_payload BLOB;
            ALTER TABLE scheduled_updates ADD COLUMN android_payload BLOB;
            """),
        // An accepted update that need not be queued at once (issue 43): a plain update, due now, of an active activity
        // with nothing waiting in the queue. Its message is written, and the activity names it as its waiting update,
        // with its turn (A9); delivery queues it when that comes (`queueWaitingUpdates`).
        Migration(version: 34, name: "updates queued by delivery", sql: """
            ALTER TABLE activities ADD COLUMN waiting_update INTEGER;
            ALTER TABLE activities ADD COLUMN waiting_due_at INTEGER;
            CREATE INDEX activities_waiting ON activities (waiting_due_at) WHERE waiting_update IS NOT NULL;
            """),
    ]

    public static var latestVersion: Int { all.last!.version }

    /// Version 29 (SQLite): `tag_types.type` may also be `boolean` or `date`. The check is widened in the stored table
    /// text (as `SQLiteCheckLists` does; it accepts every row the old one did), in the form SQLite tests in place.
    @Sendable static func widenTagTypes(_ c: any SQLConnection) throws(StoreError) {
        guard let sql = try c.query("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'tag_types'").first?["sql"].text else { return }
        let widened = sql.replacing(/CHECK \(type (?:IN \([^)]*\)|= 'string' OR type = 'integer' OR type = 'list')\)/) { _ in
            "CHECK (type = 'string' OR type = 'integer' OR type = 'list' OR type = 'boolean' OR type = 'date')"
        }
        guard widened != sql else { throw StoreError(.io, "tag_types has no check of its types to widen: \(sql)") }
        try SQLiteCheckLists.storeTableTexts([("tag_types", widened)], c)
    }

    /// Version 23: how many devices each stored start to named devices names, from its stored target.
    static func countNamedDevices(_ c: any SQLConnection) throws(StoreError) {
        for row in try c.query("SELECT id, target FROM messages WHERE target_kind = 'devices'") {
            // A target that does not read as a list is left uncounted: such a start is not taken for a small one.
            let list = row["target"].text.flatMap { try? JSONParser.parse($0).objectValue?["devices"]?.arrayValue }
            try c.run("UPDATE messages SET named_devices = ? WHERE id = ?", [list.map { .int(Int64($0.count)) } ?? .null, row["id"]])
        }
    }
}
