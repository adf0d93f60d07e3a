import Foundation
import IsletCore
import IsletStore

/// JSON API methods about the calling application itself.
public enum ApplicationMethods {
    /// `getApplication` {auth, application} → the application's public facts (EXT).
    public static let getApplication = APIMethod(name: "getApplication", access: .server) { call in
        ["application": .object(describe(call.application))]
    }

    /// The public facts of an application, as the API and `islet app show --json` print them.
    public static func describe(_ application: Application) -> JSONObject {
        var object: JSONObject = [
            "code": .string(application.code.rawValue),
            "name": .string(application.name),
            "bundle_id": .string(application.bundleID),
            "created_at": .string(application.createdAt.formatted(.iso8601)),
        ]
        if let key = application.apnsKey {
            object["apns"] = ["team_id": .string(key.teamID), "key_id": .string(key.keyID), "environment": .string(key.environment.rawValue)]
        } else {
            object["apns"] = .null
        }
        return object
    }
}
