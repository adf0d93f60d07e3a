import Foundation
import IsletAPI
import IsletCore
import IsletCrypto
import IsletApp
import IsletHTTP2
import IsletStore

/// What the end-to-end benchmarks share: a temporary folder, nginx as APNs (and as FCM, with its token endpoint) with a
/// self-signed certificate, and Islet sending to it for one application that holds an APNs key and, with `android`, an
/// FCM service account. `stop()` undoes it all.
final class NginxWorld {
    let directory: URL
    let nginx: Nginx
    let server: IsletServer
    let port: Int
    /// The application's code and server API token.
    let app: String
    let auth: String

    /// `database`: an SQLite path or PostgreSQL URL (it must be empty), or nil for an SQLite file in the folder.
    init(name: String, database: String? = nil, android: Bool = false, configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-bench-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificate = directory.appendingPathComponent("nginx.crt").path, key = directory.appendingPathComponent("nginx.key").path
        try TLSContext.writeSelfSigned(certificate: certificate, key: key)
        let nginx = try Nginx(directory: directory, certificate: certificate, key: key)
        self.nginx = nginx
        do {
            (server, port, app, auth) = try Self.startIslet(nginx: nginx, certificate: certificate, key: key, database: database ?? directory.appendingPathComponent("islet.sqlite").path,
                                                            android: android, configure: configure)
        } catch {
            nginx.stop()   // not left behind holding the port and the caller's output
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private static func startIslet(nginx: Nginx, certificate: String, key: String, database: String, android: Bool,
                                   configure: (inout ServerConfiguration) -> Void) throws -> (IsletServer, Int, String, String) {
        var configuration = ServerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0),
                                                database: database,
                                                apns: .apple, apnsURL: "https://127.0.0.1:\(nginx.port)", apnsCA: certificate)
        configuration.fcmURL = "https://127.0.0.1:\(nginx.port)"
        configuration.fcmCA = certificate
        configure(&configuration)
        let server = try IsletServer(configuration: configuration, logger: .discard)
        guard try server.store.hasNoApplications() else {
            throw BenchError("\(configuration.location) is not empty; give the benchmark an empty database")
        }
        let created = try ApplicationAdmin(store: server.store).create(
            name: "Bench", bundleID: "com.example.bench",
            apnsKey: APNsSigningKey(info: APNsKeyInfo(teamID: "TEAM123456", keyID: "KEY1234567", environment: .both),
                                   pem: try String(contentsOfFile: key, encoding: .utf8)))
        if android {
            // nginx's /token answers every assertion with a token; its checks are the FCM stand-in's, in the tests.
            let account: JSONValue = [
                "type": "service_account", "project_id": "bench", "private_key_id": "bench", "private_key": .string(RSASigningKey.generatePEM()),
                "client_email": "bench@bench.iam.gserviceaccount.com", "token_uri": .string("https://127.0.0.1:\(nginx.port)/token"),
            ]
            try ApplicationAdmin(store: server.store).setFCMAccount(
                for: created.application.code, info: FCMAccountInfo(projectID: "bench", clientEmail: "bench@bench.iam.gserviceaccount.com"),
                keyJSON: account.jsonText)
        }
        let port = try server.start()
        return (server, port, created.application.code.rawValue, created.apiToken.secret)
    }

    func stop() {
        server.shutdown()
        nginx.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
