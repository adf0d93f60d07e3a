import Foundation
import IsletCore
import IsletHTTP
import IsletStore

/// `POST /messaging/v2/notify`, Pushwoosh's Messaging API v2, for the Android Live Updates it sends (issue 46,
/// `PushwooshNotify`): authorised by a server API token in `Authorization: Token …`, answered `{"message_code": …}`, or
/// a gRPC-Gateway error (`{"code", "message", "details"}`) with the HTTP status of Islet's own answer.
public struct PushwooshNotifyRoute: Sendable {
    public static let path = "/messaging/v2/notify"

    let methods: LiveActivityMethods
    let authenticator: Authenticator
    let now: @Sendable () -> Date
    /// The server API tokens' rate limit (E6), counted apart from the JSON API's.
    let limiter: RateLimiter?

    public init(methods: LiveActivityMethods, applications: any ApplicationStore, limits: RateLimits = RateLimits(),
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.methods = methods
        authenticator = Authenticator(store: applications)
        limiter = limits.serverPerToken.map { RateLimiter(limit: $0) }
        self.now = now
    }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard request.path == Self.path else { return Self.failure(APIError(.notFound, "no such path \(request.path.prefix(256))")) }
        guard request.method == "POST" else {
            var refused = Self.failure(APIError(.methodNotAllowed, "use POST on \(Self.path)"))
            refused.headers.append(("Allow", "POST"))
            return refused
        }
        do {
            let application = try authenticator.authenticate(application: nil, secret: APIRouter.headerToken(request), access: .server)
            if let limiter, let wait = limiter.take(application.code.rawValue) {
                var limited = Self.failure(APIError(.tooManyRequests, RateLimited.message("the server API tokens of \(application.code)", limit: limiter.limit,
                                                                                          retryAfter: wait).message))
                limited.headers.append(("Retry-After", String(wait)))
                return limited
            }
            let document: JSONValue
            do {
                document = try JSONParser.parse(request.body)
            } catch {
                throw APIError(.badRequest, "body: malformed JSON: \(error)")
            }
            try document.refuseNUL()
            let notify = try PushwooshNotify.parse(document, application: application.code, now: now())
            let code = try methods.notify(notify, application: application, at: now())
            return APIRouter.json(["message_code": .string(code)], status: 200)
        } catch let error as APIError {
            return Self.failure(error)
        } catch is StoreError {
            var response = Self.failure(.storageUnavailable)
            response.headers.append(("Retry-After", "1"))
            return response
        } catch {
            return Self.failure(APIError(.internalError, "internal error; nothing was changed"))
        }
    }

    /// A gRPC-Gateway error, as Pushwoosh's v2 API answers: the gRPC code of the HTTP status, and Islet's message.
    static func failure(_ error: APIError) -> HTTPResponse {
        let grpc: Int64 = switch error.code.httpStatus {
        case 400: 3      // INVALID_ARGUMENT
        case 401: 16     // UNAUTHENTICATED
        case 403: 7      // PERMISSION_DENIED
        case 404: 5      // NOT_FOUND
        case 405: 12     // UNIMPLEMENTED
        case 413, 429: 8 // RESOURCE_EXHAUSTED
        case 503: 14     // UNAVAILABLE
        default: 13      // INTERNAL
        }
        return APIRouter.json(["code": .int(grpc), "message": .string(error.message), "details": []], status: error.code.httpStatus)
    }
}

extension LiveActivityMethods {
    /// Stores what a Pushwoosh notify asks (`PushwooshNotify`) as Islet's own start, update or end of the activity
    /// `live_update.id`, for Android phones only: the message has no APNs payload, so iPhones are skipped. Returns its code.
    func notify(_ notify: PushwooshNotify, application: Application, at now: Date) throws -> String {
        let live = notify.livePath
        guard application.fcmAccount != nil else {
            throw APIError.invalid("segment.payload", "the application has no FCM service account, so no Android phone can get it: islet app set-fcm \(application.code) --service-account key.json")
        }
        let code = MessageCode.next()
        let dueAt = notify.sendAt ?? now
        let event: LiveActivityEvent = switch notify.operation {
        case .start: .start
        case .update: .update
        case .end: .end
        }
        let update = AndroidLiveUpdate(operation: notify.operation, activityID: notify.activityID, messageCode: code, title: notify.title,
                                       text: notify.body, android: notify.android)
        try AndroidLiveUpdate.checkSize(update.dataBytes, path: String(live.dropLast(".live_update".count).dropLast(".android".count)))
        guard event == .start else {
            // One started by startLiveActivity has iPhones too, and its own content-state: it takes updateLiveActivity
            // (whose `android` object reaches its Android phones), not an Android-only update that would change both.
            if let activity = try messages.activity(notify.activityID, in: application.code),
               activity.attributesType != PushwooshNotify.attributesType {
                throw APIError.invalid("\(live).id", "'\(notify.activityID.prefix(256))' was started by startLiveActivity: update or end it with updateLiveActivity, whose android object reaches its Android phones")
            }
            var message = NewMessage(code: code, event: event, activityID: notify.activityID, target: nil, attributesType: nil, name: nil,
                                     contentState: [:], payload: [], fallbackPayload: nil, priority: 10, dueAt: dueAt,
                                     expiresAt: dueAt.addingTimeInterval(pushLifetime))
            message.androidPayload = update.dataBytes
            do {
                _ = try messages.acceptUpdates([message], in: application.code, budget: application.updateBudget, pacing: pacing, at: now,
                                               validateOnly: false)
            } catch let refusal as AcceptRefusal {
                throw APIError.invalid("\(live).id", refusal.message)
            }
            kick()
            return code
        }
        let target: TargetSelection
        switch notify.audience {
        case .application:
            target = .filter(.platform(.android, name: "A(\"\(application.code)\")"))
        case .filter(let name):
            guard let filter = try devices.filter(named: name, in: application.code) else {
                throw APIError.invalid("segment.code", "no filter named '\(name.prefix(256))' in this application (create it with createFilter)")
            }
            target = .filter(filter)
        }
        var message = NewMessage(code: code, event: .start, activityID: notify.activityID, target: target,
                                 attributesType: PushwooshNotify.attributesType, name: notify.title, contentState: [:], payload: [],
                                 fallbackPayload: nil, priority: 10, dueAt: dueAt, expiresAt: dueAt.addingTimeInterval(pushLifetime))
        message.androidPayload = update.dataBytes
        do {
            try messages.acceptStarts([message], in: application.code, at: now, validateOnly: false)
        } catch let refusal as AcceptRefusal {
            throw APIError.invalid("\(live).id", refusal.message)
        }
        kick()
        return code
    }
}
