import Foundation
import IsletCore
import IsletStore

/// Named filters over device tags (X1): `createFilter`, `listFilters`, `deleteFilter`.
public struct FilterMethods: Sendable {
    let store: any DeviceStore
    let audit: AuditLog

    public init(store: any DeviceStore, audit: AuditLog = .disabled) {
        self.store = store
        self.audit = audit
    }

    public var all: [APIMethod] { [createFilter, listFilters, deleteFilter] }

    var createFilter: APIMethod {
        APIMethod(name: "createFilter", access: .server) { [store, audit] call in
            let body = call.request
            let name = try Self.name(body)
            var join = FilterJoin.and
            if let text = try body.string("operator") {
                guard let value = FilterJoin(rawValue: text.uppercased()) else { throw APIError.invalid("operator", "must be \"AND\" or \"OR\"") }
                join = value
            }
            let filter = try FilterDefinition.parse(name: name, join: join, conditions: body.value("conditions"),
                                                    tagTypes: try store.tagTypes(in: call.application.code,
                                                                                 named: FilterDefinition.tagNames(in: body.value("conditions"))))
            do {
                try store.createFilter(filter, in: call.application.code, at: call.receivedAt)
            } catch let error as StoreError where error.code == .conflict {
                throw APIError.invalid("name", "a filter named '\(name)' already exists")
            }
            audit.record(.filterCreated, application: call.application.code, actor: call.actor, details: ["filter": filter.json])
            return ["filter": filter.json]
        }
    }

    var listFilters: APIMethod {
        APIMethod(name: "listFilters", access: .server, effect: .reads) { [store] call in
            let paging = try ListPaging(call.request, method: "listFilters")
            let (filters, nextCursor) = paging.page(try store.filters(in: call.application.code, after: paging.cursor, limit: paging.fetch)) { $0.name }
            return ["filters": .array(filters.map(\.json)), "next_cursor": nextCursor]
        }
    }

    var deleteFilter: APIMethod {
        APIMethod(name: "deleteFilter", access: .server) { [store, audit] call in
            let name = try Self.name(call.request)
            guard try store.deleteFilter(named: name, in: call.application.code) else {
                throw APIError.invalid("name", "no filter named '\(name)'")
            }
            audit.record(.filterDeleted, application: call.application.code, actor: call.actor, details: ["name": .string(name)])
            return [:]
        }
    }

    static func name(_ body: FieldReader) throws(APIError) -> String {
        let name = try body.requiredString("name")
        guard name.count <= 200 else { throw APIError.invalid("name", "must be at most 200 characters") }
        return name
    }
}
