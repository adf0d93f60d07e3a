import Foundation
import IsletStore
import Synchronization

/// One `islet serve` per SQLite file: two servers would both claim the same messages and send some pushes
/// twice. The first server holds an exclusive `flock` on the database file itself for its life, so every name of
/// the file (a symlink, a hard link, a bind mount) meets the same lock; the kernel releases it when the process
/// ends, however it ends. Beside the file's real path, `<file>.serve-lock` names the holding process for the
/// refusal. CLI commands do not take it.
///
/// `flock` locks are apart from the POSIX locks SQLite takes on the file, but closing any descriptor of a file drops
/// every POSIX lock the process holds on it, SQLite's included: so the descriptor that holds the lock is never closed.
/// `release` unlocks it, and the next lock of the same file in this process takes it again.
public final class SQLiteServerLock: Sendable {
    /// The file's identity, while this lock holds it; nil once released.
    private let held = Mutex<FileIdentity?>(nil)
    /// The pid file, beside the database file's real path.
    public let path: String

    /// Takes the lock, or throws naming the process that holds it. Creates the database file (readable by its
    /// owner only, as `SQLiteDatabase` does) when it does not exist yet.
    public init(databasePath: String) throws(StoreError) {
        let identity = try Self.files.withLock { (files: inout Files) throws(StoreError) -> FileIdentity in
            // The file's identity first, by its name: a descriptor of it this process kept is used again, as opening a
            // second one would mean closing one of them some day.
            var status = stat()
            if stat(databasePath, &status) == 0, files.descriptors[FileIdentity(status)] != nil { return FileIdentity(status) }
            let fd = Foundation.open(databasePath, O_RDONLY | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0, fstat(fd, &status) == 0 else { throw StoreError(.io, "cannot open \(databasePath): \(String(cString: strerror(errno)))") }
            let identity = FileIdentity(status)
            // Replaced between the two looks: the descriptor kept for its identity stays; this one is left open too.
            if files.descriptors[identity] == nil { files.descriptors[identity] = fd }
            return identity
        }
        path = (Self.realPath(databasePath) ?? databasePath) + ".serve-lock"
        let taken = Self.files.withLock { files -> (Bool, Int32) in
            guard let fd = files.descriptors[identity] else { return (false, EBADF) }
            // A lock on an open file description is taken again by its holder: this process's own second server
            // is refused by `held`, another process's by the kernel.
            if files.held.contains(identity) { return (false, EWOULDBLOCK) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return (false, errno) }
            files.held.insert(identity)
            return (true, 0)
        }
        guard taken.0 else {
            guard taken.1 == EWOULDBLOCK else { throw StoreError(.io, "cannot lock \(databasePath): \(String(cString: strerror(taken.1)))") }
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            throw StoreError(.conflict, """
                another islet serve (\(holder.isEmpty ? "another process" : "pid \(holder)")) is using \(databasePath): one server per \
                SQLite file, or both would send some pushes. Stop it first, or run several servers on PostgreSQL (docs/PRODUCTION.md)
                """)
        }
        held.withLock { $0 = identity }
        let pidFile = Foundation.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if pidFile >= 0 {
            let pid = "\(getpid())\n"
            _ = pid.withCString { write(pidFile, $0, strlen($0)) }
            close(pidFile)
        }
    }

    /// A file as the kernel knows it, whatever its name.
    struct FileIdentity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
        }
    }

    /// A descriptor of each database file this process locked once, never closed (see the type's note), and the
    /// files a lock of this process holds now.
    private struct Files {
        var descriptors: [FileIdentity: Int32] = [:]
        var held: Set<FileIdentity> = []
    }
    private static let files = Mutex(Files())

    /// The path with every symlink resolved; nil when it cannot be resolved.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Lets another server start on the file.
    public func release() {
        guard let identity = held.withLock({ held in defer { held = nil }; return held }) else { return }
        let pidFile = Foundation.open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        if pidFile >= 0 { close(pidFile) }
        Self.files.withLock { files in
            if let fd = files.descriptors[identity] { _ = flock(fd, LOCK_UN) }
            files.held.remove(identity)
        }
    }

    deinit { release() }
}
