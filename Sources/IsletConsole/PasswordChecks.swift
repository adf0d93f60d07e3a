import Synchronization

/// At most `limit` console password checks at once. A check is CPU (PBKDF2), run on the HTTP workers every API call
/// shares: a flood of sign-ins from many addresses, each within its address's rate limit, would otherwise take every
/// worker and core. A check over the limit is not queued (a queued one still holds its worker): it is refused at once.
final class PasswordChecks: Sendable {
    let limit: Int
    private let running = Atomic<Int>(0)

    init(limit: Int) { self.limit = max(1, limit) }

    /// Runs `check` if fewer than `limit` run now; nil, having run nothing, otherwise.
    func run<T>(_ check: () -> T) -> T? {
        var current = running.load(ordering: .relaxed)
        while true {
            guard current < limit else { return nil }
            let (exchanged, original) = running.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        defer { running.subtract(1, ordering: .releasing) }
        return check()
    }

    /// Checks running now.
    var inProgress: Int { running.load(ordering: .relaxed) }
}
