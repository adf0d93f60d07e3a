import Foundation
import Testing
import IsletCore

/// Issue 12: `GET /openapi.json` describes exactly the routes the server answers, no more, no less.
@Suite("OpenAPI document")
struct OpenAPITests {
    static let plainRoutes: Set<String> = ["GET /healthz", "GET /metrics", "GET /openapi.json"]

    func document(_ running: RunningServer) throws -> JSONObject {
        let response = try request(running.port, method: "GET", "/openapi.json")
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json; charset=utf-8")
        return try #require(response.json?.objectValue)
    }

    func operations(_ document: JSONObject) -> Set<String> {
        var found: Set<String> = []
        for (path, item) in document["paths"]?.objectValue?.entries ?? [] {
            for method in item.objectValue?.keys ?? [] where ["get", "post", "put", "delete", "patch", "head"].contains(method) {
                found.insert("\(method.uppercased()) \(path)")
            }
        }
        return found
    }

    @Test(arguments: [true, false])
    func theDocumentListsEveryRouteAndNoOther(simulator: Bool) throws {
        // Without the simulator (a scripted transport stands in for Apple), its routes do not exist.
        let running = simulator ? try RunningServer() : try RunningServer(transport: RecordingTransport())
        let document = try document(running)
        #expect(document["openapi"]?.stringValue?.hasPrefix("3.1") == true)
        var expected = Self.plainRoutes.union(running.server.router.methodNames.map { "POST /json/1.3/\($0)" }).union(["POST /messaging/v2/notify"])
        if simulator {
            expected.formUnion(["GET /simulator/devices", "POST /simulator/devices", "GET /simulator/devices/{hwid}", "POST /simulator/devices/{hwid}/activities",
                                "POST /simulator/devices/{hwid}/state"])
        }
        let documented = operations(document)
        let simulatorRoutes = documented.filter { $0.contains("/simulator/") }
        #expect(documented.subtracting(simulatorRoutes).symmetricDifference(expected.subtracting(simulatorRoutes)).isEmpty,
                "documented but not served, or served but not documented: \(documented.symmetricDifference(expected).sorted())")
        if simulator { #expect(simulatorRoutes == expected.filter { $0.contains("/simulator/") }) }
        // The console (its page, and the calls the page makes with its session cookie) is docs/CONSOLE.md's, not the API document's.
        #expect(running.server.prefixRoutes == (simulator ? ["/simulator/devices"] : []) + ["/console", "/messaging/v2/notify"])

        // Every documented operation reaches a handler: never "no such path" or "unknown method".
        for operation in documented where simulator || !operation.contains("/simulator/") {
            let parts = operation.split(separator: " ", maxSplits: 1).map(String.init)
            let path = parts[1].replacingOccurrences(of: "{hwid}", with: "first_third")
            let response = try request(running.port, method: parts[0], path, body: parts[0] == "POST" ? #"{"request":{}}"# : nil)
            let message = response.message ?? ""
            #expect(!message.hasPrefix("no such path") && !message.hasPrefix("unknown method"), "\(operation): \(message)")
        }
        #expect(try request(running.port, method: "GET", "/simulator/devicesX").message?.hasPrefix("no such path") == true)
    }

    /// The server answers the very document people read: docs/openapi.json (embedded by scripts/embed-openapi).
    @Test func theServedDocumentIsDocsOpenAPIJSON() throws {
        let running = try RunningServer()
        let file = try JSONParser.parse(Array(try Data(contentsOf: packageRoot.appendingPathComponent("docs/openapi.json"))))
        #expect(JSONValue.object(try document(running)) == file, "docs/openapi.json changed: run scripts/embed-openapi")
    }

    /// Every operation names its errors; the JSON API ones all answer in the envelope.
    @Test func everyJSONOperationDocumentsItsErrors() throws {
        let running = try RunningServer()
        let paths = try #require(try document(running)["paths"]?.objectValue)
        for (path, item) in paths.entries where path.hasPrefix("/json/1.3/") {
            let responses = try #require(item.objectValue?["post"]?.objectValue?["responses"]?.objectValue, "\(path)")
            for status in ["200", "400", "401", "404", "405", "413", "429", "503"] {
                #expect(responses[status] != nil, "\(path) does not document \(status)")
            }
            #expect(item.objectValue?["post"]?.objectValue?["operationId"]?.stringValue == String(path.dropFirst("/json/1.3/".count)))
        }
    }
}
