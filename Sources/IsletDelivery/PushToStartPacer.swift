import Foundation
import IsletCore
import Synchronization

/// A12 on this node: each device's push-to-start slots of the last minute, sent or promised. Starts to
/// named devices (`devices`, `users`) are paced; a fan-out by filter is not, as it sends each device one
/// and tracking every device of a million-device start would cost a million entries. Another node, or a
/// restart, does not see these slots: at worst a device gets twice the pace once.
final class PushToStartPacer: Sendable {
    let pacing: PushToStartPacing
    private let slots = Mutex<[Int64: [Date]]>([:])

    init(pacing: PushToStartPacing) { self.pacing = pacing }

    /// Takes the device's next slot: nil when it is now (send), else the time to hold the push until.
    func admit(_ device: Int64, now: Date) -> Date? {
        guard pacing.perMinute > 0 else { return nil }
        return slots.withLock { all in
            let kept = (all[device] ?? []).filter { $0 > now.addingTimeInterval(-PushToStartPacing.window) }
            let slot = pacing.nextSlot(after: kept, now: now)
            all[device] = kept + [slot]
            // Devices whose slots all passed are forgotten now and then, so the map stays as small as the last minute's starts.
            if all.count > 10_000 && all.count.isMultiple(of: 1_000) {
                all = all.filter { $0.value.contains { $0 > now.addingTimeInterval(-PushToStartPacing.window) } }
            }
            return slot > now ? slot : nil
        }
    }
}
