import Foundation
import Synchronization

/// The PostgreSQL server the tests use: `ISLET_TEST_POSTGRES_URL` when set (a database on an existing
/// server, whose user may create schemas in it), else a throwaway cluster this test process starts on first
/// use (initdb in a temporary folder, a Unix socket there and no TCP port at all) and removes when it exits.
/// As root it runs as the `postgres` user, since PostgreSQL refuses to run as root. Each test gets a schema.
public enum TestPostgres {
    /// The server's database URL, or why none could be had.
    private static let server: Result<Server, PeerError> = Result(catching: { try Server.start() }).mapError { $0 as? PeerError ?? PeerError("\($0)") }

    struct Server: Sendable {
        /// The database the tests' schemas go in.
        let url: String
        let socketDirectory: String?
        let binaries: String

        static func start() throws -> Server {
            let binaries = try binDirectory()
            if let given = ProcessInfo.processInfo.environment["ISLET_TEST_POSTGRES_URL"], !given.isEmpty {
                return Server(url: given, socketDirectory: nil, binaries: binaries)
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-pg-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let asRoot = getuid() == 0
            if asRoot { try run("/bin/chown", ["postgres:postgres", directory]) }
            let data = directory + "/data"
            try run(binaries + "/initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"], asPostgres: asRoot)
            // Durability of this throwaway cluster is not under test (Islet's own is): fsync off keeps the suite fast.
            try run(binaries + "/pg_ctl", ["-D", data, "-w", "-s", "-l", directory + "/server.log", "-o",
                                           "-c listen_addresses='' -k \(directory) -c fsync=off -c max_connections=200", "start"], asPostgres: asRoot)
            cluster.withLock { $0 = (data, directory, binaries, asRoot) }
            atexit { TestPostgres.stopCluster() }
            return Server(url: "postgresql:///postgres?host=\(directory)&user=postgres", socketDirectory: directory, binaries: binaries)
        }
    }

    private static let cluster = Mutex<(data: String, directory: String, binaries: String, asRoot: Bool)?>(nil)

    /// Stops the tests' own clusters still running at exit.
    static func stopPrivateClusters() {
        for running in privateClusters.withLock({ $0 }) {
            try? run(running.binaries + "/pg_ctl", ["-D", running.data, "-m", "immediate", "-s", "stop"], asPostgres: running.asRoot)
            try? FileManager.default.removeItem(atPath: running.directory)
        }
    }

    /// Stops the throwaway cluster (immediately: its data is thrown away) and removes its folder.
    static func stopCluster() {
        guard let running = cluster.withLock({ $0 }) else { return }
        try? run(running.binaries + "/pg_ctl", ["-D", running.data, "-m", "immediate", "-s", "stop"], asPostgres: running.asRoot)
        try? FileManager.default.removeItem(atPath: running.directory)
    }

    /// A new, empty database of the test's own: a schema of the server's database, which the URL puts first on
    /// the search path (a schema costs a millisecond, a database a checkpoint). `Database.drop` removes it, or
    /// the throwaway cluster goes with it at exit.
    public static func createDatabase() throws -> Database {
        let server = try server.get()
        let name = "islet_\(UUID().uuidString.prefix(13).lowercased().replacingOccurrences(of: "-", with: ""))"
        try psql(server, "CREATE SCHEMA \(name)")
        return Database(name: name, url: schemaURL(server, name))
    }

    public struct Database: Sendable {
        /// The schema's name.
        public let name: String
        public let url: String

        public init(name: String, url: String) {
            self.name = name
            self.url = url
        }

        /// Removes the schema from a given server. A throwaway cluster's schemas go with it at exit.
        public func drop() {
            guard let server = try? TestPostgres.server.get(), server.socketDirectory == nil else { return }
            try? TestPostgres.psql(server, "DROP SCHEMA IF EXISTS \(name) CASCADE")
        }
    }

    /// Runs one SQL command on the server's database, as the tests' user.
    public static func administer(_ sql: String) throws {
        try psql(try server.get(), sql)
    }

    /// Loads a plain-format `pg_dump` of one schema, `schema`, as the test database `database` (made by
    /// `createDatabase`, whose empty schema it replaces): the dump's schema name is rewritten to the database's.
    public static func load(dump path: String, schema: String, into database: Database) throws {
        let server = try server.get()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let rewritten = try NSRegularExpression(pattern: "\\b\(NSRegularExpression.escapedPattern(for: schema))\\b")
            .stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: database.name)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("islet-dump-\(UUID().uuidString).sql")
        try rewritten.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        try psql(server, "DROP SCHEMA \(database.name) CASCADE")
        try run(server.binaries + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", server.url, "-f", file.path])
    }

    /// A PostgreSQL cluster of one test's own (initdb in a temporary folder, a Unix socket there, no TCP port),
    /// for a test that restarts the server under its clients; stopped and removed by `stop()` or at exit.
    public final class PrivateCluster: Sendable {
        public let url: String
        let data: String
        let directory: String
        let binaries: String
        let asRoot: Bool

        public init() throws {
            binaries = try binDirectory()
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-pgc-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            asRoot = getuid() == 0
            if asRoot { try TestPostgres.run("/bin/chown", ["postgres:postgres", directory]) }
            data = directory + "/data"
            try TestPostgres.run(binaries + "/initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                                 asPostgres: asRoot)
            url = "postgresql:///postgres?host=\(directory)&user=postgres"
            try start()
            let started = (data, directory, binaries, asRoot)
            let first = TestPostgres.privateClusters.withLock { clusters in
                defer { clusters.append(started) }
                return clusters.isEmpty
            }
            if first { atexit { TestPostgres.stopPrivateClusters() } }
        }

        /// Starts the server; fsync stays on: this cluster's restarts are what its test is about.
        public func start() throws {
            try TestPostgres.run(binaries + "/pg_ctl", ["-D", data, "-w", "-s", "-l", directory + "/server.log", "-o",
                                                        "-c listen_addresses='' -k \(directory) -c max_connections=200", "start"], asPostgres: asRoot)
        }

        /// Stops the server at once (`immediate`: as a crash, recovery at the next start) or cleanly.
        public func stopServer(immediate: Bool) throws {
            try TestPostgres.run(binaries + "/pg_ctl", ["-D", data, "-m", immediate ? "immediate" : "fast", "-s", "-w", "stop"], asPostgres: asRoot)
        }

        /// Runs one SQL command on the cluster.
        public func administer(_ sql: String) throws {
            try TestPostgres.run(binaries + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        }

        public func stop() {
            try? stopServer(immediate: true)
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    private static let privateClusters = Mutex<[(data: String, directory: String, binaries: String, asRoot: Bool)]>([])

    /// The server's URL with `search_path` set to `schema` (libpq's `options` parameter).
    private static func schemaURL(_ server: Server, _ schema: String) -> String {
        let separator = server.url.contains("?") ? "&" : "?"
        return server.url + separator + "options=-csearch_path%3D\(schema)"
    }

    private static func psql(_ server: Server, _ sql: String) throws {
        try run(server.binaries + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", server.url, "-c", sql])
    }

    static func binDirectory() throws -> String {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard let newest = versions.compactMap(Int.init).max() else {
            throw PeerError("no PostgreSQL server in /usr/lib/postgresql: run scripts/install-deps --test (make test does)")
        }
        return "/usr/lib/postgresql/\(newest)/bin"
    }

    /// Runs a PostgreSQL program to its end. Not through Foundation's Process: it sees a child end when an
    /// inherited descriptor closes, and the server that `pg_ctl start` leaves running would hold it open. The
    /// child gets only stdin, stdout and stderr (stderr into a file), so the server holds nothing of this process.
    static func run(_ executable: String, _ arguments: [String], asPostgres: Bool = false) throws {
        let argv = asPostgres ? ["/usr/sbin/runuser", "-u", "postgres", "--", executable] + arguments : [executable] + arguments
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("islet-pg-run-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: errors) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Every other descriptor of this process (glibc's closefrom action is not visible to Swift).
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap(Int32.init).filter { $0 > 2 }
        for descriptor in open { posix_spawn_file_actions_addclose(&actions, descriptor) }
        // No signal blocked: a spawn inherits the calling thread's mask, and a daemon left with SIGTERM blocked
        // (PgBouncer) would ignore its stop.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        var pid: pid_t = 0
        let status = argv.withCStrings { pointers in
            posix_spawn(&pid, argv[0], &actions, &attributes, UnsafeMutablePointer(mutating: pointers), environ)
        }
        guard status == 0 else { throw PeerError("cannot start \(argv[0]): \(String(cString: strerror(status)))") }
        var exit: Int32 = 0
        while waitpid(pid, &exit, 0) == -1 && errno == EINTR {}
        guard exit == 0 else {
            let message = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw PeerError("\(argv.joined(separator: " ")) failed (status \(exit)): \(message)")
        }
    }
}

extension Array where Element == String {
    /// The strings as a NULL-terminated array of C strings, for the length of `body`.
    func withCStrings<R>(_ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        let copies = map { strdup($0) } + [nil]
        defer { copies.forEach { free($0) } }
        return copies.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
