import Foundation
import PackagePlugin

/// Compiles the shipped card profiles (`Scenarios/cards/*.yaml`) and CA public keys
/// (`Scenarios/ca/capk.yaml`) into the target as Swift source, so the binaries carry their
/// embedded default wherever they run. The files are the inputs: changing or adding one rebuilds.
@main
struct EmbedDefaults: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let scenarios = context.package.directoryURL.appending(path: "Scenarios")
        let cards = try FileManager.default.contentsOfDirectory(at: scenarios.appending(path: "cards"), includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "yaml" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let capk = scenarios.appending(path: "ca/capk.yaml")
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedFiles.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(cards.count) card profiles and the CA public keys",
                executable: try context.tool(named: "cardbench-embed").url,
                arguments: [output.path, capk.path] + cards.map(\.path),
                inputFiles: [capk] + cards,
                outputFiles: [output]
            )
        ]
    }
}
