import Foundation

/// A TCP connection to 127.0.0.1, for the tests' own HTTP/1.1 clients (they share no code with the server).
public enum LoopbackSocket {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A connected socket to 127.0.0.1:`port` whose reads give up after `timeout` seconds; the caller closes it.
    public static func connect(port: Int, timeout: Int = 20) throws(Failure) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            throw Failure(description: "connect to 127.0.0.1:\(port) failed: errno \(error)")
        }
        return fd
    }

    /// Reads from `socket` into `received` until it contains `text`; false when the peer closes, a read times out,
    /// or `seconds` pass first (a stream that keeps sending something else cannot hold the test).
    public static func receive(_ socket: Int32, until text: String, into received: inout String, seconds: Double = 20) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !received.contains(text) {
            guard ContinuousClock.now < deadline else { return false }
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            received += String(decoding: buffer[..<count], as: UTF8.self)
        }
        return true
    }
}
