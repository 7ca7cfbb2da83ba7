import Foundation
import Testing
@testable import Scenario

@_exported import DaemonTestSupport
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
        ("name: x\nsteps:\n  - worldline: {pay: {amount: 1}}\n", 3, "card: <profile>, number: <card number> or token"),
        ("name: x\nsteps:\n  - worldline: {pay: {amount: 1, card: no-such-card}}\n", 3, "pay.card: no profile"),
        ("name: x\nsteps:\n  - worldline: {challenge: a, result: maybe}\n", 3, "result: pass or fail"),
        ("name: x\nsteps:\n  - worldline: {host: {respond: \"05\", unavailable: true}}\n", 3, "exactly one of respond"),
        ("name: x\nsteps:\n  - worldline: {get: a}\n    expect: {statuss: CAPTURED}\n", 4, "unknown key \"statuss\""),
        ("name: x\niso8583_host: {packager: jpos-iso93}\nsteps:\n  - wait: 1\n", 2, "iso8583_host.packager: pyiso8583-default, "),
        ("name: x\niso8583_host: {framing: nac5}\nsteps:\n  - wait: 1\n", 2, "iso8583_host.framing: binary2, nac or ascii4"),
        ("name: x\niso8583_host: {port: 1}\nsteps:\n  - wait: 1\n", 2, "unknown key \"port\""),
        ("name: x\niso8583_host: {answer_reversals: sometimes}\nsteps:\n  - wait: 1\n", 2, "iso8583_host.answer_reversals: true, false or first_lost"),
        ("name: x\nsteps:\n  - open: a\n    expect: {host_messages: [\"0430 in 39\"]}\n", 4, "host_messages: a list like"),
        ("name: x\niso8583_host:\n  answers: [maybe]\nsteps:\n  - wait: 1\n", 3, "iso8583_host.answers: issuer, timeout, malformed"),
        ("name: x\niso8583_host:\n  answers:\n    - {code: \"5\"}\nsteps:\n  - wait: 1\n", 4, "code: two letters or digits"),
        ("name: x\niso8583_host:\n  answers:\n    - {code: \"00\", authorisation_code: \"12\"}\nsteps:\n  - wait: 1\n", 4, "authorisation_code: 6 letters"),
        ("name: x\niso8583_host:\n  answers:\n    - {code: \"00\", script_after: [\"8418000000\"]}\nsteps:\n  - wait: 1\n", 4, "not both"),
        ("name: x\niso8583_host:\n  answers:\n    - {code: \"00\", corrupt_arpc: true}\nsteps:\n  - wait: 1\n", 4, "not both"),
        ("name: x\niso8583_host:\n  answers:\n    - {corrupt_arpc: false}\nsteps:\n  - wait: 1\n", 4, "an answer needs code, script_before, script_after or corrupt_arpc"),
        // Lc says 8 bytes of data, 2 follow.
        ("name: x\niso8583_host:\n  answers:\n    - {script_after: [\"84180000080102\"]}\nsteps:\n  - wait: 1\n", 4, "command APDUs in hex"),
        ("name: x\nsteps:\n  - open: a\n    expect:\n      iso8583: [{mti: \"200\"}]\n", 5, "mti: 4 digits"),
        ("name: x\nsteps:\n  - open: a\n    expect:\n      iso8583: [{mti: \"0200\", fields: {129: \"x\"}}]\n", 5, "a field number 2 to 128, or 55.TAG"),
        ("name: x\nsteps:\n  - open: a\n    expect:\n      iso8583: [{mti: \"0200\", fields: {4.9F26: \"x\"}}]\n", 5, "a field number 2 to 128, or 55.TAG"),
        ("name: x\nsteps:\n  - open: a\n    expect:\n      host_messages: [\"0200 sideways\"]\n", 5, "host_messages: a list like"),
        ("name: x\nsteps:\n  - iso8583_echo: {signon: true}\n", 3, "unknown key \"signon\""),
        ("name: x\nsteps:\n  - iso8583_echo: {}\n    expect: {callback: {status: success}}\n", 4, "unknown key \"callback\""),
        ("name: x\nsteps:\n  - iso8583_echo: {}\n    expect: {echo: {code: \"00\"}}\n", 4, "unknown key \"code\""),
        // `echo:` belongs to an iso8583_echo step: on an open step it is an unknown key, not ignored.
        ("name: x\nsteps:\n  - open: a\n    expect: {echo: {answered: \"true\"}}\n", 4, "unknown key \"echo\""),
        ("name: x\nclock: {waits: sometimes}\nsteps:\n  - wait: 0\n", 2, "clock.waits: scripted (the default: every wait virtual) or real"),
        ("name: x\nclock: {}\nsteps:\n  - wait: 0\n", 2, "clock: start: <ISO 8601 instant> and/or waits: real"),
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

    @Test("iso8583: the messages the scripted host received are checked: their MTIs in order, then each field")
    func iso8583Expectations() async throws {
        func run(_ expectation: String) async throws -> String {
            let yaml = """
                name: scripted host
                terminal: bench-iso8583
                iso8583_host:
                  answers: [{code: "51"}]
                steps:
                  - card: {insert: visa-credit-cvn10.yaml}
                  - keypad: {pin: "1234"}
                  - open: "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=i1-{{run.id}}"
                    expect:
                \(expectation)
                """
            return try await withScenario(yaml) { file in
                let result = await libraryRunner.run(try Scenario.load(file))
                return result.failure ?? "passed"
            }
        }
        #expect(try await run("      iso8583: [{mti: \"0200\", fields: {4: \"000000001200\", 55.9F27: \"80\", 52: {absent: true}}}]") == "passed")
        let count = try await run("      iso8583: [{mti: \"0200\"}, {mti: \"0400\"}]")
        #expect(count.contains("iso8583: expected the host to receive [\"0200\", \"0400\"], it received [\"0200\"]"), "\(count)")
        let field = try await run("      iso8583: [{mti: \"0200\", fields: {4: \"000000001300\"}}]")
        #expect(field.contains("iso8583 0200 field 4: expected \"000000001300\", got \"000000001200\""), "\(field)")
        let tag = try await run("      iso8583: [{mti: \"0200\", fields: {55.9F27: \"40\"}}]")
        #expect(tag.contains("iso8583 0200 field 55.9F27: expected \"40\", got \"80\""), "\(tag)")
        let trace = try await run("      host_messages: [\"0200 out\", \"0210 in\", \"0400 out\"]")
        #expect(trace.contains("host_messages: expected [\"0200 out\", \"0210 in\", \"0400 out\"], the ledger traced [\"0200 out\", \"0210 in\"]"), "\(trace)")
        // The card number is compared as the trace keeps it: masked.
        let pan = try await run("      iso8583: [{mti: \"0200\", fields: {2: \"4761739001010010\"}}]")
        #expect(pan.contains("got \"476173******0010\""), "\(pan)")
    }

    @Test("against a running daemon's own terminal (no set-up), a scenario with iso8583_host needs it to have an iso8583:// host in its format")
    func iso8583AgainstDaemon() async throws {
        let plain = try Scenario.parse("name: plain\nsteps:\n  - wait: 0\n", file: repositoryRoot.appendingPathComponent("Scenarios/x.yaml").path)
        let nac = try Scenario.parse("name: nac\nterminal: bench1\niso8583_host: {packager: pyiso8583-default-ascii, framing: nac}\nsteps:\n  - wait: 0\n",
                                     file: repositoryRoot.appendingPathComponent("Scenarios/x.yaml").path)
        // A core whose bench1 asks the emulated issuer.
        let emulated = try await InProcessDaemon(InProcessDaemon.Key(terminalOf: plain))
        let runner = ScenarioRunner(target: .daemon(emulated.client.endpoint), setUp: false)
        let refused = await runner.run(nac)
        await runner.finish()
        await emulated.stop()
        #expect(refused.failure?.contains("terminal bench1 authorises against emulated: this scenario needs a terminal whose host is iso8583://127.0.0.1:PORT in pyiso8583-default-ascii, nac") == true,
                "\(refused.failure ?? "passed")")
        // A core whose bench1 has a scripted host in another format.
        let binary = try Scenario.parse("name: b\nterminal: bench1\niso8583_host: {}\nsteps:\n  - wait: 0\n",
                                        file: repositoryRoot.appendingPathComponent("Scenarios/x.yaml").path)
        let other = try await InProcessDaemon(InProcessDaemon.Key(terminalOf: binary))
        let second = ScenarioRunner(target: .daemon(other.client.endpoint), setUp: false)
        let mismatch = await second.run(nac)
        await second.finish()
        await other.stop()
        #expect(mismatch.failure?.contains("terminal bench1 speaks pyiso8583-default, binary2 to its host") == true, "\(mismatch.failure ?? "passed")")
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
