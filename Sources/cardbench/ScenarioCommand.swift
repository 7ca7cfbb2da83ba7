import ArgumentParser
import Daemon
import Foundation
import Scenario

struct ScenarioCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenario",
        abstract: "Scenario files: scripted transactions with expectations (docs/scenarios.md).",
        subcommands: [ScenarioRun.self, ScenarioMerge.self, ScenarioGenerate.self, ScenarioRecord.self]
    )
}

struct ScenarioRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run scenario files or directories; exit 1 when any fails, 2 when one is malformed.",
        discussion: """
        Each scenario runs on fresh terminal state, on the terminal it declares (docs/scenarios.md, \
        "Terminals in scenarios"). By default (--in-process) each job has a daemon core started in \
        this process on a temporary ledger, with a manual clock on which a host's timeout costs no \
        real time; with --socket the scenarios drive a running cardbenchd, which the run sets up \
        (its terminals made through the API, its clock switched to manual) and gives back after, \
        unless it is configured with scenarios.setup: false.
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

    @Option(help: "Run only shard K of N (K/N): a stable part of the library for one of N CI runners; the N parts cover it once.")
    var shard: String?

    @Option(help: "With --shard: balance the shards by the times in this JUnit report of an earlier run (by count without it).")
    var timings: String?

    @Option(help: "Run up to N scenarios at once, each on terminals of its own; results are reported in the library's order whatever N is.")
    var jobs = 1

    @Flag(help: "Print the results as JSON.")
    var json = false

    static func load(_ paths: [String], shard: ScenarioShard? = nil, timings: [String: Double]? = nil) throws(ScenarioError) -> [Scenario] {
        var files = try Scenario.files(paths)
        if let shard { files = shard.select(files, timings: timings) }
        var out: [Scenario] = []
        for file in files { out.append(try Scenario.load(file)) }
        return out
    }

    func validate() throws {
        if let shard, ScenarioShard(shard) == nil { throw CLIError(message: "--shard: \(ScenarioShard.rule); got \"\(shard)\"", code: 2) }
        if timings != nil, shard == nil { throw CLIError(message: "--timings: needs --shard", code: 2) }
        if socket != nil, inProcess { throw CLIError(message: "--socket and --in-process: choose one", code: 2) }
        if jobs < 1 || jobs > 64 { throw CLIError(message: "--jobs: 1 to 64, got \(jobs)", code: 2) }
        if terminal != nil, socket == nil { throw CLIError(message: "--terminal: needs --socket (an in-process core has only the scenario's own terminal)", code: 2) }
    }

    func run() async throws {
        var times: [String: Double]? = nil
        if let timings {
            let cases: [JUnitReport.Case]
            do { cases = try JUnitReport.read(try Data(contentsOf: URL(fileURLWithPath: timings))) } catch {
                throw CLIError(message: "--timings: cannot read \(timings): \(error)", code: 2)
            }
            times = Dictionary(cases.map { ($0.file, $0.seconds) }, uniquingKeysWith: { $1 })
        }
        let scenarios: [Scenario]
        do throws(ScenarioError) {
            scenarios = try Self.load(paths, shard: shard.flatMap(ScenarioShard.init), timings: times)
                .map { scenario in terminal.map { scenario.on(terminal: $0) } ?? scenario }
        } catch {
            FileHandle.standardError.write(Data("cardbench: malformed scenario: \(error)\n".utf8))
            throw ExitCode(2)
        }
        // A shard of a library smaller than the shard count may be empty: nothing to run is not an error then.
        guard !scenarios.isEmpty || shard != nil else { throw CLIError(message: "no scenario files under \(paths.joined(separator: ", "))", code: 2) }
        let runner = ScenarioRunner(target: socket.map { .daemon($0) } ?? .inProcess, setUp: terminal == nil)
        let json = self.json
        let results = await runner.run(scenarios, jobs: jobs) { result in
            guard !json else { return }
            print(String(format: "%@ %@ (%@, %.2f s)", result.passed ? "ok  " : "FAIL", result.name, result.file, result.seconds))
            if let failure = result.failure { print("     " + failure.replacingOccurrences(of: "\n", with: "\n     ")) }
            flushOutput()
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

struct ScenarioMerge: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the JUnit reports of a library's shards into one report (one testsuite per folder).",
        discussion: "Exit 1 when a merged case failed, 2 when a report cannot be read."
    )

    @Argument(help: "The shards' JUnit reports.")
    var reports: [String]

    @Option(help: "Write the merged report here (standard output without it).")
    var output: String?

    func run() throws {
        var all: [[JUnitReport.Case]] = []
        for report in reports {
            do { all.append(try JUnitReport.read(try Data(contentsOf: URL(fileURLWithPath: report)))) } catch {
                throw CLIError(message: "\(report): cannot read: \(error)", code: 2)
            }
        }
        let merged = JUnitReport.merge(all)
        let xml = JUnitReport.xml(merged)
        if let output {
            do { try xml.write(toFile: output, atomically: true, encoding: .utf8) } catch {
                throw CLIError(message: "--output: cannot write \(output): \(error.localizedDescription)")
            }
            let failed = merged.filter { $0.failure != nil }.count
            print("\(merged.count - failed) passed, \(failed) failed")
        } else {
            print(xml, terminator: "")
        }
        if merged.contains(where: { $0.failure != nil }) { throw ExitCode(1) }
    }
}

struct ScenarioGenerate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Write a library of generated scenarios: cards × amounts × response codes × fronts (Viva, Worldline, Citcon).",
        discussion: """
        Each scenario is a real transaction whose outcome the issuer's queued answer decides, with \
        its expectations (the callback or the platform's answer, and the ledger). The cards are \
        copied from --cards into the library's cards/ folder. The same count always gives the same files.
        """
    )

    @Option(help: "How many scenarios.")
    var count = 1_000

    @Option(help: "The directory to write the library into (made if missing).")
    var out: String

    @Option(help: "Where the card profiles are (the shipped library's).")
    var cards = "Scenarios/cards"

    func validate() throws {
        guard (1...1_000_000).contains(count) else { throw CLIError(message: "--count: 1 to 1000000, got \(count)", code: 2) }
    }

    func run() throws {
        let written = try Self.write(count: count, into: out, cards: cards)
        print("\(written) scenarios in \(out)")
    }

    /// Writes `count` generated scenarios and the cards they use into `directory`.
    static func write(count: Int, into directory: String, cards: String) throws -> Int {
        let fm = FileManager.default
        let root = URL(fileURLWithPath: directory)
        do {
            try fm.createDirectory(at: root.appendingPathComponent("cards"), withIntermediateDirectories: true)
            for card in ScenarioGenerator.cards {
                let target = root.appendingPathComponent("cards/\(card.profile).yaml")
                if fm.fileExists(atPath: target.path) { try fm.removeItem(at: target) }
                try fm.copyItem(at: URL(fileURLWithPath: cards).appendingPathComponent("\(card.profile).yaml"), to: target)
            }
            // At most 1,000 files a folder.
            for i in 0..<count {
                let (file, text) = ScenarioGenerator.scenario(i)
                let folder = root.appendingPathComponent(String(format: "g%03d", i / 1_000))
                if i % 1_000 == 0 { try fm.createDirectory(at: folder, withIntermediateDirectories: true) }
                try text.write(to: folder.appendingPathComponent(file), atomically: false, encoding: .utf8)
            }
        } catch {
            throw CLIError(message: "cannot write the library into \(directory): \(error.localizedDescription)")
        }
        return count
    }
}
