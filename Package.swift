// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "cardbench",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "cardbench", targets: ["cardbench"]),
        .library(name: "EMV", targets: ["EMV"]),
        .library(name: "VirtualCard", targets: ["VirtualCard"]),
        .library(name: "CardIO", targets: ["CardIO"]),
        .library(name: "Terminal", targets: ["Terminal"]),
        .library(name: "Ledger", targets: ["Ledger"]),
        .library(name: "Fronts", targets: ["Fronts"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", exact: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", exact: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
    ],
    targets: [
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
        // A profile-driven emulated EMV card answering APDUs; pure (profiles are parsed from text).
        .target(
            name: "VirtualCard",
            dependencies: ["EMV", .product(name: "Yams", package: "Yams")]
        ),
        // The terminal: kernel, emulated host, counters and clock. Pure.
        .target(
            name: "Terminal",
            dependencies: ["EMV"]
        ),
        // Readers and channels: the vpcd virtual-reader link now, serial and udev later.
        .target(
            name: "CardIO",
            dependencies: ["EMV"]
        ),
        // The durable record: SQLite (WAL) through GRDB — terminals, STANs, transactions, traces, outbox.
        .target(
            name: "Ledger",
            dependencies: [
                "EMV",
                "Terminal",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The apps cardbench stands in for: request URLs parsed and checked, callbacks rendered. Pure.
        .target(
            name: "Fronts",
            dependencies: ["EMV", "Terminal"]
        ),
        .executableTarget(
            name: "cardbench",
            dependencies: [
                "EMV",
                "VirtualCard",
                "CardIO",
                "Terminal",
                "Ledger",
                "CLibCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "EMVTests",
            dependencies: ["EMV"]
        ),
        .testTarget(
            name: "VirtualCardTests",
            dependencies: ["VirtualCard", "EMV"]
        ),
        .testTarget(
            name: "TerminalTests",
            dependencies: ["Terminal", "EMV", "VirtualCard"]
        ),
        .testTarget(
            name: "LedgerTests",
            dependencies: ["Ledger", "Terminal"]
        ),
        .testTarget(
            name: "FrontsTests",
            dependencies: ["Fronts", "Terminal", "EMV"]
        ),
        .testTarget(
            name: "CardIOTests",
            dependencies: ["CardIO", "EMV"]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["EMV", "CardIO", "VirtualCard"]
        ),
    ]
)
