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
                let url = Self.root.appendingPathComponent(document).deletingLastPathComponent().appendingPathComponent(String(target)).standardizedFileURL
                #expect(url.path.hasPrefix(Self.root.standardizedFileURL.path + "/") && FileManager.default.fileExists(atPath: url.path),
                        "\(document) links to \(target), which is not in the repository")
            }
        }
    }

    /// The nginx site the production guide shows is the packaged file the package test runs, directive for
    /// directive (the guide leaves out the comments and folds short blocks onto one line).
    @Test func theGuidesNginxSiteIsThePackagedOne() throws {
        func directives(_ text: Substring) -> [String] {
            let code = text.split(separator: "\n").map { line in line.prefix { $0 != "#" } }.joined(separator: " ")
            var tokens: [String] = [], current = ""
            for character in code {
                if character == ";" || character == "{" || character == "}" {
                    let directive = current.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                    if !directive.isEmpty { tokens.append(directive) }
                    tokens.append(String(character))
                    current = ""
                } else {
                    current.append(character)
                }
            }
            return tokens
        }
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/PRODUCTION.md"), encoding: .utf8)
        let block = try #require(guide.firstRange(of: "```nginx\n").flatMap { start in
            guide[start.upperBound...].firstRange(of: "```").map { guide[start.upperBound..<$0.lowerBound] }
        })
        let packaged = try String(contentsOf: Self.root.appendingPathComponent("packaging/nginx-islet.conf"), encoding: .utf8)
        let expected = directives(packaged[...])
        #expect(expected.count > 30 && expected.contains("proxy_pass http://127.0.0.1:8080"), "the packaged site was read")
        #expect(directives(block) == expected, "docs/PRODUCTION.md's nginx block differs from packaging/nginx-islet.conf")
    }
}
