import Foundation
import Testing
import IsletAPI
import IsletCore
import IsletStore

/// The package root, from this file's place in Tests/IsletIntegrationTests.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("Third-party Pushwoosh client against Islet (issue 3)")
struct PushwooshClientTests {
    @Test func pypushwooshDrivesTheDeviceAPI() throws {
        let python = packageRoot.appendingPathComponent(".venv/bin/python3")
        try #require(FileManager.default.isExecutableFile(atPath: python.path),
                     "run scripts/install-deps (make test does) to create .venv with pypushwoosh")
        let running = try RunningServer(demo: false)
        let app = try running.admin().create(name: "Shop", bundleID: "com.example.shop")

        let (status, text) = try runProgram(python, [packageRoot.appendingPathComponent("Tests/compat/pypushwoosh_devices.py").path,
                                                     String(running.port), app.application.code.rawValue, app.deviceToken.secret])
        #expect(status == 0, "\(text)")
        #expect(text.contains("pypushwoosh: all device calls answered as expected"))

        // What the client did is in the store, as Islet's own reads see it.
        let devices = running.server.devices
        let device = try #require(try devices.device(hwid: "py-device", in: app.application.code))
        #expect(device.pushToken == String(repeating: "c0ffee", count: 10) + "abcd")
        #expect(device.language == "pt")
        #expect(try devices.tags(hwid: "py-device", in: app.application.code) == ["Level": .integer(7), "Sports": .list(["golf", "ski"]), "Team": .string("red")])
        #expect(try devices.device(hwid: "py-gone", in: app.application.code)?.pushToken == nil)
        #expect(try devices.device(hwid: "py-early", in: app.application.code)?.pushToken == nil, "known by its tags, not registered")
        #expect(try devices.device(hwid: "nobody", in: app.application.code) == nil)
    }
}
