import Foundation
import IsletCore
import IsletStore

/// JSON API methods about the calling application itself.
public enum ApplicationMethods {
    /// `getApplication` {auth, application} → the application's public facts (EXT). `apnsMode` says where this
    /// server sends pushes ("apple" or "simulator"); `simulatedKey` makes the simulator's key of an application
    /// that has none yet, so the answer shows the key its pushes will be signed with rather than `null`.
    public static func getApplication(apnsMode: String,
                                      simulatedKey: (@Sendable (ApplicationCode) throws -> APNsKeyInfo?)? = nil) -> APIMethod {
        APIMethod(name: "getApplication", access: .server, effect: .reads) { call in
            var application = call.application
            if application.apnsKey == nil, let simulatedKey, let key = try? simulatedKey(application.code) {
                application = Application(code: application.code, name: application.name, bundleID: application.bundleID,
                                          createdAt: application.createdAt, apnsKey: key, updateBudget: application.updateBudget,
                                          userIDSource: application.userIDSource)
            }
            var described = describe(application)
            if case .object(var apns) = described["apns"] { apns["mode"] = .string(apnsMode); described["apns"] = .object(apns) }
            return ["application": .object(described)]
        }
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
        object["fcm"] = application.fcmAccount.map { ["project_id": .string($0.projectID), "client_email": .string($0.clientEmail)] } ?? .null
        object["update_budget"] = ["per_hour": .int(Int64(application.updateBudget.perHour)),
                                   "frequent_per_hour": .int(Int64(application.updateBudget.frequentPerHour))]
        object["user_ids_from"] = .string(application.userIDSource.rawValue)
        return object
    }
}
