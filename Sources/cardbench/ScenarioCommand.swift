import ArgumentParser
import Daemon
import Foundation
import Scenario

struct ScenarioCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenario",
        abstract: "Scenario files: scripted transactions with expectations (docs/scenarios.md).",
        subcommands: [ScenarioRun.self]
    )
}

struct ScenarioRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run scenario files or directories; exit 1 when any fails, 2 when one is malformed.",
        discussion: """
        Each scenario runs on fresh terminal state. By default (--in-process) each runs in a daemon \
        core of its own started in this process on a temporary ledger; with --socket the scenarios \
        drive a running cardbenchd (its clock must be manual for scenarios that set it).
        """
    )

    @Argument(help: "Scenario files, or directories to search for *.yaml (cards/ folders are skipped).")
    var paths: [String]

    @Option(help: "Drive the cardbenchd at this control socket or http:// URL.")
    var socket: String?

    @Flag(help: "Run each scenario in a daemon core in this process (the default).")
    var inProcess = false

    @Option(help: "With --socket: run every scenario on this terminal of the daemon instead of the one it names (a pcsc: terminal with a vpcd endpoint runs the library through pcscd).")
    var terminal: String?

    @Option(help: "Write a JUnit XML report here.")
    var junit: String?

    @Flag(help: "Print the results as JSON.")
    var json = false

    static func load(_ paths: [String]) throws(ScenarioError) -> [Scenario] {
        var out: [Scenario] = []
        for file in try Scenario.files(paths) { out.append(try Scenario.load(file)) }
        return out
    }

    func validate() throws {
        if socket != nil, inProcess { throw CLIError(message: "--socket and --in-process: choose one", code: 2) }
        if terminal != nil, socket == nil { throw CLIError(message: "--terminal: needs --socket (an in-process core has only the scenario's own terminal)", code: 2) }
    }

    func run() async throws {
        let scenarios: [Scenario]
        do throws(ScenarioError) {
            scenarios = try Self.load(paths).map { scenario in terminal.map { scenario.on(terminal: $0) } ?? scenario }
        } catch {
            FileHandle.standardError.write(Data("cardbench: malformed scenario: \(error)\n".utf8))
            throw ExitCode(2)
        }
        guard !scenarios.isEmpty else { throw CLIError(message: "no scenario files under \(paths.joined(separator: ", "))", code: 2) }
        let runner = ScenarioRunner(target: socket.map { .daemon($0) } ?? .inProcess)
        var results: [ScenarioResult] = []
        for scenario in scenarios {
            let result = await runner.run(scenario)
            results.append(result)
            if !json {
                print(String(format: "%@ %@ (%@, %.2f s)", result.passed ? "ok  " : "FAIL", result.name, result.file, result.seconds))
                if let failure = result.failure { print("     " + failure.replacingOccurrences(of: "\n", with: "\n     ")) }
                flushOutput()
            }
        }
        await runner.finish()
        if let junit {
            do { try JUnitReport.xml(results).write(toFile: junit, atomically: true, encoding: .utf8) } catch {
                throw CLIError(message: "--junit: cannot write \(junit): \(error.localizedDescription)")
            }
        }
        let failed = results.filter { !$0.passed }.count
        if json {
            try printJSON(results)
        } else {
            print("\(results.count - failed) passed, \(failed) failed")
        }
        if failed > 0 { throw ExitCode(1) }
    }
}
