import COpenSSL

/// Cryptography Islet needs, on OpenSSL's libcrypto: digests, secure randomness, APNs key checks.
public enum Crypto {
    /// SHA-256 of `bytes`.
    public static func sha256<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let ok = Array(bytes).withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { islet_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        precondition(ok == 1, "OpenSSL SHA-256 failed")
        return digest
    }

    /// `count` bytes from OpenSSL's CSPRNG.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { islet_random_bytes($0.baseAddress, count) }
        precondition(ok == 1, "OpenSSL RAND_bytes failed")
        return bytes
    }

    /// PBKDF2-HMAC-SHA256 of `password` (32 bytes): for the console password, which is typed, so must be slow to guess.
    public static func pbkdf2SHA256(password: String, salt: [UInt8], iterations: Int) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: 32)
        let secret = Array(password.utf8)
        let ok = secret.withUnsafeBufferPointer { pass in
            salt.withUnsafeBufferPointer { saltBytes in
                key.withUnsafeMutableBufferPointer { out in
                    pass.withMemoryRebound(to: CChar.self) { passChars in
                        PKCS5_PBKDF2_HMAC(passChars.baseAddress, Int32(secret.count), saltBytes.baseAddress, Int32(salt.count), Int32(iterations),
                                          EVP_sha256(), Int32(out.count), out.baseAddress)
                    }
                }
            }
        }
        precondition(ok == 1, "OpenSSL PBKDF2 failed")
        return key
    }

    /// Compares two byte strings in time that depends only on their lengths.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    /// The bytes of hex text (either case); nil for an odd length or a non-hex digit.
    public static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
            index += 2
        }
        return bytes
    }

    /// Lowercase hex of `bytes`.
    public static func hex<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes { out.append(digits[Int(byte >> 4)]); out.append(digits[Int(byte & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Why an APNs signing key was refused.
    public enum KeyProblem: Error, Equatable, Sendable {
        case unreadable
        case notP256
    }

    /// A new P-256 private key as PKCS#8 PEM, the format of Apple's .p8 keys (for simulated applications).
    public static func generateAPNsSigningKey() -> String {
        var buffer = [CChar](repeating: 0, count: 1024)
        let length = islet_p256_generate_pem(&buffer, 1024)
        precondition(length > 0, "OpenSSL could not generate a P-256 key")
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Checks that `pem` is a PKCS#8 P-256 private key, the format of Apple's AuthKey_XXXX.p8 files (A3).
    public static func checkAPNsSigningKey(pem: String) -> KeyProblem? {
        var text = pem
        let result = text.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) { islet_check_p256_private_key($0.baseAddress, $0.count) }
        }
        switch result {
        case 0: return nil
        case 2: return .notP256
        default: return .unreadable
        }
    }
}

/// A secret random generator for Swift's randomness APIs, backed by OpenSSL.
public struct SecureRandom: RandomNumberGenerator, Sendable {
    public init() {}
    public mutating func next() -> UInt64 {
        Crypto.randomBytes(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}
