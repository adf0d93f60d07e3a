import COpenSSL
import Foundation

public struct TLSError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// An OpenSSL SSL_CTX, client or server side, owned by this object.
///
/// `@unchecked Sendable`: an SSL_CTX is safe to share between threads once configured; it is only read.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Client side: TLS 1.2+, ALPN h2, system CAs plus `extraCA` (a PEM file).
    public init(clientTrusting extraCA: String?) throws(TLSError) {
        var error = [CChar](repeating: 0, count: 256)
        guard let context = islet_tls_client_context(extraCA, &error, 256) else {
            throw TLSError(description: "TLS client set-up failed: \(String(cBuffer: error))")
        }
        self.context = context
    }

    /// Server side, with a PEM certificate chain and key.
    public init(serverCertificate: String, key: String) throws(TLSError) {
        var error = [CChar](repeating: 0, count: 256)
        guard let context = islet_tls_server_context(serverCertificate, key, &error, 256) else {
            throw TLSError(description: "TLS server set-up failed (\(serverCertificate)): \(String(cBuffer: error))")
        }
        self.context = context
    }

    deinit { SSL_CTX_free(context) }

    /// Writes a self-signed certificate for 127.0.0.1, ::1 and localhost, and its key (0600).
    public static func writeSelfSigned(certificate: String, key: String, days: Int32 = 3650) throws(TLSError) {
        guard islet_tls_self_signed(certificate, key, days) == 1 else {
            throw TLSError(description: "cannot write a self-signed certificate to \(certificate)")
        }
    }
}
