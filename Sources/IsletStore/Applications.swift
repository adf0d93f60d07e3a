import Foundation
import IsletCore

/// Which calls a token may make: server API methods or device API methods (E2, E3).
public struct TokenKind: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    /// Server API token: startLiveActivity, updateLiveActivity, filters, schemas, stats.
    public static let api = Self(uncheckedRawValue: "api")
    /// Device API token: what the Pushwoosh SDK sends as `Authorization: Token …`.
    public static let device = Self(uncheckedRawValue: "device")
    public static let all = [api, device]
}

/// Which APNs environments an application's signing key may be used for.
public struct APNsEnvironment: WireValue {
    public let rawValue: String
    public init(uncheckedRawValue: String) { rawValue = uncheckedRawValue }

    public static let production = Self(uncheckedRawValue: "production")
    public static let sandbox = Self(uncheckedRawValue: "sandbox")
    public static let both = Self(uncheckedRawValue: "both")
    public static let all = [production, sandbox, both]
}

/// The public facts of an application's APNs key: safe to show and log.
public struct APNsKeyInfo: Sendable, Equatable {
    public let teamID: String
    public let keyID: String
    public let environment: APNsEnvironment

    public init(teamID: String, keyID: String, environment: APNsEnvironment) {
        self.teamID = teamID
        self.keyID = keyID
        self.environment = environment
    }
}

/// An APNs token-auth signing key (.p8): the facts plus the secret PEM, which is never printed.
public struct APNsSigningKey: Sendable, Equatable, CustomStringConvertible {
    public let info: APNsKeyInfo
    public let pem: String

    public init(info: APNsKeyInfo, pem: String) {
        self.info = info
        self.pem = pem
    }

    public var description: String {
        "APNsSigningKey(team: \(info.teamID), key: \(info.keyID), environment: \(info.environment), pem: <redacted>)"
    }
}

/// The public facts of an application's FCM service account (issue 46): safe to show and log.
public struct FCMAccountInfo: Sendable, Equatable {
    public let projectID: String
    public let clientEmail: String

    public init(projectID: String, clientEmail: String) {
        self.projectID = projectID
        self.clientEmail = clientEmail
    }
}

/// An application: the unit that owns devices, tokens, activities and an APNs key.
public struct Application: Sendable, Equatable {
    public let code: ApplicationCode
    public let name: String
    public let bundleID: String
    public let createdAt: Date
    public let apnsKey: APNsKeyInfo?
    /// Its priority-10 update budget (A7).
    public let updateBudget: UpdateBudget
    /// Who may set its devices' User IDs (issue 44).
    public let userIDSource: UserIDSource
    /// Its FCM service account (issue 46): without one, its Android phones get nothing.
    public var fcmAccount: FCMAccountInfo?

    public init(code: ApplicationCode, name: String, bundleID: String, createdAt: Date, apnsKey: APNsKeyInfo? = nil,
                updateBudget: UpdateBudget = .standard, userIDSource: UserIDSource = .app) {
        self.code = code
        self.name = name
        self.bundleID = bundleID
        self.createdAt = createdAt
        self.apnsKey = apnsKey
        self.updateBudget = updateBudget
        self.userIDSource = userIDSource
    }
}

/// A stored API or device token: only its SHA-256 hash is kept, the token itself is shown once.
public struct TokenRecord: Sendable, Equatable {
    /// A short public identifier, used to list and revoke the token.
    public let id: String
    public let application: ApplicationCode
    public let kind: TokenKind
    public let hash: [UInt8]
    public let label: String
    public let createdAt: Date
    public let revokedAt: Date?

    public init(id: String, application: ApplicationCode, kind: TokenKind, hash: [UInt8], label: String,
                createdAt: Date, revokedAt: Date? = nil) {
        self.id = id
        self.application = application
        self.kind = kind
        self.hash = hash
        self.label = label
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }

    public var isRevoked: Bool { revokedAt != nil }
}

/// Storage of applications and their credentials.
public protocol ApplicationStore: Sendable {
    /// True when no application exists yet (a fresh database).
    func hasNoApplications() throws(StoreError) -> Bool
    /// Creates an application with its first tokens and optional APNs key, all or nothing.
    func createApplication(_ application: Application, tokens: [TokenRecord], apnsKey: APNsSigningKey?) throws(StoreError)
    func application(_ code: ApplicationCode) throws(StoreError) -> Application?
    func applications() throws(StoreError) -> [Application]

    func addToken(_ token: TokenRecord) throws(StoreError)
    /// Revokes a token by its id; false when the application has no unrevoked token with that id.
    func revokeToken(application: ApplicationCode, id: String, at date: Date) throws(StoreError) -> Bool
    /// Every token of the application, revoked ones included, oldest first.
    func tokens(of application: ApplicationCode) throws(StoreError) -> [TokenRecord]
    /// The token with this SHA-256 hash, in any application (hashes are unique).
    func token(hash: [UInt8]) throws(StoreError) -> TokenRecord?
    /// The token with this SHA-256 hash and its application, read together (one lookup per API call).
    func credential(hash: [UInt8]) throws(StoreError) -> (token: TokenRecord, application: Application)?

    func setAPNsKey(_ key: APNsSigningKey, for application: ApplicationCode) throws(StoreError)
    /// Sets the application's priority-10 update budget (A7); `.notFound` when there is no such application.
    func setUpdateBudget(_ budget: UpdateBudget, for application: ApplicationCode) throws(StoreError)
    /// Sets who may set the application's devices' User IDs; `.notFound` when there is no such application.
    func setUserIDSource(_ source: UserIDSource, for application: ApplicationCode) throws(StoreError)
    func apnsKey(for application: ApplicationCode) throws(StoreError) -> APNsSigningKey?
    /// Stores the application's FCM service account key, its JSON text sealed like an APNs key (issue 46).
    func setFCMAccount(_ info: FCMAccountInfo, keyJSON: String, for application: ApplicationCode) throws(StoreError)
    /// The application's FCM service account key (its JSON text, opened); nil when it has none.
    func fcmAccountKey(for application: ApplicationCode) throws(StoreError) -> String?
    /// How many stored APNs keys and FCM service accounts are sealed and how many are plain; throws `.locked` when a
    /// sealed one cannot be opened with this store's master key.
    func checkAPNsKeys() throws(StoreError) -> (sealed: Int, plain: Int)
}
