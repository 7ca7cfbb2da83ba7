import Foundation
import Testing
@testable import Scenario

@_exported import TestSupport

/// Writes `yaml` as a scenario file beside the shipped library (so its card names resolve) and
/// removes it after `body`.
func withScenario<T>(_ yaml: String, _ body: (String) async throws -> T) async throws -> T {
    let dir = repositoryRoot.appendingPathComponent("Scenarios/.test-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let file = dir.appendingPathComponent("s.yaml").path
    try yaml.write(toFile: file, atomically: true, encoding: .utf8)
    return try await body(file)
}

@Suite("Scenario language and runner")
struct ScenarioTests {
    @Test("malformed files fail with their file, line and reason", arguments: [
        ("name: x\nsteps: []\n", 2, "steps: must be a list"),
        ("name: x\nsteps:\n  - open: \"vivapayclient://pay/v1\"\n    expect:\n      calback: {status: success}\n", 5, "unknown key \"calback\""),
        ("name: x\nsteps:\n  - keypad: {pin: \"1234\", cancel: true}\n", 3, "exactly one of pin"),
        ("name: x\nsteps:\n  - card: {insert: no-such-card}\n", 3, "no card named no-such-card"),
        ("steps:\n  - wait: 1\n", 1, "name: is required"),
        ("name: x\nsteps:\n  - open: a\n    card: remove\n", 3, "a step has one action"),
        ("name: x\nsteps:\n  - open: a\n    expect:\n      callback:\n        status: {matches: \"(\"}\n", 6, "not a regular expression"),
        ("name: [x\n", 2, "not valid YAML"),
        ("name: x\nsteps:\n  - worldline: {pay: {amount: 1}, cancel: a}\n", 3, "exactly one of session, pay"),
        ("name: x\nsteps:\n  - worldline: {pay: {amount: 1}}\n", 3, "card: <profile> or number"),
        ("name: x\nsteps:\n  - worldline: {pay: {amount: 1, card: no-such-card}}\n", 3, "pay.card: no profile"),
        ("name: x\nsteps:\n  - worldline: {challenge: a, result: maybe}\n", 3, "result: pass or fail"),
        ("name: x\nsteps:\n  - worldline: {host: {respond: \"05\", unavailable: true}}\n", 3, "exactly one of respond"),
        ("name: x\nsteps:\n  - worldline: {get: a}\n    expect: {statuss: CAPTURED}\n", 4, "unknown key \"statuss\""),
    ])
    func malformed(yaml: String, line: Int, reason: String) async throws {
        try await withScenario(yaml) { file in
            do {
                _ = try Scenario.load(file)
                Issue.record("accepted: \(yaml)")
            } catch let error as ScenarioError {
                #expect(error.file == file)
                #expect(error.line == line, "\(error)")
                #expect(error.reason.contains(reason), "\(error)")
            }
        }
    }

    @Test("a passing scenario: card, PIN, host code, callback, ledger, trace, saved values in a later step")
    func passing() async throws {
        let yaml = """
            name: declined then approved
            cards:
              visa: visa-credit-cvn10.yaml
            steps:
              - card: {insert: visa}
              - keypad: {pin: "1234"}
              - host: {respond: "51"}
              - open: "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=s1"
                expect:
                  callback:
                    status: failed
                    referenceNumber: ""
                    message: {matches: "^Transaction declined by host\\\\. \\\\(51\\\\)"}
                    installments: {absent: true}
                  ledger: {status: declined, responseCode: "51"}
                  trace: {contains: [SELECT, GET PROCESSING OPTIONS, VERIFY, GENERATE AC]}
              - keypad: {pin: "1234"}
              - open: "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1300&clientTransactionId=s2"
                save: sale
                expect:
                  callback: {status: success, referenceNumber: {matches: "^[0-9]{6}$"}}
                  ledger: {status: approved, amount: "1300"}
              - open: "vivapayclient://pay/v1?callback=pos://r&action=cancel&referenceNumber={{sale.referenceNumber}}"
                expect:
                  callback: {status: success}
                  original: {status: cancelled}
            """
        try await withScenario(yaml) { file in
            let runner = ScenarioRunner(target: .inProcess)
            let result = await runner.run(try Scenario.load(file))
            await runner.finish()
            #expect(result.passed, "\(result.failure ?? "")")
        }
    }

    @Test("a failing expectation names the step's line, expected and actual, and shows the trace")
    func failing() async throws {
        let yaml = """
            name: wrong expectation
            steps:
              - card: {insert: visa-credit-cvn10.yaml, remove_after: "GENERATE AC"}
              - keypad: {pin: "1234"}
              - open: "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=f1"
                expect:
                  callback: {status: success}
            """
        try await withScenario(yaml) { file in
            let runner = ScenarioRunner(target: .inProcess)
            let result = await runner.run(try Scenario.load(file))
            await runner.finish()
            #expect(!result.passed)
            let failure = result.failure ?? ""
            #expect(failure.contains("\(file):5:"), "\(failure)")
            #expect(failure.contains("callback.status: expected \"success\", got \"failed\""), "\(failure)")
            #expect(failure.contains("GENERATE AC"), "the trace excerpt: \(failure)")
            let xml = JUnitReport.xml([result])
            #expect(xml.contains("failures=\"1\"") && xml.contains("<failure message="))
        }
    }
}

/// Every scenario of the shipped library.
let library: [String] = (try? Scenario.files([repositoryRoot.appendingPathComponent("Scenarios").path])) ?? []

/// The library's one runner: its daemon cores are started once and reused from scenario to
/// scenario, as `cardbench scenario run` does (the cores' files go when the test process exits).
let libraryRunner = ScenarioRunner(target: .inProcess)

/// One scenario at a time, as `cardbench scenario run` runs them: scenarios at once would each
/// need a daemon core of their own.
@Suite("The scenario library, in process", .serialized)
struct ScenarioLibraryTests {
    @Test("the library has at least 60 scenarios, in folders by topic, each listed in Scenarios/README.md")
    func size() throws {
        #expect(library.count >= 60, "\(library.count) scenarios")
        let index = try String(contentsOf: repositoryRoot.appendingPathComponent("Scenarios/README.md"), encoding: .utf8)
        // The index has a section per folder (### `viva/` — …) listing its files by name.
        let sections = index.components(separatedBy: "\n### ").dropFirst()
        for file in library {
            let relative = file.replacingOccurrences(of: repositoryRoot.appendingPathComponent("Scenarios").path + "/", with: "")
            let parts = relative.split(separator: "/")
            #expect(parts.count == 2, "\(relative) is not in one topic folder")
            guard parts.count == 2 else { continue }
            let section = sections.first { $0.hasPrefix("`\(parts[0])/`") }
            #expect(section?.contains("`\(parts[1])`") == true, "Scenarios/README.md does not list \(relative) under \(parts[0])/")
        }
    }

    @Test("each scenario passes", arguments: library)
    func passes(_ file: String) async throws {
        let scenario = try Scenario.load(file)
        let result = await libraryRunner.run(scenario)
        #expect(result.passed, "\(result.failure ?? "")")
    }
}
