import Foundation
import IsletCore
import IsletStore

/// Apple's channel management API as the simulator answers it (X5): `POST`, `GET` and `DELETE` of
/// `/1/apps/<bundle id>/channels` (the channel in `apns-channel-id`) and `GET /1/apps/<bundle id>/all-channels`,
/// with Apple's status codes and reasons; channels are kept in the simulator's store, per application and
/// environment (`gateway`: the listener the request came to).
struct SimulatedChannels {
    let store: any SimulatorStore
    let gateway: Gateway
    let now: @Sendable () -> Date

    /// Apple's limit per application and environment.
    static let limit = BroadcastChannels.limitPerEnvironment

    struct Answer {
        var status: Int
        var channelID: String? = nil
        var body: JSONValue? = nil
    }

    static func refusal(_ status: Int, _ reason: String) -> Answer { Answer(status: status, body: ["reason": .string(reason)]) }

    /// `path` is the request's path, `credential` the verified provider token's.
    func answer(method: String, path: String, channelID: String?, body: [UInt8], credential: SimulatorCredential) -> Answer {
        let prefix = "/1/apps/"
        let rest = path.dropFirst(prefix.count)
        guard let slash = rest.firstIndex(of: "/") else { return Self.refusal(404, "BadPath") }
        if let refusal = Self.topicRefusal(String(rest[..<slash]), credential: credential) { return Self.refusal(refusal.status, refusal.reason) }
        let application = credential.application
        do {
            switch (method, rest[rest.index(after: slash)...]) {
            case ("GET", "all-channels"):
                return Answer(status: 200, body: ["channels": .array(try store.simulatedChannels(application: application, gateway: gateway).map { .string($0.id) })])
            case ("POST", "channels"):
                return try create(body, application)
            case ("GET", "channels"), ("DELETE", "channels"):
                guard let channelID, !channelID.isEmpty else { return Self.refusal(400, "MissingChannelId") }
                guard let raw = Data(base64Encoded: channelID), !raw.isEmpty, channelID.utf8.count <= 64 else { return Self.refusal(400, "BadChannelId") }
                guard let policy = try store.simulatedChannelPolicy(application: application, id: channelID, gateway: gateway) else {
                    return Self.refusal(400, "ChannelNotRegistered")
                }
                if method == "GET" {
                    return Answer(status: 200, body: ["message-storage-policy": .int(Int64(policy)), "push-type": "LiveActivity"])
                }
                _ = try store.deleteSimulatedChannel(application: application, id: channelID, gateway: gateway)
                return Answer(status: 204)
            case (_, "channels"), (_, "all-channels"):
                return Self.refusal(405, "MethodNotAllowed")
            default:
                return Self.refusal(404, "BadPath")
            }
        } catch {
            return Self.refusal(500, "InternalServerError")
        }
    }

    /// Apple's checks of the bundle id in a path: a push type suffix is refused, and the provider token's bundle id
    /// must be the one in the path.
    static func topicRefusal(_ bundleID: String, credential: SimulatorCredential) -> (status: Int, reason: String)? {
        if bundleID.contains(".push-type.") { return (400, "TopicDisallowed") }
        if bundleID != credential.bundleID { return (403, "TopicMismatch") }
        return nil
    }

    private func create(_ body: [UInt8], _ application: ApplicationCode) throws -> Answer {
        guard let request = (try? JSONParser.parse(body))?.objectValue else { return Self.refusal(400, "BadRequestPayload") }
        guard request.keys.allSatisfy({ ["message-storage-policy", "push-type"].contains($0) }) else { return Self.refusal(400, "BadRequestParams") }
        guard let pushType = request["push-type"] else { return Self.refusal(400, "MissingPushType") }
        guard pushType == "LiveActivity" else { return Self.refusal(400, "InvalidPushType") }
        guard let policy = request["message-storage-policy"]?.intValue, policy == 0 || policy == 1 else {
            return Self.refusal(400, "BadMessageStoragePolicy")
        }
        guard try store.simulatedChannels(application: application, gateway: gateway).count < Self.limit else {
            return Self.refusal(400, "CannotCreateChannelConfig")
        }
        var generator = SystemRandomNumberGenerator()
        let id = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
        try store.saveSimulatedChannel(application: application, id: id, policy: Int(policy), gateway: gateway, at: now())
        return Answer(status: 201, channelID: id)
    }
}
