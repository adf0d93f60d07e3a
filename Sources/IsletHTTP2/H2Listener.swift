import CEpoll
import COpenSSL
import Foundation

/// Accepts TLS + HTTP/2 connections on a loop and hands each to a new delegate.
///
/// `@unchecked Sendable`: loop-confined, like `H2Connection`.
final class H2Listener: LoopHandler, @unchecked Sendable {
    let loop: EventLoop
    let fd: Int32
    let tls: TLSContext
    let port: Int
    private let makeDelegate: () -> any H2ConnectionDelegate
    private var closed = false

    init(loop: EventLoop, host: String, port: Int, tls: TLSContext, makeDelegate: @escaping () -> any H2ConnectionDelegate) throws(TLSError) {
        var error = [CChar](repeating: 0, count: 256)
        let fd = islet_tcp_listen(host, Int32(port), &error, 256)
        guard fd >= 0 else { throw TLSError(description: String(cBuffer: error)) }
        self.loop = loop
        self.fd = fd
        self.tls = tls
        self.port = Int(islet_socket_port(fd))
        self.makeDelegate = makeDelegate
    }

    /// Starts accepting; call on the loop thread.
    func start() { loop.register(fd, events: UInt32(ISLET_EPOLLIN), handler: self) }

    func ready(_ events: UInt32) {
        while true {
            let client = islet_tcp_accept(fd)
            guard client >= 0 else { return }
            guard let ssl = islet_tls_server(tls.context, client) else { Foundation.close(client); continue }
            _ = H2Connection(loop: loop, fd: client, ssl: ssl, role: .server, connecting: false, peer: "client", delegate: makeDelegate())
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        loop.unregister(fd)
        Foundation.close(fd)
    }
}
