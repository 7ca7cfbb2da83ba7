import Daemon
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
@testable import Scenario

/// The console's scenario runs (`/v1/scenario-runs`) with the real runner: files of
/// `scenarios.directory` run in daemon cores of their own; progress, results and the JUnit report.
@Suite("console scenario runs")
struct ConsoleScenarioRunTests {
    static let jsonHeaders: HTTPFields = [.contentType: "application/json"]

    func object(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }

    @Test("a folder runs to its pass/fail list and JUnit report; paths stay inside the directory; one run at a time")
    func runs() async throws {
        // Beside the shipped library, so the scenarios' card names resolve as they do there.
        let directory = repositoryRoot.appendingPathComponent("Scenarios/.test-console-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("good"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, file) in [("a.yaml", "swipe-stripe-only.yaml"), ("b.yaml", "fallback-off.yaml")] {
            try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("Scenarios/magstripe/\(file)"),
                                             to: directory.appendingPathComponent("good/\(name)"))
        }
        try "name: [broken\n".write(to: directory.appendingPathComponent("broken.yaml"), atomically: true, encoding: .utf8)

        let harness = try BenchHarness { $0.scenariosDirectory = directory.path }
        defer { harness.remove() }
        let app = Application(router: API(bench: harness.bench, scenarios: ConsoleScenarioService()).router())
        try await app.test(.router) { client in
            let list = try await client.execute(uri: "/v1/scenarios", method: .get) { try object($0.body) }
            #expect(list["files"] as? [String] == ["broken.yaml", "good/a.yaml", "good/b.yaml"])
            let folders = (list["folders"] as? [[String: Any]] ?? []).map { "\($0["path"] ?? "")=\($0["count"] ?? "")" }
            #expect(folders == [".=3", "good=2"])

            for (path, status, field) in [("../magstripe", HTTPResponse.Status.badRequest, "path"), ("/etc", .badRequest, "path"),
                                          ("good/../../cards", .badRequest, "path"), ("nope", .notFound, nil)] {
                try await client.execute(uri: "/v1/scenario-runs", method: .post, headers: Self.jsonHeaders,
                                         body: ByteBuffer(string: "{\"path\": \"\(path)\"}")) { response in
                    #expect(response.status == status, "\(path)")
                    if let field {
                        let refusal = try object(response.body)
                        #expect(refusal["field"] as? String == field, "\(path)")
                    }
                }
            }

            func run(_ path: String, whileRunning: ((String) async throws -> Void)? = nil) async throws -> [String: Any] {
                let started = try await client.execute(uri: "/v1/scenario-runs", method: .post, headers: Self.jsonHeaders,
                                                       body: ByteBuffer(string: "{\"path\": \"\(path)\"}")) { response in
                    #expect(response.status == .accepted)
                    return try object(response.body)
                }
                let id = try #require(started["id"] as? String)
                try await whileRunning?(id)
                for _ in 0..<600 {
                    let view = try await client.execute(uri: "/v1/scenario-runs/\(id)", method: .get) { try object($0.body) }
                    if view["state"] as? String != "running" { return view }
                    try await Task.sleep(for: .milliseconds(100))
                }
                Issue.record("run \(id) did not end")
                return [:]
            }

            let good = try await run("good") { id in
                // One run at a time, and its report only once it has ended.
                try await client.execute(uri: "/v1/scenario-runs", method: .post, headers: Self.jsonHeaders,
                                         body: ByteBuffer(string: #"{"path": "."}"#)) { response in
                    #expect(response.status == .conflict && String(buffer: response.body).contains("scenario run \(id) is in progress"))
                }
                try await client.execute(uri: "/v1/scenario-runs/\(id)/junit", method: .get) { response in
                    #expect(response.status == .conflict && String(buffer: response.body).contains("still running"))
                }
            }
            #expect(good["state"] as? String == "passed")
            #expect(good["total"] as? Int == 2 && good["passed"] as? Int == 2 && good["failed"] as? Int == 0)
            let results = good["results"] as? [[String: Any]] ?? []
            #expect(results.map { $0["file"] as? String ?? "" } == ["good/a.yaml", "good/b.yaml"])
            let id = try #require(good["id"] as? String)
            try await client.execute(uri: "/v1/scenario-runs/\(id)/junit", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/xml; charset=utf-8")
                let xml = String(buffer: response.body)
                #expect(xml.contains("tests=\"2\"") && xml.contains("failures=\"0\""), "\(xml.prefix(300))")
            }

            let all = try await run(".")
            #expect(all["state"] as? String == "failed")
            #expect(all["passed"] as? Int == 2 && all["failed"] as? Int == 1)
            let broken = (all["results"] as? [[String: Any]] ?? []).first { $0["file"] as? String == "broken.yaml" }
            #expect((broken?["failure"] as? String)?.contains("malformed scenario") == true)

            let runs = try await client.execute(uri: "/v1/scenario-runs", method: .get) {
                try JSONSerialization.jsonObject(with: Data($0.body.readableBytesView)) as? [[String: Any]] ?? []
            }
            #expect(runs.map { $0["path"] as? String ?? "" } == [".", "good"], "newest first")
            try await client.execute(uri: "/v1/scenario-runs/nope/junit", method: .get) { #expect($0.status == .notFound) }
        }
    }
}
