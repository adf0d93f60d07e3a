import Foundation
import Testing
import IsletHTTP
import IsletTestPeers
import Synchronization

/// Requests answered later (`HTTPExecution.later`): the handler returns on the connection's thread with the answer still
/// to come, and any thread answers it; no worker waits for it, and shutdown answers what is left by its deadline.
@Suite("HTTP server: requests answered later")
struct LaterAnswerServerTests {
    /// `/later` keeps its answer for the test to give; `/later-on-worker` hands itself to a worker; `/at-once` answers.
    final class LaterHandler: HTTPHandler {
        let waiting = Mutex<[(number: Int, answer: HTTPLaterAnswer)]>([])
        let arrived = Atomic<Int>(0)
        let threads = Mutex<Set<String>>([])

        func execution(for request: HTTPRequest) -> HTTPExecution {
            request.path.hasPrefix("/later") ? .later : .connectionThread
        }

        func handleLater(_ request: HTTPRequest, _ answer: HTTPLaterAnswer) {
            threads.withLock { _ = $0.insert(WorkerPoolServerTests.GatedHandler.threadName()) }
            let number = arrived.add(1, ordering: .acquiringAndReleasing).newValue
            if request.path == "/later-on-worker" {
                return answer.onWorker { HTTPResponse(status: 200, body: Array(WorkerPoolServerTests.GatedHandler.threadName().utf8)) }
            }
            waiting.withLock { $0.append((number, answer)) }
        }

        func handle(_ request: HTTPRequest) -> HTTPResponse { HTTPResponse(status: 200, body: Array("at once".utf8)) }
        func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    }

    @Test func requestsWaitForTheirAnswersWithoutAThreadEach() throws {
        let handler = LaterHandler()
        // One worker: twelve requests waiting at once show that none of them holds it.
        let server = try WorkerPoolServerTests.started(handler, workerThreads: 1)
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        let port = server.port
        let requests = (0..<12).map { _ in RawHTTPClient.onThread { try RawHTTPClient.send("POST", "/later", port: port) } }
        #expect(WorkerPoolServerTests.waitUntil { handler.waiting.withLock { $0.count } == 12 }, "\(handler.waiting.withLock { $0.count }) of 12")
        #expect(handler.threads.withLock { $0.allSatisfy { !$0.hasPrefix("islet-http-") } }, "run on the connections' threads: \(handler.threads.withLock { $0 })")
        let atOnce = try RawHTTPClient.send("GET", "/at-once", port: port)
        #expect(atOnce.status == 200 && atOnce.body == "at once", "the connection threads answer others meanwhile")
        // Answered from one other thread, each with its own answer.
        let answers = handler.waiting.withLock { $0 }
        Thread { for (number, answer) in answers { answer.respond(HTTPResponse(status: 200, body: Array("answer \(number)".utf8))) } }.start()
        let bodies = try requests.map { request in
            let response = try request.value()
            #expect(response.status == 200, "\(response)")
            return response.body
        }
        #expect(Set(bodies) == Set((1...12).map { "answer \($0)" }))
        #expect(WorkerPoolServerTests.waitUntil { server.requestsInFlight == 0 })
    }

    @Test func aRequestAnsweredLaterCanGoOnAWorker() throws {
        let handler = LaterHandler()
        let server = try WorkerPoolServerTests.started(handler, workerThreads: 2)
        defer { server.shutdown(gracePeriod: .seconds(1)) }
        let response = try RawHTTPClient.send("POST", "/later-on-worker", port: server.port)
        #expect(response.status == 200 && response.body.hasPrefix("islet-http-"), "\(response)")
    }

    @Test func shutdownAnswersARequestStillWaitingAsOfUnknownOutcome() throws {
        let handler = LaterHandler()
        let server = try WorkerPoolServerTests.started(handler, workerThreads: 1)
        let port = server.port
        let request = RawHTTPClient.onThread { try RawHTTPClient.send("POST", "/later", port: port) }
        #expect(WorkerPoolServerTests.waitUntil { handler.waiting.withLock { $0.count } == 1 })
        let started = ContinuousClock.now
        #expect(!server.shutdown(gracePeriod: .milliseconds(300)), "a request was still waiting at the deadline")
        #expect(ContinuousClock.now - started < .seconds(5))
        let response = try request.value()
        // Its handler ran (a write may be under way): the client is told the outcome is unknown, not that nothing changed.
        #expect(response.status == 503 && response.body.contains("outcome is unknown"), "\(response)")
        // The answer that comes after the stop goes nowhere, harmlessly.
        handler.waiting.withLock { $0 }.first?.answer.respond(HTTPResponse(status: 200))
    }
}
