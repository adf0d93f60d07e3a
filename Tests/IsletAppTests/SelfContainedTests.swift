import Foundation
import Testing

/// The repository stands alone: no test, script or document reads or links anything beside it.
@Suite("Self-contained repository")
struct SelfContainedTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The sibling folder the project's design notes live in, spelled in parts so this file does not name it.
    static let sibling = ".." + "/" + "shared"

    @Test func nothingReachesOutsideTheRepository() throws {
        var offenders: [String] = []
        let skipped: Set<String> = [".build", ".git", ".venv", "var"]
        let enumerator = FileManager.default.enumerator(at: Self.root, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            if skipped.contains(url.lastPathComponent) { enumerator?.skipDescendants(); continue }
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true,
                  let text = try? String(contentsOf: url, encoding: .utf8) else { continue }
            if text.contains(Self.sibling) { offenders.append(String(url.path.dropFirst(Self.root.path.count + 1))) }
        }
        #expect(offenders.isEmpty, "files that point outside the repository: \(offenders)")
    }
}
