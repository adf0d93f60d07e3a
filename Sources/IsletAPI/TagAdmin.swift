import Foundation
import IsletCore
import IsletStore

/// The operator's side of an application's custom tags (issue 44), as `islet app tag` runs it: list them, set a tag's
/// type (before any device sets one, or over a wrong first value), delete one. Refusals are IsletCore's
/// `TagAdministration` rules; every change goes to the audit log.
public struct TagAdmin: Sendable {
    let store: any TagAdministrationStore
    let audit: AuditLog
    let actor: String

    public init(store: any TagAdministrationStore, audit: AuditLog = AuditLog(path: nil), actor: String = "cli") {
        self.store = store
        self.audit = audit
        self.actor = actor
    }

    public func tags(of application: ApplicationCode) throws -> [TagSummary] { try store.tagSummaries(in: application) }

    /// Sets the tag's type; a change of type deletes the values devices hold, only when `droppingValues`.
    public func setType(_ type: TagType, of name: String, in application: ApplicationCode,
                        droppingValues: Bool) throws -> (before: TagFacts, valuesDeleted: Int) {
        let result = try store.setTagType(type, of: name, in: application) { facts in
            if let refusal = TagAdministration.refusal(name, filters: facts.filters)
                ?? TagAdministration.typeRefusal(name, type: type, current: facts.type, devices: facts.devices, droppingValues: droppingValues) {
                throw APIError(.badRequest, refusal)
            }
        }
        audit.record(.tagTypeSet, application: application, actor: actor, details: [
            "tag": .string(name), "type": .string(type.rawValue), "previous": result.before.type.map { .string($0.rawValue) } ?? .null,
            "values_deleted": .int(Int64(result.valuesDeleted))])
        return result
    }

    /// Deletes the tag and every value devices hold of it.
    public func delete(_ name: String, in application: ApplicationCode) throws -> TagFacts {
        guard let facts = try store.deleteTag(name, in: application, check: { facts in
            if let refusal = TagAdministration.refusal(name, filters: facts.filters) { throw APIError(.badRequest, refusal) }
        }) else { throw APIError(.notFound, "application \(application) has no tag '\(name)'") }
        audit.record(.tagDeleted, application: application, actor: actor, details: [
            "tag": .string(name), "values_deleted": .int(Int64(facts.devices))])
        return facts
    }
}
