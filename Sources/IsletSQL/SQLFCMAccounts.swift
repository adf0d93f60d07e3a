import Foundation
import IsletCore
import IsletCrypto
import IsletStore

/// Applications' FCM service accounts (issue 46): the key's JSON text, sealed with the master key as APNs keys are
/// (bound to its application, so sealed text moved to another row does not open), and its public facts beside it.
extension SQLApplicationStore {
    public func setFCMAccount(_ info: FCMAccountInfo, keyJSON: String, for application: ApplicationCode) throws(StoreError) {
        try changing { (c) throws(StoreError) in
            // As for APNs keys: one master key for the whole file, never a secret in clear beside sealed ones.
            let stored = try storedKeys(c).map(\.stored) + storedAccounts(c).map(\.stored)
            if masterKey == nil, stored.contains(where: MasterKey.isSealed) {
                throw StoreError(.locked, "this database's keys are sealed: give Islet its master key (ISLET_MASTER_KEY or ISLET_MASTER_KEY_FILE), or the service account would be stored in clear")
            }
            guard try c.query("SELECT 1 AS found FROM applications WHERE code = ?", [.text(application.rawValue)]).first != nil else {
                throw StoreError(.notFound, "application \(application) does not exist")
            }
            try c.run("""
                INSERT INTO fcm_accounts (application, project_id, client_email, key_json, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (application) DO UPDATE SET project_id = excluded.project_id, client_email = excluded.client_email,
                    key_json = excluded.key_json, updated_at = excluded.updated_at
                """, [
                .text(application.rawValue), .text(info.projectID), .text(info.clientEmail),
                .text(masterKey.map { $0.seal(keyJSON, boundTo: Self.fcmBinding(application)) } ?? keyJSON), .int(Int64(Date().timeIntervalSince1970)),
            ])
        }
    }

    public func fcmAccountKey(for application: ApplicationCode) throws(StoreError) -> String? {
        let stored = try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT key_json FROM fcm_accounts WHERE application = ?", [.text(application.rawValue)]).first?["key_json"].text
        }
        guard let stored else { return nil }
        return try open(stored, application: application, binding: Self.fcmBinding(application), what: "FCM service account")
    }

    /// Seals every stored service account again with `newKey` (plain with nil), inside the caller's transaction; how many.
    func resealFCMAccounts(with newKey: MasterKey?, _ c: any SQLConnection) throws(StoreError) -> Int {
        let accounts = try storedAccounts(c)
        for account in accounts {
            let binding = Self.fcmBinding(account.application)
            let json = try open(account.stored, application: account.application, binding: binding, what: "FCM service account")
            try c.run("UPDATE fcm_accounts SET key_json = ? WHERE application = ?",
                      [.text(newKey.map { $0.seal(json, boundTo: binding) } ?? json), .text(account.application.rawValue)])
        }
        return accounts.count
    }

    func storedAccounts(_ c: any SQLConnection) throws(StoreError) -> [(application: ApplicationCode, stored: String)] {
        try c.query("SELECT application, key_json FROM fcm_accounts ORDER BY application").compactMap { row in
            ApplicationCode(row["application"].text ?? "").map { ($0, row["key_json"].text ?? "") }
        }
    }

    static func fcmBinding(_ application: ApplicationCode) -> String { "fcm-account/\(application.rawValue)" }
}
