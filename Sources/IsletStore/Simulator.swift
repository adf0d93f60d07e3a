import IsletCore

/// Where the APNs simulator keeps its simulated devices, as JSON documents the simulator defines,
/// so that `islet simulator device add` and a running server see the same devices (issue 6).
public protocol SimulatorStore: Sendable {
    func simulatedDevices() throws(StoreError) -> [(application: ApplicationCode, hwid: String, state: String)]
    func simulatedDevice(application: ApplicationCode, hwid: String) throws(StoreError) -> String?
    func saveSimulatedDevice(application: ApplicationCode, hwid: String, state: String) throws(StoreError)
}
