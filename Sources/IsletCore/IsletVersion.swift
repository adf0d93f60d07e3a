/// This build's version: `islet --version`, `/healthz`, `islet_build_info` in `/metrics`, and what nodes
/// report to each other (`islet cluster status`). In IsletCore so the API and the CLI read the same one.
public enum IsletVersion {
    public static let current = "0.1.0"

    /// What `islet --version` and `islet version` print.
    public static var line: String { "islet \(current)" }
}
