import Foundation
import Testing
import IsletAPI
import IsletCore
import IsletHTTP

/// Issue 12, E6: the public device API is rate limited per client address and per application.
@Suite("Rate limits (E6)")
struct RateLimitTests {
    func register(_ running: RunningServer, token: String, hwid: String, forwardedFor: String? = nil) throws -> RawHTTPResponse {
        var headers = ["Authorization": "Token \(token)"]
        if let forwardedFor { headers["X-Forwarded-For"] = forwardedFor }
        let body = JSONValue.object(["request": ["application": "XXXXX-XXXXX", "hwid": .string(hwid),
                                                 "push_token": .string(String(repeating: "ab", count: 32))]]).jsonText
        return try request(running.port, "/json/1.3/registerDevice", body: body, headers: headers)
    }

    @Test func aClientOverItsRateGets429WithRetryAfterAndOthersAreUnaffected() throws {
        // One call a minute, bursts of 2: the third call in a row is over, whatever the machine's speed.
        let running = try RunningServer(rateLimits: RateLimits(devicePerAddress: RateLimit(perSecond: 1.0 / 60, burst: 2)))
        let device = try running.admin().issueToken(for: ApplicationCode("XXXXX-XXXXX")!, kind: .device, label: "app").secret
        #expect(try register(running, token: device, hwid: "a").status == 200)
        #expect(try register(running, token: device, hwid: "b").status == 200)
        let refused = try register(running, token: device, hwid: "c")
        #expect(refused.status == 429)
        #expect(refused.statusCode == 429)
        #expect(refused.headers["retry-after"].flatMap(Int.init).map { (1...60).contains($0) } == true, "\(refused.headers)")
        #expect(refused.message?.hasPrefix("rate limit: one client address (127.0.0.1) on the device API may make") == true, "\(refused.message ?? "")")
        #expect(try running.server.devices.device(hwid: "c", in: ApplicationCode("XXXXX-XXXXX")!) == nil, "nothing applied")

        // Behind a proxy on this machine, each forwarded client has its own bucket; a forged earlier entry is ignored.
        #expect(try register(running, token: device, hwid: "d", forwardedFor: "203.0.113.7").status == 200)
        #expect(try register(running, token: device, hwid: "e", forwardedFor: "198.51.100.1, 203.0.113.7").status == 200)
        #expect(try register(running, token: device, hwid: "f", forwardedFor: "203.0.113.7").status == 429)
        #expect(try register(running, token: device, hwid: "g", forwardedFor: "203.0.113.8").status == 200)
        // The backend's server token is not held to the device limits.
        for hwid in ["h", "i", "j"] { #expect(try register(running, token: "SECRET_API_TOKEN", hwid: hwid).status == 200) }
    }

    /// An update is answered later on SQLite (issue 43): its token, limit and refusals answer as any call's do.
    @Test func anUpdateIsAuthenticatedLimitedAndRefusedAsAnyCall() throws {
        let running = try RunningServer(rateLimits: RateLimits(serverPerToken: RateLimit(perSecond: 1.0 / 60, burst: 2)))
        func update(token: String) throws -> RawHTTPResponse {
            let body = JSONValue.object(["request": ["application": "XXXXX-XXXXX", "auth": .string(token), "notifications": [[
                "live_activity": ["event": "update", "content-state": ["n": 1]], "live_activity_id": "NO_SUCH_ACTIVITY"]]]]).jsonText
            return try request(running.port, "/json/1.3/updateLiveActivity", body: body)
        }
        let wrong = try update(token: "NOT_A_TOKEN")
        #expect(wrong.status == 401 && wrong.message?.contains("not a valid server API token") == true, "\(wrong)")
        let unknown = try update(token: "SECRET_API_TOKEN")
        #expect(unknown.status == 400 && unknown.message?.hasPrefix("notifications[0].live_activity_id") == true, "\(unknown)")
        #expect(try update(token: "SECRET_API_TOKEN").status == 400)
        let refused = try update(token: "SECRET_API_TOKEN")
        #expect(refused.status == 429 && refused.statusCode == 429, "\(refused)")
        #expect(refused.headers["retry-after"].flatMap(Int.init).map { (1...60).contains($0) } == true, "\(refused.headers)")
    }

    @Test func theApplicationsDeviceTokensShareOneLimit() throws {
        let running = try RunningServer(rateLimits: RateLimits(devicePerAddress: nil, devicePerToken: RateLimit(perSecond: 1.0 / 60, burst: 1)))
        let admin = try running.admin()
        let first = try admin.issueToken(for: ApplicationCode("XXXXX-XXXXX")!, kind: .device, label: "1").secret
        let second = try admin.issueToken(for: ApplicationCode("XXXXX-XXXXX")!, kind: .device, label: "2").secret
        #expect(try register(running, token: first, hwid: "a").status == 200)
        let refused = try register(running, token: second, hwid: "b")
        #expect(refused.status == 429)
        #expect(refused.message?.hasPrefix("rate limit: the device API tokens of XXXXX-XXXXX may make") == true)
    }
}

@Suite("Token buckets and client addresses (E6), pure")
struct TokenBucketTests {
    @Test func aBucketAllowsItsBurstThenRefillsAtItsRate() {
        let limit = RateLimit(perSecond: 2, burst: 3)
        var bucket = TokenBucket(limit: limit, now: 100)
        #expect(bucket.take(limit, now: 100) == nil && bucket.take(limit, now: 100) == nil && bucket.take(limit, now: 100) == nil)
        #expect(bucket.take(limit, now: 100) == 1, "empty: one token comes back in half a second, said as 1 s")
        #expect(bucket.take(limit, now: 100.5) == nil)
        #expect(bucket.take(limit, now: 100.5) == 1)
        #expect(bucket.isFull(limit, now: 102) && !bucket.isFull(limit, now: 100.6))
        let slow = RateLimit(perSecond: 0.1, burst: 1)
        var rare = TokenBucket(limit: slow, now: 0)
        #expect(rare.take(slow, now: 0) == nil)
        #expect(rare.take(slow, now: 1) == 9)
    }

    @Test func ratesParseFromTheCommandLine() {
        #expect(RateLimit.parse("50") == .some(RateLimit(perSecond: 50, burst: 100)))
        #expect(RateLimit.parse("5/7") == .some(RateLimit(perSecond: 5, burst: 7)))
        #expect(RateLimit.parse("2") == .some(RateLimit(perSecond: 2, burst: 10)))
        #expect(RateLimit.parse("off") == .some(nil) && RateLimit.parse("0") == .some(nil))
        for bad in ["", "-1", "x", "5/0", "5/", "1/2/3", "inf"] { #expect(RateLimit.parse(bad) == nil, "\(bad)") }
    }

    @Test func theClientIsThePeerUnlessALocalProxyForwardedIt() {
        #expect(RateLimiter.clientAddress(peer: "203.0.113.9", forwardedFor: ["1.2.3.4"]) == "203.0.113.9", "a remote peer cannot claim another address")
        #expect(RateLimiter.clientAddress(peer: "127.0.0.1", forwardedFor: ["1.2.3.4, 203.0.113.9"]) == "203.0.113.9")
        #expect(RateLimiter.clientAddress(peer: "127.0.0.1", forwardedFor: ["1.2.3.4", "203.0.113.9"]) == "203.0.113.9",
                "a second header line (HAProxy's) is read after the first, which the client wrote")
        #expect(RateLimiter.clientAddress(peer: "::1", forwardedFor: []) == "::1")
    }

    @Test func anIPv6ClientIsLimitedByItsSlash64() {
        #expect(ClientAddress.key("2001:db8:1:2:aaaa::1") == ClientAddress.key("2001:db8:1:2:bbbb:cccc:dddd:eeee"))
        #expect(ClientAddress.key("2001:db8:1:2::1") != ClientAddress.key("2001:db8:1:3::1"))
        #expect(ClientAddress.key("2001:db8:1:2::1") == "2001:0db8:0001:0002::/64")
        #expect(ClientAddress.key("::ffff:203.0.113.7") == "203.0.113.7" && ClientAddress.key("203.0.113.7") == "203.0.113.7")
    }

    @Test func aLimiterForgetsFullBucketsOnlyWhenLargeAndRarely() {
        let clock = ManualSeconds()
        let limiter = RateLimiter(limit: RateLimit(perSecond: 1, burst: 1), pruneAbove: 3, now: { clock.value })
        for key in ["a", "b", "c", "d"] { #expect(limiter.take(key) == nil) }
        #expect(limiter.take("a") != nil, "a's bucket is remembered and empty")
        clock.value = 20   // every bucket is full again
        #expect(limiter.take("e") == nil)
        #expect(limiter.trackedKeys == 1, "the sweep dropped the full buckets")
    }
}

/// A clock the test sets by hand (one thread sets it, the limiter reads it under its own lock).
final class ManualSeconds: @unchecked Sendable {
    var value = 0.0
}
