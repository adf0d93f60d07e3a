import Foundation
import IsletCore
import IsletCrypto

/// Why a service account's key, or a token endpoint's answer, was refused; it names the field and the rule.
public struct ServiceAccountError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String

    public init(description: String) { self.description = description }
}

/// A Google service account's key: the JSON file Firebase's console downloads (Project settings, Service accounts),
/// which lets Islet send through FCM HTTP v1 for its project (issue 46).
public struct ServiceAccount: Sendable, Equatable {
    public let projectID: String
    public let clientEmail: String
    /// The key's id: the `kid` of every assertion signed with it.
    public let privateKeyID: String
    /// The RSA private key, PEM.
    public let privateKey: String
    /// Where an assertion is traded for an access token: the key's own `token_uri` (Google's when absent).
    public let tokenURI: String

    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"
    /// What the access token may do: send FCM messages, nothing else.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Reads a key file. `type` must be `service_account`; `project_id`, `client_email`, `private_key_id` and
    /// `private_key` are required; `token_uri`, when given, must be an https URL.
    public init(json: [UInt8]) throws(ServiceAccountError) {
        guard let object = (try? JSONParser.parse(json))?.objectValue else {
            throw ServiceAccountError(description: "service account key: must be a JSON object (the key file from Firebase's console)")
        }
        func text(_ field: String) throws(ServiceAccountError) -> String {
            guard let value = object[field]?.stringValue, !value.isEmpty else {
                throw ServiceAccountError(description: "service account key: \(field) is required and must be a non-empty string")
            }
            return value
        }
        let type = try text("type")
        guard type == "service_account" else {
            throw ServiceAccountError(description: "service account key: type must be \"service_account\", got \"\(type)\"")
        }
        projectID = try text("project_id")
        clientEmail = try text("client_email")
        privateKeyID = try text("private_key_id")
        privateKey = try text("private_key")
        if object["token_uri"] == nil || object["token_uri"] == .null {
            tokenURI = Self.defaultTokenURI
        } else {
            let uri = try text("token_uri")
            guard uri.hasPrefix("https://"), uri.count > "https://".count else {
                throw ServiceAccountError(description: "service account key: token_uri must be an https URL, got \"\(uri)\"")
            }
            tokenURI = uri
        }
    }
}

/// Signs the assertions a service account trades for FCM access tokens (RFC 7523, Google's OAuth2 for service accounts).
public final class ServiceAccountSigner: Sendable {
    public let account: ServiceAccount
    private let key: RSASigningKey
    /// How long an assertion (and so the access token asked with it) is valid: Google accepts at most an hour.
    public static let assertionLifetime: TimeInterval = 3600

    public init(_ account: ServiceAccount) throws(ServiceAccountError) {
        guard let key = RSASigningKey(pem: account.privateKey) else {
            throw ServiceAccountError(description: "service account key: private_key must be an RSA private key (PEM) of 2048 bits or more")
        }
        self.account = account
        self.key = key
    }

    /// The signed assertion: `{"alg":"RS256","typ":"JWT","kid":…}.{"iss","scope","aud","iat","exp"}`, issued at `issuedAt`
    /// (whole seconds), expiring an hour later. Nil only if OpenSSL fails to sign.
    public func assertion(issuedAt: Date) -> String? {
        let issued = Int64(issuedAt.timeIntervalSince1970)
        let header: JSONValue = ["alg": "RS256", "typ": "JWT", "kid": .string(account.privateKeyID)]
        let claims: JSONValue = [
            "iss": .string(account.clientEmail), "scope": .string(ServiceAccount.scope), "aud": .string(account.tokenURI),
            "iat": .int(issued), "exp": .int(issued + Int64(Self.assertionLifetime)),
        ]
        let signingInput = Base64URL.encode(header.jsonBytes) + "." + Base64URL.encode(claims.jsonBytes)
        guard let signature = key.sign(Array(signingInput.utf8)) else { return nil }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The token request's body (`application/x-www-form-urlencoded`), POSTed to `account.tokenURI`.
    public func tokenRequest(issuedAt: Date) -> [UInt8]? {
        // An assertion is base64url and dots: nothing in it needs escaping in a form.
        assertion(issuedAt: issuedAt).map { Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\($0)".utf8) }
    }
}

/// An OAuth2 access token from the token endpoint: sent as `Authorization: Bearer <token>` with every FCM message.
public struct AccessToken: Sendable, Equatable {
    public let token: String
    public let expiresAt: Date

    public init(token: String, expiresAt: Date) {
        self.token = token
        self.expiresAt = expiresAt
    }

    /// A successful answer's body (`{"access_token": …, "expires_in": …, "token_type": "Bearer"}`), received at `receivedAt`.
    public static func of(body: [UInt8], receivedAt: Date) throws(ServiceAccountError) -> AccessToken {
        guard let object = (try? JSONParser.parse(body))?.objectValue else {
            throw ServiceAccountError(description: "token endpoint: the answer is not a JSON object")
        }
        guard let token = object["access_token"]?.stringValue, !token.isEmpty else {
            throw ServiceAccountError(description: "token endpoint: access_token is missing from the answer")
        }
        guard let type = object["token_type"]?.stringValue, type.lowercased() == "bearer" else {
            throw ServiceAccountError(description: "token endpoint: token_type must be Bearer, got \(object["token_type"]?.jsonText ?? "nothing")")
        }
        guard let seconds = object["expires_in"]?.intValue, seconds > 0 else {
            throw ServiceAccountError(description: "token endpoint: expires_in must be a positive number of seconds")
        }
        return AccessToken(token: token, expiresAt: receivedAt.addingTimeInterval(TimeInterval(seconds)))
    }

    /// How long before it expires a token is replaced: an FCM request made with it has that long to arrive.
    public static let renewalMargin: TimeInterval = 300

    /// Worth sending with at `date`: more than `renewalMargin` before it expires.
    public func isFresh(at date: Date) -> Bool { date.addingTimeInterval(Self.renewalMargin) < expiresAt }
}
