import Foundation
import IsletCore

/// What an audit entry records.
public struct AuditAction: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let applicationCreated = Self(uncheckedRawValue: "application.created")
    public static let tokenIssued = Self(uncheckedRawValue: "token.issued")
    public static let tokenRevoked = Self(uncheckedRawValue: "token.revoked")
    public static let apnsKeySet = Self(uncheckedRawValue: "apns_key.set")
    public static let fcmAccountSet = Self(uncheckedRawValue: "fcm_account.set")
    public static let updateBudgetSet = Self(uncheckedRawValue: "update_budget.set")
    public static let userIDSourceSet = Self(uncheckedRawValue: "user_id_source.set")
    public static let tagTypeSet = Self(uncheckedRawValue: "tag.type_set")
    public static let tagDeleted = Self(uncheckedRawValue: "tag.deleted")
    public static let masterKeyRotated = Self(uncheckedRawValue: "master_key.rotated")
    public static let filterCreated = Self(uncheckedRawValue: "filter.created")
    public static let filterDeleted = Self(uncheckedRawValue: "filter.deleted")
    public static let schemaSet = Self(uncheckedRawValue: "schema.set")
    public static let schemaDeleted = Self(uncheckedRawValue: "schema.deleted")
    public static let channelCreated = Self(uncheckedRawValue: "channel.created")
    public static let channelDeleted = Self(uncheckedRawValue: "channel.deleted")
    public static let all = [applicationCreated, tokenIssued, tokenRevoked, apnsKeySet, fcmAccountSet, updateBudgetSet, userIDSourceSet, tagTypeSet, tagDeleted, masterKeyRotated, filterCreated, filterDeleted,
                             schemaSet, schemaDeleted, channelCreated, channelDeleted]
}

/// The audit log: one JSON line per admin action (who, what, which application, when), appended to a file
/// readable by its owner only. Shared by `islet serve` and the CLI (appends of one line do not interleave).
/// Entries name tokens by id and keys by key id, never a secret.
public struct AuditLog: Sendable {
    public let path: String?
    let now: @Sendable () -> Date

    public init(path: String?, now: @escaping @Sendable () -> Date = { Date() }) {
        self.path = path
        self.now = now
    }

    public static let disabled = AuditLog(path: nil)

    /// The log a setting (`--audit-log`, `ISLET_AUDIT_LOG`) names: "off" for none, a file, or, unset,
    /// `audit.log` in `directory` (beside an SQLite database), where `islet serve` and the CLI both find it.
    public init(setting: String?, directory: String) {
        switch setting {
        case "off"?: self.init(path: nil)
        case let path? where !path.isEmpty: self.init(path: path)
        default: self.init(path: URL(fileURLWithPath: directory).appendingPathComponent("audit.log").path)
        }
    }

    /// Appends one entry; a failure to write is reported on stderr and never undoes the action.
    public func record(_ action: AuditAction, application: ApplicationCode, actor: String, details: JSONObject = [:]) {
        guard let path else { return }
        var entry: JSONObject = ["at": .string(now().formatted(.iso8601)), "action": .string(action.rawValue),
                                 "application": .string(application.rawValue), "actor": .string(actor)]
        for (key, value) in details.entries { entry[key] = value }
        let line = Array((JSONValue.object(entry).jsonText + "\n").utf8)
        var fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 && errno == ENOENT {
            // Its folder does not exist yet (the default ./var on a fresh PostgreSQL setup): make it, owner-only.
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        }
        guard fd >= 0 else {
            FileHandle.standardError.write(Data("warning: cannot append to the audit log \(path): \(String(cString: strerror(errno)))\n".utf8))
            return
        }
        defer { close(fd) }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
