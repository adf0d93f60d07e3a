import Foundation
import Synchronization

/// The answer to a request run with `HTTPExecution.later`: its handler returned on the connection's thread with the
/// answer still to come (a write handed to the group commit), and its connection waits suspended until one of these
/// is called, once, from any thread.
public final class HTTPLaterAnswer: Sendable {
    private let id: UInt64
    private let request: HTTPRequest
    private let context: ServerContext
    private let given = Atomic<Bool>(false)

    init(id: UInt64, request: HTTPRequest, context: ServerContext) {
        self.id = id
        self.request = request
        self.context = context
    }

    /// Sends `response` (unless a shutdown answered the request already).
    public func respond(_ response: HTTPResponse) {
        guard take() else { return }
        context.suspensions.finish(id, with: response)
    }

    /// Hands the rest of the request to a worker, which may wait, and sends what `work` returns: for what the
    /// connection's thread must not wait for (a read of the database across the network, a retry).
    public func onWorker(_ work: @escaping @Sendable () -> HTTPResponse) {
        guard take() else { return }
        // Begun: its `later` handler ran, so a refusal cannot say nothing was changed.
        context.onWorker(id, request, begun: true, work)
    }

    /// True the first time: a second answer is a handler's mistake, caught in debug builds and dropped otherwise.
    private func take() -> Bool {
        let (exchanged, _) = given.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
        assert(exchanged, "a request answered later was answered twice")
        return exchanged
    }
}

extension ServerContext {
    /// Suspends the connection and runs the handler's `handleLater` here, on the connection's thread; the answer is
    /// queued when libmicrohttpd calls back after the resume. False when the server is stopping (answer at once instead).
    func handLater(_ request: HTTPRequest, answer: PendingAnswer, connection: OpaquePointer) -> Bool {
        guard let id = suspensions.suspend(connection, answer: answer, request: request) else { return false }
        // Begun at once: a shutdown that answers it before its write is done cannot say nothing was changed.
        guard suspensions.begin(id) else { return true }
        handler.handleLater(request, HTTPLaterAnswer(id: id, request: request, context: self))
        return true
    }
}
