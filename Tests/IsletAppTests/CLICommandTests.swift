import Foundation
import Testing
import IsletCore
import IsletSQL
import IsletSQLite
import IsletStore
@testable import IsletApp

@Suite("islet app …")
struct CLICommandTests {
    let workspace = Workspace()

    func create(_ extra: [String] = []) throws -> JSONObject {
        let run = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop", "--database", workspace.database, "--json"] + extra)
        #expect(run.status == 0, "\(run.errors)")
        return try #require(try JSONParser.parse(run.output.trimmingCharacters(in: .newlines)).objectValue)
    }

    @Test func createPrintsExactlyCodeAndBothTokensAsJSON() throws {
        let object = try create()
        #expect(object.keys == ["application", "api_token", "device_token"])
        let code = try #require(object["application"]?.stringValue)
        #expect(ApplicationCode(code) != nil)
        let api = try #require(object["api_token"]?.stringValue), device = try #require(object["device_token"]?.stringValue)
        #expect(api.count == 40 && device.count == 40 && api != device)
        let store = SQLApplicationStore(database: try SQLiteDatabase(path: workspace.database))
        #expect(try store.tokens(of: ApplicationCode(code)!).map(\.kind) == [.api, .device])
    }

    @Test func createTextNamesTheTokensAndTheDatabaseComesFromTheEnvironment() throws {
        let run = islet(["app", "create", "--name", "Shop", "--bundle-id", "com.example.shop"], environment: ["ISLET_DATABASE": workspace.database])
        #expect(run.status == 0)
        #expect(run.output.hasPrefix("Created application "))
        #expect(run.output.contains("server API token:  "))
        #expect(run.output.contains("device API token:  "))
        #expect(FileManager.default.fileExists(atPath: workspace.database))
    }

    @Test func listAndShow() throws {
        let code = try #require(try create()["application"]?.stringValue)
        let list = islet(["app", "list", "--database", workspace.database])
        #expect(list.output == "\(code)  com.example.shop  Shop  (no APNs key)\n")
        let show = islet(["app", "show", code, "--database", workspace.database, "--json"])
        let object = try #require(try JSONParser.parse(show.output.trimmingCharacters(in: .newlines)).objectValue)
        #expect(object["code"] == .string(code))
        #expect(object["apns"] == .null)
        #expect(object["tokens"]?.arrayValue?.count == 2)
        let text = islet(["app", "show", code, "--database", workspace.database])
        #expect(text.output.contains("bundle id:  com.example.shop"))
        #expect(text.output.contains("server API  active"))
    }

    @Test func tokenCreateAndRevokeByIdOrValue() throws {
        let created = try create()
        let code = created["application"]!.stringValue!
        let issued = islet(["app", "token", "create", code, "--kind", "device", "--label", "ios", "--database", workspace.database, "--json"])
        #expect(issued.status == 0)
        let token = try #require(try JSONParser.parse(issued.output.trimmingCharacters(in: .newlines)).objectValue)
        #expect(token["kind"] == "device")
        let id = try #require(token["id"]?.stringValue)

        #expect(islet(["app", "token", "revoke", code, id, "--database", workspace.database]).output == "Revoked token \(id) of \(code).\n")
        let again = islet(["app", "token", "revoke", code, id, "--database", workspace.database])
        #expect(again.status == 1)
        #expect(again.errors == "error: token \(id) is already revoked\n")

        let byValue = islet(["app", "token", "revoke", code, created["api_token"]!.stringValue!, "--database", workspace.database])
        #expect(byValue.status == 0)
        let unknown = islet(["app", "token", "revoke", code, "tk_000000000000", "--database", workspace.database])
        #expect(unknown.errors == "error: application \(code) has no token tk_000000000000\n")
    }

    @Test func setUpdateBudgetStoresTheBudgetAndRefusesWhatIsOutOfBounds() throws {
        let code = try #require(try create()["application"]?.stringValue)
        let run = islet(["app", "set-update-budget", code, "--per-hour", "20", "--database", workspace.database])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "Activities of \(code) now get 20 priority-10 updates an hour (60 on devices with frequent updates on); the rest go at priority 5.\n")
        let store = SQLApplicationStore(database: try SQLiteDatabase(path: workspace.database))
        #expect(try store.application(ApplicationCode(code)!)?.updateBudget == UpdateBudget(perHour: 20, frequentPerHour: 60))
        #expect(islet(["app", "show", code, "--database", workspace.database]).output.contains(
            "  budget:     20 priority-10 updates an hour per activity, 60 with frequent updates on\n"))
        for (arguments, message) in [
            (["--per-hour", "many"], "error: --per-hour: 'many' is not a whole number of updates an hour\n"),
            (["--frequent-per-hour", "5"], "error: --frequent-per-hour: must be at least the per-hour budget (20): frequent updates raise a device's budget, got 5\n"),
            (["--per-hour", "3601", "--frequent-per-hour", "4000"], "error: --per-hour: must be a number of updates an hour from 0 to 3600, got 3601\n"),
            ([], "error: give --per-hour, --frequent-per-hour or both\n"),
        ] {
            let refused = islet(["app", "set-update-budget", code] + arguments + ["--database", workspace.database])
            #expect(refused.status != 0 && refused.errors.hasSuffix(message), "\(refused.errors)")
        }
        #expect(try store.application(ApplicationCode(code)!)?.updateBudget == UpdateBudget(perHour: 20, frequentPerHour: 60), "nothing half-applied")
    }

    /// Issue 44: who may set a device's User ID, the app by default.
    @Test func setUserIDSourceStoresTheChoiceAndRefusesAnyOther() throws {
        let code = try #require(try create()["application"]?.stringValue)
        let store = SQLApplicationStore(database: try SQLiteDatabase(path: workspace.database))
        #expect(try store.application(ApplicationCode(code)!)?.userIDSource == .app)
        let refused = islet(["app", "set-user-id-source", code, "backend", "--database", workspace.database])
        #expect(refused.status != 0 && refused.errors.hasSuffix("error: source: 'backend' must be app or server\n"), "\(refused.errors)")
        let run = islet(["app", "set-user-id-source", code, "server", "--database", workspace.database])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "Devices of \(code) now take a User ID from the server only (registerDevice with a server API token); a userId the app sends is not stored.\n")
        #expect(try store.application(ApplicationCode(code)!)?.userIDSource == .server)
        #expect(islet(["app", "show", code, "--database", workspace.database]).output.contains("  user IDs:   set by the server only\n"))
    }

    /// Issue 44: a tag's type from the server side; a refusal names the rule and leaves everything as it was.
    @Test func appTagListsSetsTheTypeAndDeletes() throws {
        let code = try #require(try create()["application"]?.stringValue)
        let application = try #require(ApplicationCode(code))
        let devices = SQLDeviceStore(database: try SQLiteDatabase(path: workspace.database))
        for (n, level) in [(1, "three"), (2, "four")] {
            _ = try devices.registerDevice(DeviceRegistration(hwid: "h\(n)", pushToken: String(repeating: "a\(n)", count: 16)),
                                           tags: [("Level", .string(level))], in: application, at: Date())
        }
        let database = ["--database", workspace.database]
        #expect(islet(["app", "tag", "list", code] + database).output == "NAME   TYPE     DEVICES\nLevel  string   2\n")
        let refused = islet(["app", "tag", "set-type", code, "Level", "integer"] + database)
        #expect(refused.status == 1)
        #expect(refused.errors == "error: tag 'Level' is of type string on 2 devices: their values would be deleted; run again with --drop-values to do so\n")
        #expect(try devices.tags(hwid: "h1", in: application)?["Level"] == .string("three"), "nothing half-applied")
        let changed = islet(["app", "tag", "set-type", code, "Level", "integer", "--drop-values"] + database)
        #expect(changed.output == "Tag 'Level' of \(code) is now of type integer (was string); the values of 2 devices were deleted.\n", "\(changed.errors)")
        #expect(islet(["app", "tag", "set-type", code, "Topics", "list"] + database).output
                == "Tag 'Topics' of \(code) is now of type list; devices' values of another type will be skipped.\n")
        #expect(islet(["app", "tag", "set-type", code, "Language", "integer"] + database).errors
                == "error: tag 'Language' is built in (Language, OS Version, Timezone, User ID, Platform): registerDevice sets it\n")
        #expect(islet(["app", "tag", "set-type", code, "Level", "version"] + database).errors.hasSuffix("error: type: 'version' must be one of string, integer, list, boolean, date\n"))
        #expect(islet(["app", "tag", "list", code, "--json"] + database).output
                == #"{"tags":[{"name":"Level","type":"integer","devices":0},{"name":"Topics","type":"list","devices":0}]}"# + "\n")
        #expect(islet(["app", "tag", "delete", code, "Topics"] + database).output == "Deleted tag 'Topics' of \(code) and the values of 0 devices.\n")
        #expect(islet(["app", "tag", "delete", code, "Topics"] + database).errors == "error: application \(code) has no tag 'Topics'\n")
    }

    @Test func setAPNsKeyChecksTheKeyAndTheFile() throws {
        let code = try #require(try create()["application"]?.stringValue)
        let good = workspace.file("AuthKey_KEY1234567.p8", TestKeys.p256)
        let run = islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", good,
                         "--environment", "sandbox", "--database", workspace.database])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "Set APNs key KEY1234567 (team TEAM123456, sandbox) for \(code).\n")
        let store = SQLApplicationStore(database: try SQLiteDatabase(path: workspace.database))
        #expect(try store.apnsKey(for: ApplicationCode(code)!)?.pem == TestKeys.p256)

        let open = workspace.file("open.p8", TestKeys.p256, mode: 0o644)
        let worldReadable = islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", open,
                                   "--database", workspace.database])
        #expect(worldReadable.status == 64)
        #expect(worldReadable.errors == "error: --key-file: \(open) is open to other users of this machine (mode 644): it must be readable by its owner only; run chmod 600 \(open) first\n")
        // Issue 44: a group's read is refused too, as for the master key file.
        let group = workspace.file("group.p8", TestKeys.p256, mode: 0o640)
        let groupReadable = islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", group,
                                   "--database", workspace.database])
        #expect(groupReadable.status == 64 && groupReadable.errors.contains("(mode 640): it must be readable by its owner only"), "\(groupReadable.errors)")

        let wrongCurve = workspace.file("p384.p8", TestKeys.p384)
        let p384 = islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", wrongCurve,
                          "--database", workspace.database])
        #expect(p384.errors == "error: --key-file: \(wrongCurve) is not a P-256 (ES256) key; APNs signing keys from Apple (AuthKey_XXXXXXXXXX.p8) are P-256, not RSA or another curve\n")

        let rsaFile = workspace.file("rsa.p8", TestKeys.rsa)
        let rsa = islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", rsaFile,
                         "--database", workspace.database])
        #expect(rsa.status == 64)
        #expect(rsa.errors == "error: --key-file: \(rsaFile) is not a P-256 (ES256) key; APNs signing keys from Apple (AuthKey_XXXXXXXXXX.p8) are P-256, not RSA or another curve\n")

        let garbage = workspace.file("garbage.p8", "not a key")
        #expect(islet(["app", "set-apns-key", code, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", garbage,
                       "--database", workspace.database]).errors.contains("is not a PEM private key"))
        #expect(islet(["app", "set-apns-key", code, "--team-id", "team", "--key-id", "KEY1234567", "--key-file", good,
                       "--database", workspace.database]).errors == "error: --team-id: must be 10 uppercase letters or digits, as Apple issues them\n")
    }

    @Test func createWithAKeyStoresIt() throws {
        let good = workspace.file("AuthKey.p8", TestKeys.p256)
        let code = try #require(try create(["--team-id", "TEAM123456", "--key-id", "KEY1234567", "--key-file", good])["application"]?.stringValue)
        let show = islet(["app", "show", code, "--database", workspace.database])
        #expect(show.output.contains("APNs key:   KEY1234567 (team TEAM123456, both)"))
    }

    @Test(arguments: [
        (["app", "create", "--name", "Shop"], 64, "error: islet app create: missing --bundle-id <id>\n"),
        (["app", "create", "--name", "Shop", "--bundle-id", "shop"], 1, "error: bundle-id: must be a reverse-DNS bundle identifier such as com.example.app\n"),
        (["app", "create", "--name", " ", "--bundle-id", "com.example.shop"], 1, "error: name: must not be empty\n"),
        (["app", "create", "--name", "Shop", "--bundle-id", "com.x.y", "--team-id", "TEAM123456"], 64, "error: an APNs key needs all of --team-id, --key-id and --key-file\n"),
        (["app", "create", "--nme", "Shop"], 64, "error: islet app create: unknown option '--nme'; see 'islet app create --help'\n"),
        (["app", "create", "--name"], 64, "error: islet app create: --name needs a value <name>\n"),
        (["app", "create", "--name", "a", "--name", "b"], 64, "error: islet app create: --name is given more than once\n"),
        (["app", "show"], 64, "error: islet app show: missing argument <code>; see 'islet app show --help'\n"),
        (["app", "show", "abc"], 64, "error: 'abc' is not an application code; codes look like ABCDE-12345\n"),
        (["app", "show", "ABCDE-12345"], 1, "error: application ABCDE-12345 does not exist\n"),
        (["app", "show", "ABCDE-12345", "extra"], 64, "error: islet app show: unexpected argument 'extra'; see 'islet app show --help'\n"),
        (["app", "token", "create", "ABCDE-12345", "--kind", "root"], 64, "error: --kind: 'root' is not one of api, device\n"),
        (["app", "token", "create", "ABCDE-12345"], 1, "error: application ABCDE-12345 does not exist\n"),
        (["app", "frobnicate"], 64, "error: islet app: unknown command 'frobnicate'; see 'islet app --help'\n"),
        (["serve", "--listen", "nowhere"], 64, "error: --listen: 'nowhere' is not HOST:PORT with a numeric address and a port 0-65535\n"),
        (["serve", "--apns", "fcm"], 64, "error: --apns: 'fcm' is not one of simulator, apple\n"),
        (["serve", "--apns-url", "http://x"], 64, "error: --apns-url: 'http://x' is not an https://HOST[:PORT] URL\n"),
        (["serve", "--apns-ca", "/nonexistent.pem"], 64, "error: --apns-ca: cannot read /nonexistent.pem\n"),
    ])
    func errorsAreOneLineAndNonZero(words: [String], status: Int32, message: String) {
        let run = islet(words + (words.first == "app" && !words.contains("frobnicate") ? ["--database", workspace.database] : []))
        #expect(run.status == status)
        #expect(run.errors == message)
        #expect(run.output.isEmpty)
    }

    /// Issue 48: both spellings print the one version line on stdout, and take nothing else.
    @Test func versionPrintsOneLineByEitherSpelling() {
        #expect(IsletVersion.current.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+/) != nil, "a version such as 0.1.0: \(IsletVersion.current)")
        for words in [["--version"], ["version"]] {
            let run = islet(words)
            #expect(run.status == 0 && run.errors.isEmpty, "\(words): \(run.errors)")
            #expect(run.output == "islet \(IsletVersion.current)\n", "\(words)")
        }
        let extra = islet(["--version", "now"])
        #expect(extra.status == 64 && extra.output.isEmpty)
        #expect(extra.errors == "error: islet version: unexpected argument 'now'; see 'islet version --help'\n")
    }

    @Test func simulatedDevicesAreAddedChangedAndShown() throws {
        let code = try #require(try create()["application"]?.stringValue)
        let added = islet(["simulator", "device", "add", "--application", code, "--hwid", "phone", "--ios", "18.0", "--database", workspace.database, "--json"])
        #expect(added.status == 0, "\(added.errors)")
        let device = try #require(try JSONParser.parse(added.output.trimmingCharacters(in: .newlines)).objectValue)
        #expect(device["ios_version"] == "18.0")
        #expect(device["push_to_start_tokens"]?.objectValue?.count == 1)
        // Registered with Islet as the SDK would: the device and its push-to-start token.
        let store = SQLDeviceStore(database: try SQLiteDatabase(path: workspace.database))
        #expect(try store.device(hwid: "phone", in: ApplicationCode(code)!)?.osVersion == "18.0")
        #expect(try SQLApplicationStore(database: try SQLiteDatabase(path: workspace.database)).apnsKey(for: ApplicationCode(code)!) != nil,
                "a simulated application gets a key of its own")

        #expect(islet(["simulator", "device", "set", "phone", "--application", code, "--state", "locked", "--database", workspace.database]).output == "phone is now locked.\n")
        let shown = islet(["simulator", "show", "phone", "--database", workspace.database])
        #expect(shown.output.hasPrefix("phone — iOS 18.0, locked\nLock screen: empty\n"))
        #expect(islet(["simulator", "device", "set", "ghost", "--application", code, "--state", "locked", "--database", workspace.database]).errors
                == "error: no simulated device 'ghost' in \(code)\n")
        #expect(islet(["simulator", "device", "add", "--application", code, "--hwid", "x", "--ios", "new", "--database", workspace.database]).errors
                == "error: ios_version: must be a version such as 17.4\n")
    }

    @Test func serveReadsItsSettingsFromTheEnvironmentAndFlagsWin() throws {
        let env = ["ISLET_LISTEN": "127.0.0.1:9999", "ISLET_APNS": "apple", "ISLET_APNS_URL": "https://127.0.0.1:2197", "ISLET_DATABASE": "/tmp/x.sqlite"]
        let parsed = try ParsedArguments([], spec: ServeCommand.spec, commandPath: "islet serve", environment: env)
        let fromEnvironment = try ServeCommand(parsed, context: .process).configuration
        #expect(fromEnvironment.listen == ListenAddress(host: "127.0.0.1", port: 9999))
        #expect(fromEnvironment.apns == .apple)
        #expect(fromEnvironment.apnsURL == "https://127.0.0.1:2197")
        #expect(fromEnvironment.database == "/tmp/x.sqlite")
        let flags = try ParsedArguments(["--listen", "127.0.0.1:1234", "--apns", "simulator"], spec: ServeCommand.spec,
                                        commandPath: "islet serve", environment: env)
        let overridden = try ServeCommand(flags, context: .process).configuration
        #expect(overridden.listen.port == 1234)
        #expect(overridden.apns == .simulator)
    }

    /// Issue 12: off loopback, the server must be told where pushes go; it never silently runs the simulator.
    @Test func serveOffLoopbackNeedsAnExplicitAPNsMode() throws {
        let refused = islet(["serve", "--listen", "0.0.0.0:0", "--database", workspace.database])
        #expect(refused.status == 64)
        #expect(refused.errors == "error: --apns: 0.0.0.0:0 is not a loopback address, so say where pushes go: --apns apple (Apple's APNs) or --apns simulator (nothing reaches Apple)\n")
        for environment in [["ISLET_APNS": "apple"], [:]] {
            let words = ["--listen", "0.0.0.0:0"] + (environment.isEmpty ? ["--apns", "simulator"] : [])
            let parsed = try ParsedArguments(words, spec: ServeCommand.spec, commandPath: "islet serve", environment: environment)
            #expect(try ServeCommand(parsed, context: .process).configuration.listen.host == "0.0.0.0")
        }
        let loopback = try ParsedArguments(["--listen", "127.0.0.1:0"], spec: ServeCommand.spec, commandPath: "islet serve", environment: [:])
        #expect(try ServeCommand(loopback, context: .process).configuration.apns == .simulator, "the simulator stays the default on loopback")
    }

    @Test func configurationDumpHidesURLPasswords() {
        var configuration = ServerConfiguration()
        configuration.apnsURL = "https://user:hunter2@127.0.0.1:2197"
        #expect(!configuration.description.contains("hunter2"))
        #expect(configuration.description.contains("127.0.0.1:2197"))
    }

    @Test(arguments: [("127.0.0.1:80", "127.0.0.1", 80, true), ("[::1]:8080", "::1", 8080, true), ("localhost:0", "127.0.0.1", 0, true),
                      ("0.0.0.0:8080", "0.0.0.0", 8080, false)])
    func parsesListenAddresses(text: String, host: String, port: Int, loopback: Bool) throws {
        let address = try #require(ListenAddress(text))
        #expect(address.host == host && address.port == port && address.isLoopback == loopback)
    }
}
