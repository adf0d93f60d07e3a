import Foundation
import Testing
import IsletCore
import IsletPostgres
import IsletSQL
import IsletStore
import IsletTestPeers

/// What only the PostgreSQL engine has: a server at the other end of a connection.
@Suite("PostgreSQL connections")
struct PostgresConnectionTests {
    /// The server drops every connection of a running Islet (a restart, a failover): the call that meets a
    /// dead connection fails with a clear error (the API answers 503, nothing changed), and the next one
    /// reconnects by itself.
    @Test func aLostConnectionFailsOneCallAndTheNextReconnects() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let name = "islet-test-\(UUID().uuidString.prefix(8))"
        let database = try PostgresDatabase(url: created.url + "&application_name=\(name)")
        let store = SQLApplicationStore(database: database)
        let code = ApplicationCode("LOSTC-00001")!
        try store.createApplication(Application(code: code, name: "x", bundleID: "com.example.x", createdAt: Date()), tokens: [], apnsKey: nil)
        try TestPostgres.administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(name)'")
        do {
            _ = try store.application(code)
            Issue.record("a call on a connection the server closed cannot succeed")
        } catch {
            #expect(error.code == .io && error.message.contains("PostgreSQL"), "\(error.message)")
            #expect(!error.message.contains("password"))
        }
        #expect(try store.application(code)?.name == "x", "the pool dropped the dead connection and connected again")
    }

    @Test func anUnreachableServerIsNamedWithoutItsPassword() {
        #expect {
            _ = try PostgresDatabase(url: "postgresql://islet:s3cret@127.0.0.1:1/islet?connect_timeout=2")
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == .io && error.message.contains("postgresql://islet:***@127.0.0.1:1/islet") && !error.message.contains("s3cret")
        }
    }

    @Test func placeholdersBecomeNumberedParametersOutsideQuotedText() throws {
        let created = try TestPostgres.createDatabase()
        defer { created.drop() }
        let database = try PostgresDatabase(url: created.url)
        let row = try database.withConnection { (c) throws(StoreError) in
            try c.query("SELECT ? AS a, '?' AS quoted, ?2 AS again, ? AS b", [.int(7), .text("x"), .blob([0, 1, 255])])[0]
        }
        #expect(row["a"] == .int(7) && row["quoted"] == .text("?") && row["again"] == .text("x") && row["b"] == .blob([0, 1, 255]))
    }
}
