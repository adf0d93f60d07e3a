import IsletCore
import IsletStore

/// Decides whether a request may act on an application (E2, E3).
///
/// A wrong token and an unknown application get the same answer, so callers cannot probe which
/// applications exist.
public struct Authenticator: Sendable {
    let store: any ApplicationStore

    public init(store: any ApplicationStore) { self.store = store }

    /// The application `code` when `secret` is one of its unrevoked tokens allowed for `access`; 401 otherwise.
    ///
    /// Server API methods take server API tokens only. Device API methods take the device API token
    /// the SDK sends, and also a server API token, which may do anything for its application.
    /// A server call may leave out `application` (as Pushwoosh's getMessageDetails does): then the
    /// application is the one the token belongs to, since a token authorises exactly one (E2).
    public func authenticate(application code: ApplicationCode?, secret: String?, access: APIAccess) throws -> Application {
        try authenticateWithKind(application: code, secret: secret, access: access).application
    }

    /// As `authenticate`, with the kind of token that matched.
    public func authenticateWithKind(application code: ApplicationCode?, secret: String?,
                                     access: APIAccess) throws -> (application: Application, kind: TokenKind, id: String) {
        let field = access == .server ? "auth" : "Authorization"
        let wanted = access == .server ? "server API" : "device API"
        guard let secret, !secret.isEmpty else {
            let how = access == .server ? "request.auth or header Authorization: Token <token>" : "header Authorization: Token <token>"
            throw APIError(.unauthorized, "\(field): a \(wanted) token is required (\(how))")
        }
        // One indexed lookup by the secret's hash (hashes are unique across applications); a token of another
        // application is refused as a wrong one.
        let found = try store.credential(hash: Credentials.hash(secret))
        guard let code else {
            guard access == .server, let (owner, application) = found, owner.kind == .api else {
                throw APIError(.unauthorized, "\(field): not a valid \(wanted) token")
            }
            guard !owner.isRevoked else { throw APIError(.unauthorized, "\(field): this token was revoked") }
            return (application, owner.kind, owner.id)
        }
        guard let (token, application) = found, token.application == code else {
            throw APIError(.unauthorized, "\(field): not a valid \(wanted) token for application \(code)")
        }
        if token.isRevoked {
            throw APIError(.unauthorized, "\(field): this token was revoked")
        }
        if access == .server && token.kind == .device {
            // E3: a device token can never call server API methods.
            throw APIError(.unauthorized, "\(field): a device API token cannot call server API methods; use a server API token")
        }
        return (application, token.kind, token.id)
    }
}
