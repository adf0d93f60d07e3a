import CMicroHTTPD
import Foundation

/// A client's address as the limits count it.
public enum ClientAddress {
    /// The bucket of an address: an IPv4 address itself, an IPv6 address by its /64 (one subscriber's network holds
    /// billions of addresses, so one bucket per address would limit nobody), an IPv4-mapped IPv6 address by its IPv4.
    public static func key(_ address: String) -> String {
        guard address.contains(":") else { return address }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")   // an IPv4-mapped address is its IPv4 address
        }
        return stride(from: 0, to: 8, by: 2).map { String(format: "%02x%02x", bytes[$0], bytes[$0 + 1]) }.joined(separator: ":") + "::/64"
    }

    /// A socket address as text (IPv4 or IPv6); "" when it is neither.
    static func text(_ address: UnsafePointer<sockaddr>?) -> String {
        var text = [CChar](repeating: 0, count: 64)
        islet_address_text(address, &text, text.count)
        return string(text)
    }

    /// The address of a libmicrohttpd connection as text; "" when unknown.
    static func text(of connection: OpaquePointer) -> String {
        var text = [CChar](repeating: 0, count: 64)
        islet_mhd_client_address(connection, &text, text.count)
        return string(text)
    }

    private static func string(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
