import Foundation
import Testing
import IsletCore
import IsletSQL
import IsletSQLite
import IsletStore
@testable import IsletApp

/// `islet cluster status` (issue 14): the nodes of a database, their leases, and the delivery lag.
@Suite("islet cluster status")
struct ClusterCommandTests {
    let workspace = Workspace()

    @Test func listsTheNodesTheirLeasesAndTheQueue() throws {
        _ = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database])
        let database = try SQLiteDatabase(path: workspace.database)
        let cluster = SQLClusterStore(database: database)
        let now = Date()
        _ = try cluster.join(NodeInfo(id: NodeID("edge-a")!, host: "a.example", pid: 41, version: "0.1.0"), at: now)
        _ = try cluster.join(NodeInfo(id: NodeID("edge-b")!, host: "b.example", pid: 42, version: "0.1.0"), at: now)
        try cluster.leave(NodeID("edge-b")!, at: now)

        let text = islet(["cluster", "status", "--database", workspace.database])
        #expect(text.status == 0, "\(text.errors)")
        let lines = text.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("NODE") == true)
        #expect(lines.contains { $0.hasPrefix("edge-a ") && $0.contains("a.example") && $0.contains("unknown") }, "SQLite cannot tell a live node: \(lines)")
        #expect(lines.contains { $0.hasPrefix("edge-b ") && $0.contains("stopped") })
        #expect(lines.last?.hasPrefix("delivery: 0 jobs due") == true)

        let json = islet(["cluster", "status", "--json", "--database", workspace.database])
        let answer = try #require(try JSONParser.parse(json.output.trimmingCharacters(in: .whitespacesAndNewlines)).objectValue)
        let nodes = (answer["nodes"]?.arrayValue ?? []).compactMap { $0.objectValue }
        #expect(nodes.map { $0["node"] } == ["edge-a", "edge-b"] && nodes.map { $0["number"] } == [1, 2])
        #expect(nodes.allSatisfy { $0["leases"] == 0 && $0["claimed"] == 0 } && answer["jobs_due"] == 0)
    }

    @Test func refusesAMissingDatabase() {
        let run = islet(["cluster", "status", "--database", workspace.directory.appendingPathComponent("none.sqlite").path])
        #expect(run.status == 1 && run.errors.contains("no database at"))
    }
}
