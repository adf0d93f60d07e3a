import IsletStore
import Synchronization

/// The credentials (a token and its application) of recent API calls, so that a call authenticates without
/// a database read. A change made through the store that owns the cache drops every entry when it ends; a
/// change made elsewhere (another node, the `islet` command) is seen once the entry's `lifetime` has passed.
/// Unknown tokens are not kept: a token created elsewhere works at once.
public final class CredentialCache: Sendable {
    public typealias Credential = (token: TokenRecord, application: Application)

    struct Entry {
        let credential: Credential
        let until: ContinuousClock.Instant
    }

    struct State {
        var entries: [[UInt8]: Entry] = [:]
        /// Counts the changes: a read that began before one is not kept after it.
        var generation = 0
    }

    private let state = Mutex(State())
    let lifetime: Duration
    let capacity: Int

    public init(lifetime: Duration = .seconds(1), capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The credential of the token whose hash is `hash`: cached, or `read` from the database and kept.
    public func value(for hash: [UInt8], now: ContinuousClock.Instant = .now,
                      read: () throws(StoreError) -> Credential?) throws(StoreError) -> Credential? {
        let (cached, generation) = state.withLock { ($0.entries[hash], $0.generation) }
        if let cached, now < cached.until { return cached.credential }
        guard let fresh = try read() else { return nil }
        state.withLock { state in
            guard state.generation == generation else { return }
            // Bounded: a flood of distinct valid tokens starts the cache over rather than growing it.
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[hash] = Entry(credential: fresh, until: now + lifetime)
        }
        return fresh
    }

    /// Drops every entry, and whatever reads in progress would have kept.
    public func invalidate() {
        state.withLock { state in
            state.generation += 1
            state.entries.removeAll()
        }
    }
}
