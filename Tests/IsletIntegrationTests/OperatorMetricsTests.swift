import Foundation
import Testing
import IsletCore
import IsletDelivery
import IsletStore
import Synchronization

/// `/metrics` as an operator scrapes it during an APNs outage and after (issue 11): push outcomes by result
/// and reason, the retry backlog and its lag, all read through HTTP.
@Suite("Operator metrics at /metrics")
struct OperatorMetricsTests {
    /// The samples of a scrape, keyed by the whole series (`name{labels}`).
    static func scrape(_ port: Int) throws -> [String: Double] {
        let response = try request(port, method: "GET", "/metrics")
        #expect(response.status == 200)
        var samples: [String: Double] = [:]
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                Issue.record("not a sample line: \(line)")
                continue
            }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    /// An APNs outage the test switches off.
    final class Outage: Sendable {
        let on = Atomic<Bool>(true)
    }

    func outageWorld(_ outage: Outage) throws -> (LiveActivityWorld, String) {
        let transport = RecordingTransport { _, _ in outage.on.load(ordering: .relaxed) ? PushOutcome(status: 503, reason: "ServiceUnavailable") : .delivered }
        let world = try LiveActivityWorld(transport: transport)
        let code = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third", "old_phone", "mid_phone", "no_token"]]))]]))[0]
        #expect(try eventually { try world.running.server.messages.messageDetails(code: code, in: ApplicationCode(world.code)!)?.pending[.retrying] == 3 })
        return (world, code)
    }

    @Test func anOutageShowsAsRetriesOwedWithTheirReasonThenAsSent() throws {
        let outage = Outage()
        let (world, _) = try outageWorld(outage)
        // The test clock stands still, so the retries (due a second later) are not taken yet; the counters are
        // updated just after the records commit, so the scrape waits for them.
        var during: [String: Double] = [:]
        #expect(try eventually {
            during = try Self.scrape(world.running.port)
            return during["islet_pushes_total{result=\"retrying\",reason=\"ServiceUnavailable\",service=\"apns\"}"] == 3 && during["islet_delivery_jobs_due"] == 0
        })
        #expect(during["islet_pushes_total{result=\"retrying\",reason=\"ServiceUnavailable\",service=\"apns\"}"] == 3, "\(during)")
        #expect(during["islet_pushes_total{result=\"skipped\",reason=\"no push-to-start token\",service=\"\"}"] == 1, "\(during)")
        #expect(during["islet_pushes_total{result=\"sent\",reason=\"\",service=\"apns\"}"] == nil)
        #expect(during["islet_delivery_retries_owed{state=\"retrying\"}"] == 3)
        #expect(during["islet_delivery_retries_owed{state=\"unconfirmed\"}"] == 0)
        #expect(during["islet_delivery_oldest_due_retry_age_seconds"] == 0, "not due yet")
        #expect(during["islet_delivery_jobs_due"] == 0, "the job is finished; only retries are owed")

        outage.on.store(false, ordering: .relaxed)
        #expect(try eventually {
            if try Self.scrape(world.running.port)["islet_pushes_total{result=\"sent\",reason=\"\",service=\"apns\"}"] == 3 { return true }
            world.clock.advance(5)
            world.running.server.delivery?.kick()
            return false
        })
        let after = try Self.scrape(world.running.port)
        #expect(after["islet_delivery_retries_owed{state=\"retrying\"}"] == 0)
        #expect(after["islet_delivery_oldest_due_retry_age_seconds"] == 0)
        #expect(after["islet_pushes_total{result=\"retrying\",reason=\"ServiceUnavailable\",service=\"apns\"}"] == 3, "a counter never goes down")
    }

    /// An outage longer than a push's lifetime: the pushes settle as expired at the claim, and count.
    @Test func pushesThatExpireInAnOutageAreCounted() throws {
        let outage = Outage()
        let (world, _) = try outageWorld(outage)
        // Expired at a claim (reason "") or when a retry would fall past the lifetime (Apple's last reason).
        func expired(_ samples: [String: Double]) -> Double {
            samples.filter { $0.key.hasPrefix("islet_pushes_total{result=\"expired\"") }.values.reduce(0, +)
        }
        #expect(try eventually {
            if expired(try Self.scrape(world.running.port)) == 3 { return true }
            world.clock.advance(600)
            world.running.server.delivery?.kick()
            return false
        })
        let after = try Self.scrape(world.running.port)
        #expect(after["islet_delivery_retries_owed{state=\"retrying\"}"] == 0, "\(after.filter { $0.key.contains("pushes") || $0.key.contains("owed") })")
    }

    @Test func retriesNobodyTakesShowAsLag() throws {
        let outage = Outage()
        let (world, _) = try outageWorld(outage)
        _ = world.running.server.delivery?.shutdown(deadline: .now + .seconds(5))   // nobody retries them now
        world.clock.advance(30)
        let stuck = try Self.scrape(world.running.port)
        #expect(stuck["islet_delivery_retries_owed{state=\"retrying\"}"] == 3)
        let lag = try #require(stuck["islet_delivery_oldest_due_retry_age_seconds"])
        #expect(lag >= 28 && lag <= 30, "first retry due 0.5–1 s after the answer: \(lag)")
    }

    /// A start to `first_third` with a `send_date` that far ahead of the world's clock (rounded down to the minute).
    static func scheduleStart(in world: LiveActivityWorld, secondsAhead: TimeInterval) throws {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        let sendDate = formatter.string(from: world.clock.now.addingTimeInterval(secondsAhead))
        _ = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(
            ["devices": ["first_third"], "send_date": .string(sendDate)]))]]))
    }

    @Test func aScheduledStartIsCountedAsScheduledUntilItFallsDueAndThenAsLag() throws {
        // No transport answer matters here: the job is only looked at, never claimed before it is due.
        let world = try LiveActivityWorld()
        try Self.scheduleStart(in: world, secondsAhead: 3600)
        let before = try Self.scrape(world.running.port)
        #expect(before["islet_delivery_jobs_scheduled"] == 1 && before["islet_delivery_jobs_due"] == 0, "\(before)")
        _ = world.running.server.delivery?.shutdown(deadline: .now + .seconds(5))   // nobody sends it: it stays due
        world.clock.advance(3600 + 90)
        let after = try Self.scrape(world.running.port)
        #expect(after["islet_delivery_jobs_scheduled"] == 0 && after["islet_delivery_jobs_due"] == 1, "\(after)")
        let lag = try #require(after["islet_delivery_oldest_due_job_age_seconds"])
        #expect(lag >= 60 && lag <= 150, "due for about 90 s (the send date is rounded to the minute): \(lag)")
    }

    @Test func aPushSentLateCountsItsLagFromTheMessageFallingDue() throws {
        let world = try LiveActivityWorld()
        try Self.scheduleStart(in: world, secondsAhead: 3600)
        #expect(try Self.scrape(world.running.port)["islet_delivery_lag_seconds_count"] == 0)
        // Due 60–120 s before the clock (the send date is rounded down to the minute), which stands still while it is sent.
        world.clock.advance(3600 + 60)
        world.running.server.delivery?.kick()
        var samples: [String: Double] = [:]
        #expect(try eventually {
            samples = try Self.scrape(world.running.port)
            return samples["islet_delivery_lag_seconds_count"] == 1
        }, "\(samples)")
        #expect(samples["islet_delivery_lag_seconds_bucket{le=\"30.0\"}"] == 0, "\(samples)")
        #expect(samples["islet_delivery_lag_seconds_bucket{le=\"300.0\"}"] == 1, "\(samples)")
        let sum = try #require(samples["islet_delivery_lag_seconds_sum"])
        #expect(sum >= 60 && sum <= 121, "\(sum)")
    }

    /// A look for work that found none counts as such, not as a claim; one that took the start counts as a claim.
    @Test func looksForWorkThatFoundNoneAreCountedApartFromClaims() throws {
        let world = try LiveActivityWorld()
        var samples: [String: Double] = [:]
        // The workers look as they start, and find nothing.
        #expect(try eventually {
            samples = try Self.scrape(world.running.port)
            return (samples["islet_cluster_empty_looks_total"] ?? 0) >= 1
        }, "\(samples)")
        #expect(samples["islet_cluster_claims_total"] == 0, "\(samples)")
        let code = try world.messageCodes(try world.server("startLiveActivity", ["notifications": [.object(startNotification(["devices": ["first_third"]]))]]))
        _ = try world.waitUntilSent(code)
        #expect(try eventually { try Self.scrape(world.running.port)["islet_cluster_claims_total"] == 1 })
    }

    /// docs/grafana-islet.json charts only metric families this server exposes.
    @Test func theGrafanaDashboardQueriesOnlyExposedMetrics() throws {
        let running = try RunningServer()   // the built-in simulator behind the real APNs client, as `make run`
        _ = try request(running.port, "/json/1.3/getApplication", body: #"{"request":{"application":"XXXXX-XXXXX","auth":"SECRET_API_TOKEN"}}"#)
        let exposition = String(decoding: try request(running.port, method: "GET", "/metrics").body, as: UTF8.self)
        let families = Set(exposition.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dashboard = try #require(try JSONParser.parse(Array(try Data(contentsOf: root.appendingPathComponent("docs/grafana-islet.json")))).objectValue)
        let panels = try #require(dashboard["panels"]?.arrayValue)
        #expect(panels.count >= 6)
        var used: Set<String> = []
        for panel in panels {
            for target in panel.objectValue?["targets"]?.arrayValue ?? [] {
                let expression = try #require(target.objectValue?["expr"]?.stringValue)
                for match in expression.matches(of: try Regex("islet_[a-z_]+")) {
                    var name = String(expression[match.range])
                    for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && !families.contains(name) { name.removeLast(suffix.count) }
                    used.insert(name)
                }
            }
        }
        #expect(used.subtracting(families).isEmpty, "the dashboard queries metrics Islet does not expose: \(used.subtracting(families).sorted())")
        #expect(families.subtracting(used).isEmpty, "metrics no panel shows: \(families.subtracting(used).sorted())")
    }
}
