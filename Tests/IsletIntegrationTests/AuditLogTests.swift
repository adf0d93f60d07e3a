import Foundation
import Testing
import IsletAPI
import IsletCore

/// The audit trail is not lost to a missing folder: the default one (./var) does not exist yet on a fresh
/// PostgreSQL setup, where nothing else creates it.
@Suite("Audit log")
struct AuditLogTests {
    @Test func theFirstEntryCreatesTheLogsFolderOwnerOnly() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("islet-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let log = AuditLog(setting: nil, directory: root.appendingPathComponent("var").path)
        log.record(.applicationCreated, application: ApplicationCode("AUDIT-00001")!, actor: "test")
        let path = root.appendingPathComponent("var/audit.log").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\"action\":\"application.created\"") && text.contains("AUDIT-00001"), "\(text)")
        let folder = try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent("var").path)
        #expect((folder[.posixPermissions] as? Int) == 0o700)
        let file = try FileManager.default.attributesOfItem(atPath: path)
        #expect((file[.posixPermissions] as? Int) == 0o600)
    }
}
