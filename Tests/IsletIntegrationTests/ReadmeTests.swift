import Foundation
import Testing
import IsletCore

/// The README's walkthrough, run as written: each `sh` block between the walkthrough markers runs in
/// bash, in order, against a fresh server started as `make run` starts it, and its output must match
/// the `text` block that follows (`…` matches anything; message codes, times, UUIDs and Unix times are
/// masked; line breaks in the expected block are only for reading).
@Suite("README walkthrough runs as written")
struct ReadmeTests {
    struct Step: CustomStringConvertible {
        let script: String
        let expected: String
        let line: Int
        var description: String { "README.md line \(line)" }

        /// Reads-only steps may be run again until they match: delivery is asynchronous, a reader is not.
        var readsOnly: Bool {
            let methods = script.matches(of: try! Regex(#"/json/1\.3/([A-Za-z]+)"#)).map { String(script[$0.range].split(separator: "/").last!) }
            let simulatorWrite = script.contains("/simulator/devices") && script.contains(" -d ")
            return !methods.isEmpty ? methods.allSatisfy { $0.hasPrefix("get") } && !simulatorWrite : script.contains("/simulator/devices/") && !simulatorWrite
        }
    }

    static func steps(_ readme: String) throws -> [Step] {
        let lines = readme.components(separatedBy: "\n")
        guard let begin = lines.firstIndex(of: "<!-- walkthrough: begin -->"), let end = lines.firstIndex(of: "<!-- walkthrough: end -->"),
              begin < end else { throw TestClientError(description: "README.md has no walkthrough markers") }
        var steps: [Step] = []
        var index = begin
        func block(from start: Int) -> (text: String, next: Int) {
            var body: [String] = []
            var cursor = start + 1
            while cursor < end, lines[cursor] != "```" { body.append(lines[cursor]); cursor += 1 }
            return (body.joined(separator: "\n"), cursor + 1)
        }
        while index < end {
            if lines[index] == "```sh" {
                let script = block(from: index)
                var expected = ""
                var next = script.next
                if next < end, lines[next] == "```text" {
                    let output = block(from: next)
                    expected = output.text
                    next = output.next
                }
                steps.append(Step(script: script.text, expected: expected, line: index + 1))
                index = next
            } else {
                index += 1
            }
        }
        return steps
    }

    /// Masks what differs from run to run, and drops line breaks.
    static func normalized(_ text: String) -> String {
        var text = text.replacingOccurrences(of: "\n", with: "")
        let masks: [(String, String)] = [
            (#"[0-9A-Z]{5}-[0-9A-Z]{8}-[0-9A-Z]{8}"#, "<message>"),
            (#"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"#, "<uuid>"),
            (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"#, "<time>"),
            (#"\b1\d{9}\b"#, "<unix>"),
        ]
        for (pattern, mask) in masks { text = text.replacing(try! Regex(pattern), with: mask) }
        return text
    }

    /// Whether `actual` matches `expected`, where `"…"` in `expected` stands for one JSON string (any text without a
    /// quote: a value that differs from run to run, never the fields after it), and `…` elsewhere for any text (what a
    /// sample leaves out on purpose, said so by the `…` itself).
    static func matches(expected: String, actual: String) -> Bool {
        let value = "\u{1}"
        let parts = normalized(expected).replacingOccurrences(of: "\"…\"", with: value).components(separatedBy: "…")
            .map { NSRegularExpression.escapedPattern(for: $0).replacingOccurrences(of: value, with: #""[^"]*""#) }
        guard let pattern = try? Regex("^" + parts.joined(separator: ".*?") + "$").dotMatchesNewlines() else { return false }
        return normalized(actual).wholeMatch(of: pattern) != nil
    }

    @Test func theMatcherMasksWhatChangesAndNothingElse() {
        #expect(Self.matches(expected: #"{"Messages":["…"]}"#, actual: #"{"Messages":["Q3J7B-0D8XK2LM-7TPA94ZC"]}"#))
        #expect(Self.matches(expected: "{\"at\":\"…\",\n\"n\":1}", actual: #"{"at":"2026-11-30T07:55:42Z","n":1}"#))
        #expect(Self.matches(expected: #"{"t":<unix>}"#, actual: #"{"t":1796025341}"#))
        #expect(!Self.matches(expected: #"{"n":1}"#, actual: #"{"n":2}"#))
        #expect(!Self.matches(expected: #"{"state":"ended",…}"#, actual: #"{"state":"active","x":1}"#))
        #expect(!Self.matches(expected: "", actual: "something"))
        // A value's `…` stands for that value only: fields the sample does not show make it fail.
        #expect(!Self.matches(expected: #"{"updated_at":"…","renews_at":null}"#,
                              actual: #"{"updated_at":"2026-11-30T07:55:42Z","started_at":"2026-11-30T07:55:42Z","renews_at":null}"#))
        #expect(Self.matches(expected: #"{"updated_at":"…",…,"renews_at":null}"#,
                             actual: #"{"updated_at":"2026-11-30T07:55:42Z","started_at":"2026-11-30T07:55:42Z","renews_at":null}"#))
    }

    @Test func theWalkthroughRunsAsWritten() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let steps = try Self.steps(readme)
        #expect(steps.count >= 12, "the walkthrough covers register, filter, start, update, end and inspect")
        for method in ["setTags", "createFilter", "startLiveActivity", "updateLiveActivity", "getMessageDetails", "getLiveActivity", "dismissal-date"] {
            #expect(steps.contains { $0.script.contains(method) }, "the walkthrough uses \(method)")
        }

        // As `make run` starts it: the simulator, a fresh var/islet.sqlite in the working directory.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let serve = try ServeProcess(executable: "islet", arguments: ["serve", "--listen", "127.0.0.1:0", "--database",
                                                                      directory.appendingPathComponent("var/islet.sqlite").path, "--apns", "simulator"],
                                     directory: directory)
        defer { kill(serve.process.processIdentifier, SIGKILL) }
        let islet = try builtExecutable("islet").path
        let state = directory.appendingPathComponent("walkthrough-variables.sh").path
        _ = FileManager.default.createFile(atPath: state, contents: nil)

        for step in steps {
            var script = step.script.replacingOccurrences(of: "http://127.0.0.1:8080", with: "http://127.0.0.1:\(serve.port)")
                .replacingOccurrences(of: ".build/release/islet", with: islet)
            // Variables the block assigns carry over to the next blocks, as in one terminal.
            let assigned = Set(step.script.matches(of: try Regex(#"(?m)^([A-Z_][A-Z0-9_]*)="#)).map { String(step.script[$0.range].dropLast()) })
            script = ". \(state)\n" + script + "\n" + assigned.sorted().map { "declare -p \($0) >> \(state)" }.joined(separator: "\n")
            var output = ""
            let matched = try eventually(step.readsOnly ? 10 : 0) {
                output = try Self.bash(script, in: directory)
                return Self.matches(expected: step.expected, actual: output)
            }
            #expect(matched, "\(step): expected\n\(step.expected)\ngot\n\(output)")
            if !matched { break }
        }
    }

    static func bash(_ script: String, in directory: URL) throws -> String {
        try runProgram(URL(fileURLWithPath: "/bin/bash"), ["-c", script], in: directory).output
    }
}
