import Foundation
import Testing
import IsletHTTP
@testable import IsletApp

/// Where the router runs each request: writes wait for their durable commit on a worker (so concurrent
/// writes share a sync, issue 13), local reads answer on the connection's thread, and on PostgreSQL every
/// storage call waits on a worker (each is a network round trip). A start or an update on a local database is
/// answered later: its thread hands the write to the group commit, whose leader answers it (issue 43).
@Suite("Where requests run")
struct ExecutionPlacementTests {
    static func post(_ method: String) -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/json/1.3/\(method)")
    }

    @Test func writesRunOnWorkersAndLocalReadsAtOnce() throws {
        let running = try RunningServer()
        let router = running.server.router
        for write in ["registerDevice", "unregisterDevice", "setTags", "setActivityToken", "setActivityPushToStartToken",
                      "deleteMessage", "createFilter", "deleteFilter",
                      "setLiveActivitySchema", "deleteLiveActivitySchema"] {
            #expect(router.execution(for: Self.post(write)) == .workerPool, "\(write)")
        }
        for answeredLater in ["startLiveActivity", "updateLiveActivity"] {
            #expect(router.execution(for: Self.post(answeredLater)) == (IntegrationEngine.isPostgreSQL ? .workerPool : .later), "\(answeredLater)")
        }
        #expect(router.execution(for: HTTPRequest(method: "GET", path: "/json/1.3/updateLiveActivity")) == .workerPool, "a wrong verb: its 405 on a worker")
        let reads = ["getTags", "getApplication", "getLiveActivity", "getMessageDetails", "listFilters", "getLiveActivitySchemas"]
        for read in reads {
            #expect(router.execution(for: Self.post(read)) == (IntegrationEngine.isPostgreSQL ? .workerPool : .connectionThread), "\(read)")
        }
        for path in ["/healthz", "/metrics"] {
            #expect(router.execution(for: HTTPRequest(method: "GET", path: path)) == (IntegrationEngine.isPostgreSQL ? .workerPool : .connectionThread), "\(path)")
        }
        #expect(router.execution(for: HTTPRequest(method: "GET", path: "/openapi.json")) == .connectionThread)
        #expect(router.execution(for: Self.post("noSuchMethod")) == .connectionThread, "an unknown method is a 404 answered at once")
        #expect(router.execution(for: HTTPRequest(method: "POST", path: "/simulator/devices")) == .workerPool, "the simulator adds devices")
    }

    @Test func unfinishedRequestsAreAnsweredInTheEnvelope() throws {
        let running = try RunningServer()
        let router = running.server.router
        for started in [false, true] {
            let response = router.unfinished(Self.post("registerDevice"), started: started)
            #expect(response.status == 503)
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(text.contains("\"status_code\":503"), "\(text)")
            #expect(text.contains(started ? "may or may not have been applied" : "nothing was changed"), "\(text)")
        }
    }
}
