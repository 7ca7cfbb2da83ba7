import Daemon
import DaemonTestSupport
import Foundation
import Scenario
import TestSupport
import Testing

/// A scenario run sets a running daemon up (`scenarios.setup`): the terminals its scenarios
/// declare, one set per job, and a manual clock; and it leaves nothing behind.
@Suite("Scenario runs set a daemon up", .serialized)
struct DaemonSetupTests {
    static func terminals(_ client: DaemonClient) async throws -> [String] {
        let reply = try await client.send(method: "GET", "/v1/terminals")
        let list = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]])
        return list.compactMap { $0["name"] as? String }.sorted()
    }

    static func clockMode(_ client: DaemonClient) async throws -> String? {
        let reply = try await client.send(method: "GET", "/v1/clock")
        return (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["mode"] as? String
    }

    @Test("the whole library passes against a cardbenchd started with no configuration, the same with 1 and 4 jobs; afterwards its terminals and clock are as before")
    func libraryAgainstBareDaemon() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.stop() }
        let before = try await Self.terminals(daemon.client)
        #expect(try await Self.clockMode(daemon.client) == "system")
        let scenarios = try library.map { try Scenario.load($0) }
        var reports: [[String]] = []
        for jobs in [1, 4] {
            let runner = ScenarioRunner(target: .daemon(daemon.socket))
            let results = await runner.run(scenarios, jobs: jobs)
            await runner.finish()
            let failed = results.filter { !$0.passed }
            #expect(failed.isEmpty, "\(jobs) job(s): \(failed.prefix(3).map { $0.failure ?? "" })")
            reports.append(results.map { "\($0.file) \($0.passed) \($0.failure ?? "")" })
            #expect(try await Self.terminals(daemon.client) == before, "the run's terminals are left over")
            #expect(try await Self.clockMode(daemon.client) == "system")
        }
        #expect(reports[0] == reports[1])
        #expect(reports[0].count == library.count)
    }

    @Test("scenarios.setup: false: no terminal is made and the clock stays, each refusal naming the setting; a scenario declaring its terminal fails so")
    func refused() async throws {
        let daemon = try await DaemonProcess(config: "scenarios:\n  setup: false\n")
        defer { daemon.stop() }
        let made = try await daemon.client.send(method: "POST", "/v1/terminals", json: TerminalBody(name: "t2"))
        #expect(made.status == 403 && made.errorMessage.contains("scenarios.setup: false"), "\(made.status) \(made.errorMessage)")
        let clock = try await daemon.client.send(method: "POST", "/v1/clock", json: ClockBody(mode: "manual"))
        #expect(clock.status == 403 && clock.errorMessage.contains("scenarios.setup: false"), "\(clock.status) \(clock.errorMessage)")
        let file = repositoryRoot.appendingPathComponent("Scenarios/iso8583/timeout-z3-reversed.yaml").path
        let runner = ScenarioRunner(target: .daemon(daemon.socket))
        let result = await runner.run(try Scenario.load(file))
        await runner.finish()
        #expect(result.failure?.contains("scenarios.setup: false") == true, "\(result.failure ?? "passed")")
        #expect(try await Self.terminals(daemon.client) == ["bench1"])
    }

    @Test("POST /v1/clock: a bad mode or waits, and peersSilent with set, are 400 naming the field; waits shows in GET")
    func clockRules() async throws {
        let daemon = try await DaemonProcess(config: "clock:\n  mode: manual\n")
        defer { daemon.stop() }
        let client = daemon.client
        for (body, field) in [(ClockBody(mode: "lunar"), "mode"), (ClockBody(waits: "sometimes"), "waits"),
                              (ClockBody(advanceSeconds: 1, peersSilent: true), "peersSilent")] {
            let reply = try await client.send(method: "POST", "/v1/clock", json: body)
            #expect(reply.status == 400 && reply.errorMessage.contains(field), "\(field): \(reply.status) \(reply.errorMessage)")
        }
        #expect(try await client.send(method: "POST", "/v1/clock", json: ClockBody(waits: "real")).status == 200)
        let shown = try await client.send(method: "GET", "/v1/clock")
        #expect((try JSONSerialization.jsonObject(with: shown.body) as? [String: Any])?["waits"] as? String == "real")
    }

    @Test("POST and DELETE /v1/terminals: made, used, refused with the field and rule, removed; a configured terminal is not removed")
    func makeAndRemove() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.stop() }
        let client = daemon.client
        var body = TerminalBody(name: "lane-1")
        body.tacDefault = "0000000000"
        body.interfaces = ["contact"]
        let made = try await client.send(method: "POST", "/v1/terminals", json: body)
        #expect(made.status == 201, "\(made.errorMessage)")
        #expect(try await Self.terminals(client) == ["bench1", "lane-1"])
        // It is a terminal like the others: a card in its reader, a sale on it.
        let card = try await client.send(method: "POST", "/v1/terminals/lane-1/card", json: ["profile": "visa-credit-cvn10"])
        #expect(card.status == 200 || card.status == 201, "\(card.errorMessage)")
        _ = try await client.send(method: "POST", "/v1/terminals/lane-1/keypad", json: ["pin": "1234"])
        let sale = try await client.send(method: "POST", "/v1/open",
                                         json: ["url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=100", "terminal": "lane-1"])
        #expect(sale.status == 200 && String(decoding: sale.body, as: UTF8.self).contains("status=success"), "\(String(decoding: sale.body, as: UTF8.self))")
        let again = try await client.send(method: "POST", "/v1/terminals", json: body)
        #expect(again.status == 409 && again.errorMessage.contains("exists already"), "\(again.errorMessage)")
        for (field, edit) in [("tacDefault", { (b: inout TerminalBody) in b.tacDefault = "00" }),
                              ("interfaces", { (b: inout TerminalBody) in b.interfaces = ["chip"] }),
                              ("host", { (b: inout TerminalBody) in b.host = "tcp://h:1" }),
                              ("hostTimeoutSeconds", { (b: inout TerminalBody) in b.hostTimeoutSeconds = 0 }),
                              ("name", { (b: inout TerminalBody) in b.name = "no spaces" })] {
            var bad = TerminalBody(name: "lane-2")
            edit(&bad)
            let reply = try await client.send(method: "POST", "/v1/terminals", json: bad)
            #expect(reply.status == 400 && reply.errorMessage.contains(field), "\(field): \(reply.status) \(reply.errorMessage)")
        }
        let configured = try await client.send(method: "DELETE", "/v1/terminals/bench1")
        #expect(configured.status == 409 && configured.errorMessage.contains("configured"), "\(configured.errorMessage)")
        let removed = try await client.send(method: "DELETE", "/v1/terminals/lane-1")
        #expect(removed.status == 204)
        let gone = try await client.send(method: "DELETE", "/v1/terminals/lane-1")
        #expect(gone.status == 404)
        #expect(try await Self.terminals(client) == ["bench1"])
        // Made again, a name keeps its TID; another TID for it is refused, and nothing is left made.
        #expect(try await client.send(method: "POST", "/v1/terminals", json: TerminalBody(name: "lane-1")).status == 201)
        _ = try await client.send(method: "DELETE", "/v1/terminals/lane-1")
        var other = TerminalBody(name: "lane-1")
        other.tid = "12345678"
        let moved = try await client.send(method: "POST", "/v1/terminals", json: other)
        #expect(moved.status == 409 && moved.errorMessage.contains("tid"), "\(moved.status) \(moved.errorMessage)")
        #expect(try await Self.terminals(client) == ["bench1"])
    }

    @Test("a terminal a stopped run left behind is made afresh, and removed at the end")
    func leftBehind() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.stop() }
        let file = repositoryRoot.appendingPathComponent("Scenarios/magstripe/fallback-accepted.yaml").path
        let scenario = try Scenario.load(file)
        // What the run would make for it, there already (without its fallback).
        #expect(try await daemon.client.send(method: "POST", "/v1/terminals", json: TerminalBody(name: "\(scenario.terminal)-j1")).status == 201)
        let runner = ScenarioRunner(target: .daemon(daemon.socket))
        let result = await runner.run(scenario)
        await runner.finish()
        #expect(result.passed, "\(result.failure ?? "")")
        #expect(try await Self.terminals(daemon.client) == ["bench1"])
    }

    @Test("JUnit: a scenario's system-out names its transactions' console pages and traces on the daemon, and each is there")
    func systemOut() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.stop() }
        let file = repositoryRoot.appendingPathComponent("Scenarios/host-declines/viva-cents-05-do-not-honour.yaml").path
        let scenario = try Scenario.load(file)
        let runner = ScenarioRunner(target: .daemon(daemon.socket))
        let result = await runner.run(scenario)
        await runner.finish()
        let output = try #require(result.output, "\(result)")
        let id = try #require(output.firstMatch(of: /transactions\/([0-9]+)/).map { String($0.1) })
        #expect(output.contains("/console/#/transactions/\(id)") && output.contains("GET /v1/transactions/\(id)"))
        #expect(try await daemon.client.send(method: "GET", "/v1/transactions/\(id)").status == 200)
        let xml = JUnitReport.xml([result])
        #expect(xml.contains("<system-out>transaction \(id): /console/#/transactions/\(id)"), "\(xml)")
        #expect(try JUnitReport.read(Data(xml.utf8)).first?.output == output)
    }
}

/// What a scenario's `clock: {waits: real}` changes: a host's latency moves a manual clock when
/// virtual, and leaves it where it is when real.
@Suite("Scenario waits, virtual or real")
struct ScenarioWaitsTests {
    @Test("a 2 s host delay: virtual, the bench clock moves 2 s in no real time; real, the clock stays and real time passes")
    func virtualOrReal() async throws {
        let daemon = try await DaemonProcess(["--demo"], config: "clock:\n  mode: manual\n")
        defer { daemon.remove() }
        var elapsed: [String: (clock: Int64, real: Duration)] = [:]
        for mode in ["scripted", "real"] {
            #expect(try await daemon.json("POST", "/v1/clock", ClockBody(waits: mode)).0 == 200)
            #expect(try await daemon.json("POST", "/v1/terminals/bench1/host-queue", HostOutcomeBody(delayMs: 2_000)).0 / 100 == 2)
            let began = ContinuousClock.now
            let sale = try #require(try await daemon.open(
                "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1000&clientTransactionId=waits-\(mode)").result)
            let real = ContinuousClock.now - began
            let t = try #require(sale.transaction)
            elapsed[mode] = ((t.completedAt ?? 0) - t.createdAt, real)
        }
        let virtual = try #require(elapsed["scripted"]), real = try #require(elapsed["real"])
        #expect(virtual.clock >= 2_000_000, "the delay is a point on the clock's timeline: \(virtual)")
        #expect(real.clock < 2_000_000, "real waits leave the manual clock where it is: \(real)")
        #expect(real.real >= .seconds(2), "\(real)")
    }
}
