import Foundation

/// Debian's PgBouncer in front of a test's own PostgreSQL cluster, on a Unix socket of its own folder (no TCP
/// port), for the tests of what Islet needs of a pooler. As root it runs as `postgres` (it refuses root).
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
        // -d: it forks and the parent exits once it listens.
        try TestPostgres.run(binary, ["-d", directory + "/pgbouncer.ini"], asPostgres: asRoot)
        url = "postgresql:///postgres?host=\(directory)&port=6432&user=postgres"
        let deadline = ContinuousClock.now + .seconds(20)
        while !FileManager.default.fileExists(atPath: directory + "/.s.PGSQL.6432") {
            guard ContinuousClock.now < deadline else { throw PeerError("PgBouncer did not listen within 20 s: see \(directory)/pgbouncer.log") }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// Stops PgBouncer (waiting for it to exit) and removes its folder.
    public func stop() {
        if let text = try? String(contentsOfFile: directory + "/pgbouncer.pid", encoding: .utf8), let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(10)
            while Self.isRunning(pid) && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether `pid` runs: not gone, nor a zombie (the daemon's parent here may be an init that does not reap).
    static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let end = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: end)...].hasPrefix(" Z")
    }
}
