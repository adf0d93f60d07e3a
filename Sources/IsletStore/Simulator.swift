import Foundation
import IsletCore

/// Where the APNs simulator keeps its simulated devices, as JSON documents the simulator defines,
/// so that `islet simulator device add` and a running server see the same devices (issue 6).
public protocol SimulatorStore: Sendable {
    func simulatedDevices() throws(StoreError) -> [(application: ApplicationCode, hwid: String, state: String)]
    func simulatedDevice(application: ApplicationCode, hwid: String) throws(StoreError) -> String?
    /// One application's devices in HWID order, at most `limit` after the HWID `after`.
    func simulatedDevices(of application: ApplicationCode, after: String?, limit: Int) throws(StoreError) -> [(hwid: String, state: String)]
    /// Saves the device's document and indexes it by `tokens` (its push, push-to-start and update tokens), each
    /// of which finds this device alone.
    func saveSimulatedDevice(application: ApplicationCode, hwid: String, state: String, tokens: [String]) throws(StoreError)
    /// The device a token belongs to, found through the token index.
    func simulatedDevice(token: String) throws(StoreError) -> (application: ApplicationCode, hwid: String, state: String)?
    /// Devices saved before the token index existed (or copied without it), to index again.
    func unindexedSimulatedDevices() throws(StoreError) -> [(application: ApplicationCode, hwid: String, state: String)]
    /// The simulator's broadcast channels of an application in one environment (Apple's side of X5; nil: both): id
    /// and storage policy, oldest first.
    func simulatedChannels(application: ApplicationCode, gateway: Gateway?) throws(StoreError) -> [(id: String, policy: Int)]
    /// One channel's storage policy, read alone; nil when the simulator has no such channel in `gateway` (nil: in either).
    func simulatedChannelPolicy(application: ApplicationCode, id: String, gateway: Gateway?) throws(StoreError) -> Int?
    func saveSimulatedChannel(application: ApplicationCode, id: String, policy: Int, gateway: Gateway, at date: Date) throws(StoreError)
    /// Whether there was such a channel in `gateway` (nil: in either).
    func deleteSimulatedChannel(application: ApplicationCode, id: String, gateway: Gateway?) throws(StoreError) -> Bool
    /// The channel's last broadcast, kept until `keptUntil` for phones that subscribe later (storage policy 1); nil
    /// keeps nothing.
    func saveSimulatedChannelMessage(application: ApplicationCode, id: String, payload: [UInt8]?, keptUntil date: Date) throws(StoreError)
    func simulatedChannelMessage(application: ApplicationCode, id: String) throws(StoreError) -> (payload: [UInt8], keptUntil: Date)?
}
