import Synchronization

/// At most `limit` runs of some costly work at once, and at most `perKey` of them for one key (an application): work
/// that holds a shared HTTP worker for its whole run (a password hash, a request to Apple that may never be answered)
/// must not take every worker, nor may one key take every slot. Work over a limit is not queued (queued, it would
/// still hold its worker): it is refused at once, and its caller answers "busy, retry".
public final class AtOnceLimit: Sendable {
    public let limit: Int
    public let perKey: Int
    private let running = Mutex<(total: Int, byKey: CountsByKey)>((0, CountsByKey()))

    public init(limit: Int, perKey: Int? = nil) {
        self.limit = max(1, limit)
        self.perKey = max(1, min(perKey ?? limit, limit))
    }

    /// Runs `work` if fewer than `limit` run now, and fewer than `perKey` for `key`; nil, having run nothing, otherwise.
    public func run<T>(key: String = "", _ work: () throws -> T) rethrows -> T? {
        let admitted = running.withLock { running -> Bool in
            guard running.total < limit, running.byKey[key] < perKey else { return false }
            running.total += 1
            running.byKey.add(1, to: key)
            return true
        }
        guard admitted else { return nil }
        defer {
            running.withLock { running in
                running.total -= 1
                running.byKey.remove(1, from: key)
            }
        }
        return try work()
    }

    /// Runs now, in all.
    public var inProgress: Int { running.withLock { $0.total } }
}
