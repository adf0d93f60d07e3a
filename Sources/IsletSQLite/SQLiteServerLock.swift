import Foundation
import IsletStore
import Synchronization

/// One `islet serve` per SQLite file: two servers would both claim the same messages and send some pushes
/// twice. The first server holds an exclusive lock on `<file>.serve-lock` (which names its process) for its
/// life; the kernel releases it when the process ends, however it ends. CLI commands do not take it.
public final class SQLiteServerLock: Sendable {
    private let descriptor = Mutex<Int32>(-1)
    public let path: String

    /// Takes the lock, or throws naming the process that holds it.
    public init(databasePath: String) throws(StoreError) {
        path = databasePath + ".serve-lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError(.io, "cannot open \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(fd)
            guard reason == EWOULDBLOCK else { throw StoreError(.io, "cannot lock \(path): \(String(cString: strerror(reason)))") }
            throw StoreError(.conflict, """
                another islet serve (\(holder.isEmpty ? "another process" : "pid \(holder)")) is using \(databasePath): one server per \
                SQLite file, or both would send some pushes. Stop it first, or run several servers on PostgreSQL (docs/PRODUCTION.md)
                """)
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { write(fd, $0, strlen($0)) }
        descriptor.withLock { $0 = fd }
    }

    /// Lets another server start on the file.
    public func release() {
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            _ = ftruncate(fd, 0)
            close(fd)
            fd = -1
        }
    }

    deinit { release() }
}
