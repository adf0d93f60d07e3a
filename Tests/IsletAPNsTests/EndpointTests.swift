import Foundation
import Testing
@testable import IsletAPNs
import IsletCore

/// A1 and X5: which host and port each kind of request goes to.
@Suite("APNs endpoints")
struct EndpointTests {
    @Test func pushesAndChannelManagementGoToApplesHostsForEachEnvironment() throws {
        let apple = APNsClientConfiguration()
        #expect(apple.endpoint(.production) == ("api.push.apple.com", 443) && apple.endpoint(.sandbox) == ("api.sandbox.push.apple.com", 443))
        #expect(apple.endpoint(.production, service: .broadcast) == ("api-broadcast.push.apple.com", 443))
        #expect(apple.endpoint(.sandbox, service: .broadcast) == ("api-broadcast.sandbox.push.apple.com", 443))
        #expect(apple.endpoint(.production, service: .management) == ("api-manage-broadcast.push.apple.com", 2196))
        #expect(apple.endpoint(.sandbox, service: .management) == ("api-manage-broadcast.sandbox.push.apple.com", 2195))
        let local = APNsClientConfiguration(overrideURL: URL(string: "https://127.0.0.1:8443"))
        #expect(local.endpoint(.sandbox, service: .management) == ("127.0.0.1", 8443) && local.endpoint(.production, service: .broadcast) == ("127.0.0.1", 8443),
                "--apns-url takes every request")
        var simulator = local
        simulator.sandboxOverrideURL = URL(string: "https://127.0.0.1:8444")
        #expect(simulator.endpoint(.sandbox, service: .management) == ("127.0.0.1", 8444) && simulator.endpoint(.sandbox) == ("127.0.0.1", 8444)
                && simulator.endpoint(.production, service: .broadcast) == ("127.0.0.1", 8443), "the simulator's two environments")
    }
}
