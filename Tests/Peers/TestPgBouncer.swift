import Foundation
import Synchronization

/// Debian's PgBouncer in front of a test's own PostgreSQL cluster, on a Unix socket of its own folder (no TCP
/// port), for the tests of what Islet needs of a pooler. As root it runs as `postgres` (it refuses root). Stopped
/// by `stop()`, or at the test process's exit.
public final class TestPgBouncer: Sendable {
    public let url: String
    let directory: String

    /// `mode`: PgBouncer's `pool_mode` (session, transaction, statement); `serverConnections`: its pool's size.
    public init(before cluster: TestPostgres.PrivateCluster, mode: String, serverConnections: Int) throws {
        let binary = "/usr/sbin/pgbouncer"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw PeerError("no \(binary): run scripts/install-deps --test (make test does)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-pgb-\(UUID().uuidString.prefix(8))").path
        url = "postgresql:///postgres?host=\(directory)&port=6432&user=postgres"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try #""postgres" """#.write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        try """
            [databases]
            postgres = host=\(cluster.directory) dbname=postgres user=postgres
            [pgbouncer]
            unix_socket_dir = \(directory)
            listen_port = 6432
            auth_type = trust
            auth_file = \(directory)/users.txt
            pool_mode = \(mode)
            default_pool_size = \(serverConnections)
            max_client_conn = 50
            logfile = \(directory)/pgbouncer.log
            pidfile = \(directory)/pgbouncer.pid
            """.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        let asRoot = getuid() == 0
        if asRoot { try TestPostgres.run("/bin/chown", ["-R", "postgres:postgres", directory]) }
        let first = Self.running.withLock { running in
            defer { running.append(directory) }
            return running.isEmpty
        }
        if first { atexit { TestPgBouncer.stopAll() } }
        do {
            // -d: it forks and the parent exits once it listens.
            try TestPostgres.run(binary, ["-d", directory + "/pgbouncer.ini"], asPostgres: asRoot)
            let deadline = ContinuousClock.now + .seconds(20)
            // Until it accepts a connection: its socket file appears a moment before it listens.
            while !Self.accepts(directory + "/.s.PGSQL.6432") {
                guard ContinuousClock.now < deadline else { throw PeerError("PgBouncer did not listen within 20 s: see \(directory)/pgbouncer.log") }
                Thread.sleep(forTimeInterval: 0.02)
            }
        } catch {
            stop()
            throw error
        }
    }

    /// Stops PgBouncer (SIGTERM, then SIGKILL if it is still running after 10 s) and removes its folder.
    public func stop() {
        Self.stop(directory)
        Self.running.withLock { $0.removeAll { $0 == directory } }
    }

    private static let running = Mutex<[String]>([])

    static func stopAll() {
        for directory in running.withLock({ $0 }) { stop(directory) }
    }

    private static func stop(_ directory: String) {
        if let text = try? String(contentsOfFile: directory + "/pgbouncer.pid", encoding: .utf8),
           let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(10)
            while isRunning(pid) && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
            if isRunning(pid) { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether a connection to the Unix socket at `path` is accepted.
    static func accepts(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    /// Whether `pid` runs: not gone, nor a zombie (the daemon's parent here may be an init that does not reap).
    static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let end = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: end)...].hasPrefix(" Z")
    }
}
