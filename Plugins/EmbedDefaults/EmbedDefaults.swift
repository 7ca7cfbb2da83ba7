import Foundation
import PackagePlugin

/// Compiles the shipped card profiles (`Scenarios/cards/*.yaml`), CA public keys
/// (`Scenarios/ca/capk.yaml`) and the bench console (`Console/`) into the target as Swift source,
/// so the binaries carry their embedded default and their console wherever they run. The files
/// are the inputs: changing or adding one rebuilds.
@main
struct EmbedDefaults: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let scenarios = context.package.directoryURL.appending(path: "Scenarios")
        let cards = try FileManager.default.contentsOfDirectory(at: scenarios.appending(path: "cards"), includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "yaml" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let capk = scenarios.appending(path: "ca/capk.yaml")
        // The bench console's page, style and modules (docs/console.md), served from memory.
        let console = try FileManager.default.contentsOfDirectory(at: context.package.directoryURL.appending(path: "Console"), includingPropertiesForKeys: nil)
            .filter { ["html", "css", "js", "svg"].contains($0.pathExtension) }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedFiles.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(cards.count) card profiles, the CA public keys and \(console.count) console files",
                executable: try context.tool(named: "cardbench-embed").url,
                arguments: [output.path, capk.path] + cards.map(\.path) + ["--console"] + console.map(\.path),
                inputFiles: [capk] + cards + console,
                outputFiles: [output]
            )
        ]
    }
}
