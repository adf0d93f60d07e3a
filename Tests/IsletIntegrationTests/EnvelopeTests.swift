import Foundation
import Testing
import IsletStore
import IsletCore

private let demoRequest = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}"#

@Suite("HTTP API envelope and errors (E1, E4)")
struct EnvelopeTests {
    let running: RunningServer

    init() throws { running = try RunningServer() }

    @Test func answersInTheEnvelope() throws {
        let response = try request(running.port, "/json/1.3/getApplication", body: demoRequest)
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json; charset=utf-8")
        let object = try #require(response.json?.objectValue)
        #expect(object.keys == ["status_code", "status_message", "response"])
        #expect(object["status_code"] == 200)
        #expect(object["status_message"] == "OK")
        #expect(object["response"]?.objectValue?["application"]?.objectValue?["code"] == "XXXXX-XXXXX")
        #expect(object["response"]?.objectValue?["application"]?.objectValue?["bundle_id"] == "com.example.fooddelivery")
    }

    @Test(arguments: [
        (#"{"request":"#, 400, "body: malformed JSON: unexpected end of input at byte 11"),
        (#"{"request":{"application":"XXXXX-XXXXX",}}"#, 400, "body: malformed JSON: expected a string key at byte 40"),
        (#"[1]"#, 400, #"body: must be a JSON object {"request": {...}}, got array"#),
        (#"{}"#, 400, #"request: is required (the body is {"request": {...}})"#),
        (#"{"request":[]}"#, 400, "request: must be an object, got array"),
        (#"{"request":{"application":12345,"auth":"SECRET_API_TOKEN"}}"#, 400, "application: must be a string, got number"),
        (#"{"request":{"application":"xxxxx","auth":"SECRET_API_TOKEN"}}"#, 400, "application: must be an application code of the form XXXXX-XXXXX"),
        (#"{"request":{"application":"XXXXX-XXXXX","auth":7}}"#, 400, "auth: must be a string, got number"),
    ])
    func rejectsBadInputNamingTheField(body: String, status: Int, message: String) throws {
        let response = try request(running.port, "/json/1.3/getApplication", body: body)
        #expect(response.status == status)
        #expect(response.statusCode == Int64(status))
        #expect(response.message == message)
        #expect(response.json?.objectValue?["response"] == JSONValue.null)
    }

    @Test func aServerCallWithoutApplicationActsForTheTokensApplication() throws {
        // A token authorises exactly one application (E2), so it names it, as Pushwoosh's {auth, message} calls rely on.
        let response = try request(running.port, "/json/1.3/getApplication", body: #"{"request":{"auth":"SECRET_API_TOKEN"}}"#)
        #expect(response.status == 200)
        #expect(response.json?.objectValue?["response"]?.objectValue?["application"]?.objectValue?["code"] == "XXXXX-XXXXX")
        let wrong = try request(running.port, "/json/1.3/getApplication", body: #"{"request":{"auth":"nope"}}"#)
        #expect(wrong.status == 401)
        #expect(wrong.message == "auth: not a valid server API token")
        let device = try request(running.port, "/json/1.3/registerDevice", body: #"{"request":{"hwid":"h","push_token":"00"}}"#,
                                 headers: ["Authorization": "Token SECRET_API_TOKEN"])
        #expect(device.status == 400)
        #expect(device.message == "application: is required", "device calls always name their application")
    }

    @Test func unknownMethodIs404() throws {
        let response = try request(running.port, "/json/1.3/noSuchMethod", body: demoRequest)
        #expect(response.status == 404)
        #expect(response.statusCode == 404)
        #expect(response.message == "unknown method 'noSuchMethod'")
        let typo = try request(running.port, "/json/1.3/startLiveActivty", body: demoRequest)
        #expect(typo.status == 404)
        #expect(typo.message == "unknown method 'startLiveActivty'; did you mean 'startLiveActivity'?")
        let path = try request(running.port, method: "GET", "/index.html")
        #expect(path.status == 404)
        #expect(path.message == "no such path /index.html; JSON API methods are POST /json/1.3/<method>")
    }

    @Test(arguments: ["GET", "PUT", "DELETE"])
    func wrongHTTPMethodIs405(method: String) throws {
        let response = try request(running.port, method: method, "/json/1.3/getApplication", body: method == "GET" ? nil : demoRequest)
        #expect(response.status == 405)
        #expect(response.statusCode == 405)
        #expect(response.headers["allow"] == "POST")
        #expect(response.message == "HTTP method \(method) is not allowed on /json/1.3/getApplication; use POST")
    }

    @Test func bodyOverOneMebibyteIs413BeforeItIsRead() throws {
        let connection = try RawHTTPConnection(port: running.port)
        try connection.send("POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nContent-Length: \((1 << 20) + 1)\r\n\r\n{")
        let response = try connection.readResponse()
        #expect(response.status == 413)
        #expect(response.statusCode == 413)
        #expect(response.message == "request body: larger than the limit of 1048576 bytes")
    }

    @Test func chunkedBodyOverTheLimitIs413() throws {
        let connection = try RawHTTPConnection(port: running.port)
        try connection.send("POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        let chunk = String(repeating: "a", count: 65536)
        for _ in 0..<17 { try connection.send(String(65536, radix: 16) + "\r\n" + chunk + "\r\n") }
        try connection.send("0\r\n\r\n")
        let response = try connection.readResponse()
        #expect(response.status == 413)
        #expect(response.statusCode == 413)
    }

    @Test func bodyJustUnderTheLimitIsRead() throws {
        // 1 MiB of padding inside a valid request: read whole and answered, not refused.
        let padding = String(repeating: "x", count: (1 << 20) - 200)
        let body = #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN","padding":"\#(padding)"}}"#
        let response = try request(running.port, "/json/1.3/getApplication", body: body)
        #expect(response.status == 200)
    }

    @Test func healthAndMetrics() throws {
        let health = try request(running.port, method: "GET", "/healthz")
        #expect(health.status == 200)
        let fields = health.json?.objectValue
        #expect(fields?["status"] == "ok" && fields?["database"] == "reachable" && fields?["liveness"] == .bool(true))
        #expect(fields?["node"]?.stringValue.flatMap(NodeID.init) != nil, "this node's id (issue 14)")
        #expect(fields?["version"] == .string(IsletVersion.current), "the build answering (issue 48)")
        #expect(try request(running.port, method: "POST", "/healthz", body: "{}").status == 405)

        _ = try request(running.port, "/json/1.3/getApplication", body: demoRequest)
        _ = try request(running.port, "/json/1.3/getApplication", body: "{")
        let metrics = try request(running.port, method: "GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(text.contains("islet_http_requests_total{route=\"getApplication\",status=\"200\"} 1\n"))
        #expect(text.contains("islet_http_requests_total{route=\"getApplication\",status=\"400\"} 1\n"))
        #expect(text.contains("islet_http_requests_total{route=\"healthz\",status=\"200\"} 1\n"))
        #expect(text.contains("islet_http_request_duration_seconds_count{route=\"getApplication\"} 2\n"))
        #expect(text.contains("islet_http_request_duration_seconds_bucket{route=\"getApplication\",le=\"+Inf\"} 2\n"))
        // Issue 48: the version as a build-info gauge, with its HELP and TYPE lines.
        #expect(text.contains("# HELP islet_build_info The version of this islet build, as its label (always 1).\n"
                              + "# TYPE islet_build_info gauge\nislet_build_info{version=\"\(IsletVersion.current)\"} 1\n"), "\(text.prefix(400))")
    }

    @Test func keepAliveConnectionServesSeveralRequests() throws {
        let connection = try RawHTTPConnection(port: running.port)
        let body = Array(demoRequest.utf8)
        let one = "POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n" + demoRequest
        let last = "POST /json/1.3/getApplication HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n" + demoRequest
        try connection.send(one + one + last)
        let response = try connection.readResponse()
        #expect(response.status == 200)
        let all = String(decoding: response.body, as: UTF8.self)
        #expect(all.components(separatedBy: "HTTP/1.1 200 OK").count == 3, "three answers on one connection")
    }
}
