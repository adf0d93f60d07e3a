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
                                      help: "Push outcomes recorded since start, by result (delivery state) and reason (Apple's reason or the skip reason).")
            for (key, count) in delivery.metrics.snapshot().sorted(by: { $0.key < $1.key }) {
                pushes.add(count, labels: ["result": key.result.rawValue, "reason": key.reason])
            }
            out += pushes.text
        }
        let at = now()
        if let queue = try? messages.queueStatistics(at: at) {
            func age(_ since: Date?) -> Double { since.map { max(0, at.timeIntervalSince($0)) } ?? 0 }
            var due = MetricFamily("islet_delivery_jobs_due", .gauge, help: "Messages (or shards) due and not finished: waiting for a worker or being sent.")
            due.add(queue.jobsDue)
            var scheduled = MetricFamily("islet_delivery_jobs_scheduled", .gauge, help: "Scheduled starts not due yet.")
            scheduled.add(queue.jobsScheduled)
            var lag = MetricFamily("islet_delivery_oldest_due_job_age_seconds", .gauge,
                                   help: "How long ago the oldest unfinished due job fell due (0 when none): the delivery lag.")
            lag.add(age(queue.oldestDueAt))
            var owed = MetricFamily("islet_delivery_retries_owed", .gauge,
                                    help: "Pushes owed another attempt (retrying) and starts awaiting their device's update token (unconfirmed).")
            owed.add(queue.retrying, labels: ["state": DeliveryState.retrying.rawValue])
            owed.add(queue.unconfirmed, labels: ["state": DeliveryState.unconfirmed.rawValue])
            var retryLag = MetricFamily("islet_delivery_oldest_due_retry_age_seconds", .gauge,
                                        help: "How long ago the most overdue retry fell due (0 when none is overdue).")
            retryLag.add(age(queue.oldestRetryDueAt))
            out += due.text + scheduled.text + lag.text + owed.text + retryLag.text
        }
        if let diagnostics = client?.diagnostics() {
            var connections = MetricFamily("islet_apns_connections", .gauge, help: "Open HTTP/2 connections to APNs.")
            connections.add(diagnostics.connections)
            var streams = MetricFamily("islet_apns_streams_in_flight", .gauge, help: "Pushes written to APNs and awaiting their answer (open streams).")
            streams.add(diagnostics.inFlight)
            var queued = MetricFamily("islet_apns_pushes_queued", .gauge, help: "Pushes waiting in the APNs client for a connection or a free stream.")
            queued.add(diagnostics.queued)
            var tokens = MetricFamily("islet_apns_provider_tokens_issued_total", .counter,
                                      help: "Provider tokens (JWTs) signed since start: one per key about every 50 minutes; faster growth means renewals.")
            tokens.add(diagnostics.providerTokensIssued)
            out += connections.text + streams.text + queued.text + tokens.text
        }
        return out
    }
}
