// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "cardbench",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "cardbench", targets: ["cardbench"]),
        .executable(name: "cardbenchd", targets: ["cardbenchd"]),
        .library(name: "EMV", targets: ["EMV"]),
        .library(name: "VirtualCard", targets: ["VirtualCard"]),
        .library(name: "CardIO", targets: ["CardIO"]),
        .library(name: "Terminal", targets: ["Terminal"]),
        .library(name: "LedgerModel", targets: ["LedgerModel"]),
        .library(name: "Ledger", targets: ["Ledger"]),
        .library(name: "Fronts", targets: ["Fronts"]),
        .library(name: "Workflows", targets: ["Workflows"]),
        .library(name: "Defaults", targets: ["Defaults"]),
        .library(name: "ISO8583", targets: ["ISO8583"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", exact: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", exact: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", exact: "2.5.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", exact: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", exact: "1.4.0", traits: ["YAML"]),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
        .package(url: "https://github.com/apple/swift-system.git", exact: "1.8.1"),
        // Socket activation: NIO's server channel around a descriptor systemd passed, with its
        // quiescing helper (both already in the graph through Hummingbird).
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", exact: "1.35.2"),
    ],
    targets: [
        // What tests share: the repository root, a temporary ledger, in-process virtual cards, test
        // terminals with the one keypad, and a harness wiring them into the workflows. No daemon:
        // workflow tests build neither Hummingbird nor NIO.
        .target(
            name: "TestSupport",
            dependencies: ["EMV", "Terminal", "Ledger", "LedgerModel", "VirtualCard", "Workflows"],
            path: "Tests/TestSupport"
        ),
        // What the daemon's and the scenarios' tests add: a daemon core in process, and a real
        // cardbenchd process on a temporary state directory.
        .target(
            name: "DaemonTestSupport",
            dependencies: ["TestSupport", "Daemon"],
            path: "Tests/DaemonTestSupport"
        ),
        // libcrypto from Debian's libssl-dev, used for the DES/TDES block cipher only.
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "EMV",
            dependencies: [
                "CLibCrypto",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The embedded default: the shipped card profiles and CA public keys, compiled in by the
        // EmbedDefaults plugin so the binaries need no files (docs/operations.md).
        .target(name: "Defaults", plugins: ["EmbedDefaults"]),
        .plugin(name: "EmbedDefaults", capability: .buildTool(), dependencies: ["cardbench-embed"]),
        .executableTarget(name: "cardbench-embed"),
        // A profile-driven emulated EMV card answering APDUs, and how the emulated issuer sees it
        // (its account, its facts); pure (profiles are parsed from text).
        .target(
            name: "VirtualCard",
            dependencies: ["EMV", "Terminal", .product(name: "Yams", package: "Yams")]
        ),
        // The terminal: kernel, emulated host, counters and clock. Pure.
        .target(
            name: "Terminal",
            dependencies: ["EMV"]
        ),
        // ISO 8583:1987 messages: packagers (jPOS's and pyiso8583's formats), framing, the messages a
        // terminal sends and how the emulated issuer reads them, the trace's masked form. Pure.
        .target(
            name: "ISO8583",
            dependencies: ["EMV", "Terminal"]
        ),
        // Readers and channels: virtual (vpcd), serial (termios, ISO 7816-3), udev, PC/SC; and the
        // framed TCP links to and from ISO 8583 hosts.
        .target(
            name: "CardIO",
            dependencies: ["EMV", "ISO8583", "CLibUDev", "CLibPCSCLite", .product(name: "Logging", package: "swift-log"),
                           .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")]
        ),
        // libpcsclite from Debian's libpcsclite-dev: USB CCID and contactless readers through pcscd.
        // A C target rather than a system library: see its header for why.
        .target(
            name: "CLibPCSCLite",
            linkerSettings: [.linkedLibrary("pcsclite")]
        ),
        // libudev from Debian's libudev-dev: serial readers are found and followed through udev.
        .systemLibrary(
            name: "CLibUDev",
            pkgConfig: "libudev",
            providers: [.apt(["libudev-dev"])]
        ),
        // glibc's malloc.h: the daemon limits its malloc arenas and trims its heap (MemoryTrim).
        .systemLibrary(name: "CGlibcMalloc"),
        // The ledger's records, their rules and the store protocols the workflows run against. Pure
        // (no GRDB), as NIOCore stands apart from NIOPosix: the workflows import this, not the ledger.
        .target(
            name: "LedgerModel",
            dependencies: ["EMV", "Terminal"]
        ),
        // The durable record: SQLite (WAL) through GRDB — terminals, STANs, transactions, traces, outbox.
        .target(
            name: "Ledger",
            dependencies: [
                "EMV",
                "Terminal",
                "LedgerModel",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The apps cardbench stands in for: request URLs parsed and checked, callbacks rendered. Pure.
        .target(
            name: "Fronts",
            dependencies: [
                "EMV", "Terminal",
                // The platforms' records, which their renderers put in the vendors' wire shapes.
                "LedgerModel",
                // The Worldline platform's request signatures and encrypted customer input.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Every transaction workflow of every front (sale, pre-auth, capture, cancel, refund, abort,
        // batch, details, reversals), against small protocols: ledger store, terminal session and its
        // card and prompts, host, clock, events. Pure: the daemon, the scenarios and `cardbench sale`
        // wire it.
        .target(
            name: "Workflows",
            dependencies: ["EMV", "Terminal", "Fronts", "LedgerModel", .product(name: "CryptoExtras", package: "swift-crypto")]
        ),
        // The daemon: configuration, terminals and their readers, the HTTP API (Unix socket and
        // loopback), callback delivery, sd_notify, metrics and events. All the I/O of a request.
        .target(
            name: "Daemon",
            dependencies: [
                "EMV", "VirtualCard", "CardIO", "Terminal", "Ledger", "Fronts", "Workflows", "CGlibcMalloc", "Defaults", "ISO8583",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ]
        ),
        // Scenario files and their runner: the language (docs/scenarios.md), run through the API of a
        // daemon core in this process or of a running cardbenchd.
        .target(
            name: "Scenario",
            dependencies: [
                "Daemon", "EMV", "CardIO", "ISO8583", "Terminal",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "cardbenchd",
            dependencies: [
                "Daemon",
                "Defaults",
                "Scenario",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "cardbench",
            dependencies: [
                "EMV",
                "VirtualCard",
                "CardIO",
                "Terminal",
                "Ledger",
                "Fronts",
                "Workflows",
                "Daemon",
                "Scenario",
                "Defaults",
                "ISO8583",
                "CLibCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ScenarioTests",
            dependencies: ["Scenario", "Daemon", "TestSupport", "DaemonTestSupport", .product(name: "Yams", package: "Yams")]
        ),
        .testTarget(
            name: "WorkflowsTests",
            dependencies: ["Workflows", "Fronts", "Ledger", "Terminal", "EMV", "VirtualCard", "TestSupport"]
        ),
        .testTarget(
            name: "EMVTests",
            dependencies: ["EMV"],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "ISO8583Tests",
            dependencies: ["ISO8583", "EMV", "Terminal"]
        ),
        .testTarget(
            name: "VirtualCardTests",
            dependencies: ["VirtualCard", "EMV", .product(name: "Yams", package: "Yams")]
        ),
        .testTarget(
            name: "TerminalTests",
            dependencies: ["Terminal", "EMV", "VirtualCard", "TestSupport"]
        ),
        .testTarget(
            name: "LedgerTests",
            dependencies: ["Ledger", "Terminal"]
        ),
        .testTarget(
            name: "FrontsTests",
            dependencies: ["Fronts", "Terminal", "EMV", .product(name: "CryptoExtras", package: "swift-crypto")],
            // The JWE vector and its generator are read from the source tree.
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "DaemonTests",
            dependencies: ["Daemon", "Defaults", "Fronts", "Ledger", "Terminal", "EMV", "CardIO", "VirtualCard", "Workflows", "TestSupport",
                           "DaemonTestSupport", "ISO8583",
                           .product(name: "HummingbirdTesting", package: "hummingbird"),
                           .product(name: "AsyncHTTPClient", package: "async-http-client"),
                           .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "CryptoExtras", package: "swift-crypto"),
                           .product(name: "Yams", package: "Yams")],
            // The hostile corpus is read from the source tree (its generator and README sit beside it).
            exclude: ["Hostile", "Support"]
        ),
        .testTarget(
            name: "CardIOTests",
            dependencies: ["CardIO", "CLibPCSCLite", "EMV", "ISO8583", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["EMV", "CardIO", "VirtualCard", "TestSupport"]
        ),
    ]
)
