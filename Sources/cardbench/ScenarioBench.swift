import ArgumentParser
import Foundation
import Scenario

/// `cardbench bench scenarios`: the scenario library's speed, as a CI run sees it, beside its goal
/// (issue 39: at least 200 scenarios a second in process). The floor measured in the same run is
/// a scenario that does nothing (`wait: 0`): what the runner itself costs per scenario.
struct ScenarioBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenarios",
        abstract: "Scenarios a second through the runner, the slowest ten, and the CPU per scenario, beside an empty scenario's floor.",
        discussion: """
        Runs the library once (in process by default, or against the cardbenchd at --socket), then as \
        many empty scenarios as the library has. Prints scenarios a second, this process's CPU per \
        scenario (in process the daemon core runs here too), and the slowest ten with their times.
        """
    )

    @Argument(help: "The library: scenario files or directories.")
    var paths: [String] = ["Scenarios"]

    @Option(help: "Drive the cardbenchd at this control socket or http:// URL (in process without it).")
    var socket: String?

    @Option(help: "Run up to N scenarios at once (the goal is measured with 2, one per core of the reference machine).")
    var jobs = 2

    @Option(help: "Instead of the library: a generated one of this many scenarios (cardbench scenario generate), run at a tenth of its size and at full size, to show time per scenario and memory as it grows.")
    var generated: Int?

    @Flag(help: "Print the figures as JSON.")
    var json = false

    struct Figures: Encodable {
        let scenarios: Int
        let failed: Int
        let seconds: Double
        let scenariosPerSecond: Double
        let cpuMillisecondsPerScenario: Double
        let floorScenariosPerSecond: Double
        let goalScenariosPerSecond: Double
        let slowest: [Slow]
        struct Slow: Encodable { let file: String; let seconds: Double }
    }

    func run() async throws {
        if let generated { return try await runGenerated(generated) }
        let scenarios: [Scenario]
        do throws(ScenarioError) { scenarios = try ScenarioRun.load(paths) } catch {
            throw CLIError(message: "malformed scenario: \(error)", code: 2)
        }
        guard !scenarios.isEmpty else { throw CLIError(message: "no scenario files under \(paths.joined(separator: ", "))", code: 2) }
        let target: ScenarioTarget = socket.map { .daemon($0) } ?? .inProcess

        let runner = ScenarioRunner(target: target)
        let cpu0 = SaleBench.ownCPUSeconds(), start = Date()
        let results = await runner.run(scenarios, jobs: jobs)
        let seconds = Date().timeIntervalSince(start), cpu = SaleBench.ownCPUSeconds() - cpu0
        await runner.finish()

        // The floor: as many scenarios that do nothing, through the same runner.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let empty = directory.appendingPathComponent("empty.yaml").path
        try "name: nothing\nsteps:\n  - wait: 0\n".write(toFile: empty, atomically: true, encoding: .utf8)
        let nothing: Scenario
        do throws(ScenarioError) { nothing = try Scenario.load(empty) } catch { throw CLIError(message: "the floor's scenario: \(error)") }
        let floorRunner = ScenarioRunner(target: target)
        let floorStart = Date()
        _ = await floorRunner.run([Scenario](repeating: nothing, count: scenarios.count), jobs: jobs)
        let floorSeconds = Date().timeIntervalSince(floorStart)
        await floorRunner.finish()

        let slowest = results.sorted { $0.seconds > $1.seconds }.prefix(10)
        let figures = Figures(
            scenarios: results.count, failed: results.filter { !$0.passed }.count, seconds: (seconds * 1000).rounded() / 1000,
            scenariosPerSecond: (Double(results.count) / seconds * 10).rounded() / 10,
            cpuMillisecondsPerScenario: (cpu / Double(results.count) * 1000 * 100).rounded() / 100,
            floorScenariosPerSecond: (Double(results.count) / floorSeconds * 10).rounded() / 10, goalScenariosPerSecond: socket == nil ? 200 : 100,
            slowest: slowest.map { .init(file: $0.file, seconds: ($0.seconds * 1000).rounded() / 1000) })
        if json {
            try printJSON(figures)
        } else {
            print("cardbench bench scenarios: \(figures.scenarios) scenarios \(socket == nil ? "in process" : "against \(socket!)"), --jobs \(jobs), \(figures.failed) failed")
            func label(_ text: String) -> String { text.padding(toLength: 44, withPad: " ", startingAt: 0) }
            print(label("the library") + String(format: " %10.1f scenarios/s  (%.2f s)", figures.scenariosPerSecond, seconds))
            print(label("floor: an empty scenario, as many times") + String(format: " %10.1f scenarios/s", figures.floorScenariosPerSecond))
            print(String(format: "CPU per scenario (this process): %.2f ms", figures.cpuMillisecondsPerScenario))
            print(String(format: "goal: at least %.0f scenarios/s %@: %.1f, %@", figures.goalScenariosPerSecond, socket == nil ? "in process" : "against a daemon",
                         figures.scenariosPerSecond, figures.scenariosPerSecond >= figures.goalScenariosPerSecond ? "met" : "not met"))
            print("the slowest ten:")
            for s in figures.slowest { print(String(format: "  %8.3f s  %@", s.seconds, s.file)) }
        }
        if figures.failed > 0 { throw ExitCode(1) }
    }

    /// The generated library at a tenth of `count` and at `count`: seconds per scenario at each
    /// size (linear: the same), and this process's resident set at each tenth of the full run
    /// (flat: no growth with the library's size).
    func runGenerated(_ count: Int) async throws {
        guard count >= 100 else { throw CLIError(message: "--generated: at least 100", code: 2) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-generated-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try ScenarioGenerate.write(count: count, into: directory.path, cards: "Scenarios/cards")
        let all: [Scenario]
        do throws(ScenarioError) { all = try ScenarioRun.load([directory.path]) } catch { throw CLIError(message: "the generated library: \(error)") }
        let target: ScenarioTarget = socket.map { .daemon($0) } ?? .inProcess
        let pid = ProcessInfo.processInfo.processIdentifier
        var lines: [(size: Int, seconds: Double, failed: Int, rss: [Int])] = []
        for size in [count / 10, count] {
            let runner = ScenarioRunner(target: target)
            var done = 0
            var rss: [Int] = []
            let start = Date()
            let results = await runner.run(Array(all.prefix(size)), jobs: jobs) { _ in
                done += 1
                if done % max(1, size / 10) == 0 { rss.append(SaleBench.residentKB(pid)) }
            }
            let seconds = Date().timeIntervalSince(start)
            await runner.finish()
            lines.append((size, seconds, results.filter { !$0.passed }.count, rss))
        }
        print("cardbench bench scenarios --generated \(count): \(socket == nil ? "in process" : "against \(socket!)"), --jobs \(jobs)")
        for l in lines {
            print(String(format: "%7d scenarios: %8.2f s  %8.1f scenarios/s  %6.0f µs a scenario  %d failed", l.size, l.seconds,
                         Double(l.size) / l.seconds, l.seconds / Double(l.size) * 1e6, l.failed))
        }
        let full = lines[1]
        print("resident set at each tenth of the \(count): " + full.rss.map { String(format: "%.1f", Double($0) / 1024) }.joined(separator: ", ") + " MB")
        let perSmall = lines[0].seconds / Double(lines[0].size), perFull = full.seconds / Double(full.size)
        let ratio = perFull / perSmall
        print(String(format: "goal: time linear in the library's size: %.2fx the time a scenario at a tenth of the size, %@", ratio, ratio <= 1.25 ? "met" : "not met"))
        let growth = Double((full.rss.last ?? 0) - (full.rss.first ?? 0)) / 1024
        print(String(format: "goal: memory flat: %+.1f MB from the first tenth to the end, %@", growth, growth <= 5 ? "met" : "not met"))
        if lines.contains(where: { $0.failed > 0 }) { throw ExitCode(1) }
    }
}
