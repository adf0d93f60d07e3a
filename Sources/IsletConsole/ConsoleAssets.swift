/// The console's page, script, stylesheet and icon, built into the binary by SwiftPM (`.embedInCode("Assets")`
/// in Package.swift generates `PackageResources`): no files to install beside it, nothing fetched at run time.
enum ConsoleAssets {
    struct Asset {
        let contentType: String
        let bytes: [UInt8]
    }

    static let byName: [String: Asset] = [
        "index.html": Asset(contentType: "text/html; charset=utf-8", bytes: PackageResources.index_html),
        "console.js": Asset(contentType: "text/javascript; charset=utf-8", bytes: PackageResources.console_js),
        "console.css": Asset(contentType: "text/css; charset=utf-8", bytes: PackageResources.console_css),
        "icon.svg": Asset(contentType: "image/svg+xml", bytes: PackageResources.icon_svg),
    ]
}
