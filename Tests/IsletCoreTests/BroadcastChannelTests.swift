import Foundation
import Testing
import IsletCore

/// X5: what createLiveActivityChannel accepts, and what Apple's refusals become for the caller.
@Suite("Broadcast channel requests (X5)")
struct BroadcastChannelRequestTests {
    func parse(_ request: JSONValue) throws -> BroadcastChannels.NewChannel {
        try BroadcastChannels.newChannel(try FieldReader(request, path: ""))
    }

    @Test func defaultsAndChoices() throws {
        let defaults = try parse(["name": "match-42"])
        #expect(defaults.name == "match-42" && defaults.policy == .none && defaults.gateways == [.production, .sandbox])
        #expect(try parse(["name": "a.b_c-1", "storage_policy": "most_recent", "environment": "sandbox"]).gateways == [.sandbox])
        #expect(BroadcastChannels.createBody(.mostRecent).jsonText == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
        #expect(BroadcastChannels.StoragePolicy(apple: 1) == .mostRecent && BroadcastChannels.StoragePolicy(apple: 2) == nil)
    }

    @Test func applesRefusalsNameWhatToDo() {
        let silent = BroadcastChannels.appleRefusal(action: "create", name: "m", gateway: .sandbox, status: 0, reason: "connection lost")
        #expect(silent.code == .unavailable && silent.message == "APNs (sandbox) did not create channel 'm': no answer (connection lost); retry later")
        #expect(BroadcastChannels.appleRefusal(action: "create", name: "m", gateway: .production, status: 400, reason: "CannotCreateChannelConfig").code == .badRequest)
        #expect(BroadcastChannels.appleRefusal(action: "delete", name: "m", gateway: .production, status: 503, reason: nil).code == .unavailable)
        #expect(BroadcastChannels.appleRefusal(action: "create", name: "m", gateway: .production, status: 403, reason: "InvalidProviderToken").message
                == "application: APNs (production) did not create channel 'm': InvalidProviderToken, Apple refused the application's APNs key or bundle id")
    }
}
