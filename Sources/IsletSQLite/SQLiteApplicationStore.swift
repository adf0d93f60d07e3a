import Foundation
import IsletCore
import IsletStore

/// Applications, tokens and APNs keys in SQLite.
public struct SQLiteApplicationStore: ApplicationStore {
    let database: SQLiteDatabase

    public init(database: SQLiteDatabase) { self.database = database }

    public func hasNoApplications() throws(StoreError) -> Bool {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT NOT EXISTS (SELECT 1 FROM applications)")[0][0].int == 1
        }
    }

    public func createApplication(_ application: Application, tokens: [TokenRecord], apnsKey: APNsSigningKey?) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
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
        try database.write { (c) throws(StoreError) in
            guard try !c.query("SELECT 1 FROM applications WHERE code = ?", [.text(token.application.rawValue)]).isEmpty else {
                throw StoreError(.notFound, "application \(token.application) does not exist")
            }
            try insert(token, c)
        }
    }

    public func revokeToken(application: ApplicationCode, id: String, at date: Date) throws(StoreError) -> Bool {
        try database.write { (c) throws(StoreError) in
            try c.run("UPDATE tokens SET revoked_at = ? WHERE application = ? AND id = ? AND revoked_at IS NULL",
                      [.int(Int64(date.timeIntervalSince1970)), .text(application.rawValue), .text(id)]) == 1
        }
    }

    public func tokens(of application: ApplicationCode) throws(StoreError) -> [TokenRecord] {
        try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.selectToken + " WHERE application = ? ORDER BY created_at, rowid", [.text(application.rawValue)]).compactMap(Self.token)
        }
    }

    public func token(hash: [UInt8]) throws(StoreError) -> TokenRecord? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query(Self.selectToken + " WHERE hash = ?", [.blob(hash)]).first.flatMap(Self.token)
        }
    }

    private static let selectToken = "SELECT id, application, kind, hash, label, created_at, revoked_at FROM tokens"

    private static func token(_ row: SQLRow) -> TokenRecord? {
        guard let application = ApplicationCode(row[1].text ?? ""), let kind = TokenKind(rawValue: row[2].text ?? "") else { return nil }
        return TokenRecord(
            id: row[0].text ?? "", application: application, kind: kind, hash: row[3].blob ?? [], label: row[4].text ?? "",
            createdAt: Date(timeIntervalSince1970: Double(row[5].int ?? 0)),
            revokedAt: row[6].int.map { Date(timeIntervalSince1970: Double($0)) })
    }

    public func setAPNsKey(_ key: APNsSigningKey, for application: ApplicationCode) throws(StoreError) {
        try database.write { (c) throws(StoreError) in
            guard try !c.query("SELECT 1 FROM applications WHERE code = ?", [.text(application.rawValue)]).isEmpty else {
                throw StoreError(.notFound, "application \(application) does not exist")
            }
            try upsert(key, application, c)
        }
    }

    public func apnsKey(for application: ApplicationCode) throws(StoreError) -> APNsSigningKey? {
        try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT team_id, key_id, environment, pem FROM apns_keys WHERE application = ?",
                        [.text(application.rawValue)]).first.map { row in
                APNsSigningKey(
                    info: APNsKeyInfo(teamID: row[0].text ?? "", keyID: row[1].text ?? "",
                                      environment: APNsEnvironment(rawValue: row[2].text ?? "") ?? .production),
                    pem: row[3].text ?? "")
            }
        }
    }

    // MARK: - Rows

    private static let selectApplication = """
        SELECT a.code, a.name, a.bundle_id, a.created_at, k.team_id, k.key_id, k.environment
        FROM applications a LEFT JOIN apns_keys k ON k.application = a.code
        """

    private static func application(_ row: SQLRow) -> Application {
        var key: APNsKeyInfo?
        if let team = row[4].text, let keyID = row[5].text {
            key = APNsKeyInfo(teamID: team, keyID: keyID, environment: APNsEnvironment(rawValue: row[6].text ?? "") ?? .production)
        }
        return Application(
            code: ApplicationCode(row[0].text ?? "")!, name: row[1].text ?? "", bundleID: row[2].text ?? "",
            createdAt: Date(timeIntervalSince1970: Double(row[3].int ?? 0)), apnsKey: key)
    }

    private func insert(_ token: TokenRecord, _ c: SQLiteConnection) throws(StoreError) {
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

    private func upsert(_ key: APNsSigningKey, _ application: ApplicationCode, _ c: SQLiteConnection) throws(StoreError) {
        try c.run("""
            INSERT INTO apns_keys (application, team_id, key_id, environment, pem, updated_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (application) DO UPDATE SET team_id = excluded.team_id, key_id = excluded.key_id,
                environment = excluded.environment, pem = excluded.pem, updated_at = excluded.updated_at
            """, [
            .text(application.rawValue), .text(key.info.teamID), .text(key.info.keyID), .text(key.info.environment.rawValue),
            .text(key.pem), .int(Int64(Date().timeIntervalSince1970)),
        ])
    }
}
