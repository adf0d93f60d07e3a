import Foundation
import IsletCore

/// Hands each push to the service that delivers it (issue 46): Android pushes (`PushType.isFCM`) to FCM, every other
/// to APNs. A batch of one kind goes straight through; a mixed batch is split and its outcomes put back in order.
public struct PushRouter: PushTransport {
    public let apns: any PushTransport
    public let fcm: any PushTransport

    public init(apns: any PushTransport, fcm: any PushTransport) {
        self.apns = apns
        self.fcm = fcm
    }

    public func send(_ pushes: [Push], deadline: ContinuousClock.Instant) -> [PushOutcome] {
        submit(pushes, deadline: deadline, writeBy: nil, bulk: false).wait(deadline: deadline + .seconds(2))
    }

    public func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?) -> PendingOutcomes {
        submit(pushes, deadline: deadline, writeBy: writeBy, bulk: false)
    }

    public func submit(_ pushes: [Push], deadline: ContinuousClock.Instant, writeBy: ContinuousClock.Instant?, bulk: Bool) -> PendingOutcomes {
        let android = pushes.indices.filter { pushes[$0].pushType.isFCM }
        if android.isEmpty { return apns.submit(pushes, deadline: deadline, writeBy: writeBy, bulk: bulk) }
        if android.count == pushes.count { return fcm.submit(pushes, deadline: deadline, writeBy: writeBy, bulk: bulk) }
        let apple = pushes.indices.filter { !pushes[$0].pushType.isFCM }
        let fromAPNs = apns.submit(apple.map { pushes[$0] }, deadline: deadline, writeBy: writeBy, bulk: bulk)
        let fromFCM = fcm.submit(android.map { pushes[$0] }, deadline: deadline, writeBy: writeBy, bulk: bulk)
        let pending = PendingOutcomes(count: pushes.count)
        Thread.detachNewThread {
            for (index, outcome) in zip(apple, fromAPNs.wait(deadline: deadline + .seconds(2))) { pending.fulfil(index, outcome) }
            for (index, outcome) in zip(android, fromFCM.wait(deadline: deadline + .seconds(2))) { pending.fulfil(index, outcome) }
        }
        return pending
    }
}
