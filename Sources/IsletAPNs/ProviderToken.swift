import COpenSSL
import Foundation
import IsletCore
import IsletStore
import Synchronization

public struct SigningKeyError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// An APNs signing key held in memory as an OpenSSL key; freed with this object (A3).
///
/// `@unchecked Sendable`: the EVP_PKEY is never changed after loading; OpenSSL allows concurrent
/// signing and verifying with one key.
public final class SigningKey: @unchecked Sendable {
    public let info: APNsKeyInfo
    let key: OpaquePointer

    public init(_ signingKey: APNsSigningKey) throws(SigningKeyError) {
        var pem = signingKey.pem
        guard let key = pem.withUTF8({ islet_p256_key(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count) }) else {
            throw SigningKeyError(description: "the APNs key \(signingKey.info.keyID) is not a readable P-256 private key")
        }
        self.info = signingKey.info
        self.key = key
    }

    deinit { islet_key_free(key) }

    /// The raw 64-byte ES256 signature of `data`.
    public func sign(_ data: [UInt8]) -> [UInt8]? {
        var signature = [UInt8](repeating: 0, count: 64)
        let ok = data.withUnsafeBytes { bytes in islet_es256_sign(key, bytes.baseAddress, bytes.count, &signature) }
        return ok == 1 ? signature : nil
    }

    public func verify(_ data: [UInt8], signature: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        return data.withUnsafeBytes { bytes in islet_es256_verify(key, bytes.baseAddress, bytes.count, signature) } == 1
    }

    /// A provider token: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` signed (A3).
    public func providerToken(issuedAt: Date) -> String? {
        let header = #"{"alg":"ES256","kid":"\#(info.keyID)"}"#
        let claims = #"{"iss":"\#(info.teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        guard let signature = sign(Array(signingInput.utf8)) else { return nil }
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// One provider token per key, reused for about 50 minutes and never renewed more often than every 20 (A3).
/// With `shared`, the token is the one every node of the database uses: a node asks the store when its copy
/// is 50 minutes old, and only the first to ask signs a new one (issue 14). The store is asked off the client's
/// loop (`APNsCredentialResolver`), about once every 50 minutes per key; if it cannot answer, this node signs its own
/// meanwhile.
///
/// Used by the resolver's threads at once: the tokens in hand are behind a lock, never held across the store's calls
/// (two reads of one key at once may both sign; either token is valid, and with `shared` the store keeps one).
final class ProviderTokens: Sendable {
    static let reuseFor: TimeInterval = 50 * 60
    static let minimumAge: TimeInterval = 20 * 60
    /// Apple refuses a token older than this.
    static let lifetime: TimeInterval = 60 * 60

    private let shared: (any ClusterStore)?
    private let logger: Logger
    private let tokens = Mutex<[String: (token: String, issuedAt: Date)]>([:])
    private let signed = Atomic<Int>(0)
    /// Tokens signed by this process since the client started (first ones and renewals), for `/metrics`.
    var issued: Int { signed.load(ordering: .relaxed) }

    init(shared: (any ClusterStore)? = nil, logger: Logger = Logger(label: "islet.apns")) {
        self.shared = shared
        self.logger = logger
    }

    static func name(_ key: SigningKey) -> String { "\(key.info.teamID).\(key.info.keyID)" }

    /// The key's token and when it was issued: the one in hand while younger than 50 minutes, else a new one.
    func token(for key: SigningKey, now: Date) -> (token: String, issuedAt: Date)? {
        let name = Self.name(key)
        if let current = tokens.withLock({ $0[name] }), now.timeIntervalSince(current.issuedAt) < Self.reuseFor { return current }
        if let shared {
            // What this node signed counts only if it is what the database kept: the signing runs in a grouped
            // write, which may run again (each signature differs, ES256 being randomized).
            var signed: String?
            do {
                let got = try shared.providerToken(named: name, issuedAfter: now.addingTimeInterval(-Self.reuseFor), at: now) { date in
                    signed = key.providerToken(issuedAt: date)
                    return signed
                }
                if let signed, got?.token == signed { self.signed.add(1, ordering: .relaxed) }
                tokens.withLock { $0[name] = got }
                return got
            } catch {
                logger.warning("cannot read the shared provider token; this node signs its own", ["key": .string(name), "error": .string("\(error)")])
            }
        }
        guard let token = key.providerToken(issuedAt: now) else { return nil }
        tokens.withLock { $0[name] = (token, now) }
        signed.add(1, ordering: .relaxed)
        return (token, now)
    }

    /// APNs said `token` expired (403 ExpiredProviderToken): drop it so the next call makes a new one —
    /// unless it is younger than 20 minutes, when a new one would earn 429 TooManyProviderTokenUpdates.
    /// True when a retry will carry a new token.
    @discardableResult
    func expire(_ token: String, for key: SigningKey, now: Date) -> Bool {
        let name = Self.name(key)
        guard let current = tokens.withLock({ $0[name] }) else { return true }
        guard current.token == token else { return true }   // already replaced
        guard now.timeIntervalSince(current.issuedAt) >= Self.minimumAge else { return false }
        if let shared {
            do {
                // Another node may have replaced it already, or (a younger token there) must not yet.
                guard try shared.expireProviderToken(named: name, token: token, renewableBefore: now.addingTimeInterval(-Self.minimumAge)) else {
                    return false
                }
            } catch {
                logger.warning("cannot expire the shared provider token; this node renews its own", ["key": .string(name), "error": .string("\(error)")])
            }
        }
        tokens.withLock { tokens in
            if tokens[name]?.token == token { tokens[name] = nil }
        }
        return true
    }
}
