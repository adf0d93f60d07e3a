/// Who may set a device's User ID (issue 44), an application's choice. A User ID picks the devices a start by
/// `users` reaches, and those devices may then join the activity (D5): whoever sets it decides who gets a
/// person's Live Activities.
public enum UserIDSource: String, Sendable, CaseIterable {
    /// The app, through the device API (`registerDevice`'s `userId`, as the Pushwoosh SDK sends it), and the
    /// backend with a server token: Pushwoosh's model, and the default. Any copy of the app can claim any User ID.
    case app
    /// Only the backend, with a server API token: a `userId` sent with the device token is not stored.
    case server

    /// Whether a `userId` sent with this kind of token is stored: `byServer` when the call carries a server API token.
    public func accepts(byServer: Bool) -> Bool { byServer || self == .app }

    /// What registerDevice answers (in `warnings`) for a `userId` it did not store.
    public static let ignoredWarning = ignored(settableBy: "registerDevice")
    /// What registerUser answers (in `warnings`) for a `userId` it did not store (issue 45).
    public static let ignoredByRegisterUserWarning = ignored(settableBy: "registerUser or registerDevice")

    static func ignored(settableBy methods: String) -> String {
        "userId: not stored: this application takes User IDs from its server only (\(methods) with a server API token); the device's User ID is unchanged"
    }
}
