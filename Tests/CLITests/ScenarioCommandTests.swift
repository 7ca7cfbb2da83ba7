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
