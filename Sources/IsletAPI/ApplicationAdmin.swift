import Foundation
import IsletCore
import IsletCrypto
import IsletStore

/// Creating applications and managing their credentials: what `islet app …` and the demo set-up do.
public struct ApplicationAdmin: Sendable {
    let store: any ApplicationStore
    let now: @Sendable () -> Date
    let audit: AuditLog
    /// Who acts, for the audit log ("cli" for `islet app …`).
    let actor: String

    public init(store: any ApplicationStore, audit: AuditLog = .disabled, actor: String = "cli", now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
        self.audit = audit
        self.actor = actor
    }

    /// A new application with its first server API token and device API token.
    public struct Created: Sendable {
        public let application: Application
        public let apiToken: IssuedToken
        public let deviceToken: IssuedToken
    }

    /// Creates an application. `code` and `apiTokenSecret` are fixed only for the demo application.
    public func create(name: String, bundleID: String, apnsKey: APNsSigningKey? = nil, code: ApplicationCode? = nil,
                       apiTokenSecret: String? = nil) throws -> Created {
        let name = name.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { throw APIError.invalid("name", "must not be empty") }
        guard name.count <= 200 else { throw APIError.invalid("name", "must be at most 200 characters") }
        try Self.validateBundleID(bundleID)
        var random = SecureRandom()
        let code = code ?? ApplicationCode.random(using: &random)
        let created = now()
        let application = Application(code: code, name: name, bundleID: bundleID, createdAt: created, apnsKey: apnsKey?.info)
        let api = Credentials.issue(for: code, kind: .api, label: "initial", secret: apiTokenSecret, at: created)
        let device = Credentials.issue(for: code, kind: .device, label: "initial", at: created)
        try store.createApplication(application, tokens: [api.record, device.record], apnsKey: apnsKey)
        audit.record(.applicationCreated, application: code, actor: actor, details: [
            "name": .string(name), "bundle_id": .string(bundleID), "tokens": [.string(api.record.id), .string(device.record.id)],
            "apns_key_id": apnsKey.map { .string($0.info.keyID) } ?? .null])
        return Created(application: application, apiToken: api, deviceToken: device)
    }

    /// Issues one more token of `kind`; tokens rotate by issuing a new one and revoking the old.
    public func issueToken(for code: ApplicationCode, kind: TokenKind, label: String) throws -> IssuedToken {
        guard try store.application(code) != nil else { throw APIError(.notFound, "application \(code) does not exist") }
        let token = Credentials.issue(for: code, kind: kind, label: label, at: now())
        try store.addToken(token.record)
        audit.record(.tokenIssued, application: code, actor: actor, details: ["token": .string(token.record.id), "kind": .string(kind.rawValue),
                                                                          "label": .string(label)])
        return token
    }

    /// Revokes a token given by its id (`tk_…`) or by its secret value.
    public func revokeToken(of code: ApplicationCode, idOrSecret: String) throws -> TokenRecord {
        guard try store.application(code) != nil else { throw APIError(.notFound, "application \(code) does not exist") }
        let tokens = try store.tokens(of: code)
        guard let token = tokens.first(where: { $0.id == idOrSecret }) ?? Credentials.match(idOrSecret, in: tokens) else {
            throw APIError(.notFound, "application \(code) has no token \(idOrSecret.hasPrefix("tk_") ? idOrSecret : "with that value")")
        }
        guard !token.isRevoked else { throw APIError(.badRequest, "token \(token.id) is already revoked") }
        _ = try store.revokeToken(application: code, id: token.id, at: now())
        audit.record(.tokenRevoked, application: code, actor: actor, details: ["token": .string(token.id), "kind": .string(token.kind.rawValue)])
        return token
    }

    public func setAPNsKey(for code: ApplicationCode, key: APNsSigningKey) throws {
        guard try store.application(code) != nil else { throw APIError(.notFound, "application \(code) does not exist") }
        try store.setAPNsKey(key, for: code)
        audit.record(.apnsKeySet, application: code, actor: actor, details: [
            "team_id": .string(key.info.teamID), "key_id": .string(key.info.keyID), "environment": .string(key.info.environment.rawValue)])
    }

    /// Sets the FCM service account Islet sends the application's Android Live Updates with (issue 46); `keyJSON` was
    /// read and checked by the caller (IsletFCM's `ServiceAccount`).
    public func setFCMAccount(for code: ApplicationCode, info: FCMAccountInfo, keyJSON: String) throws {
        guard try store.application(code) != nil else { throw APIError(.notFound, "application \(code) does not exist") }
        try store.setFCMAccount(info, keyJSON: keyJSON, for: code)
        audit.record(.fcmAccountSet, application: code, actor: actor, details: [
            "project_id": .string(info.projectID), "client_email": .string(info.clientEmail)])
    }

    /// Sets the application's priority-10 update budget (A7); a value left nil keeps the current one.
    public func setUpdateBudget(for code: ApplicationCode, perHour: Int?, frequentPerHour: Int?) throws -> UpdateBudget {
        guard let application = try store.application(code) else { throw APIError(.notFound, "application \(code) does not exist") }
        for (value, field) in [(perHour, "per-hour"), (frequentPerHour, "frequent-per-hour")] {
            if let value, !UpdateBudget.allowed.contains(value) {
                throw APIError.invalid(field, "must be a number of updates an hour from \(UpdateBudget.allowed.lowerBound) to \(UpdateBudget.allowed.upperBound), got \(value)")
            }
        }
        let budget = UpdateBudget(perHour: perHour ?? application.updateBudget.perHour,
                                  frequentPerHour: frequentPerHour ?? application.updateBudget.frequentPerHour)
        // Frequent updates on can only raise a device's budget (as on the phone).
        guard budget.frequentPerHour >= budget.perHour else {
            throw APIError.invalid("frequent-per-hour", "must be at least the per-hour budget (\(budget.perHour)): frequent updates raise a device's budget, got \(budget.frequentPerHour)")
        }
        try store.setUpdateBudget(budget, for: code)
        audit.record(.updateBudgetSet, application: code, actor: actor, details: [
            "per_hour": .int(Int64(budget.perHour)), "frequent_per_hour": .int(Int64(budget.frequentPerHour))])
        return budget
    }

    /// Sets who may set the application's devices' User IDs (issue 44).
    public func setUserIDSource(for code: ApplicationCode, _ source: UserIDSource) throws {
        guard try store.application(code) != nil else { throw APIError(.notFound, "application \(code) does not exist") }
        try store.setUserIDSource(source, for: code)
        audit.record(.userIDSourceSet, application: code, actor: actor, details: ["user_ids_from": .string(source.rawValue)])
    }

    /// A secret file's text (an APNs key, an FCM service account), refused when other users may read or change it (a
    /// group's too, as the master key file): the key lets anyone push to every user of the app. Errors name `field`.
    public static func readSecretFile(_ path: String, field: String) throws(APIError) -> String {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw APIError.invalid(field, "cannot read \(path): no such file or no permission")
        }
        if let mode = attributes[.posixPermissions] as? Int, mode & 0o077 != 0 {
            throw APIError.invalid(field, "\(path) is open to other users of this machine (mode \(String(mode & 0o777, radix: 8))): it must be readable by its owner only; run chmod 600 \(path) first")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw APIError.invalid(field, "cannot read \(path)")
        }
        return text
    }

    /// Reads and checks an APNs signing key file (.p8) (A3).
    public static func loadAPNsKey(teamID: String, keyID: String, path: String, environment: APNsEnvironment) throws -> APNsSigningKey {
        try validateAppleID(teamID, field: "team-id")
        try validateAppleID(keyID, field: "key-id")
        let pem = try readSecretFile(path, field: "key-file")
        switch Crypto.checkAPNsSigningKey(pem: pem) {
        case nil: break
        case .notP256: throw APIError.invalid("key-file", "\(path) is not a P-256 (ES256) key; APNs signing keys from Apple (AuthKey_XXXXXXXXXX.p8) are P-256, not RSA or another curve")
        case .unreadable: throw APIError.invalid("key-file", "\(path) is not a PEM private key (an AuthKey_XXXXXXXXXX.p8 from Apple)")
        }
        return APNsSigningKey(info: APNsKeyInfo(teamID: teamID, keyID: keyID, environment: environment), pem: pem)
    }

    /// Apple team and key ids: ten uppercase letters or digits.
    static func validateAppleID(_ value: String, field: String) throws {
        let ok = value.utf8.count == 10 && value.utf8.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) }
        guard ok else { throw APIError.invalid(field, "must be 10 uppercase letters or digits, as Apple issues them") }
    }

    /// A bundle id: reverse-DNS, letters, digits, '-' and '.', as App Store Connect accepts.
    static func validateBundleID(_ value: String) throws {
        let allowed = value.utf8.allSatisfy {
            ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x2E
        }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard allowed, parts.count >= 2, parts.allSatisfy({ !$0.isEmpty }), value.utf8.count <= 155 else {
            throw APIError.invalid("bundle-id", "must be a reverse-DNS bundle identifier such as com.example.app")
        }
        guard !value.hasSuffix(PushType.liveActivityTopicSuffix) else {
            throw APIError.invalid("bundle-id", "give the app's bundle id; Islet adds \(PushType.liveActivityTopicSuffix) to the APNs topic itself (A2)")
        }
    }
}
