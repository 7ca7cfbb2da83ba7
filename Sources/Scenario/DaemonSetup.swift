import CardIO
import Daemon
import Foundation
import ISO8583
import Terminal

/// What a scenario run sets up on a running daemon (`scenarios.setup`, on by default), so the
/// library runs against a daemon started with no configuration: the clock switched to manual
/// (and back at the end), and the terminals the scenarios declare, made through
/// `POST /v1/terminals` — one set per job, so scenarios run at once never share one — with a
/// scripted ISO 8583 host of the runner's for each terminal with `iso8583_host:`. `finish()`
/// removes what it made.
actor DaemonSetup {
    /// A terminal the run made: its settings, and the scripted host it authorises against.
    private struct Made {
        let key: String
        let host: ScriptedISO8583Host?
    }

    private let client: DaemonClient
    private var started = false
    /// The daemon's own terminals when the run began.
    private var existing: Set<String> = []
    /// Whether the run switched the clock to manual (it switches it back at the end).
    private var switchedClock = false
    /// Why the daemon refused to be set up, when it did (`scenarios.setup: false`).
    private var refusal: String?
    private var made: [String: Made] = [:]

    init(client: DaemonClient) { self.client = client }

    /// The scenario as it runs on this daemon in job `lane`: on a terminal made for it when it
    /// declares one (or when jobs run at once), with that terminal's scripted host; or on the
    /// daemon's own terminal of its name, as before (`ScenarioTarget.daemon`).
    func prepare(_ scenario: Scenario, lane: Int, jobs: Int) async throws -> (Scenario, ScriptedISO8583Host?) {
        try await begin()
        let useOwn = existing.contains(scenario.terminal) && !scenario.declaresTerminal && jobs == 1
        if useOwn || refusal != nil {
            if let refusal, !existing.contains(scenario.terminal) || jobs > 1 {
                throw StepFailure(description: "\(scenario.file): terminal \(scenario.terminal): \(refusal)")
            }
            return (scenario, nil)
        }
        let name = Self.name(scenario.terminal, lane: lane)
        let key = Self.key(scenario)
        if let m = made[name], m.key == key { return (scenario.on(terminal: name), m.host) }
        if let old = made.removeValue(forKey: name) {
            _ = try? await client.send(method: "DELETE", "/v1/terminals/\(name)")
            old.host?.stop()
        }
        var body = TerminalBody(name: name)
        body.tacDefault = scenario.tacDefault
        body.fallback = scenario.terminalOptions.fallback ? true : nil
        body.interfaces = scenario.terminalOptions.interfaces
        func minor(_ key: String) -> Int? {
            guard let text = scenario.terminalOptions.contactless[key] else { return nil }
            let parts = text.split(separator: ".")
            return Int(parts[0]).map { $0 * 100 + (parts.count > 1 ? Int(parts[1]) ?? 0 : 0) }
        }
        body.contactlessTransactionLimit = minor("transaction_limit")
        body.contactlessFloorLimit = minor("floor_limit")
        body.contactlessCVMLimit = minor("cvm_limit")
        var host: ScriptedISO8583Host?
        if let script = scenario.iso8583Host {
            guard let packager = Packager.named(script.packager), let framing = Framing(rawValue: script.framing) else {
                throw StepFailure(description: "\(scenario.file): iso8583_host: unknown packager or framing")
            }
            let h = try ScriptedISO8583Host(packager: packager, framing: framing)
            host = h
            body.host = "iso8583://127.0.0.1:\(h.port)"
            body.iso8583Packager = script.packager
            body.iso8583Framing = script.framing
            // As in process: a host timeout of 3 s (virtual: it costs nothing).
            body.hostTimeoutSeconds = 3
        }
        var reply = try await client.send(method: "POST", "/v1/terminals", json: body)
        if reply.status == 409, try await client.send(method: "DELETE", "/v1/terminals/\(name)").status == 204 {
            // A run that was stopped before its end left the terminal it made: made afresh.
            reply = try await client.send(method: "POST", "/v1/terminals", json: body)
        }
        guard reply.status == 201 else {
            host?.stop()
            throw StepFailure(description: "\(scenario.file): making terminal \(name) for the scenario's terminal \(scenario.terminal): HTTP \(reply.status): \(reply.errorMessage)")
        }
        made[name] = Made(key: key, host: host)
        return (scenario.on(terminal: name), host)
    }

    /// Once per run: what the daemon has, and its clock made manual when it is not.
    private func begin() async throws {
        guard !started else { return }
        started = true
        let terminals = try await client.send(method: "GET", "/v1/terminals")
        if let list = try? JSONSerialization.jsonObject(with: terminals.body) as? [[String: Any]] {
            existing = Set(list.compactMap { $0["name"] as? String })
        }
        let clock = try await client.send(method: "GET", "/v1/clock")
        let mode = (try? JSONSerialization.jsonObject(with: clock.body) as? [String: Any])?["mode"] as? String
        if mode == "system" {
            let reply = try await client.send(method: "POST", "/v1/clock", json: ClockBody(mode: "manual"))
            if reply.status == 200 { switchedClock = true } else { refusal = reply.errorMessage }
        }
        // A daemon that lets nothing be set up says so when asked to make a terminal.
        if refusal == nil {
            let probe = try await client.send(method: "POST", "/v1/terminals", json: TerminalBody(name: ""))
            if probe.status == 403 { refusal = probe.errorMessage }
        }
    }

    /// Removes the terminals the run made, stops their hosts, and gives the clock back.
    func finish() async {
        for (name, m) in made {
            _ = try? await client.send(method: "DELETE", "/v1/terminals/\(name)")
            m.host?.stop()
        }
        made = [:]
        if started {
            _ = try? await client.send(method: "POST", "/v1/clock", json: ClockBody(waits: WaitMode.virtual.rawValue))
        }
        if switchedClock { _ = try? await client.send(method: "POST", "/v1/clock", json: ClockBody(mode: "system")) }
    }

    /// The made terminal's name: the scenario's with its job, at most 32 characters.
    static func name(_ terminal: String, lane: Int) -> String {
        let suffix = "-j\(lane + 1)"
        return String(terminal.prefix(32 - suffix.count)) + suffix
    }

    /// What makes two scenarios' terminals the same.
    static func key(_ s: Scenario) -> String {
        let o = s.terminalOptions
        return [s.tacDefault ?? "", String(o.fallback), (o.interfaces ?? []).joined(separator: ","),
                o.contactless.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","),
                s.iso8583Host.map { "\($0.packager)/\($0.framing)" } ?? ""].joined(separator: "|")
    }
}

extension Scenario {
    /// Whether the scenario declares settings for its terminal (beyond its name) or an external
    /// host: a daemon's own terminal of that name may not have them, so a run makes one.
    var declaresTerminal: Bool { tacDefault != nil || terminalOptions != TerminalOptions() || iso8583Host != nil }

    /// Whether the scenario depends on the daemon's clock or moves it (sets it, advances it,
    /// waits on it): against a daemon, such a scenario runs alone, since the clock is the
    /// daemon's, not the terminal's.
    var usesTheClock: Bool {
        if clockStart != nil || iso8583Host != nil || waits == .real { return true }
        return steps.contains { step in
            switch step.action {
            case .clockAdvance, .clockSet, .wait, .worldline, .citcon, .iso8583Echo: return true
            case .host(_, let unavailable, let delay): return unavailable || (delay ?? 0) > 0
            default: return false
            }
        }
    }
}
