import Synchronization

/// Request counters and a latency histogram, exposed in Prometheus text format at `GET /metrics`.
public final class Metrics: Sendable {
    /// Upper bounds of the latency buckets, in seconds.
    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    private struct Histogram {
        var counts = [Int](repeating: 0, count: Metrics.buckets.count)
        var count = 0
        var sum = 0.0
    }

    private struct State {
        var requests: [String: [Int: Int]] = [:]   // route → status → count
        var latency: [String: Histogram] = [:]      // route → histogram
    }

    private let state = Mutex(State())

    public init() {}

    /// Records one answered request. `route` is an API method name or a fixed label, never free text.
    public func record(route: String, status: Int, seconds: Double) {
        state.withLock { state in
            state.requests[route, default: [:]][status, default: 0] += 1
            var histogram = state.latency[route] ?? Histogram()
            histogram.count += 1
            histogram.sum += seconds
            if let index = Metrics.buckets.firstIndex(where: { seconds <= $0 }) { histogram.counts[index] += 1 }
            state.latency[route] = histogram
        }
    }

    /// The Prometheus exposition text (format 0.0.4).
    public func render() -> String {
        let snapshot = state.withLock { $0 }
        var out = """
            # HELP islet_http_requests_total HTTP requests answered, by API method (route) and HTTP status.
            # TYPE islet_http_requests_total counter\n
            """
        for route in snapshot.requests.keys.sorted() {
            for (status, count) in snapshot.requests[route]!.sorted(by: { $0.key < $1.key }) {
                out += "islet_http_requests_total{route=\"\(route)\",status=\"\(status)\"} \(count)\n"
            }
        }
        out += """
            # HELP islet_http_request_duration_seconds Time from a complete request to its response, by route.
            # TYPE islet_http_request_duration_seconds histogram\n
            """
        for route in snapshot.latency.keys.sorted() {
            let histogram = snapshot.latency[route]!
            var cumulative = 0
            for (index, bound) in Metrics.buckets.enumerated() {
                cumulative += histogram.counts[index]
                out += "islet_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "islet_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(histogram.count)\n"
            out += "islet_http_request_duration_seconds_sum{route=\"\(route)\"} \(histogram.sum)\n"
            out += "islet_http_request_duration_seconds_count{route=\"\(route)\"} \(histogram.count)\n"
        }
        return out
    }
}
