import IsletCore
import IsletStore

/// Decides whether a request may act on an application (E2, E3).
///
/// A wrong token and an unknown application get the same answer, so callers cannot probe which
/// applications exist.
public struct Authenticator: Sendable {
    let store: any ApplicationStore

    public init(store: any ApplicationStore) { self.store = store }

    /// The application `code` when `secret` is one of its unrevoked tokens of `kind`; 401 otherwise.
    public func authenticate(application code: ApplicationCode, secret: String?, kind: TokenKind) throws -> Application {
        let field = kind == .api ? "auth" : "Authorization"
        guard let secret, !secret.isEmpty else {
            let how = kind == .api ? "request.auth or header Authorization: Token <token>" : "header Authorization: Token <device API token>"
            throw APIError(.unauthorized, "\(field): a \(kind == .api ? "server API" : "device API") token is required (\(how))")
        }
        let application = try store.application(code)
        let tokens = application == nil ? [] : try store.tokens(of: code)
        guard let application, let token = Credentials.match(secret, in: tokens) else {
            throw APIError(.unauthorized, "\(field): not a valid \(kind == .api ? "server API" : "device API") token for application \(code)")
        }
        if token.isRevoked {
            throw APIError(.unauthorized, "\(field): this token was revoked")
        }
        if token.kind != kind {
            // E3: a device token can never call server API methods.
            throw APIError(.unauthorized, kind == .api
                ? "\(field): a device API token cannot call server API methods; use a server API token"
                : "\(field): a server API token cannot call device API methods; use the application's device API token")
        }
        return application
    }
}
