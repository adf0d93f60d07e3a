import Foundation
import IsletAPI
import IsletAPNs
import IsletDelivery
import IsletStore

/// The delivery, queue and APNs families of `/metrics`, read at each scrape (docs/PRODUCTION.md lists them,
/// docs/grafana-islet.json charts them).
struct OperatorMetrics: Sendable {
    let delivery: DeliveryService?
    let messages: any MessageStore
    let client: APNsClient?
    let now: @Sendable () -> Date

    func render() -> String {
        var out = ""
        if let delivery {
            var pushes = MetricFamily("islet_pushes_total", .counter,
                                      help: "Push outcomes recorded since start, by result (delivery state), reason (Apple's or FCM's reason, or the skip reason) and service (apns, fcm, or empty for a skip).")
            for (key, count) in delivery.metrics.snapshot().sorted(by: { $0.key < $1.key }) {
                pushes.add(count, labels: ["result": key.result.rawValue, "reason": key.reason, "service": key.service])
            }
            out += pushes.text
            out += Self.lagHistogram(delivery.metrics.lagSnapshot())
            let cluster = delivery.metrics.clusterSnapshot()
            var node = MetricFamily("islet_node_info", .gauge, help: "This node's id among the islet serve processes sharing the database (always 1).")
            node.add(1, labels: ["node": delivery.node.rawValue])
            out += node.text
            out += Self.single("islet_node_liveness", .gauge, "1 while this node's liveness session holds its lock (PostgreSQL; always 1 on SQLite).",
                               delivery.nodeIsAlive ? 1 : 0)
            out += Self.single("islet_cluster_nodes_running", .gauge,
                               "Nodes running on this database, this one included, as counted at its last heartbeat (every 5 s): its looks after a kick are spaced by this many times the look spacing.",
                               Double(delivery.runningNodes))
            out += Self.single("islet_cluster_claims_total", .counter, "Claims this node made that took work: a job or shard, a group of small messages, a group of due retries.",
                               Double(cluster.claims))
            out += Self.single("islet_cluster_empty_looks_total", .counter,
                               "Looks for work by this node's workers that found none, each a claim's queries: many against claims means workers woken for nothing.",
                               Double(cluster.emptyLooks))
            out += Self.single("islet_cluster_withheld_looks_total", .counter,
                               "Looks for work this node did not make because its liveness session was down: the other nodes count it gone meanwhile.",
                               Double(cluster.withheldLooks))
            out += Self.single("islet_cluster_lease_losses_total", .counter,
                               "Claims whose lease was rescued by another node before their outcome was written: that node resumed the work.",
                               Double(cluster.leaseLosses))
            var rescued = MetricFamily("islet_cluster_rescued_total", .counter,
                                       help: "What this node rescued from leases that expired or whose node was gone: leases, jobs and shards, retries.")
            rescued.add(cluster.rescuedLeases, labels: ["what": "leases"])
            rescued.add(cluster.rescuedJobs, labels: ["what": "jobs"])
            rescued.add(cluster.rescuedDeliveries, labels: ["what": "deliveries"])
            out += rescued.text
        }
        let at = now()
        if let queue = try? messages.queueStatistics(at: at) {
            func age(_ since: Date?) -> Double { since.map { max(0, at.timeIntervalSince($0)) } ?? 0 }
            out += Self.single("islet_delivery_jobs_due", .gauge, "Messages (or shards) due and not finished: waiting for a worker or being sent.",
                               Double(queue.jobsDue))
            out += Self.single("islet_delivery_jobs_scheduled", .gauge, "Scheduled starts not due yet.", Double(queue.jobsScheduled))
            out += Self.single("islet_delivery_oldest_due_job_age_seconds", .gauge,
                               "How long ago the oldest unfinished due job fell due (0 when none): the delivery lag.", age(queue.oldestDueAt))
            var owed = MetricFamily("islet_delivery_retries_owed", .gauge,
                                    help: "Pushes owed another attempt (retrying) and starts awaiting their device's update token (unconfirmed).")
            owed.add(queue.retrying, labels: ["state": DeliveryState.retrying.rawValue])
            owed.add(queue.unconfirmed, labels: ["state": DeliveryState.unconfirmed.rawValue])
            out += owed.text
            out += Self.single("islet_delivery_oldest_due_retry_age_seconds", .gauge,
                               "How long ago the most overdue retry fell due (0 when none is overdue).", age(queue.oldestRetryDueAt))
        }
        if let diagnostics = client?.diagnostics() {
            out += Self.single("islet_apns_connections", .gauge, "Open HTTP/2 connections to APNs.", Double(diagnostics.connections))
            out += Self.single("islet_apns_streams_in_flight", .gauge, "Pushes written to APNs and awaiting their answer (open streams).",
                               Double(diagnostics.inFlight))
            out += Self.single("islet_apns_pushes_queued", .gauge, "Pushes waiting in the APNs client for a connection or a free stream.",
                               Double(diagnostics.queued))
            out += Self.single("islet_apns_provider_tokens_issued_total", .counter,
                               "Provider tokens (JWTs) signed since start: one per key about every 50 minutes; faster growth means renewals.",
                               Double(diagnostics.providerTokensIssued))
        }
        return out
    }

    /// `islet_delivery_lag_seconds`, a Prometheus histogram (cumulative buckets).
    static func lagHistogram(_ histogram: DeliveryMetrics.LagHistogram) -> String {
        let name = "islet_delivery_lag_seconds"
        return """
            # HELP \(name) Time from a message falling due (an update: its acceptance) to its pushes leaving Islet, per push; retries not counted.
            # TYPE \(name) histogram

            """ + Metrics.histogramSamples(name, labels: "", bounds: DeliveryMetrics.lagBuckets, counts: histogram.buckets,
                                           count: histogram.count, sum: histogram.sum)
    }

    /// A family of one unlabelled sample.
    static func single(_ name: String, _ kind: MetricFamily.Kind, _ help: String, _ value: Double) -> String {
        var family = MetricFamily(name, kind, help: help)
        family.add(value)
        return family.text
    }
}
