import Foundation
import IsletCrypto

/// The console's sign-in rules (issue 17), as pure functions: the session cookie, the CSRF check and the
/// console password's stored form.
public enum ConsoleCredentials {
    public static let cookieName = "islet_console"
    /// A session lasts a working day; signing in again starts a new one.
    public static let sessionLifetime: TimeInterval = 12 * 3600
    public static let csrfHeader = "x-csrf-token"

    /// A new session id (the cookie's value) or CSRF token: 32 random bytes, URL-safe base64 without padding.
    public static func newSecret() -> String {
        Data(Crypto.randomBytes(32)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// What is stored of a session id: its SHA-256, so a copy of the database opens no session.
    public static func idHash(_ id: String) -> [UInt8] { Crypto.sha256(Array(id.utf8)) }

    /// `Set-Cookie` for a new session: only sent to the console's paths, unreadable by scripts, never on
    /// requests another site starts, and over HTTPS only when the console is served over HTTPS.
    public static func sessionCookie(_ id: String, secure: Bool) -> String {
        "\(cookieName)=\(id); Path=/console; Max-Age=\(Int(sessionLifetime)); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// `Set-Cookie` that removes the session cookie (sign-out).
    public static func clearedCookie(secure: Bool) -> String {
        "\(cookieName)=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The session id in a `Cookie` header, if any.
    public static func sessionID(cookieHeader: String?) -> String? {
        guard let cookieHeader else { return nil }
        for pair in cookieHeader.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookieName else { continue }
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// Whether the request came over HTTPS: directly never (Islet listens in plain HTTP), so through a proxy
    /// that says so (docs/PRODUCTION.md's nginx sets X-Forwarded-Proto).
    public static func isHTTPS(forwardedProto: String?) -> Bool {
        forwardedProto?.split(separator: ",").first?.trimmingCharacters(in: .whitespaces).lowercased() == "https"
    }

    /// A state-changing call must carry the session's CSRF token in `X-CSRF-Token`: another site can make a
    /// browser send the cookie (older browsers ignore SameSite), but it cannot read the token to send it.
    public static func csrfAccepted(expected: String, presented: String?) -> Bool {
        guard let presented, !expected.isEmpty else { return false }
        return Crypto.constantTimeEquals(Array(expected.utf8), Array(presented.utf8))
    }

    // MARK: - The console password

    /// PBKDF2-HMAC-SHA256 rounds for a new password (OWASP's 2023 advice for SHA-256).
    public static let passwordIterations = 600_000
    public static let minimumPasswordLength = 12

    /// Why a new console password is refused, or nil.
    public static func passwordProblem(_ password: String) -> String? {
        if password.count < minimumPasswordLength { return "must be at least \(minimumPasswordLength) characters" }
        if password.count > 1024 { return "must be at most 1024 characters" }
        return nil
    }

    /// The stored form of a password: `pbkdf2-sha256$<rounds>$<salt hex>$<key hex>`.
    public static func passwordRecord(_ password: String, iterations: Int = passwordIterations, salt: [UInt8] = Crypto.randomBytes(16)) -> String {
        "pbkdf2-sha256$\(iterations)$\(Crypto.hex(salt))$\(Crypto.hex(Crypto.pbkdf2SHA256(password: password, salt: salt, iterations: iterations)))"
    }

    /// The refusal of an event stream past what `whom` ("this session", "application X") may hold open.
    public static func tooManyStreams(_ limit: Int, of whom: String) -> String {
        "console events: \(whom) has \(limit) event streams open, the most it may have (each holds a connection); close a tab, or retry after 5 s"
    }

    /// Console password checks run at once at most (each costs about a fifth of a second of a core): half the cores, so
    /// a flood of sign-ins from many addresses leaves the rest to the API.
    public static let passwordChecksAtOnce = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)

    /// The answer to a password sign-in while `limit` checks are running (429, retry after a second).
    public static func passwordChecksBusy(limit: Int) -> String {
        "console password sign-ins: \(limit) \(limit == 1 ? "is" : "are") being checked, the most this server checks at once "
            + "(each costs a fifth of a second of a core); retry after 1 s"
    }

    /// Whether `password` matches a stored record (false for a record this version cannot read).
    public static func passwordMatches(_ password: String, record: String) -> Bool {
        let parts = record.split(separator: "$").map(String.init)
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let iterations = Int(parts[1]), (1...10_000_000).contains(iterations),
              let salt = Crypto.bytes(hex: parts[2]), let key = Crypto.bytes(hex: parts[3]), password.utf8.count <= 4096 else { return false }
        return Crypto.constantTimeEquals(Crypto.pbkdf2SHA256(password: password, salt: salt, iterations: iterations), key)
    }
}
