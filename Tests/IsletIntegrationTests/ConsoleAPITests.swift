import Foundation
import Testing
import IsletAPI
import IsletApp
import IsletConsole
import IsletCore
import IsletDelivery
import IsletHTTP
import IsletStore
import IsletTestPeers
import Synchronization

/// The console's API (issue 17), in-process through its router: sign-in with a server API token or the console
/// password, the session cookie, CSRF on every change, the JSON API's methods run for the session, and the
/// console's own reads. The event stream is read over a real socket.
@Suite("Console API: sessions, CSRF and reads (issue 17)")
struct ConsoleAPITests {
    /// A signed-in session's cookie and CSRF token.
    struct Session {
        let cookie: String
        let csrf: String
    }

    let world: LiveActivityWorld

    init() throws {
        world = try LiveActivityWorld(transport: RecordingTransport { push, _ in
            push.deviceToken == LiveActivityWorld.hex("53", 80) ? PushOutcome(status: 410, reason: "Unregistered") : .delivered
        })
    }

    var console: ConsoleRouter { world.running.server.console }

    func send(_ method: String, _ path: String, body: JSONValue? = nil, session: Session? = nil, csrf: String? = nil,
              headers: [(name: String, value: String)] = [], query: [(name: String, value: String)] = []) -> (status: Int, json: JSONValue?, headers: [(name: String, value: String)]) {
        var all = headers
        if body != nil && !headers.contains(where: { $0.name == "content-type" }) { all.append(("content-type", "application/json")) }
        if let session { all.append(("cookie", "other=1; islet_console=\(session.cookie)")) }
        if let csrf { all.append(("x-csrf-token", csrf)) }
        let response = console.handle(HTTPRequest(method: method, path: path, headers: all, body: Array((body?.jsonText ?? "").utf8),
                                                  clientAddress: "127.0.0.1", query: query))
        return (response.status, try? JSONParser.parse(response.body), response.headers)
    }

    func signIn(_ credential: JSONObject) throws -> (Session, JSONObject) {
        let answer = send("POST", "/console/api/session", body: .object(credential))
        #expect(answer.status == 200, "\(answer.json?.jsonText ?? "")")
        let cookie = try #require(answer.headers.first { $0.name == "Set-Cookie" }?.value)
        let id = try #require(ConsoleCredentials.sessionID(cookieHeader: String(cookie.split(separator: ";")[0])))
        let response = try #require(answer.json?.objectValue?["response"]?.objectValue)
        return (Session(cookie: id, csrf: try #require(response["csrf_token"]?.stringValue)), response)
    }

    func response(_ answer: (status: Int, json: JSONValue?, headers: [(name: String, value: String)]),
                  sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        #expect(answer.status == 200, "\(answer.json?.jsonText ?? "")", sourceLocation: sourceLocation)
        return try #require(answer.json?.objectValue?["response"]?.objectValue, sourceLocation: sourceLocation)
    }

    func message(_ answer: (status: Int, json: JSONValue?, headers: [(name: String, value: String)])) -> String {
        answer.json?.objectValue?["status_message"]?.stringValue ?? ""
    }

    @Test func aServerAPITokenSignsInToItsApplicationOnly() throws {
        let (_, described) = try signIn(["token": .string(world.auth)])
        #expect(described["applications"]?.arrayValue?.compactMap { $0.objectValue?["code"]?.stringValue } == [world.code])
        #expect(described["credential"] == "server API token")
        #expect(described["simulator"] == false, "this server runs on a recording transport, not the simulator")

        let device = try world.running.admin().issueToken(for: ApplicationCode(world.code)!, kind: .device, label: "app")
        let refused = send("POST", "/console/api/session", body: ["token": .string(device.secret)])
        #expect(refused.status == 401 && message(refused).hasPrefix("token: not a valid server API token"), "a device API token is public: it opens no console")
        #expect(!refused.headers.contains { $0.name == "Set-Cookie" })
        let wrong = send("POST", "/console/api/session", body: ["token": "nope"])
        #expect(wrong.status == 401 && message(wrong).hasPrefix("token: not a valid server API token"))
        let empty = send("POST", "/console/api/session", body: [:])
        #expect(empty.status == 400 && message(empty).hasPrefix("token: is required"))
        // No CSRF token exists before signing in: another site's form (not JSON) or cross-site fetch is refused.
        let form = send("POST", "/console/api/session", body: ["token": .string(world.auth)], headers: [("content-type", "text/plain")])
        #expect(form.status == 415 && message(form) == "Content-Type: must be application/json to sign in")
        let crossSite = send("POST", "/console/api/session", body: ["token": .string(world.auth)], headers: [("sec-fetch-site", "cross-site")])
        #expect(crossSite.status == 403 && !crossSite.headers.contains { $0.name == "Set-Cookie" })
        #expect(send("GET", "/console/api/overview").status == 401, "no cookie, no console")
        #expect(send("GET", "/console/api/overview", session: Session(cookie: "forged", csrf: "")).status == 401)
    }

    @Test func everyChangeNeedsTheSessionsCSRFTokenAndReadsDoNot() throws {
        let (session, _) = try signIn(["token": .string(world.auth)])
        let start: JSONValue = ["request": ["notifications": [.object(startNotification())]]]
        let forged = send("POST", "/console/api/call/startLiveActivity", body: start, session: session)
        #expect(forged.status == 403 && message(forged).hasPrefix("X-CSRF-Token: missing or wrong"))
        let wrong = send("POST", "/console/api/call/startLiveActivity", body: start, session: session, csrf: session.csrf + "x")
        #expect(wrong.status == 403)
        #expect(try world.running.server.messages.activity("ORDER_1", in: ApplicationCode(world.code)!) == nil, "the refused calls changed nothing")

        let accepted = try response(send("POST", "/console/api/call/startLiveActivity", body: start, session: session, csrf: session.csrf))
        #expect(accepted["Messages"]?.arrayValue?.count == 1, "the JSON API's own method, answered as the API answers it")
        #expect(try response(send("GET", "/console/api/activities", session: session))["activities"]?.arrayValue?.count == 1, "reads need no CSRF token")
        let signOut = send("DELETE", "/console/api/session", session: session)
        #expect(signOut.status == 403, "signing out is a change too")
    }

    @Test func theSessionCannotActOnAnotherApplication() throws {
        let other = try world.running.admin().create(name: "Other", bundleID: "com.example.other")
        let (session, _) = try signIn(["token": .string(world.auth)])
        let answer = send("POST", "/console/api/call/listFilters", body: ["request": ["application": .string(other.application.code.rawValue)]],
                          session: session, csrf: session.csrf)
        #expect(answer.status == 401 && message(answer).contains("signed in to \(world.code)"))
        let header = send("GET", "/console/api/overview", session: session, headers: [("x-islet-application", other.application.code.rawValue)])
        #expect(header.status == 401)
    }

    @Test func revokingTheTokenEndsItsSessionsAtOnce() throws {
        let admin = try world.running.admin()
        let code = ApplicationCode(world.code)!
        let token = try admin.issueToken(for: code, kind: .api, label: "console")
        let (session, _) = try signIn(["token": .string(token.secret)])
        _ = try response(send("GET", "/console/api/overview", session: session))
        _ = try admin.revokeToken(of: code, idOrSecret: token.record.id)
        let after = send("GET", "/console/api/overview", session: session)
        #expect(after.status == 401 && message(after).contains("was revoked"))
        #expect(send("POST", "/console/api/session", body: ["token": .string(token.secret)]).status == 401)
    }

    /// Issue 44: wrong console passwords from many addresses at once, each within its address's limit, are checked a
    /// few at a time (each check costs a fifth of a second of a core, on the workers every API call shares); the rest
    /// are refused at once with 429 and `Retry-After`, and none signs in.
    @Test func passwordSignInsFromManyAddressesAreCheckedAFewAtATime() throws {
        try Storage(StorageLocation(world.running.database)).console.setConsolePassword(ConsoleCredentials.passwordRecord("correct horse battery"), at: Date())
        let attempts = ConsoleCredentials.passwordChecksAtOnce * 4 + 4
        let answers = Mutex<[(status: Int, message: String, retryAfter: String?)]>([])
        let console = console
        let threads = (0..<attempts).map { n in
            Thread {
                let answer = console.handle(HTTPRequest(method: "POST", path: "/console/api/session",
                                                        headers: [("content-type", "application/json"), ("x-forwarded-for", "2001:db8:\(n)::1")],
                                                        body: Array(#"{"password": "wrong horse battery \#(n)"}"#.utf8), clientAddress: "127.0.0.1", query: []))
                let message = (try? JSONParser.parse(answer.body))?.objectValue?["status_message"]?.stringValue ?? ""
                answers.withLock { $0.append((answer.status, message, answer.headers.first { $0.name == "Retry-After" }?.value)) }
            }
        }
        threads.forEach { $0.start() }
        #expect(eventually(120) { answers.withLock { $0.count } == attempts })
        let all = answers.withLock { $0 }
        let refused = all.filter { $0.status == 429 }
        #expect(!refused.isEmpty, "some were refused while others were checked: \(all.map(\.status))")
        #expect(refused.allSatisfy { $0.message == ConsoleCredentials.passwordChecksBusy(limit: ConsoleCredentials.passwordChecksAtOnce) && $0.retryAfter == "1" })
        #expect(all.allSatisfy { $0.status == 429 || ($0.status == 401 && $0.message == "password: wrong console password") }, "\(all)")
    }

    @Test func theConsolePasswordActsOnTheApplicationThePageNames() throws {
        let other = try world.running.admin().create(name: "Other", bundleID: "com.example.other")
        let noPassword = send("POST", "/console/api/session", body: ["password": "correct horse battery"])
        #expect(noPassword.status == 401 && message(noPassword).contains("islet console set-password"))
        try Storage(StorageLocation(world.running.database)).console.setConsolePassword(ConsoleCredentials.passwordRecord("correct horse battery", iterations: 1000), at: Date())
        #expect(send("POST", "/console/api/session", body: ["password": "wrong horse battery"]).status == 401)
        let (session, described) = try signIn(["password": "correct horse battery"])
        #expect(Set(described["applications"]?.arrayValue?.compactMap { $0.objectValue?["code"]?.stringValue } ?? []) == [world.code, other.application.code.rawValue])
        #expect(described["credential"] == "console password")
        let unnamed = send("GET", "/console/api/overview", session: session)
        #expect(unnamed.status == 400 && message(unnamed).hasPrefix("X-Islet-Application:"))
        let overview = try response(send("GET", "/console/api/overview", session: session, headers: [("x-islet-application", other.application.code.rawValue)]))
        #expect(overview["application"]?.objectValue?["code"]?.stringValue == other.application.code.rawValue)
        #expect(overview["devices"] == 0)
        _ = try response(send("POST", "/console/api/call/createFilter",
                              body: ["request": ["name": "everyone", "conditions": [["Language", "EQ", "en"]]]], session: session, csrf: session.csrf,
                              headers: [("x-islet-application", world.code)]))
        #expect(try world.running.server.devices.filter(named: "everyone", in: ApplicationCode(world.code)!) != nil)
    }

    @Test func theReadsListActivitiesTheirMessagesDevicesAndTheHour() throws {
        let (session, _) = try signIn(["token": .string(world.auth)])
        let before = try response(send("GET", "/console/api/overview", session: session))
        #expect(before["devices"] == 6)
        #expect(before["push_to_start_tokens"] == 4)
        #expect(before["activities"] == ["scheduled": 0, "active": 0, "ended": 0])
        #expect(before["pushes"] == [])
        var codes: [String] = []
        for n in 1...3 {
            codes += try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "ORDER_\(n)"))]]))
        }
        codes += try world.messageCodes(try world.server("updateLiveActivity", ["notifications": [[
            "live_activity_id": "ORDER_1", "live_activity": ["event": "end", "content-state": ["status": "Delivered", "estimatedTime": "0 min"],
                                                             "stale-date": 1_900_000_000]]]]))
        _ = try world.waitUntilSent(codes)

        let first = try response(send("GET", "/console/api/activities", session: session, query: [("limit", "2")]))
        #expect(first["activities"]?.arrayValue?.compactMap { $0.objectValue?["live_activity_id"]?.stringValue } == ["ORDER_3", "ORDER_2"], "newest first")
        let cursor = try #require(first["next_cursor"]?.stringValue)
        let second = try response(send("GET", "/console/api/activities", session: session, query: [("limit", "2"), ("cursor", cursor)]))
        #expect(second["activities"]?.arrayValue?.compactMap { $0.objectValue?["live_activity_id"]?.stringValue } == ["ORDER_1"])
        #expect(second["next_cursor"] == .null)
        let ended = try response(send("GET", "/console/api/activities", session: session, query: [("state", "ended")]))
        #expect(ended["activities"]?.arrayValue?.first?.objectValue?["devices"] == 1, "second_device's start was refused (410)")
        #expect(ended["activities"]?.arrayValue?.count == 1)
        #expect(try response(send("GET", "/console/api/activities", session: session, query: [("attributes_type", "Other")]))["activities"] == [])
        let badState = send("GET", "/console/api/activities", session: session, query: [("state", "live")])
        #expect(badState.status == 400 && message(badState) == "state: must be one of scheduled, active, ended")
        #expect(message(send("GET", "/console/api/activities", session: session, query: [("limit", "0")])) == "limit: must be an integer from 1 to 200")

        let timeline = try response(send("GET", "/console/api/messages", session: session, query: [("live_activity_id", "ORDER_1")]))
        let messages = try #require(timeline["messages"]?.arrayValue?.compactMap { $0.objectValue })
        #expect(messages.map { $0["event"]?.stringValue } == ["end", "start"], "newest first")
        #expect(messages[0]["content-state"]?.objectValue?["status"] == "Delivered", "what the push said")
        #expect(messages[0]["stale-date"] == 1_900_000_000)
        #expect(messages[1]["alert"]?.objectValue?["title"] == "Food Delivery")
        let unknown = send("GET", "/console/api/messages", session: session, query: [("live_activity_id", "NOPE")])
        #expect(unknown.status == 400 && message(unknown) == "live_activity_id: no activity 'NOPE' in this application")

        let byPrefix = try response(send("GET", "/console/api/devices", session: session, query: [("q", "p")]))
        #expect(byPrefix["devices"]?.arrayValue?.compactMap { $0.objectValue?["hwid"]?.stringValue } == ["portuguese"])
        func hwids(_ page: JSONObject) -> [String] { page["devices"]?.arrayValue?.compactMap { $0.objectValue?["hwid"]?.stringValue } ?? [] }
        let firstDevices = try response(send("GET", "/console/api/devices", session: session, query: [("limit", "4")]))
        #expect(hwids(firstDevices) == ["first_third", "mid_phone", "no_token", "old_phone"], "HWID order")
        let rest = try response(send("GET", "/console/api/devices", session: session,
                                     query: [("limit", "4"), ("cursor", firstDevices["next_cursor"]?.stringValue ?? "")]))
        #expect(hwids(rest) == ["portuguese", "second_device"] && rest["next_cursor"] == .null)
        try world.expectOK(call(world.running.port, "registerDevice", ["application": .string(world.code), "hwid": "zz_phone",
                                                                         "push_token": .string(LiveActivityWorld.hex("b1", 32)), "userId": "first"],
                                token: world.auth))
        #expect(hwids(try response(send("GET", "/console/api/devices", session: session, query: [("q", "first")]))) == ["zz_phone", "first_third"],
                "the User ID's devices first, then the HWIDs that start so")

        // The hour's pushes: first_third's were sent; second_device's push-to-start token answered 410 Unregistered.
        let overview = try response(send("GET", "/console/api/overview", session: session))
        #expect(overview["devices"] == 7)
        #expect(overview["activities"] == ["scheduled": 0, "active": 2, "ended": 1])
        let pushes = try #require(overview["pushes"]?.arrayValue?.compactMap { $0.objectValue })
        func count(_ state: String, reason: String? = nil) -> Int {
            pushes.filter { $0["state"]?.stringValue == state && (reason == nil || $0["reason"]?.stringValue == reason) }
                .reduce(0) { $0 + Int($1["count"]?.intValue ?? 0) }
        }
        let details = try codes.compactMap { try world.running.server.messages.messageDetails(code: $0, in: ApplicationCode(world.code)!) }
        #expect(count("sent") == details.reduce(0) { $0 + $1.sent }, "\(pushes)")
        #expect(count("failed") == details.reduce(0) { $0 + $1.failed } && count("failed", reason: "Unregistered") >= 1, "\(pushes)")
        #expect(pushes.allSatisfy { $0["minute"]?.stringValue?.hasSuffix(":00Z") == true }, "a minute at a time")
        #expect(overview["queue"]?.objectValue?["jobs_due"] == 0)
    }

    @Test func signInAttemptsAreLimitedPerClientAddress() throws {
        var statuses: [Int] = []
        for _ in 0..<12 { statuses.append(send("POST", "/console/api/session", body: ["token": "guess"]).status) }
        #expect(statuses.prefix(10).allSatisfy { $0 == 401 })
        #expect(statuses.suffix(2).allSatisfy { $0 == 429 })
    }

    @Test func theAssetsAreServedWithALockedDownContentSecurityPolicy() throws {
        let page = console.handle(HTTPRequest(method: "GET", path: "/console"))
        #expect(page.status == 200)
        #expect(String(decoding: page.body, as: UTF8.self).contains("/console/assets/console.js"))
        let policy = try #require(page.headers.first { $0.name == "Content-Security-Policy" }?.value)
        #expect(policy.contains("default-src 'self'") && policy.contains("frame-ancestors 'none'") && !policy.contains("unsafe"))
        let script = console.handle(HTTPRequest(method: "GET", path: "/console/assets/console.js"))
        #expect(script.status == 200 && script.headers.contains { $0.name == "Content-Type" && $0.value.hasPrefix("text/javascript") })
        #expect(console.handle(HTTPRequest(method: "GET", path: "/console/assets/nope.js")).status == 404)
        #expect(console.handle(HTTPRequest(method: "POST", path: "/console")).status == 405)
    }

    /// Server-Sent Events over a real socket: a page hears `change` when its application's activities change.
    @Test func theEventStreamSaysWhenTheApplicationChanges() throws {
        let (session, _) = try signIn(["token": .string(world.auth)])
        let socket = try LoopbackSocket.connect(port: world.running.port, timeout: 15)
        defer { close(socket) }
        let request = "GET /console/api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nCookie: islet_console=\(session.cookie)\r\n\r\n"
        _ = request.withCString { Glibc.send(socket, $0, strlen($0), 0) }
        var received = ""
        func read(until text: String) -> Bool { LoopbackSocket.receive(socket, until: text, into: &received) }
        #expect(read(until: "event: ready"))
        #expect(received.lowercased().contains("content-type: text/event-stream"))
        #expect(!received.contains("event: change"))
        _ = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(id: "LIVE_1"))]]))
        #expect(read(until: "event: change\ndata: {\"application\":\"\(world.code)\"}"), "\(received)")
    }
}
