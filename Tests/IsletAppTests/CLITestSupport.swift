import Foundation
import Synchronization
@testable import IsletApp

/// Runs the CLI in-process and captures what it prints.
struct CLIRun {
    let status: Int32
    let output: String
    let errors: String
}

func islet(_ words: [String], environment: [String: String] = [:], input: [String] = []) -> CLIRun {
    let output = Mutex(""), errors = Mutex(""), lines = Mutex(input)
    let context = CLIContext(environment: environment,
                             standardOutput: { text in output.withLock { $0 += text } },
                             standardError: { text in errors.withLock { $0 += text } },
                             standardInput: { lines.withLock { $0.isEmpty ? nil : $0.removeFirst() } })
    let status = CommandLineTool.main(words, context: context)
    return CLIRun(status: status, output: output.withLock { $0 }, errors: errors.withLock { $0 })
}

/// A temporary directory with a database path, removed at the end of the test.
final class Workspace {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("islet-cli-\(UUID().uuidString)")
    var database: String { directory.appendingPathComponent("islet.sqlite").path }

    init() { try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Writes `text` to a file with the given permissions and returns its path.
    func file(_ name: String, _ text: String, mode: Int16 = 0o600) -> String {
        let path = directory.appendingPathComponent(name).path
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        return path
    }
}

/// Test-only keys, generated for these tests with `openssl genpkey`; they sign nothing real.
enum TestKeys {
    static let p256 = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYWMhT7CTWEmDNML6
        UfT2nogHHgI9yuHqwl2gN81fGW+hRANCAARUdfjQIFTK2JQKsMdBJOsH4YNtPesB
        a3PuQPKTHcSSNvBWJTE5tITsD7kLELT4sJPUvIdVV7rGDyYNjkLyP2et
        -----END PRIVATE KEY-----
        """
    static let p384 = """
        -----BEGIN PRIVATE KEY-----
        MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDCVCzuYb5ZW7QNzgLbw
        5m/lgLf8KMFyXuNWJnrs+QobhYUAp3rwKMiNSQl09JFpNXChZANiAASBFFRECJSq
        m6oV2TsFJ0gzAWDEdWbtet4Xmb2p/VjaY1D6LU0CnJBfnHtcddSfi6Qn2zbLMrez
        fyJzb7CNU2g6N4zhOunp4OK/7P+P5BBMqYwNvSakbzpvRiFtTISXuEY=
        -----END PRIVATE KEY-----
        """
    /// An RSA key, which some people take for an APNs key (a throwaway made for this test).
    static let rsa = """
        -----BEGIN PRIVATE KEY-----
        MIICdAIBADANBgkqhkiG9w0BAQEFAASCAl4wggJaAgEAAoGBANbMDix7RhH49XKR
        HJekXEyyeafU6ySgkfZbexWZ56n6Jy1smZhLZIAFjRi0SfgvvKa3D0ZiN97B1Wr/
        +R2ceDYGf0Q2dzg+aXcbNdJdlUpT5OotLiL1w92+HX5fTTmK3UFpl7L33vRJmzpS
        cj7RMhrwRTz3IAAUiR8E04BHhHqFAgMBAAECf33bEnL9yBC/zxFR9W7k3zARYzbz
        itPrQZsX/wapJxRxfoMfHuAdTMW2evX+rVi+n8sPd+PFqPbcnDAVy+GNzODIGulF
        E9eGXLwHk5YqR3n1/oiZNrisglbKH3ScAZ7AU3lf3eCb60dgaJLDUrRTAuG35cvP
        oJvxMnglZ/2mvYECQQDtpmB0tY0V9hkdH9dy4uL3aE6xPJYZzejHv061oJ3HHEcj
        CpNHr82ZdwInP4QUQ0ohleb2WnjtdS2eKxjvVfJRAkEA52HyehiElVQ0XSDgDQ8s
        7MAHsvzzc3XvVScnlhzbUzSldAyxpkqmLvfufUuII9FzZvRuZL378MuPiQDqqNqj
        9QJAD9iyQdYBTF+WmRyQbza1z62C4cqab6oNRZR6GR5Wpvo5vBpua69LVFpdKGTR
        19AM12R5fB/YRG0114AkL4FZoQJBALFgJMH0ia7wHjRGP3vDZm0XyM8tmnOotRBS
        M8af2IKwmSWdlZIlJ8BZ0Dm87WCH8C+8seQIwFqXsjEUws8uzQECQD6NJhtyzcq2
        sELsq2ekXJ6St/tZf/dz6mFjSQFV6z72eDuONAIjTmIFdb/Twc0VRebiY8UyZFYr
        8ChKqEz5qB4=
        -----END PRIVATE KEY-----
        """
}
