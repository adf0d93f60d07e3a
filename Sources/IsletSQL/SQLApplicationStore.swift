import Foundation
import IsletCore
import IsletCrypto
import IsletStore

/// Applications, tokens and APNs keys, in either engine. With a master key, APNs keys are sealed (AES-256-GCM)
/// before they are written and opened when read; keys written without one stay readable.
public struct SQLApplicationStore: ApplicationStore {
    let database: any SQLDatabase
    let masterKey: MasterKey?
    /// Credentials looked up lately (every API call authenticates), shared by the copies of this store;
    /// emptied by every change made through it.
    let credentials = CredentialCache()

    public init(database: any SQLDatabase, masterKey: MasterKey? = nil) {
        self.database = database
        self.masterKey = masterKey
    }

    /// A write to applications, tokens or keys: the credentials cached before it are dropped once it ends.
    func changing<T>(_ body: (any SQLConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        defer { credentials.invalidate() }
        return try database.write(body)
    }

    public func hasNoApplications() throws(StoreError) -> Bool {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT NOT EXISTS (SELECT 1 FROM applications) AS empty")[0]["empty"].bool
        }
    }

    public func createApplication(_ application: Application, tokens: [TokenRecord], apnsKey: APNsSigningKey?) throws(StoreError) {
        try changing { (c) throws(StoreError) in
            do throws(StoreError) {
                try c.run("INSERT INTO applications (code, name, bundle_id, created_at) VALUES (?, ?, ?, ?)", [
                    .text(application.code.rawValue), .text(application.name), .text(application.bundleID),
                    .int(Int64(application.createdAt.timeIntervalSince1970)),
                ])
            } catch where error.code == .conflict {
                throw StoreError(.conflict, "application \(application.code) already exists")
            }
            for token in tokens { try insert(token, c) }
            if let apnsKey { try upsert(apnsKey, application.code, c) }
        }
    }

    public func application(_ code: ApplicationCode) throws(StoreError) -> Application? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.selectApplication + " WHERE a.code = ?", [.text(code.rawValue)]).first.map(Self.application)
        }
    }

    public func applications() throws(StoreError) -> [Application] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.selectApplication + " ORDER BY a.created_at, a.code").map(Self.application)
        }
    }

    public func addToken(_ token: TokenRecord) throws(StoreError) {
        try changing { (c) throws(StoreError) in
            guard try !c.query("SELECT 1 FROM applications WHERE code = ?", [.text(token.application.rawValue)]).isEmpty else {
                throw StoreError(.notFound, "application \(token.application) does not exist")
            }
            try insert(token, c)
        }
    }

    public func revokeToken(application: ApplicationCode, id: String, at date: Date) throws(StoreError) -> Bool {
        try changing { (c) throws(StoreError) in
            try c.run("UPDATE tokens SET revoked_at = ? WHERE application = ? AND id = ? AND revoked_at IS NULL",
                      [.int(Int64(date.timeIntervalSince1970)), .text(application.rawValue), .text(id)]) == 1
        }
    }

    public func tokens(of application: ApplicationCode) throws(StoreError) -> [TokenRecord] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.selectToken + " WHERE application = ? ORDER BY created_at, \(database.dialect.insertionOrder)", [.text(application.rawValue)]).compactMap { Self.token($0) }
        }
    }

    public func token(hash: [UInt8]) throws(StoreError) -> TokenRecord? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.selectToken + " WHERE hash = ?", [.blob(hash)]).first.flatMap { Self.token($0) }
        }
    }

    public func credential(hash: [UInt8]) throws(StoreError) -> (token: TokenRecord, application: Application)? {
        try credentials.value(for: hash) { () throws(StoreError) in try storedCredential(hash: hash) }
    }

    func storedCredential(hash: [UInt8]) throws(StoreError) -> (token: TokenRecord, application: Application)? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("""
                SELECT t.id, t.application, t.kind, t.hash, t.label, t.created_at AS token_created_at, t.revoked_at, \(Self.applicationColumns)
                FROM tokens t JOIN applications a ON a.code = t.application LEFT JOIN apns_keys k ON k.application = a.code
                WHERE t.hash = ?
                """, [.blob(hash)]).first.flatMap { row in
                Self.token(row, createdAt: "token_created_at").map { ($0, Self.application(row)) }
            }
        }
    }

    private static let selectToken = "SELECT id, application, kind, hash, label, created_at, revoked_at FROM tokens"

    private static func token(_ row: SQLRow, createdAt: String = "created_at") -> TokenRecord? {
        guard let application = ApplicationCode(row["application"].text ?? ""), let kind = TokenKind(rawValue: row["kind"].text ?? "") else { return nil }
        return TokenRecord(
            id: row["id"].text ?? "", application: application, kind: kind, hash: row["hash"].blob ?? [], label: row["label"].text ?? "",
            createdAt: row[createdAt].date ?? Date(timeIntervalSince1970: 0),
            revokedAt: row["revoked_at"].date)
    }

    public func setAPNsKey(_ key: APNsSigningKey, for application: ApplicationCode) throws(StoreError) {
        try changing { (c) throws(StoreError) in
            guard try !c.query("SELECT 1 FROM applications WHERE code = ?", [.text(application.rawValue)]).isEmpty else {
                throw StoreError(.notFound, "application \(application) does not exist")
            }
            try upsert(key, application, c)
        }
    }

    public func setUserIDSource(_ source: UserIDSource, for application: ApplicationCode) throws(StoreError) {
        try changing { (c) throws(StoreError) in
            guard try c.run("UPDATE applications SET user_id_source = ? WHERE code = ?", [.text(source.rawValue), .text(application.rawValue)]) == 1 else {
                throw StoreError(.notFound, "application \(application) does not exist")
            }
        }
    }

    public func setUpdateBudget(_ budget: UpdateBudget, for application: ApplicationCode) throws(StoreError) {
        try changing { (c) throws(StoreError) in
            guard try c.run("UPDATE applications SET update_budget = ?, frequent_update_budget = ? WHERE code = ?",
                            [.int(Int64(budget.perHour)), .int(Int64(budget.frequentPerHour)), .text(application.rawValue)]) == 1 else {
                throw StoreError(.notFound, "application \(application) does not exist")
            }
        }
    }

    public func apnsKey(for application: ApplicationCode) throws(StoreError) -> APNsSigningKey? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT team_id, key_id, environment, pem FROM apns_keys WHERE application = ?",
                        [.text(application.rawValue)]).first.map { row in
                APNsSigningKey(
                    info: APNsKeyInfo(teamID: row["team_id"].text ?? "", keyID: row["key_id"].text ?? "",
                                      environment: APNsEnvironment(rawValue: row["environment"].text ?? "") ?? .production),
                    pem: row["pem"].text ?? "")
            }.map { (key) throws(StoreError) -> APNsSigningKey in
                APNsSigningKey(info: key.info, pem: try open(key.pem, application: application))
            }
        }
    }

    public func checkAPNsKeys() throws(StoreError) -> (sealed: Int, plain: Int) {
        try database.withConnection { (c) throws(StoreError) -> (sealed: Int, plain: Int) in
            var counts = (sealed: 0, plain: 0)
            for key in try storedKeys(c) {
                guard MasterKey.isSealed(key.stored) else { counts.plain += 1; continue }
                _ = try open(key.stored, application: key.application)
                counts.sealed += 1
            }
            // FCM service accounts are sealed the same way (issue 46).
            for account in try storedAccounts(c) {
                guard MasterKey.isSealed(account.stored) else { counts.plain += 1; continue }
                _ = try open(account.stored, application: account.application, binding: Self.fcmBinding(account.application), what: "FCM service account")
                counts.sealed += 1
            }
            return counts
        }
    }

    /// Re-seals every stored APNs key and FCM service account with `newKey` (or, with nil, stores them plain), in one
    /// transaction; they are opened with this store's master key. Returns how many were rewritten. The shared provider tokens
    /// are sealed again too (so the nodes need not sign new ones, which Apple throttles); one this store's key cannot
    /// open is dropped.
    public func resealAPNsKeys(with newKey: MasterKey?) throws(StoreError) -> Int {
        try changing { (c) throws(StoreError) -> Int in
            let keys = try storedKeys(c)
            for key in keys {
                let pem = try open(key.stored, application: key.application)
                try c.run("UPDATE apns_keys SET pem = ? WHERE application = ?",
                          [.text(newKey.map { $0.seal(pem, boundTo: Self.binding(key.application)) } ?? pem), .text(key.application.rawValue)])
            }
            for row in try c.query("SELECT name, token FROM provider_tokens ORDER BY name") {
                let stored = row["token"].text ?? "", name = row["name"].text ?? ""
                let binding = SQLClusterStore.binding(providerToken: name)
                if let token = MasterKey.isSealed(stored) ? masterKey?.open(stored, boundTo: binding) : stored {
                    try c.run("UPDATE provider_tokens SET token = ? WHERE name = ?", [.text(newKey.map { $0.seal(token, boundTo: binding) } ?? token), row["name"]])
                } else {
                    try c.run("DELETE FROM provider_tokens WHERE name = ?", [row["name"]])
                }
            }
            return keys.count + (try resealFCMAccounts(with: newKey, c))
        }
    }

    /// Every stored APNs key as written: sealed text or a plain PEM.
    func storedKeys(_ c: any SQLConnection) throws(StoreError) -> [(application: ApplicationCode, stored: String)] {
        try c.query("SELECT application, pem FROM apns_keys ORDER BY application").compactMap { row in
            ApplicationCode(row["application"].text ?? "").map { ($0, row["pem"].text ?? "") }
        }
    }

    /// What an application's sealed key is bound to: sealed text moved to another application's row does not open.
    static func binding(_ application: ApplicationCode) -> String { "apns-key/\(application.rawValue)" }

    /// The PEM of a stored key: sealed text opened with the master key, plain text as it is. `binding` and `what`: another
    /// secret's (an FCM service account's).
    func open(_ stored: String, application: ApplicationCode, binding: String? = nil, what: String = "APNs key") throws(StoreError) -> String {
        guard MasterKey.isSealed(stored) else { return stored }
        guard let masterKey else {
            throw StoreError(.locked, "the \(what) of \(application) is encrypted at rest; give Islet its master key (ISLET_MASTER_KEY or ISLET_MASTER_KEY_FILE)")
        }
        guard let pem = masterKey.open(stored, boundTo: binding ?? Self.binding(application)) else {
            throw StoreError(.locked, "the \(what) of \(application) was sealed with another master key than \(masterKey.fingerprint)")
        }
        return pem
    }

    // MARK: - Rows

    /// The columns `application(_:)` reads, of `applications a` and `apns_keys k`.
    private static let applicationColumns = """
        a.code, a.name, a.bundle_id, a.created_at, a.update_budget, a.frequent_update_budget, a.user_id_source, k.team_id, k.key_id, k.environment,
        (SELECT f.project_id FROM fcm_accounts f WHERE f.application = a.code) AS fcm_project_id,
        (SELECT f.client_email FROM fcm_accounts f WHERE f.application = a.code) AS fcm_client_email
        """

    private static let selectApplication = "SELECT \(applicationColumns) FROM applications a LEFT JOIN apns_keys k ON k.application = a.code"

    private static func application(_ row: SQLRow) -> Application {
        var key: APNsKeyInfo?
        if let team = row["team_id"].text, let keyID = row["key_id"].text {
            key = APNsKeyInfo(teamID: team, keyID: keyID, environment: APNsEnvironment(rawValue: row["environment"].text ?? "") ?? .production)
        }
        var application = Application(
            code: ApplicationCode(row["code"].text ?? "")!, name: row["name"].text ?? "", bundleID: row["bundle_id"].text ?? "",
            createdAt: row["created_at"].date ?? Date(timeIntervalSince1970: 0), apnsKey: key,
            updateBudget: budget(row["update_budget"].int, row["frequent_update_budget"].int),
            userIDSource: row["user_id_source"].text.flatMap(UserIDSource.init(rawValue:)) ?? .app)
        if let project = row["fcm_project_id"].text {
            application.fcmAccount = FCMAccountInfo(projectID: project, clientEmail: row["fcm_client_email"].text ?? "")
        }
        return application
    }

    /// An application's budget, read inside another store's transaction.
    static func updateBudget(of application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) -> UpdateBudget {
        let row = try c.query("SELECT update_budget, frequent_update_budget FROM applications WHERE code = ?", [.text(application.rawValue)]).first
        return budget(row?["update_budget"].int, row?["frequent_update_budget"].int)
    }

    /// An application's budget as stored; NULL is the default.
    static func budget(_ perHour: Int64?, _ frequentPerHour: Int64?) -> UpdateBudget {
        UpdateBudget(perHour: perHour.map { Int($0) } ?? UpdateBudget.standard.perHour,
                     frequentPerHour: frequentPerHour.map { Int($0) } ?? UpdateBudget.standard.frequentPerHour)
    }

    private func insert(_ token: TokenRecord, _ c: any SQLConnection) throws(StoreError) {
        do throws(StoreError) {
            try c.run("""
                INSERT INTO tokens (id, application, kind, hash, label, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                """, [
                .text(token.id), .text(token.application.rawValue), .text(token.kind.rawValue), .blob(token.hash),
                .text(token.label), .int(Int64(token.createdAt.timeIntervalSince1970)),
                token.revokedAt.map { .int(Int64($0.timeIntervalSince1970)) } ?? .null,
            ])
        } catch where error.code == .conflict {
            throw StoreError(.conflict, "token \(token.id) or its value is already in use")
        }
    }

    private func upsert(_ key: APNsSigningKey, _ application: ApplicationCode, _ c: any SQLConnection) throws(StoreError) {
        // One master key for the whole file: never a key in clear beside sealed ones, nor one sealed with a
        // master key that cannot open the others.
        for key in try storedKeys(c) where MasterKey.isSealed(key.stored) {
            guard masterKey != nil else {
                throw StoreError(.locked, "this database's APNs keys are sealed: give Islet its master key (ISLET_MASTER_KEY or ISLET_MASTER_KEY_FILE), or the new key would be stored in clear")
            }
            _ = try open(key.stored, application: key.application)
        }
        try c.run("""
            INSERT INTO apns_keys (application, team_id, key_id, environment, pem, updated_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (application) DO UPDATE SET team_id = excluded.team_id, key_id = excluded.key_id,
                environment = excluded.environment, pem = excluded.pem, updated_at = excluded.updated_at
            """, [
            .text(application.rawValue), .text(key.info.teamID), .text(key.info.keyID), .text(key.info.environment.rawValue),
            .text(masterKey.map { $0.seal(key.pem, boundTo: Self.binding(application)) } ?? key.pem), .int(Int64(Date().timeIntervalSince1970)),
        ])
    }
}
