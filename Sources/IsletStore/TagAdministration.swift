import IsletCore

/// A custom tag of an application, as its operator sees it.
public struct TagSummary: Sendable, Equatable {
    public let name: String
    public let type: TagType
    /// How many devices hold a value of it.
    public let devices: Int

    public init(name: String, type: TagType, devices: Int) {
        self.name = name
        self.type = type
        self.devices = devices
    }
}

/// What a change of a tag is decided on, read in its transaction.
public struct TagFacts: Sendable, Equatable {
    /// Its type; nil: no device set it, nor the operator.
    public let type: TagType?
    /// How many devices hold a value of it.
    public let devices: Int
    /// The application's filters whose conditions name it.
    public let filters: [String]

    public init(type: TagType?, devices: Int, filters: [String]) {
        self.type = type
        self.devices = devices
        self.filters = filters
    }
}

/// The server side of an application's custom tags (issue 44): what the device API cannot do. Each change reads the
/// tag's facts in its transaction and gives them to `check` (IsletCore's `TagAdministration` rules), which throws to
/// refuse; nothing is then written.
public protocol TagAdministrationStore: Sendable {
    /// Every custom tag of the application, in name order, with how many devices hold a value of it.
    func tagSummaries(in application: ApplicationCode) throws(StoreError) -> [TagSummary]
    /// Gives the tag `name` the type `type`; a change of type deletes every value devices hold of it. The facts as they
    /// were, and how many devices lost their value.
    func setTagType(_ type: TagType, of name: String, in application: ApplicationCode,
                    check: (TagFacts) throws -> Void) throws -> (before: TagFacts, valuesDeleted: Int)
    /// Deletes the tag `name` and every value devices hold of it; nil when the application has no such tag.
    func deleteTag(_ name: String, in application: ApplicationCode, check: (TagFacts) throws -> Void) throws -> TagFacts?
}
