import IsletCore
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
    /// More families, rendered at each scrape after the HTTP ones (delivery, queue, APNs).
    private let collectors = Mutex<[@Sendable () -> String]>([])

    public init() {}

    /// Adds a source of metric families; `render` returns exposition text and is called at each scrape.
    public func addCollector(_ render: @escaping @Sendable () -> String) {
        collectors.withLock { $0.append(render) }
    }

    /// Records one answered request. `route` is an API method name or a fixed label, never free text.
    /// Records a request that began at `started` and ends now.
    public func record(route: String, status: Int, since started: ContinuousClock.Instant) {
        record(route: route, status: status, seconds: (ContinuousClock.now - started).timeInterval)
    }

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
        var out = Self.buildInfo.text
        out += """
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
            out += Self.histogramSamples("islet_http_request_duration_seconds", labels: "route=\"\(route)\"", bounds: Metrics.buckets,
                                         counts: histogram.counts, count: histogram.count, sum: histogram.sum)
        }
        for collector in collectors.withLock({ $0 }) { out += collector() }
        return out
    }

    /// The build's version as a label, the usual Prometheus way: dashboards and alerts can tell nodes on
    /// different versions apart during an upgrade.
    static var buildInfo: MetricFamily {
        var family = MetricFamily("islet_build_info", .gauge, help: "The version of this islet build, as its label (always 1).")
        family.add(1, labels: ["version": IsletVersion.current])
        return family
    }

    /// A histogram's samples in the text format: a cumulative bucket per bound (`counts[i]` observations fell
    /// in bucket `i`), `+Inf`, sum and count. `labels` is rendered already (`route="x"`), or empty.
    public static func histogramSamples(_ name: String, labels: String, bounds: [Double], counts: [Int], count: Int, sum: Double) -> String {
        let prefix = labels.isEmpty ? "" : labels + ",", own = labels.isEmpty ? "" : "{\(labels)}"
        var out = "", cumulative = 0
        for (index, bound) in bounds.enumerated() {
            cumulative += counts[index]
            out += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)\n"
        }
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(count)\n"
        out += "\(name)_sum\(own) \(sum)\n"
        out += "\(name)_count\(own) \(count)\n"
        return out
    }
}

/// One metric family in the Prometheus text format: its HELP and TYPE lines and its samples.
public struct MetricFamily: Sendable {
    public enum Kind: String, Sendable { case counter, gauge }

    public let name: String
    public let help: String
    public let kind: Kind
    private var samples: [String] = []

    public init(_ name: String, _ kind: Kind, help: String) {
        self.name = name
        self.kind = kind
        self.help = help
    }

    public mutating func add(_ value: Double, labels: KeyValuePairs<String, String> = [:]) {
        let text = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        if labels.isEmpty {
            samples.append("\(name) \(text)")
        } else {
            let rendered = labels.map { "\($0.key)=\"\(Self.escape($0.value))\"" }.joined(separator: ",")
            samples.append("\(name){\(rendered)} \(text)")
        }
    }

    public mutating func add(_ value: Int, labels: KeyValuePairs<String, String> = [:]) { add(Double(value), labels: labels) }

    public var text: String {
        (["# HELP \(name) \(help)", "# TYPE \(name) \(kind.rawValue)"] + samples).joined(separator: "\n") + "\n"
    }

    /// Label values escape backslash, quote and newline (exposition format 0.0.4).
    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
