import Daemon
import Foundation

/// The console's scenario runs (`POST /v1/scenario-runs`): the files run as
/// `cardbench scenario run` runs them in process, each in a daemon core of its own on a temporary
/// ledger, so a run never touches the daemon's own terminals, ledger or clock.
public struct ConsoleScenarioService: ScenarioService {
    public init() {}

    public func files(_ path: String) throws -> [String] {
        try Scenario.files([path])
    }

    public func run(_ files: [String], each: @escaping @Sendable (ScenarioRunView.Result) -> Void) async -> String {
        let runner = ScenarioRunner(target: .inProcess)
        var results: [ScenarioResult] = []
        for file in files {
            let result: ScenarioResult
            do throws(ScenarioError) {
                result = await runner.run(try Scenario.load(file))
            } catch {
                // A malformed file fails as itself; the others still run.
                result = ScenarioResult(file: file, name: ((file as NSString).lastPathComponent as NSString).deletingPathExtension,
                                        passed: false, seconds: 0, failure: "malformed scenario: \(error)")
            }
            results.append(result)
            each(ScenarioRunView.Result(file: result.file, name: result.name, passed: result.passed, seconds: result.seconds,
                                        failure: result.failure))
        }
        await runner.finish()
        return JUnitReport.xml(results)
    }
}
