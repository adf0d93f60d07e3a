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

    /// Every rule id an error message or comment cites, "(S5)", is an anchor of docs/API.md, so a clone can look it up.
    @Test func everyCitedRuleIsAnAnchorOfTheAPIReference() throws {
        let reference = try String(contentsOf: Self.root.appendingPathComponent("docs/API.md"), encoding: .utf8)
        let rule = try Regex(#"\(([ESUADX][0-9]+)\)"#)
        var cited: Set<String> = []
        let enumerator = FileManager.default.enumerator(at: Self.root.appendingPathComponent("Sources"), includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift", let text = try? String(contentsOf: url, encoding: .utf8) else { continue }
            for match in text.matches(of: rule) { cited.insert(String(text[match.range]).trimmingCharacters(in: CharacterSet(charactersIn: "()"))) }
        }
        #expect(cited.count > 20, "the sources cite rules: \(cited.sorted())")
        let missing = cited.filter { !reference.contains("<a id=\"\($0)\"></a>") }
        #expect(missing.isEmpty, "rules cited in Sources without an anchor in docs/API.md: \(missing.sorted())")
        // Every markdown link inside the repository's docs points at a file that exists.
        for document in ["README.md", "docs/API.md", "docs/PRODUCTION.md", "docs/ARCHITECTURE.md"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            for match in text.matches(of: try Regex(#"\]\(([^)#\s]+)(#[^)]*)?\)"#)) {
                let target = String(text[match.range]).dropFirst(2).prefix { $0 != ")" && $0 != "#" }
                guard !target.hasPrefix("http") else { continue }
                let url = Self.root.appendingPathComponent(document).deletingLastPathComponent().appendingPathComponent(String(target))
                #expect(FileManager.default.fileExists(atPath: url.path), "\(document) links to \(target), which is not in the repository")
            }
        }
    }
}
