import Foundation
import Testing

/// The console in a real browser (issue 17): headless Chromium from Debian, driven by Selenium from PyPI
/// (Tests/Browser/console_browser.py), against `islet serve --apns simulator` as a real process with its demo.
/// Screenshots of every page go to .build/test-output/console-<engine>/, each checked not to be blank.
@Suite("Console in headless Chromium (issue 17)")
struct ConsoleBrowserTests {
    @Test func signInWatchAnActivityComposeAnUpdateAndSeeThePhoneChange() throws {
        let python = packageRoot.appendingPathComponent(".venv/bin/python3")
        try #require(FileManager.default.isExecutableFile(atPath: python.path), "run scripts/install-deps --test (make test does) to create .venv with selenium")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"),
                     "run scripts/install-deps --test (make test does) to install Debian's chromium and chromium-driver")
        let serve = try ServeProcess(arguments: ["--apns", "simulator"])
        let screenshots = packageRoot.appendingPathComponent(".build/test-output/console-\(IntegrationEngine.isPostgreSQL ? "postgresql" : "sqlite")")
        try? FileManager.default.removeItem(at: screenshots)
        // Chromium keeps its profile and crash files in HOME: a throwaway one beside the server's files.
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = serve.directory.path
        let (status, output) = try runProgram(python, [packageRoot.appendingPathComponent("Tests/Browser/console_browser.py").path,
                                                       "http://127.0.0.1:\(serve.port)", screenshots.path], environment: environment)
        #expect(status == 0, "\(output)\n--- islet serve's log:\n\(serve.log.suffix(4000))")
        #expect(output.contains("console browser tests: all"), "\(output)")
        let taken = (try? FileManager.default.contentsOfDirectory(atPath: screenshots.path).filter { $0.hasSuffix(".png") }) ?? []
        #expect(taken.count >= 13, "a screenshot of each page: \(taken.sorted())")
    }
}
