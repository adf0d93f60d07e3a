import COpenSSL
import Foundation

/// The key APNs signing keys are sealed with at rest (AES-256-GCM), from `ISLET_MASTER_KEY` or a key file.
public struct MasterKey: Sendable, Equatable {
    let bytes: [UInt8]

    /// 32 bytes written as 64 hex digits or as base64 (what `openssl rand -hex 32` or `-base64 32` prints).
    public init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.count == 64, let bytes = Crypto.bytes(hex: trimmed) {
            self.bytes = bytes
        } else if let data = Data(base64Encoded: trimmed), data.count == 32 {
            self.bytes = Array(data)
        } else {
            return nil
        }
    }

    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32, "a master key is 32 bytes")
        self.bytes = bytes
    }

    public static func generate() -> MasterKey { MasterKey(bytes: Crypto.randomBytes(32)) }

    /// A short fingerprint to tell keys apart in messages, never the key itself.
    public var fingerprint: String { Crypto.hex(Array(Crypto.sha256(bytes).prefix(4))) }

    public var hexText: String { Crypto.hex(bytes) }

    static let prefix = "islet-sealed:v1:"

    /// `text` sealed as `islet-sealed:v1:<base64 of nonce, ciphertext and tag>`; a fresh nonce every time.
    public func seal(_ text: String) -> String {
        let plaintext = Array(text.utf8)
        let nonce = Crypto.randomBytes(12)
        var out = [UInt8](repeating: 0, count: plaintext.count)
        var tag = [UInt8](repeating: 0, count: 16)
        let ok = bytes.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { iv in
                plaintext.withUnsafeBytes { input in
                    out.withUnsafeMutableBufferPointer { output in
                        tag.withUnsafeMutableBufferPointer {
                            islet_aes256gcm_seal(key.baseAddress, iv.baseAddress, input.baseAddress, plaintext.count, output.baseAddress, $0.baseAddress)
                        }
                    }
                }
            }
        }
        precondition(ok == 1, "OpenSSL AES-256-GCM failed")
        return Self.prefix + Data(nonce + out + tag).base64EncodedString()
    }

    /// Whether `stored` is sealed text (rather than a plain PEM from before encryption was configured).
    public static func isSealed(_ stored: String) -> Bool { stored.hasPrefix(prefix) }

    /// The plain text of sealed text; nil when it was sealed with another key or altered.
    public func open(_ sealed: String) -> String? {
        guard Self.isSealed(sealed), let data = Data(base64Encoded: String(sealed.dropFirst(Self.prefix.count))), data.count >= 28 else { return nil }
        let all = Array(data)
        let nonce = Array(all[0..<12]), tag = Array(all[(all.count - 16)...]), ciphertext = Array(all[12..<(all.count - 16)])
        var out = [UInt8](repeating: 0, count: ciphertext.count)
        let ok = bytes.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { iv in
                ciphertext.withUnsafeBytes { input in
                    tag.withUnsafeBufferPointer { tagBytes in
                        out.withUnsafeMutableBufferPointer {
                            islet_aes256gcm_open(key.baseAddress, iv.baseAddress, input.baseAddress, ciphertext.count, tagBytes.baseAddress, $0.baseAddress)
                        }
                    }
                }
            }
        }
        guard ok == 1 else { return nil }
        return String(decoding: out, as: UTF8.self)
    }
}
