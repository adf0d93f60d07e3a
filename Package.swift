// swift-tools-version:6.0
import PackageDescription

// Islet: a self-hosted Live Activity push server. See docs/ARCHITECTURE.md for the layout.
// C libraries come from Debian (scripts/install-deps); each sits behind one small shim target.
let package = Package(
    name: "Islet",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "islet", targets: ["islet"]),
    ],
    targets: [
        // C shims: only what Swift cannot call directly (variadic functions, macros).
        .target(name: "CSQLite", linkerSettings: [.linkedLibrary("sqlite3")]),
        .target(name: "CPostgres", linkerSettings: [.linkedLibrary("pq")]),
        .target(name: "CMicroHTTPD", linkerSettings: [.linkedLibrary("microhttpd")]),
        .target(name: "COpenSSL", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .target(name: "CNGHTTP2", linkerSettings: [.linkedLibrary("nghttp2")]),
        .target(name: "CEpoll"),

        .target(name: "IsletCore"),
        .target(name: "IsletCrypto", dependencies: ["COpenSSL"]),
        .target(name: "IsletStore", dependencies: ["IsletCore"]),
        // The stores, as SQL both engines run; each engine brings connections, transactions and migrations.
        .target(name: "IsletSQL", dependencies: ["IsletCore", "IsletStore", "IsletCrypto"]),
        .target(name: "IsletSQLite", dependencies: ["IsletSQL", "IsletStore", "CSQLite"]),
        .target(name: "IsletPostgres", dependencies: ["IsletSQL", "IsletStore", "CPostgres"]),
        .target(name: "IsletDelivery", dependencies: ["IsletCore", "IsletStore", "IsletCrypto"]),
        .target(name: "IsletHTTP", dependencies: ["CMicroHTTPD", "IsletCore"]),
        .target(name: "IsletHTTP2", dependencies: ["CNGHTTP2", "COpenSSL", "CEpoll"]),
        .target(name: "IsletAPNs", dependencies: ["IsletCore", "IsletStore", "IsletDelivery", "IsletHTTP2", "COpenSSL"]),
        // FCM HTTP v1 (issue 46): the service account that signs for its access tokens, the client that sends, and the
        // transport that sends Android pushes with each application's account.
        .target(name: "IsletFCM", dependencies: ["IsletCore", "IsletCrypto", "IsletHTTP2", "IsletStore", "IsletDelivery"]),
        .target(name: "IsletSimulator", dependencies: ["IsletCore", "IsletStore", "IsletHTTP2", "IsletAPNs", "IsletCrypto"]),
        .target(name: "IsletAPI", dependencies: ["IsletCore", "IsletStore", "IsletCrypto", "IsletHTTP", "IsletDelivery"]),
        // The web console (issue 17): its routes, sessions and events; its pages (Assets) are built into the binary.
        .target(name: "IsletConsole", dependencies: ["IsletCore", "IsletStore", "IsletCrypto", "IsletHTTP", "IsletAPI"],
                resources: [.embedInCode("Assets")]),
        .target(name: "IsletApp", dependencies: ["IsletCore", "IsletStore", "IsletSQL", "IsletSQLite", "IsletPostgres", "IsletCrypto", "IsletHTTP", "IsletAPI", "IsletConsole", "IsletDelivery", "IsletAPNs", "IsletFCM", "IsletHTTP2", "IsletSimulator"]),
        .executableTarget(name: "islet", dependencies: ["IsletApp"]),
        .executableTarget(name: "islet-bench", dependencies: ["IsletCore", "IsletStore", "IsletSQLite", "IsletHTTP2", "IsletAPNs", "IsletDelivery",
                                                              "IsletAPI", "IsletApp", "IsletSQL", "IsletCrypto", "IsletTestPeers"], path: "Sources/IsletBenchmarks"),

        // `islet serve` with a transport that records to a file: for the crash-and-resume test only.
        .executableTarget(name: "islet-test-server", dependencies: ["IsletApp", "IsletCore", "IsletDelivery", "IsletStore"], path: "Tests/TestServer"),

        // Test peers that share no code with Islet's HTTP/2 (Tests/Peers/h2_apns.py), for the test targets.
        .target(name: "IsletTestPeers", dependencies: ["IsletCore"], path: "Tests/Peers", exclude: ["h2_apns.py", "fcm_peer.py", "peer_tls.py"]),

        .testTarget(name: "IsletCoreTests", dependencies: ["IsletCore", "IsletTestPeers"]),
        .testTarget(name: "IsletSimulatorTests", dependencies: ["IsletSimulator", "IsletAPNs", "IsletHTTP2", "IsletDelivery", "IsletSQL", "IsletSQLite", "IsletStore", "IsletCore", "IsletCrypto"]),
        .testTarget(name: "IsletDeliveryTests", dependencies: ["IsletDelivery", "IsletStore", "IsletCore", "IsletCrypto"]),
        .testTarget(name: "IsletFCMTests", dependencies: ["IsletFCM", "IsletCore", "IsletCrypto", "IsletHTTP2", "IsletDelivery", "IsletStore", "IsletTestPeers"]),
        .testTarget(name: "IsletAPNsTests", dependencies: ["IsletAPNs", "IsletHTTP2", "IsletDelivery", "IsletCore", "IsletStore", "IsletTestPeers"]),
        .testTarget(name: "IsletHTTPTests", dependencies: ["IsletHTTP", "IsletTestPeers"]),
        .testTarget(name: "IsletConsoleTests", dependencies: ["IsletConsole", "IsletCore", "IsletStore", "IsletHTTP"]),
        .testTarget(name: "IsletSQLTests", dependencies: ["IsletSQL", "IsletSQLite", "IsletPostgres", "IsletStore", "IsletCore", "IsletCrypto", "IsletTestPeers"]),
        .testTarget(name: "IsletAppTests", dependencies: ["IsletApp", "IsletConsole", "IsletSQL", "IsletSQLite", "IsletStore"], exclude: ["Golden"]),
        .testTarget(name: "IsletIntegrationTests", dependencies: ["IsletApp", "IsletAPI", "IsletConsole", "IsletSQL", "IsletSQLite", "IsletPostgres", "IsletStore", "IsletHTTP", "IsletDelivery",
                                                            "IsletHTTP2", "IsletCrypto", "IsletTestPeers"],
                    exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
