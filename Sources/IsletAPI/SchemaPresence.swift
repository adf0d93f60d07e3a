import Foundation
import IsletCore
import IsletStore
import Synchronization

/// Which applications may have activities started with a schema (X2), so an update of an application that never saved
/// one makes no read of its activity's schema before it is offered to the store: one round trip and one transaction a
/// call fewer. Only a hint: the store refuses an update whose check does not hold for its activity
/// (`SchemaCheckOutdated`), and the caller then reads and checks, as for an application with schemas.
final class SchemaPresence: Sendable {
    private let known = Mutex<[ApplicationCode: (hasSchemas: Bool, readAt: ContinuousClock.Instant)]>([:])
    /// How long an answer is kept before it is read again.
    static let lifetime: Duration = .seconds(60)

    /// Whether an activity of `application` may have started with a schema: read at most once a `lifetime`.
    func mayHaveSchemas(_ application: ApplicationCode, _ schemas: any SchemaStore) throws(StoreError) -> Bool {
        let now = ContinuousClock.now
        if let entry = known.withLock({ $0[application] }), now - entry.readAt < Self.lifetime { return entry.hasSchemas }
        let has = try schemas.hasSchemas(in: application)
        known.withLock { $0[application] = (has, now) }
        return has
    }

    /// An update of `application` was refused for a schema it was not checked against: it has schemas.
    func sawSchemas(_ application: ApplicationCode) {
        known.withLock { $0[application] = (true, .now) }
    }
}
