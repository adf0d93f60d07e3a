import Foundation
import IsletCore
import IsletStore
import Synchronization

/// How long delivery records and finished messages are kept, and how gently they are deleted.
public struct RetentionPolicy: Sendable, Equatable {
    /// Finished messages older than this (and their per-device records) are deleted; nil keeps everything.
    public var keep: Duration?
    /// Rows deleted per transaction: small, so API writes never wait long behind the pruner.
    public var batch = 500
    /// Pause between two batches, leaving the single SQLite writer to the API and delivery.
    public var pause: Duration = .milliseconds(20)
    /// How often the pruner looks for old records.
    public var every: Duration = .seconds(600)
    /// Broadcast channels unused this long are deleted, at Apple's and in Islet (X5); nil keeps them.
    public var idleChannels: Duration?

    public init(keep: Duration? = .seconds(30 * 86_400), idleChannels: Duration? = nil) {
        self.keep = keep
        self.idleChannels = idleChannels
    }
}

/// Deletes old delivery records and finished messages in small batches (issue 12), and channels left idle
/// (X5), on a thread of its own. Lifecycle: `start()`, then `shutdown(deadline:)`, which every wait honours.
public final class RetentionService: Service {
    let messages: any MessageStore
    let channels: IdleChannels?
    let policy: RetentionPolicy
    let logger: Logger
    let now: @Sendable () -> Date
    private let condition = NSCondition()
    /// Set once by `shutdown`.
    private let stopRequested = Mutex(false)
    private let threads = ServiceThreads()

    public init(messages: any MessageStore, channels: IdleChannels? = nil, policy: RetentionPolicy, logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.messages = messages
        self.channels = channels
        self.policy = policy
        self.logger = logger
        self.now = now
    }

    public func start() {
        guard policy.keep != nil || (policy.idleChannels != nil && channels != nil) else { return }
        threads.start("islet-retention") { [self] in
            while !stopping {
                pruneNow()
                deleteIdleChannels()
                wait(policy.every)
            }
        }
    }

    /// Deletes everything older than the policy keeps, batch by batch; stops early when shutting down.
    @discardableResult
    public func pruneNow() -> (deliveries: Int, messages: Int) {
        guard let keep = policy.keep else { return (0, 0) }
        let cutoff = now().addingTimeInterval(-keep.timeInterval)
        var total = (deliveries: 0, messages: 0)
        while !stopping {
            do {
                let pruned = try messages.pruneFinished(before: cutoff, limit: policy.batch)
                guard pruned.deliveries + pruned.messages > 0 else { break }
                total.deliveries += pruned.deliveries
                total.messages += pruned.messages
            } catch {
                logger.error("retention: could not delete old records; trying again later", ["error": .string("\(error)")])
                break
            }
            wait(policy.pause)
        }
        if total.deliveries + total.messages > 0 {
            logger.info("retention: deleted old records", ["messages": .int(Int64(total.messages)), "deliveries": .int(Int64(total.deliveries)),
                                                           "finished_before": .string(cutoff.formatted(.iso8601))])
        }
        return total
    }

    /// X5: deletes the channels unused for `policy.idleChannels`, each at Apple's and then in Islet, oldest
    /// application first. A refusal (a bad APNs key, say) leaves that application's channels for the next look,
    /// so one application cannot hold up the others; no answer from Apple ends the look. How many were deleted.
    @discardableResult
    public func deleteIdleChannels() -> Int {
        guard let idle = policy.idleChannels, let channels else { return 0 }
        var deleted = 0
        var refused: Set<ApplicationCode> = []
        while !stopping {
            let cutoff = now().addingTimeInterval(-idle.timeInterval)
            let found: [(application: ApplicationCode, record: ChannelRecord)]
            do {
                found = try channels.store.idleChannels(unusedSince: cutoff, excluding: refused, limit: 100)
            } catch {
                logger.error("retention: could not look for idle channels; trying again later", ["error": .string("\(error)")])
                return deleted
            }
            guard !found.isEmpty else { return deleted }
            for (application, record) in found where !stopping && !refused.contains(application) {
                do {
                    // Read again just before: a broadcast or start may have used it since the list was read.
                    guard let current = try channels.store.channel(named: record.name, in: application),
                          current.idleSince < cutoff else { continue }
                    guard let bundleID = try channels.applications.application(application)?.bundleID else {
                        refused.insert(application)
                        continue
                    }
                    try channels.deletion.delete(current, application: application, bundleID: bundleID)
                    channels.deleted(application, record.name)
                    deleted += 1
                    logger.info("retention: deleted an idle channel", [
                        "application": .string(application.rawValue), "channel": .string(record.name),
                        "last_used_at": .string(current.idleSince.formatted(.iso8601)),
                    ])
                } catch {
                    logger.warning("retention: could not delete an idle channel; this application's are left for the next look", [
                        "application": .string(application.rawValue), "channel": .string(record.name), "error": .string("\(error)"),
                    ])
                    // Apple unreachable or overloaded: the rest waits for the next look rather than each waiting out its timeout.
                    if (error as? APIError)?.code == .unavailable { return deleted }
                    refused.insert(application)
                }
            }
        }
        return deleted
    }

    /// Stops the pruner; true when its thread ended by `deadline`.
    @discardableResult
    public func shutdown(deadline: ContinuousClock.Instant = .now + .seconds(5)) -> Bool {
        condition.lock()
        stopRequested.withLock { $0 = true }
        condition.broadcast()
        condition.unlock()
        return threads.waitForExit(by: deadline)
    }

    private var stopping: Bool { stopRequested.withLock { $0 } }

    private func wait(_ duration: Duration) {
        condition.lock()
        defer { condition.unlock() }
        let until = Date().addingTimeInterval(duration.timeInterval)
        while !stopping && Date() < until { _ = condition.wait(until: until) }
    }
}
