import COpenSSL
import Foundation

/// An RSA private key held in memory as an OpenSSL key, for RS256 signatures (issue 46: a Google service account signs
/// the assertion it trades for an FCM access token); freed with this object.
///
/// `@unchecked Sendable`: the EVP_PKEY is never changed after loading; OpenSSL allows concurrent signing and verifying
/// with one key.
public final class RSASigningKey: @unchecked Sendable {
    private let key: OpaquePointer

    /// Nil unless `pem` is an RSA private key (PKCS#8 `BEGIN PRIVATE KEY`, or PKCS#1) of 2,048 bits or more.
    public init?(pem: String) {
        var text = pem
        guard let key = text.withUTF8({ buffer in buffer.withMemoryRebound(to: CChar.self) { islet_rsa_key($0.baseAddress, $0.count) } }) else {
            return nil
        }
        self.key = key
    }

    deinit { islet_key_free(key) }

    /// The RS256 signature (RSASSA-PKCS1-v1_5, SHA-256) of `data`: as long as the key (256 bytes for 2,048 bits).
    public func sign(_ data: [UInt8]) -> [UInt8]? {
        var signature = [UInt8](repeating: 0, count: Int(islet_key_size(key)))
        var length = signature.count
        let ok = data.withUnsafeBytes { bytes in islet_rs256_sign(key, bytes.baseAddress, bytes.count, &signature, &length) }
        return ok == 1 ? Array(signature.prefix(length)) : nil
    }

    public func verify(_ data: [UInt8], signature: [UInt8]) -> Bool {
        data.withUnsafeBytes { bytes in islet_rs256_verify(key, bytes.baseAddress, bytes.count, signature, signature.count) } == 1
    }

    /// A new key of `bits` as PKCS#8 PEM, the form of a service account's `private_key` (for tests and stand-ins).
    public static func generatePEM(bits: Int = 2048) -> String {
        var buffer = [CChar](repeating: 0, count: 8192)
        let length = islet_rsa_generate_pem(Int32(bits), &buffer, 8192)
        precondition(length > 0, "OpenSSL could not generate an RSA key")
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
