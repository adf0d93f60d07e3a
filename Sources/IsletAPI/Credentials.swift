import Foundation
import IsletCore
import IsletCrypto
import IsletStore

/// A token as issued: the stored record plus the secret, which exists only in this value.
public struct IssuedToken: Sendable {
    public let record: TokenRecord
    public let secret: String
}

/// Makes and checks the secrets of API and device tokens (E2, E3).
///
/// Tokens are 40 random base62 characters (~238 bits); only their SHA-256 is stored.
public enum Credentials {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    public static func newSecret() -> String {
        var random = SecureRandom()
        return String((0..<40).map { _ in alphabet.randomElement(using: &random)! })
    }

    public static func newTokenID() -> String { "tk_" + Crypto.hex(Crypto.randomBytes(6)) }

    public static func hash(_ secret: String) -> [UInt8] { Crypto.sha256(Array(secret.utf8)) }

    /// A token record for `secret` (a fresh random one when nil).
    public static func issue(for application: ApplicationCode, kind: TokenKind, label: String, secret: String? = nil,
                             at date: Date) -> IssuedToken {
        let secret = secret ?? newSecret()
        let record = TokenRecord(id: newTokenID(), application: application, kind: kind, hash: hash(secret),
                                 label: label, createdAt: date)
        return IssuedToken(record: record, secret: secret)
    }

    /// The token, among `tokens`, whose hash matches `secret`.
    ///
    /// Every stored hash is compared in constant time, so timing tells nothing about which one or how close.
    static func match(_ secret: String, in tokens: [TokenRecord]) -> TokenRecord? {
        let presented = hash(secret)
        var found: TokenRecord?
        for token in tokens where Crypto.constantTimeEquals(token.hash, presented) { found = token }
        return found
    }
}
