/// The server side of an application's tags (issue 44): the first value any device sets fixes a tag's type, and the
/// device API is public, so a wrong first value would fix it for everyone. The operator can set a tag's type (before
/// any device, or over the values devices hold) and delete a tag. These rules decide what may be done.
public enum TagAdministration {
    /// The types a custom tag may have (`version` is `OS Version`'s alone).
    public static let customTypes: [TagType] = [.string, .integer, .list, .boolean, .date]

    /// Why the tag `name` may not be changed or deleted now; nil when it may. `filters`: the application's filters
    /// that name it (a filter's conditions were checked against the tag's type when it was created).
    public static func refusal(_ name: String, filters: [String]) -> String? {
        if BuiltInTag.named(name) != nil {
            return "tag '\(name)' is built in (\(BuiltInTag.all.map(\.name).joined(separator: ", "))): registerDevice sets it"
        }
        guard filters.isEmpty else {
            let list = filters.sorted().map { "'\($0)'" }.joined(separator: ", ")
            return "tag '\(name)' is used by filter\(filters.count == 1 ? "" : "s") \(list): delete \(filters.count == 1 ? "it" : "them") first (deleteFilter), and create \(filters.count == 1 ? "it" : "them") again after"
        }
        return nil
    }

    /// Why the tag `name` may not take the type `type` now; nil when it may. `current`: its type (nil: no device
    /// set it yet); `devices`: how many devices hold a value of it, all of the current type, which setting another
    /// type deletes, so only when `droppingValues`.
    public static func typeRefusal(_ name: String, type: TagType, current: TagType?, devices: Int, droppingValues: Bool) -> String? {
        guard customTypes.contains(type) else {
            return "type: must be one of \(customTypes.map(\.rawValue).joined(separator: ", ")), got '\(type.rawValue)'"
        }
        guard let current, current != type, devices > 0, !droppingValues else { return nil }
        return "tag '\(name)' is of type \(current.rawValue) on \(devices) device\(devices == 1 ? "" : "s"): their values would be deleted; "
            + "run again with --drop-values to do so"
    }
}
