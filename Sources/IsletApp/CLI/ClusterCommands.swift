import Foundation
import IsletCore
import IsletStore

/// `islet cluster`: the `islet serve` nodes sharing a database (issue 14).
struct ClusterCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "cluster", abstract: "Show the islet serve nodes sharing the database.",
        subcommands: [ClusterStatusCommand.self])
}

struct ClusterStatusCommand: CLICommand {
    static let spec = CommandSpec(
        name: "status", abstract: "List the nodes, the leases they hold, and the delivery lag.",
        discussion: """
            Every node that ran in the last hour or still holds a lease: its id and number, host, pid and version,
            whether it is running (PostgreSQL: its liveness session holds its lock; SQLite cannot tell, one server
            owns the file), its last heartbeat, the leases it holds, the jobs, shards and retries they cover, and
            when its oldest lease runs out unless renewed. Then the delivery queue: jobs due and how long the oldest
            has waited. The leases of a node that is gone are rescued by the next running node within a second.
            """,
        options: [Common.database, Common.json])

    let location: StorageLocation
    let json: Bool

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        location = Common.location(arguments)
        json = arguments.flag("--json")
    }

    func run(_ context: CLIContext) throws -> Int32 {
        if case .sqlite(let path) = location { try Common.requireFile(path) }
        let now = Date()
        let nodes: [NodeStatus]
        let queue: DeliveryQueueStatistics
        do {
            let storage = try Storage(location, for: .command)
            nodes = try storage.cluster.nodes(since: now.addingTimeInterval(-3600))
            queue = try storage.messages.queueStatistics(at: now)
        } catch {
            throw CLIError.failure(error.message)
        }
        let lag = queue.oldestDueAt.map { max(0, now.timeIntervalSince($0)) } ?? 0
        if json {
            let list: [JSONValue] = nodes.map { node in
                [
                    "node": .string(node.info.id.rawValue), "number": .int(Int64(node.number)), "host": .string(node.info.host),
                    "pid": .int(Int64(node.info.pid)), "version": .string(node.info.version), "state": .string(Self.state(node)),
                    "started_at": .int(Int64(node.startedAt.timeIntervalSince1970)), "heartbeat_at": .int(Int64(node.heartbeatAt.timeIntervalSince1970)),
                    "leases": .int(Int64(node.leases)), "claimed": .int(Int64(node.claimed)),
                    "lease_until": node.leaseUntil.map { .double(($0.timeIntervalSince1970 * 1000).rounded() / 1000) } ?? .null,
                ]
            }
            let answer: JSONValue = ["nodes": .array(list), "jobs_due": .int(Int64(queue.jobsDue)), "lag_seconds": .double((lag * 1000).rounded() / 1000),
                                     "retrying": .int(Int64(queue.retrying)), "unconfirmed": .int(Int64(queue.unconfirmed))]
            context.print(answer.jsonText)
            return 0
        }
        let header = ["NODE", "NUMBER", "HOST", "PID", "VERSION", "STATE", "HEARTBEAT", "LEASES", "CLAIMED", "LEASE ENDS"]
        var rows = [header]
        for node in nodes {
            rows.append([node.info.id.rawValue, String(node.number), node.info.host, String(node.info.pid), node.info.version, Self.state(node),
                         Self.ago(node.heartbeatAt, now), String(node.leases), String(node.claimed),
                         node.leaseUntil.map { String(format: "in %.1fs", $0.timeIntervalSince(now)) } ?? "-"])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            context.print(row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  "))
        }
        if nodes.isEmpty { context.print("(no node ran in the last hour)") }
        context.print(String(format: "delivery: %d jobs due, the oldest waiting %.1fs; %d retries owed, %d starts unconfirmed",
                             queue.jobsDue, lag, queue.retrying, queue.unconfirmed))
        return 0
    }

    static func state(_ node: NodeStatus) -> String {
        if node.stoppedAt != nil { return "stopped" }
        switch node.alive {
        case true?: return "running"
        case false?: return "gone"
        case nil: return "unknown"
        }
    }

    static func ago(_ date: Date, _ now: Date) -> String { String(format: "%.0fs ago", max(0, now.timeIntervalSince(date))) }
}
