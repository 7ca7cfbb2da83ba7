import Foundation
import Testing

@Suite("cardbench scenario run")
struct ScenarioCommandTests {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Writes scenario files in a hidden folder of Scenarios/ (so card names resolve, and the
    /// library run skips it), runs `body`, removes them.
    func withFiles(_ files: [String: String], _ body: (URL) throws -> Void) throws {
        let dir = root.appendingPathComponent("Scenarios/.cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, text) in files { try text.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        try body(dir)
    }

    @Test("a line per scenario, the closing count, exit 1 when one failed, and a JUnit report")
    func passAndFail() throws {
        let pass = """
            name: approved
            steps:
              - card: {insert: visa-credit-cvn10.yaml}
              - keypad: {pin: "1234"}
              - open: "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200"
                expect: {callback: {status: success}}
            """
        let fail = pass.replacingOccurrences(of: "name: approved", with: "name: expects a decline")
            .replacingOccurrences(of: "status: success", with: "status: failed")
        try withFiles(["a.yaml": pass, "b.yaml": fail]) { dir in
            let junit = dir.appendingPathComponent("report.xml").path
            let result = try run(["scenario", "run", dir.path, "--junit", junit])
            #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
            #expect(result.lines.first?.hasPrefix("ok   approved (") == true, "\(result.stdout)")
            #expect(result.stdout.contains("FAIL expects a decline ("))
            #expect(result.stdout.contains("callback.status: expected \"failed\", got \"success\""))
            #expect(result.lines.last == "1 passed, 1 failed")
            let xml = try String(contentsOfFile: junit, encoding: .utf8)
            #expect(xml.contains("tests=\"2\" failures=\"1\""))

            let one = try run(["scenario", "run", dir.appendingPathComponent("a.yaml").path, "--json"])
            #expect(one.status == 0)
            let decoded = try JSONSerialization.jsonObject(with: Data(one.stdout.utf8)) as? [[String: Any]]
            #expect(decoded?.first?["passed"] as? Bool == true)
        }
    }

    @Test("--shard K/N: the N shards cover the library once, by count or by an earlier run's timings; merge makes one report of theirs")
    func shards() throws {
        var files: [String: String] = [:]
        for i in 1...7 { files["s\(i).yaml"] = "name: scenario \(i)\nsteps:\n  - wait: 0\n" }
        try withFiles(files) { dir in
            func ran(_ arguments: [String]) throws -> [String] {
                let result = try run(["scenario", "run", dir.path, "--json"] + arguments)
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                let decoded = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
                return decoded.compactMap { ($0["file"] as? String).map { ($0 as NSString).lastPathComponent } }
            }
            let all = try ran([])
            #expect(all.count == 7)
            let byCount = try (1...3).map { try ran(["--shard", "\($0)/3"]) }
            #expect(byCount.map(\.count) == [3, 2, 2], "\(byCount)")
            #expect(byCount.flatMap { $0 }.sorted() == all.sorted())
            // An earlier run's report: s1 takes as long as the others together, so it gets a shard of its own.
            var timings = "<testsuites>"
            for name in all { timings += "<testcase classname=\"\(dir.path)/\(name)\" name=\"x\" time=\"\(name == "s1.yaml" ? 6.0 : 1.0)\"/>" }
            let report = dir.appendingPathComponent("timings.xml").path
            try (timings + "</testsuites>").write(toFile: report, atomically: true, encoding: .utf8)
            let byTime = try (1...2).map { try ran(["--shard", "\($0)/2", "--timings", report]) }
            #expect(byTime[0] == ["s1.yaml"], "\(byTime)")
            #expect(byTime.flatMap { $0 }.sorted() == all.sorted())
            // Each shard's JUnit report, merged: every scenario once, under its folder's testsuite.
            var reports: [String] = []
            for k in 1...3 {
                let junit = dir.appendingPathComponent("shard\(k).xml").path
                #expect(try run(["scenario", "run", dir.path, "--shard", "\(k)/3", "--junit", junit]).status == 0)
                reports.append(junit)
            }
            let mergedFile = dir.appendingPathComponent("merged.xml").path
            let merged = try run(["scenario", "merge"] + reports + ["--output", mergedFile])
            #expect(merged.status == 0 && merged.stdout.contains("7 passed, 0 failed"), "\(merged.stdout)\(merged.stderr)")
            let xml = try String(contentsOfFile: mergedFile, encoding: .utf8)
            #expect(xml.contains("<testsuites name=\"cardbench scenarios\" tests=\"7\" failures=\"0\""), "\(xml.prefix(300))")
            #expect(xml.components(separatedBy: "<testsuite name=\"\(dir.lastPathComponent)\" tests=\"7\"").count == 2, "\(xml.prefix(400))")
            #expect(xml.components(separatedBy: "<testcase ").count == 8)
        }
        // Bad input: exit 2 naming the option and the rule.
        for (arguments, message) in [(["--shard", "0/2"], "--shard: must be K/N"), (["--shard", "3/2"], "--shard: must be K/N"),
                                     (["--timings", "x.xml"], "--timings: needs --shard"),
                                     (["--shard", "1/2", "--timings", "/nonexistent/t.xml"], "--timings: cannot read /nonexistent/t.xml")] {
            let result = try run(["scenario", "run", "Scenarios/viva"] + arguments)
            #expect(result.status == 2 && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        let unreadable = try run(["scenario", "merge", "/nonexistent/a.xml"])
        #expect(unreadable.status == 2 && unreadable.stderr.contains("/nonexistent/a.xml: cannot read"), "\(unreadable.stderr)")
    }

    @Test("bench scenarios: scenarios a second beside an empty scenario's floor, CPU per scenario, the slowest first")
    func bench() throws {
        let slow = "name: slow\nsteps:\n  - wait: 1\n", quick = "name: quick\nsteps:\n  - wait: 0\n"
        try withFiles(["a.yaml": quick, "b.yaml": slow, "c.yaml": quick]) { dir in
            let result = try run(["bench", "scenarios", dir.path, "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            let figures = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect(figures["scenarios"] as? Int == 3 && figures["failed"] as? Int == 0)
            #expect((figures["scenariosPerSecond"] as? Double ?? 0) > 0 && (figures["floorScenariosPerSecond"] as? Double ?? 0) > 0)
            #expect((figures["cpuMillisecondsPerScenario"] as? Double ?? -1) >= 0 && figures["goalScenariosPerSecond"] as? Double == 200)
            let slowest = figures["slowest"] as? [[String: Any]] ?? []
            #expect(slowest.count == 3 && (slowest.first?["file"] as? String)?.hasSuffix("b.yaml") == true, "\(slowest)")
            let text = try run(["bench", "scenarios", dir.path])
            #expect(text.stdout.contains("floor: an empty scenario") && text.stdout.contains("goal: at least 200 scenarios/s"), "\(text.stdout)")
        }
    }

    @Test("--jobs, --count and --generated out of range: exit 2 naming the option and its range")
    func badNumbers() throws {
        for (arguments, message) in [(["scenario", "run", "Scenarios", "--jobs", "0"], "--jobs: 1 to 64, got 0"),
                                     (["scenario", "run", "Scenarios", "--jobs", "65"], "--jobs: 1 to 64, got 65"),
                                     (["scenario", "generate", "--count", "0", "--out", "/tmp/unused"], "--count: 1 to 1000000, got 0"),
                                     (["bench", "scenarios", "--generated", "99"], "--generated: at least 100")] {
            let result = try run(arguments)
            #expect(result.status == 2 && result.stderr.contains(message), "\(arguments): \(result.status) \(result.stderr)")
        }
    }

    @Test("scenario generate: the same count, the same files, each with its cards beside it; the library loads")
    func generate() throws {
        try withFiles([:]) { dir in
            let out = dir.appendingPathComponent("g").path
            let result = try run(["scenario", "generate", "--count", "12", "--out", out])
            #expect(result.status == 0 && result.stdout.contains("12 scenarios"), "\(result.stderr)")
            let again = dir.appendingPathComponent("h").path
            #expect(try run(["scenario", "generate", "--count", "12", "--out", again]).status == 0)
            let names = try FileManager.default.contentsOfDirectory(atPath: out + "/g000").sorted()
            #expect(names.count == 12 && names.first == "00000-viva.yaml", "\(names)")
            for name in names {
                #expect(FileManager.default.contents(atPath: out + "/g000/" + name) == FileManager.default.contents(atPath: again + "/g000/" + name))
            }
            #expect(FileManager.default.fileExists(atPath: out + "/cards/visa-credit-cvn10.yaml"))
            // Each is a real transaction with its expectations, and passes.
            let ran = try run(["scenario", "run", out])
            #expect(ran.status == 0 && ran.stdout.contains("12 passed, 0 failed"), "\(ran.stdout) \(ran.stderr)")
        }
    }

    @Test("a malformed scenario: exit 2 with its file, line and reason; nothing runs")
    func malformed() throws {
        try withFiles(["bad.yaml": "name: x\nsteps:\n  - open: a\n    expect: {callbak: {status: success}}\n"]) { dir in
            let result = try run(["scenario", "run", dir.path])
            #expect(result.status == 2)
            #expect(result.stderr.contains("bad.yaml:4: unknown key \"callbak\""), "\(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        let missing = try run(["scenario", "run", "/nonexistent/scenarios"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("/nonexistent/scenarios"))
    }
}
