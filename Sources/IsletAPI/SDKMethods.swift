import Foundation
import IsletCore
import IsletStore

/// The rest of the Pushwoosh SDKs' calls (issue 45): an app open and a User ID, kept for the device whether or not it
/// has registered; the device's receipts of its pushes; and the calls for features Islet does not have, answered in
/// the shape the SDK reads (`SDKCalls`).
public struct SDKMethods: Sendable {
    let devices: any DeviceStore
    let receipts: any DeviceReceipts

    public init(devices: any DeviceStore, receipts: any DeviceReceipts) {
        self.devices = devices
        self.receipts = receipts
    }

    public var all: [APIMethod] {
        [applicationOpen, registerUser, receipt(.received), receipt(.opened)]
            + SDKCalls.answeredEmpty.keys.sorted().map { name in
                APIMethod(name: name, access: .device, effect: .reads) { _ in SDKCalls.answeredEmpty[name] ?? [:] }
            }
    }

    /// `applicationOpen`: the app was launched. Its language, timezone and OS version are kept for the device (created
    /// without a push token if it has not registered), and the time, as its last sign of life (getDeviceHealth).
    var applicationOpen: APIMethod {
        APIMethod(name: "applicationOpen", access: .device) { [devices] call in
            let body = call.request
            let note = DeviceNote(hwid: try DeviceMethods.hwid(body), language: try DeviceMethods.shortText(body, "language"),
                                  timezone: try DeviceMethods.shortText(body, "timezone"), osVersion: try DeviceMethods.shortText(body, "os_version"),
                                  appOpened: true)
            try devices.noteDevice(note, in: call.application.code, at: call.receivedAt)
            return [:]
        }
    }

    /// `registerUser`: the device's User ID (`userId`), as registerDevice sets it, and under the same rule (issue 44):
    /// an application that takes User IDs from its server only does not store one sent with the device token, and says so.
    var registerUser: APIMethod {
        APIMethod(name: "registerUser", access: .device) { [devices] call in
            let hwid = try DeviceMethods.hwid(call.request)
            guard let userID = try DeviceMethods.shortText(call.request, "userId") else {
                throw APIError.invalid("userId", "is required: the User ID to give the device")
            }
            guard call.application.userIDSource.accepts(byServer: call.tokenKind == .api) else {
                return ["warnings": [.string(UserIDSource.ignoredByRegisterUserWarning)]]
            }
            try devices.noteDevice(DeviceNote(hwid: hwid, userID: userID), in: call.application.code, at: call.receivedAt)
            return [:]
        }
    }

    /// `messageDeliveryEvent` and `pushStat`: the device's receipt of a push, by the hash it carried (`p`: the message's
    /// code, which Islet's fallback alerts carry). Always answered 200, as Pushwoosh does: a receipt of a push Islet did
    /// not send (another provider's, or one not recorded yet) is not kept, and the answer says so.
    func receipt(_ kind: SDKCalls.Receipt) -> APIMethod {
        APIMethod(name: kind.method, access: .device) { [receipts] call in
            let hwid = try DeviceMethods.hwid(call.request)
            guard let hash = try call.request.lenientString("hash"), !hash.isEmpty else { return ["kept": false] }
            guard hash.count <= 64 else { throw APIError.invalid("hash", "must be at most 64 characters") }
            let kept = try receipts.recordReceipt(kind, messageCode: hash, hwid: hwid, in: call.application.code, at: call.receivedAt)
            return ["kept": .bool(kept)]
        }
    }
}
