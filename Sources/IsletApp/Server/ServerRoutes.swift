import Foundation
import IsletAPI
import IsletConsole
import IsletHTTP

/// What `islet serve` answers: the web console under `/console`, everything else the JSON API's router.
struct ServerRoutes: HTTPHandler {
    let api: APIRouter
    let console: ConsoleRouter
    let metrics: Metrics

    private func isConsole(_ request: HTTPRequest) -> Bool {
        request.path == ConsoleRouter.prefix || request.path.hasPrefix(ConsoleRouter.prefix + "/")
    }

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard isConsole(request) else { return api.handle(request) }
        let started = ContinuousClock.now
        let response = console.handle(request)
        // API methods the console runs count under their own names (APIRouter.consoleCall); the rest as "console".
        if !request.path.hasPrefix(ConsoleRouter.prefix + "/api/call/") {
            metrics.record(route: "console", status: response.status, since: started)
        }
        return response
    }

    func execution(for request: HTTPRequest) -> HTTPExecution {
        isConsole(request) ? console.execution(for: request) : api.execution(for: request)
    }

    func handleLater(_ request: HTTPRequest, _ answer: HTTPLaterAnswer) {
        guard isConsole(request) else { return api.handleLater(request, answer) }
        answer.onWorker { handle(request) }
    }

    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { api.bodyTooLarge(request, limit: limit) }
    func bodiesBusy(_ request: HTTPRequest, retryAfter: Int) -> HTTPResponse { api.bodiesBusy(request, retryAfter: retryAfter) }
    /// The client address the rate limits count (behind a proxy on this machine, what it forwards), by its /64 for IPv6.
    func clientKey(_ request: HTTPRequest) -> String {
        ClientAddress.key(RateLimiter.clientAddress(peer: request.clientAddress,
                                                         forwardedFor: request.headers.filter { $0.name == "x-forwarded-for" }.map(\.value)))
    }

    func unfinished(_ request: HTTPRequest, started: Bool) -> HTTPResponse { api.unfinished(request, started: started) }
}
