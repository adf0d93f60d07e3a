import Foundation
import IsletAPI
import IsletCore
import IsletCrypto
import IsletFCM
import IsletStore

/// `islet app`: applications and their credentials.
struct AppCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "app", abstract: "Create and manage applications, their tokens and APNs keys.",
        subcommands: [AppCreateCommand.self, AppListCommand.self, AppShowCommand.self, TokenCommand.self, SetAPNsKeyCommand.self, SetFCMCommand.self,
                      SetUpdateBudgetCommand.self, SetUserIDSourceCommand.self, TagCommand.self, RotateMasterKeyCommand.self])
}

/// The APNs key options shared by `app create` and `app set-apns-key`.
enum APNsKeyOptions {
    static func specs(required: Bool) -> [OptionSpec] {
        [
            OptionSpec(name: "--team-id", valueName: "id", help: "Apple developer team id (10 characters).", required: required),
            OptionSpec(name: "--key-id", valueName: "id", help: "APNs key id (10 characters).", required: required),
            OptionSpec(name: "--key-file", valueName: "path", help: "The AuthKey_<key id>.p8 file; must be readable by its owner only.",
                       required: required),
            OptionSpec(name: "--environment", valueName: "production|sandbox|both", help: "APNs environments the key serves.",
                       defaultValue: "both"),
        ]
    }

    /// The key the options describe, nil when none of them is given; all three of team, key and file or none.
    static func load(_ arguments: ParsedArguments) throws -> APNsSigningKey? {
        let team = arguments.value("--team-id"), keyID = arguments.value("--key-id"), file = arguments.value("--key-file")
        if team == nil && keyID == nil && file == nil {
            guard arguments.value("--environment") == nil else { throw CLIError.usage("--environment needs --team-id, --key-id and --key-file") }
            return nil
        }
        guard let team, let keyID, let file else {
            throw CLIError.usage("an APNs key needs all of --team-id, --key-id and --key-file")
        }
        let environmentText = arguments.value("--environment") ?? "both"
        guard let environment = APNsEnvironment(rawValue: environmentText) else {
            throw CLIError.usage("--environment: '\(environmentText)' is not one of production, sandbox, both")
        }
        do {
            return try ApplicationAdmin.loadAPNsKey(teamID: team, keyID: keyID, path: file, environment: environment)
        } catch let error as APIError {
            throw CLIError.usage("--\(error.message)")
        }
    }
}

/// Runs an admin action, turning API and storage errors into CLI errors.
private func admin<T>(_ arguments: ParsedArguments, _ body: (ApplicationAdmin) throws -> T) throws -> T {
    let store = try Common.openStore(arguments)
    return try Common.failing { try body(ApplicationAdmin(store: store, audit: Common.audit(arguments))) }
}

struct AppCreateCommand: CLICommand {
    static let spec = CommandSpec(
        name: "create", abstract: "Create an application and print its code, server API token and device API token.",
        discussion: "Tokens are shown once and stored only as hashes: keep them now.",
        options: [
            OptionSpec(name: "--name", valueName: "name", help: "A name for people.", required: true),
            OptionSpec(name: "--bundle-id", valueName: "id", help: "The iOS app's bundle id, e.g. com.example.app.", required: true),
        ] + APNsKeyOptions.specs(required: false) + [Common.database, Common.json])

    let arguments: ParsedArguments
    let key: APNsSigningKey?

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.key = try APNsKeyOptions.load(arguments)
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let created = try admin(arguments) {
            try $0.create(name: arguments.value("--name")!, bundleID: arguments.value("--bundle-id")!, apnsKey: key)
        }
        if arguments.flag("--json") {
            Common.printJSON([
                "application": .string(created.application.code.rawValue),
                "api_token": .string(created.apiToken.secret),
                "device_token": .string(created.deviceToken.secret),
            ], context)
        } else {
            context.print("""
                Created application \(created.application.code) (\(created.application.name), \(created.application.bundleID))
                  server API token:  \(created.apiToken.secret)
                  device API token:  \(created.deviceToken.secret)
                Tokens are shown only now; Islet keeps just their hashes.
                """)
        }
        return 0
    }
}

struct AppListCommand: CLICommand {
    static let spec = CommandSpec(name: "list", abstract: "List applications.", options: [Common.database, Common.json])

    let arguments: ParsedArguments
    init(_ arguments: ParsedArguments, context: CLIContext) throws { self.arguments = arguments }

    func run(_ context: CLIContext) throws -> Int32 {
        let applications = try admin(arguments) { _ in try Common.openStore(arguments).applications() }
        if arguments.flag("--json") {
            Common.printJSON(.array(applications.map { .object(ApplicationMethods.describe($0)) }), context)
        } else if applications.isEmpty {
            context.print("No applications. Create one with: islet app create --name NAME --bundle-id ID")
        } else {
            for application in applications {
                let apns = application.apnsKey.map { "APNs key \($0.keyID)" } ?? "no APNs key"
                context.print("\(application.code)  \(application.bundleID)  \(application.name)  (\(apns))")
            }
        }
        return 0
    }
}

struct AppShowCommand: ApplicationCodeCommand {
    static let spec = CommandSpec(
        name: "show", abstract: "Show an application and its tokens (ids only; secrets are never stored).",
        arguments: [ArgumentSpec(name: "code", help: "The application code.")],
        options: [Common.database, Common.json])

    let arguments: ParsedArguments
    let code: ApplicationCode

    func run(_ context: CLIContext) throws -> Int32 {
        let store = try Common.openStore(arguments)
        let (application, tokens) = try admin(arguments) { _ in (try store.application(code), try store.tokens(of: code)) }
        guard let application else { throw CLIError.failure("application \(code) does not exist") }
        if arguments.flag("--json") {
            var object = ApplicationMethods.describe(application)
            object["tokens"] = .array(tokens.map { token in
                .object([
                    "id": .string(token.id), "kind": .string(token.kind.rawValue), "label": .string(token.label),
                    "created_at": .string(token.createdAt.formatted(.iso8601)),
                    "revoked_at": token.revokedAt.map { .string($0.formatted(.iso8601)) } ?? .null,
                ])
            })
            Common.printJSON(.object(object), context)
            return 0
        }
        context.print("Application \(application.code)")
        context.print("  name:       \(application.name)")
        context.print("  bundle id:  \(application.bundleID)")
        context.print("  created:    \(application.createdAt.formatted(.iso8601))")
        if let key = application.apnsKey {
            context.print("  APNs key:   \(key.keyID) (team \(key.teamID), \(key.environment))")
        } else {
            context.print("  APNs key:   none (islet app set-apns-key \(application.code) ...)")
        }
        if let fcm = application.fcmAccount {
            context.print("  FCM:        project \(fcm.projectID) (\(fcm.clientEmail))")
        } else {
            context.print("  FCM:        none: Android phones get nothing (islet app set-fcm \(application.code) --service-account key.json)")
        }
        context.print("  budget:     \(application.updateBudget.perHour) priority-10 updates an hour per activity, \(application.updateBudget.frequentPerHour) with frequent updates on")
        context.print("  user IDs:   set by " + (application.userIDSource == .app ? "the app (device API) or the server" : "the server only"))
        context.print("  tokens:")
        for token in tokens {
            let state = token.revokedAt.map { "revoked \($0.formatted(.iso8601))" } ?? "active"
            let kind = token.kind == .api ? "server API" : "device API"
            context.print("    \(token.id)  \(kind)  \(state)  \(token.label)")
        }
        return 0
    }
}

/// `islet app token`: issue and revoke tokens.
struct TokenCommand: CLIGroup {
    static let spec = CommandSpec(
        name: "token", abstract: "Issue and revoke server API and device API tokens.",
        subcommands: [TokenCreateCommand.self, TokenRevokeCommand.self])
}

struct TokenCreateCommand: CLICommand {
    static let spec = CommandSpec(
        name: "create", abstract: "Issue a new token and print it (shown once).",
        arguments: [ArgumentSpec(name: "code", help: "The application code.")],
        options: [
            OptionSpec(name: "--kind", valueName: "api|device", help: "Server API token or device API token.", defaultValue: "api"),
            OptionSpec(name: "--label", valueName: "text", help: "A note saying who uses the token."),
            Common.database, Common.json,
        ])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let kind: TokenKind

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        let kindText = arguments.value("--kind") ?? "api"
        guard let kind = TokenKind(rawValue: kindText) else { throw CLIError.usage("--kind: '\(kindText)' is not one of api, device") }
        self.kind = kind
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let token = try admin(arguments) { try $0.issueToken(for: code, kind: kind, label: arguments.value("--label") ?? "") }
        if arguments.flag("--json") {
            Common.printJSON(["id": .string(token.record.id), "kind": .string(kind.rawValue), "token": .string(token.secret)], context)
        } else {
            context.print("Issued \(kind == .api ? "server API" : "device API") token \(token.record.id) for \(code):")
            context.print("  \(token.secret)")
            context.print("It is shown only now; Islet keeps just its hash.")
        }
        return 0
    }
}

struct TokenRevokeCommand: CLICommand {
    static let spec = CommandSpec(
        name: "revoke", abstract: "Revoke a token at once; requests using it get 401.",
        arguments: [
            ArgumentSpec(name: "code", help: "The application code."),
            ArgumentSpec(name: "token", help: "The token's id (tk_...) or the token itself."),
        ],
        options: [Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let token = try admin(arguments) { try $0.revokeToken(of: code, idOrSecret: arguments.argument(1)) }
        context.print("Revoked token \(token.id) of \(code).")
        return 0
    }
}

struct SetAPNsKeyCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set-apns-key", abstract: "Set the APNs token-auth key (.p8) Islet signs pushes with.",
        arguments: [ArgumentSpec(name: "code", help: "The application code.")],
        options: APNsKeyOptions.specs(required: true) + [Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let key: APNsSigningKey

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        guard let key = try APNsKeyOptions.load(arguments) else { throw CLIError.usage("missing --team-id, --key-id and --key-file") }
        self.key = key
    }

    func run(_ context: CLIContext) throws -> Int32 {
        try admin(arguments) { try $0.setAPNsKey(for: code, key: key) }
        context.print("Set APNs key \(key.info.keyID) (team \(key.info.teamID), \(key.info.environment)) for \(code).")
        return 0
    }
}

/// `islet app set-fcm`: the Google service account Islet sends the application's Android Live Updates with (issue 46).
struct SetFCMCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set-fcm", abstract: "Set the Firebase service account (key JSON) Islet sends Android Live Updates with.",
        arguments: [ArgumentSpec(name: "code", help: "The application code.")],
        options: [
            OptionSpec(name: "--service-account", valueName: "path",
                       help: "The key file from Firebase's console (Project settings, Service accounts); readable by its owner only.", required: true),
            Common.database,
        ])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let account: ServiceAccount
    let json: String

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        let path = arguments.value("--service-account") ?? ""
        let json: String
        do {
            json = try ApplicationAdmin.readSecretFile(path, field: "service-account")
        } catch {
            throw CLIError.usage("--\(error.message)")
        }
        do {
            let account = try ServiceAccount(json: Array(json.utf8))
            _ = try ServiceAccountSigner(account)
            self.account = account
        } catch {
            throw CLIError.usage("--service-account: \(path): \(error.description)")
        }
        self.json = json
    }

    func run(_ context: CLIContext) throws -> Int32 {
        try admin(arguments) { try $0.setFCMAccount(for: code, info: FCMAccountInfo(projectID: account.projectID, clientEmail: account.clientEmail), keyJSON: json) }
        context.print("Set FCM service account \(account.clientEmail) (project \(account.projectID)) for \(code).")
        return 0
    }
}

/// `islet app set-update-budget`: the application's hourly budget of priority-10 updates per activity (A7).
struct SetUpdateBudgetCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set-update-budget", abstract: "Set how many priority-10 updates an activity gets an hour before Islet sends them at 5.",
        arguments: [ArgumentSpec(name: "code", help: "The application code.")],
        options: [
            OptionSpec(name: "--per-hour", valueName: "n", help: "For devices without frequent updates on (default 10; 0 sends every update at 5)."),
            OptionSpec(name: "--frequent-per-hour", valueName: "n", help: "For devices that report frequent updates on (default 60)."),
            Common.database,
        ])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let perHour: Int?
    let frequentPerHour: Int?

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        func count(_ name: String) throws -> Int? {
            guard let text = arguments.value(name) else { return nil }
            guard let value = Int(text) else { throw CLIError.usage("\(name): '\(text)' is not a whole number of updates an hour") }
            return value
        }
        perHour = try count("--per-hour")
        frequentPerHour = try count("--frequent-per-hour")
        guard perHour != nil || frequentPerHour != nil else { throw CLIError.usage("give --per-hour, --frequent-per-hour or both") }
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let budget = try admin(arguments) { admin in
            do {
                return try admin.setUpdateBudget(for: code, perHour: perHour, frequentPerHour: frequentPerHour)
            } catch let error as APIError where error.code == .badRequest {
                throw CLIError.usage("--\(error.message)")   // a value out of bounds: the option's fault
            }
        }
        context.print("Activities of \(code) now get \(budget.perHour) priority-10 updates an hour (\(budget.frequentPerHour) on devices with frequent updates on); the rest go at priority 5.")
        return 0
    }
}

/// `islet app set-user-id-source`: who may set the application's devices' User IDs (issue 44).
struct SetUserIDSourceCommand: CLICommand {
    static let spec = CommandSpec(
        name: "set-user-id-source", abstract: "Set who may set a device's User ID: the app (device API, the default) or the server only.",
        arguments: [ArgumentSpec(name: "code", help: "The application code."),
                    ArgumentSpec(name: "source", help: "app (the Pushwoosh SDK's userId, and the server) or server (a server API token only).")],
        options: [Common.database])

    let arguments: ParsedArguments
    let code: ApplicationCode
    let source: UserIDSource

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.code = try Common.applicationCode(arguments.argument(0))
        let text = arguments.argument(1)
        guard let source = UserIDSource(rawValue: text) else { throw CLIError.usage("source: '\(text)' must be app or server") }
        self.source = source
    }

    func run(_ context: CLIContext) throws -> Int32 {
        try admin(arguments) { admin in try admin.setUserIDSource(for: code, source) }
        context.print(source == .app
            ? "Devices of \(code) now take the User ID the app sends (registerDevice's userId), or the server's."
            : "Devices of \(code) now take a User ID from the server only (registerDevice with a server API token); a userId the app sends is not stored.")
        return 0
    }
}

/// `islet app rotate-master-key`: re-seals every stored APNs key with a new master key.
struct RotateMasterKeyCommand: CLICommand {
    static let spec = CommandSpec(
        name: "rotate-master-key", abstract: "Seal every stored APNs key with a new master key (AES-256-GCM).",
        discussion: """
            The current master key (ISLET_MASTER_KEY or ISLET_MASTER_KEY_FILE) opens the keys; without one, plain keys are
            sealed for the first time. All keys change in one transaction. Stop the server first, then start it with the
            new key. Make a key with: openssl rand -hex 32 > master.key && chmod 600 master.key
            """,
        options: [OptionSpec(name: "--new-key-file", valueName: "file", help: "The new master key (64 hex digits), mode 0600.", required: true),
                  Common.database])

    let arguments: ParsedArguments
    let newKey: MasterKey

    init(_ arguments: ParsedArguments, context: CLIContext) throws {
        self.arguments = arguments
        self.newKey = try Common.readMasterKey(arguments.value("--new-key-file")!, name: "--new-key-file")
    }

    func run(_ context: CLIContext) throws -> Int32 {
        let database = Common.location(arguments)
        if case .sqlite(let path) = database { try Common.requireFile(path, " (nothing was sealed)") }
        let store = try Common.openStore(arguments)
        let count: Int
        do {
            let stored = try store.checkAPNsKeys()
            guard stored.sealed + stored.plain > 0 else {
                throw CLIError.failure("\(database) holds no APNs key and no FCM service account; nothing to seal (is --database the server's?)")
            }
            count = try store.resealAPNsKeys(with: newKey)
        } catch let error as StoreError {
            throw CLIError.failure(error.message)
        }
        if let code = try? store.applications().first?.code {
            Common.audit(arguments).record(.masterKeyRotated, application: code, actor: "cli",
                                           details: ["keys": .int(Int64(count)), "fingerprint": .string(newKey.fingerprint)])
        }
        context.print("Sealed \(count) APNs key\(count == 1 ? "" : "s") with master key \(newKey.fingerprint). Start Islet with this key from now on.")
        return 0
    }
}
