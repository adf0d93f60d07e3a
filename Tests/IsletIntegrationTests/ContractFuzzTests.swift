import Foundation
import Testing
import IsletCore

/// Issue 12: schemathesis (PyPI, not Islet code) fuzzes a live `islet serve` from its own `/openapi.json`:
/// no 5xx, no crash, every answer as documented. Bounded and deterministic, so it runs in `make test`.
@Suite("Contract fuzzing with schemathesis")
struct ContractFuzzTests {
    @Test func schemathesisFindsNoServerErrorAndNoAnswerOutsideTheDocument() throws {
        let schemathesis = packageRoot.appendingPathComponent(".venv/bin/schemathesis")
        guard FileManager.default.isExecutableFile(atPath: schemathesis.path) else {
            Issue.record("schemathesis is missing: run scripts/install-deps --test")
            return
        }
        let serve = try ServeProcess(arguments: ["--apns", "simulator"])
        defer { kill(serve.process.processIdentifier, SIGKILL) }
        let (status, text) = try runProgram(schemathesis, [
            "run", "http://127.0.0.1:\(serve.port)/openapi.json", "--checks", "all", "--exclude-checks", "positive_data_acceptance",
            "--max-examples", "25", "--generation-deterministic", "--no-color", "--max-response-time", "30",
            "--header", "Authorization: Token SECRET_API_TOKEN"], environment: ["PATH": "/usr/bin:/bin", "HOME": serve.directory.path], in: serve.directory)
        #expect(status == 0, "\(text.suffix(6000))")
        #expect(text.contains("generated") && !text.contains(" 0 generated"), "schemathesis ran cases: \(text.suffix(2000))")
        #expect(serve.process.isRunning, "the server survived: \(serve.log.suffix(4000))")
        #expect(!serve.log.contains("Fatal error"))
    }
}
