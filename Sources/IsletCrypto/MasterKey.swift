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

    /// Sealed text starts with this; `v1:` had no associated data, `v2:` is bound to what it is (`boundTo`).
    static let prefix = "islet-sealed:"
    static let unbound = prefix + "v1:", bound = prefix + "v2:"

    /// `text` sealed as `islet-sealed:v2:<base64 of nonce, ciphertext and tag>`, a fresh nonce every time, the tag also
    /// covering `binding` (what the text is, e.g. "apns-key/<application>"): sealed text moved to another row does not
    /// open there.
    public func seal(_ text: String, boundTo binding: String) -> String {
        let nonce = Crypto.randomBytes(12)
        var tag = [UInt8](repeating: 0, count: 16)
        let out = aesGCM(sealing: true, nonce: nonce, aad: Array(binding.utf8), input: Array(text.utf8), tag: &tag)
        precondition(out != nil, "OpenSSL AES-256-GCM failed")
        return Self.bound + Data(nonce + (out ?? []) + tag).base64EncodedString()
    }

    /// Whether `stored` is sealed text (rather than a plain PEM from before encryption was configured).
    public static func isSealed(_ stored: String) -> Bool { stored.hasPrefix(prefix) }

    /// The plain text of sealed text; nil when it was sealed with another key, for another `binding`, or altered.
    /// Text sealed before bindings (`v1:`) opens whatever the binding: sealing it again binds it.
    public func open(_ sealed: String, boundTo binding: String) -> String? {
        let aad: [UInt8]
        let body: Substring
        if sealed.hasPrefix(Self.bound) {
            aad = Array(binding.utf8)
            body = sealed.dropFirst(Self.bound.count)
        } else if sealed.hasPrefix(Self.unbound) {
            aad = []
            body = sealed.dropFirst(Self.unbound.count)
        } else {
            return nil
        }
        guard let data = Data(base64Encoded: String(body)), data.count >= 28 else { return nil }
        let all = Array(data)
        let nonce = Array(all[0..<12]), ciphertext = Array(all[12..<(all.count - 16)])
        var tag = Array(all[(all.count - 16)...])
        guard let out = aesGCM(sealing: false, nonce: nonce, aad: aad, input: ciphertext, tag: &tag) else { return nil }
        return String(decoding: out, as: UTF8.self)
    }

    /// AES-256-GCM of `input` with this key: sealing (filling `tag`) or opening (checking it); nil when it fails.
    private func aesGCM(sealing: Bool, nonce: [UInt8], aad: [UInt8], input: [UInt8], tag: inout [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: input.count)
        let ok = bytes.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { iv in
                aad.withUnsafeBytes { associated in
                    input.withUnsafeBytes { source in
                        out.withUnsafeMutableBufferPointer { output in
                            tag.withUnsafeMutableBufferPointer { tagBytes in
                                sealing
                                    ? islet_aes256gcm_seal(key.baseAddress, iv.baseAddress, associated.baseAddress, aad.count,
                                                           source.baseAddress, input.count, output.baseAddress, tagBytes.baseAddress)
                                    : islet_aes256gcm_open(key.baseAddress, iv.baseAddress, associated.baseAddress, aad.count,
                                                           source.baseAddress, input.count, tagBytes.baseAddress, output.baseAddress)
                            }
                        }
                    }
                }
            }
        }
        return ok == 1 ? out : nil
    }
}
