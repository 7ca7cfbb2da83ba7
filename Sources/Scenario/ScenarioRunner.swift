import CardIO
import Daemon
import EMV
import Foundation
import Hummingbird
import ISO8583
import Logging
import Synchronization
import Terminal
import Yams

/// Where scenarios run: a daemon core started in this process for each scenario, on a
/// temporary ledger (the default), or a running `cardbenchd` at a control socket or http:// URL.
public enum ScenarioTarget: Sendable {
    case inProcess
    case daemon(String)
}

/// The outcome of one scenario.
public struct ScenarioResult: Sendable, Encodable {
    public let file: String
    public let name: String
    public let passed: Bool
    public let seconds: Double
    /// What went wrong: the step's line, the expectation, expected versus actual, and the end
    /// of the transaction's APDU trace.
    public let failure: String?
    /// Where the scenario's transactions are (their console pages and trace), for the JUnit
    /// report's `system-out`; nil when it made none.
    public var output: String? = nil
}

/// The ledger ids of the transactions a scenario's `open` steps made, kept whatever step fails.
final class TransactionLog: Sendable {
    private let ids = Mutex<[Int64]>([])
    func add(_ id: Int64) { ids.withLock { $0.append(id) } }
    var all: [Int64] { ids.withLock { $0 } }
}

/// Runs scenario files (docs/scenarios.md) through the daemon's API.
///
/// In process, a daemon core (a `Bench` on a temporary ledger, its API on a Unix socket of its
/// own) is started the first time a scenario needs one with its configuration (its cards
/// directory, terminal and terminal action code), and kept for the next scenarios that need the
/// same one, as a running `cardbenchd` is kept for a library run: each scenario starts from its
/// terminal's reset, not from a new daemon. Starting a core costs about 200 ms (a new ledger
/// file, the card profiles, the listener); a scenario's own steps a few milliseconds. `finish()`
/// stops the cores and removes their files.
public struct ScenarioRunner: Sendable {
    public let target: ScenarioTarget
    private let cores = InProcessCores()
    /// The scripted ISO 8583 hosts started for a running daemon's terminals.
    private let hosts = ScriptedHosts()
    /// What the run set up on a running daemon (its terminals, its clock).
    private let setup: DaemonSetup?

    /// `setUp`: against a daemon, make the terminals the scenarios declare and switch its clock
    /// to manual (`DaemonSetup`); off when every scenario is sent to one terminal (`--terminal`).
    public init(target: ScenarioTarget, setUp: Bool = true) {
        self.target = target
        if case .daemon(let endpoint) = target, setUp { setup = DaemonSetup(client: DaemonClient(endpoint: endpoint)) } else { setup = nil }
    }

    /// Runs one loaded scenario.
    public func run(_ scenario: Scenario) async -> ScenarioResult { await run(scenario, lane: 0, jobs: 1) }

    /// Runs one loaded scenario as job `lane` of `jobs` run at once.
    func run(_ scenario: Scenario, lane: Int, jobs: Int) async -> ScenarioResult {
        let start = ContinuousClock.now
        var failure: String?
        let made = TransactionLog()
        do {
            switch target {
            case .inProcess:
                let daemon = try await cores.checkOut(for: scenario)
                // The scenario's terminal is made in the core as it would be in a daemon
                // (`DaemonSetup`), so one core serves every terminal the library declares.
                var (onCore, host): (Scenario, ScriptedISO8583Host?) = (scenario, daemon.iso8583Host)
                if daemon.iso8583Host == nil { (onCore, host) = try await daemon.setup.prepare(scenario, lane: 0, jobs: 1) }
                var execution = Execution(scenario: onCore, client: daemon.client, iso8583Host: host, clock: daemon.bench.manualClock)
                execution.made = made
                do { try await execution.run() } catch {
                    // A core a scenario failed in may be left mid-transaction: it is not reused.
                    await daemon.stop()
                    throw error
                }
                cores.checkIn(daemon)
            case .daemon(let endpoint):
                let client = DaemonClient(endpoint: endpoint)
                try client.checkReachable()
                var (onDaemon, host): (Scenario, ScriptedISO8583Host?) = (scenario, nil)
                if let setup { (onDaemon, host) = try await setup.prepare(scenario, lane: lane, jobs: jobs) }
                var execution = Execution(scenario: onDaemon, client: client, iso8583Host: host, scriptedHosts: hosts)
                execution.made = made
                try await execution.run()
            }
        } catch let error as StepFailure {
            failure = error.description
        } catch {
            failure = "\(scenario.file): \(error)"
        }
        let elapsed = ContinuousClock.now - start
        var result = ScenarioResult(file: scenario.file, name: scenario.name, passed: failure == nil,
                                    seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                                    failure: failure)
        let ids = made.all
        if !ids.isEmpty {
            switch target {
            case .inProcess:
                result.output = ids.map { "transaction \($0): made in process, on a ledger gone with the run (run it with --socket to keep it)" }.joined(separator: "\n")
            case .daemon(let endpoint):
                result.output = ids.map { "transaction \($0): /console/#/transactions/\($0), its trace at GET /v1/transactions/\($0) (daemon \(endpoint))" }
                    .joined(separator: "\n")
            }
        }
        return result
    }

    /// Runs `scenarios` with up to `jobs` at once, each on terminals of its own (in process, a
    /// daemon core per scenario running; against a daemon, terminals made for each job), and
    /// returns the results in the library's order. `report` gets each result in that order too,
    /// as soon as it and every one before it are done, so a run's output is the same whatever
    /// `jobs` is. Against a daemon, a scenario that uses the daemon's clock runs alone.
    public func run(_ scenarios: [Scenario], jobs: Int, report: @escaping (ScenarioResult) -> Void = { _ in }) async -> [ScenarioResult] {
        let jobs = max(1, jobs)
        var results = [ScenarioResult?](repeating: nil, count: scenarios.count)
        var reported = 0
        func flush() {
            while reported < results.count, let r = results[reported] {
                report(r)
                reported += 1
            }
        }
        var sharesADaemon = false
        if case .daemon = target { sharesADaemon = jobs > 1 }
        let alone: (Scenario) -> Bool = { sharesADaemon && $0.usesTheClock }
        // A daemon's issuer keeps one account per card number, which each scenario registers
        // afresh: two scenarios with the same card do not run at once on one daemon.
        var profilePANs: [String: String] = [:]
        let cardsOf: (Scenario) -> Set<String> = { scenario in
            guard sharesADaemon else { return [] }
            return Set(scenario.cards.values.map { path in
                if let pan = profilePANs[path] { return pan }
                let pan = (try? Execution.cardValues(path).number) ?? path
                profilePANs[path] = pan
                return pan
            })
        }
        await withTaskGroup(of: (Int, Int, ScenarioResult).self) { group in
            var next = 0
            var freeLanes = Array((0..<jobs).reversed())
            var running = 0
            var exclusive = false
            var cardsInUse: [Int: Set<String>] = [:]
            func launch() {
                let i = next, lane = freeLanes.removeLast()
                next += 1
                running += 1
                exclusive = alone(scenarios[i])
                cardsInUse[i] = cardsOf(scenarios[i])
                let scenario = scenarios[i]
                group.addTask { (i, lane, await self.run(scenario, lane: lane, jobs: jobs)) }
            }
            func fill() {
                while next < scenarios.count, !freeLanes.isEmpty, !exclusive {
                    // One that runs alone waits for the others to end; one whose cards are in
                    // use waits for them.
                    if alone(scenarios[next]) && running > 0 { return }
                    let cards = cardsOf(scenarios[next])
                    if cardsInUse.values.contains(where: { !$0.isDisjoint(with: cards) }) { return }
                    launch()
                }
            }
            fill()
            for await (i, lane, result) in group {
                results[i] = result
                running -= 1
                cardsInUse[i] = nil
                freeLanes.append(lane)
                if running == 0 { exclusive = false }
                flush()
                fill()
            }
        }
        return results.map { $0! }
    }

    /// Stops the in-process daemon cores this runner started and removes their files; against a
    /// daemon, removes the terminals the run made and gives its clock back.
    public func finish() async {
        for core in cores.drain() { await core.stop() }
        for host in hosts.drain() { host.stop() }
        await setup?.finish()
    }
}

/// The idle in-process daemon cores of a runner, by configuration. A core is checked out by one
/// scenario at a time; scenarios run at once get cores of their own.
final class InProcessCores: @unchecked Sendable {
    // Unchecked: `idle` is under `lock`.
    private let lock = NSLock()
    private var idle: [InProcessDaemon.Key: [InProcessDaemon]] = [:]

    func checkOut(for scenario: Scenario) async throws -> InProcessDaemon {
        let key = InProcessDaemon.Key(scenario)
        let reused = lock.withLock { idle[key]?.popLast() }
        if let reused { return reused }
        return try await InProcessDaemon(key)
    }

    func checkIn(_ core: InProcessDaemon) {
        lock.withLock { idle[core.key, default: []].append(core) }
    }

    func drain() -> [InProcessDaemon] {
        lock.withLock {
            defer { idle = [:] }
            return idle.values.flatMap { $0 }
        }
    }
}

/// A failed step: where, what, expected versus actual.
struct StepFailure: Error, CustomStringConvertible {
    let description: String
}

/// A daemon core: a `Bench` on a temporary state directory, the API on a Unix socket of its own,
/// a manual clock.
final class InProcessDaemon: @unchecked Sendable {
    /// What makes two scenarios' cores interchangeable: the card profiles they load. The
    /// terminals a scenario declares are made in the core when it runs (`DaemonSetup`).
    struct Key: Hashable, Sendable {
        let cardsDirectory: String
        let terminal: String
        let tacDefault: String?
        let options: TerminalOptions
        /// The scripted ISO 8583 host's packager and framing, when the terminal authorises against one.
        let iso8583: [String]?

        init(_ scenario: Scenario) {
            cardsDirectory = Scenario.cardsDirectory(for: scenario.file)
            terminal = "bench1"
            tacDefault = nil
            options = TerminalOptions()
            iso8583 = nil
        }

        /// A core whose one terminal is the scenario's, configured at start as a daemon's is.
        init(terminalOf scenario: Scenario) {
            cardsDirectory = Scenario.cardsDirectory(for: scenario.file)
            terminal = scenario.terminal
            tacDefault = scenario.tacDefault
            options = scenario.terminalOptions
            iso8583 = scenario.iso8583Host.map { [$0.packager, $0.framing] }
        }
    }

    let key: Key
    let directory: URL
    let bench: Bench
    let client: DaemonClient
    /// The external host the terminal authorises against (scenarios with `iso8583_host:`).
    let iso8583Host: ScriptedISO8583Host?
    /// The terminals made in this core for the scenarios it ran, and their scripted hosts.
    let setup: DaemonSetup
    private let server: Task<Void, any Error>

    init(_ key: Key) async throws {
        self.key = key
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-scenario-\(UUID().uuidString.prefix(8))")
        LeftBehind.add(directory.path)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = DaemonConfiguration()
        configuration.stateDirectory = directory.appendingPathComponent("state").path
        configuration.runtimeDirectory = directory.appendingPathComponent("run").path
        configuration.httpPort = nil
        configuration.manualClock = true
        // The scenario sets the clock it names (Execution.run).
        configuration.cardProfiles = [key.cardsDirectory]
        // The CA keys beside the cards (Scenarios/ca/capk.yaml), whatever the working directory.
        let capk = URL(fileURLWithPath: key.cardsDirectory).deletingLastPathComponent().appendingPathComponent("ca/capk.yaml").path
        if FileManager.default.fileExists(atPath: capk) { configuration.capkFiles = [capk] }
        var terminal = TerminalSettings(name: key.terminal, tid: "10000001", reader: .virtual(name: key.terminal))
        terminal.tacDefault = try key.tacDefault.map { try Hex.decode($0) }
        terminal.fallback = key.options.fallback
        if let names = key.options.interfaces { terminal.interfaces = Set(names.compactMap(CardInterface.init(rawValue:))) }
        func minor(_ text: String?) -> Int? {
            guard let text else { return nil }
            let parts = text.split(separator: ".")
            return Int(parts[0]).map { $0 * 100 + (parts.count > 1 ? Int(parts[1]) ?? 0 : 0) }
        }
        terminal.contactlessTransactionLimit = minor(key.options.contactless["transaction_limit"])
        terminal.contactlessFloorLimit = minor(key.options.contactless["floor_limit"])
        terminal.contactlessCVMLimit = minor(key.options.contactless["cvm_limit"])
        configuration.terminals = [terminal]
        configuration.callbacks.allowedHosts = []
        if let format = key.iso8583 {
            guard let packager = Packager.named(format[0]), let framing = Framing(rawValue: format[1]) else {
                throw StepFailure(description: "iso8583_host: unknown packager or framing \(format)")
            }
            let host = try ScriptedISO8583Host(packager: packager, framing: framing)
            iso8583Host = host
            // The terminal asks the scripted host; the issuer behind it listens in the same format.
            configuration.upstream = ISO8583Upstream(host: "127.0.0.1", port: host.port)
            configuration.iso8583.packager = packager
            configuration.iso8583.framing = framing
            configuration.iso8583.listenPort = 0
            // As `make scenarios` configures its daemon: a host timeout takes 3 s, not 30.
            configuration.hostTimeout = .seconds(3)
        } else {
            iso8583Host = nil
        }
        var benchLogger = Logger(label: "cardbench-scenario-core")
        // A scenario's unanswered reversal is what it checks, not news for the run's output.
        benchLogger.logLevel = .error
        bench = try Bench(configuration: configuration, logger: benchLogger)
        try bench.start()
        let runtime = configuration.effectiveRuntimeDirectory
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let socket = DaemonServer.controlSocket(runtimeDirectory: runtime)
        var logger = Logger(label: "cardbench-scenario")
        logger.logLevel = .critical
        let app = Application(responder: API(bench: bench).router().buildResponder(),
                              configuration: ApplicationConfiguration(address: .unixDomainSocket(path: socket)), logger: logger)
        // On a thread of its own: tests running beside it may hold every cooperative thread in
        // blocking calls, and the daemon must answer regardless, as a separate process would.
        server = Task(executorPreference: ThreadExecutor.shared) { try await app.runService() }
        client = DaemonClient(endpoint: socket)
        setup = DaemonSetup(client: client)
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? await client.send(method: "GET", "/v1/health", timeout: .seconds(1)))?.status != 200 {
            guard ContinuousClock.now < deadline else { throw StepFailure(description: "the in-process daemon did not answer on \(socket)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Ends the server and closes the ledger before returning: a library run starts a daemon
    /// core per scenario, and each one's sockets and SQLite files would otherwise stay open
    /// until the process ends (well past the 1,024 descriptors `select` can watch, which
    /// Foundation's `Process` relies on).
    func stop() async {
        await setup.finish()
        server.cancel()
        _ = await server.result
        iso8583Host?.stop()
        bench.stop()
        try? bench.ledger.close()
        try? FileManager.default.removeItem(at: directory)
        LeftBehind.remove(directory.path)
    }
}

/// The temporary directories of daemon cores still running, removed when the process exits: a
/// runner whose `finish()` is never called (a test process's shared runner) leaves nothing behind.
enum LeftBehind {
    private static let paths = Mutex<Set<String>?>(nil)

    static func add(_ path: String) {
        let first = paths.withLock { p in
            defer { p = (p ?? []).union([path]) }
            return p == nil
        }
        if first { atexit { for path in LeftBehind.paths.withLock({ $0 ?? [] }) { try? FileManager.default.removeItem(atPath: path) } } }
    }

    static func remove(_ path: String) { paths.withLock { _ = $0?.remove(path) } }
}

/// Runs the jobs of tasks that prefer it on one dedicated thread.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // Unchecked: `jobs` is under `condition`.
    static let shared = ThreadExecutor()
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private init() {
        let thread = Thread { [self] in
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.name = "cardbench scenario daemon"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }
}

/// One scenario's run through the API.
struct Execution {
    let scenario: Scenario
    let client: DaemonClient
    var saved: [String: [String: String]] = [:]
    /// Citcon merchants this run has made (each gets its key once).
    var citconMerchants: Set<String> = []
    /// The scripted ISO 8583 host: the in-process core's, or found in `scriptedHosts` for a
    /// running daemon's terminal when the run starts.
    var iso8583Host: ScriptedISO8583Host?
    let scriptedHosts: ScriptedHosts?
    /// The in-process core's clock (a running daemon's is reached through `POST /v1/clock`).
    let clock: ManualClock?
    /// Where the transactions the scenario makes are noted.
    var made = TransactionLog()

    init(scenario: Scenario, client: DaemonClient, iso8583Host: ScriptedISO8583Host? = nil, scriptedHosts: ScriptedHosts? = nil,
         clock: ManualClock? = nil) {
        self.clock = clock
        self.scenario = scenario
        self.client = client
        self.iso8583Host = iso8583Host
        self.scriptedHosts = scriptedHosts
        // A daemon's ledger outlives a scenario: {{run.id}} keeps references apart between runs.
        saved["run"] = ["id": String(UUID().uuidString.prefix(8)).lowercased()]
    }

    /// A card profile's text, read here and sent inline: the daemon reads no file a request names.
    static func profileText(_ path: String) throws -> String {
        do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw StepFailure(description: "cannot read the card profile \(path): \(error.localizedDescription)")
        }
    }

    var terminalPath: String { "/v1/terminals/\(scenario.terminal.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? scenario.terminal)" }

    mutating func run() async throws {
        // Virtual time (docs/scenarios.md): the keypad's answers are queued before each
        // transaction, so every wait but a real peer's is one only time ends. A daemon on the
        // system clock refuses; its waits are real anyway.
        if let clock {
            clock.waits = scenario.waits
        } else {
            _ = try? await client.send(method: "POST", "/v1/clock", json: ClockBody(waits: scenario.waits.rawValue))
        }
        // Fresh state: nothing queued, no card left over, the accounts as their profiles say.
        try await call("POST", terminalPath + "/reset", line: 0)
        // A platform merchant's one-shot answers left by an earlier scenario are dropped too.
        for step in scenario.steps {
            if case .worldline(let w) = step.action, !w.merchant.contains("{{") {
                try await call("DELETE", "/v1/worldline/merchants/\(w.merchant)/host-queue", line: 0)
            }
            if case .citcon(let c) = step.action, !c.merchant.contains("{{") {
                try await call("DELETE", "/v1/citcon/merchants/\(c.merchant)/host-queue", line: 0)
            }
        }
        for path in Set(scenario.cards.values).sorted() {
            try await call("POST", "/v1/host/accounts", AccountBody(profileYAML: try Self.profileText(path)), line: 0)
        }
        if let start = scenario.clockStart {
            try await call("POST", "/v1/clock", ClockBody(set: start), line: 0, what: "setting the scenario's clock (the daemon's clock must be manual)")
        }
        if let script = scenario.iso8583Host { try await prepareISO8583Host(script) }
        for step in scenario.steps { try await perform(step) }
    }

    /// Finds the scenario's terminal's external host (a running daemon's: started on the port
    /// its `terminal.<name>.host` names) and gives it the scenario's answers and the issuer to ask.
    mutating func prepareISO8583Host(_ script: ISO8583HostScript) async throws {
        let data = try await call("GET", "/v1/host", line: 0)
        guard let view = try? JSONDecoder().decode(HostView.self, from: data) else {
            throw StepFailure(description: "\(scenario.file): GET /v1/host: not the daemon's host view")
        }
        let upstream = view.upstreams[scenario.terminal] ?? "emulated"
        let wanted = "\(script.packager), \(script.framing)"
        if iso8583Host == nil {
            let needs = "this scenario needs a terminal whose host is iso8583://127.0.0.1:PORT in \(wanted) (`make scenarios` configures bench-iso8583 and others)"
            guard upstream.hasPrefix("iso8583://127.0.0.1:") || upstream.hasPrefix("iso8583://localhost:"),
                  let port = UInt16(upstream.split(separator: ":").last ?? "") else {
                throw StepFailure(description: "\(scenario.file): terminal \(scenario.terminal) authorises against \(upstream): \(needs)")
            }
            guard let format = view.upstreamFormats[scenario.terminal], format.packager == script.packager, format.framing == script.framing,
                  let packager = Packager.named(format.packager), let framing = Framing(rawValue: format.framing) else {
                let has = view.upstreamFormats[scenario.terminal].map { "\($0.packager), \($0.framing)" } ?? "no format"
                throw StepFailure(description: "\(scenario.file): terminal \(scenario.terminal) speaks \(has) to its host: \(needs) (terminal.\(scenario.terminal).iso8583.packager and .framing)")
            }
            do { iso8583Host = try scriptedHosts?.host(port: port, packager: packager, framing: framing) } catch {
                throw StepFailure(description: "\(scenario.file): cannot listen on 127.0.0.1:\(port) for terminal \(scenario.terminal)'s host: \(error)")
            }
        }
        var issuer: ScriptedISO8583Host.Issuer?
        if let listen = view.iso8583.listen, let colon = listen.lastIndex(of: ":"), let port = UInt16(listen[listen.index(after: colon)...]),
           let packager = Packager.named(view.iso8583.packager), let framing = Framing(rawValue: view.iso8583.framing) {
            var address = String(listen[..<colon])
            if address.hasPrefix("[") { address = String(address.dropFirst().dropLast()) }
            if address == "0.0.0.0" { address = "127.0.0.1" } else if address == "::" { address = "::1" }
            issuer = ScriptedISO8583Host.Issuer(host: address, port: port, packager: packager, framing: framing)
        }
        // A message the host will not answer: the terminal's timeout comes at once in virtual time.
        let silent: @Sendable () -> Void
        if let clock {
            silent = { clock.peersSilent() }
        } else {
            let client = self.client
            silent = { Task { _ = try? await client.send(method: "POST", "/v1/clock", json: ClockBody(peersSilent: true)) } }
        }
        iso8583Host?.prepare(script, issuer: issuer, silent: silent)
    }

    mutating func perform(_ step: Scenario.Step) async throws {
        switch step.action {
        case .open(let template):
            let url = try fill(template, step)
            let heard = iso8583Host?.receivedCount ?? 0
            let reply = try await client.send(method: "POST", "/v1/open", json: OpenRequest(url: url, terminal: scenario.terminal),
                                              timeout: .seconds(120))
            if let id = (try? JSONDecoder().decode(OpenResult.self, from: reply.body))?.transaction?.id { made.add(id) }
            try await check(step, url: url, reply: reply, iso8583Since: heard)
        case .insertCard(let card, let removeAfter, let pinTries, let corrupt, let interface, let then):
            try await call("POST", terminalPath + "/card",
                           CardBody(profileYAML: try Self.profileText(scenario.cards[card]!), removeAfter: removeAfter, pinTries: pinTries,
                                    corruptCryptogram: corrupt ? true : nil, interface: interface == "insert" ? nil : interface,
                                    then: then.isEmpty ? nil : then),
                           line: step.line)
        case .removeCard:
            try await call("DELETE", terminalPath + "/card", line: step.line)
        case .keypad(let pin, let select, let confirm, let cancel, let after):
            try await call("POST", terminalPath + "/keypad",
                           KeypadBody(pin: try pin.map { try fill($0, step) }, select: select, confirm: confirm ? true : nil, cancel: cancel ? true : nil,
                                      afterSeconds: after),
                           line: step.line)
        case .host(let code, let unavailable, let delay):
            try await call("POST", terminalPath + "/host-queue",
                           HostOutcomeBody(code: code, unavailable: unavailable ? true : nil, delayMs: delay), line: step.line)
        case .clockAdvance(let seconds):
            try await call("POST", "/v1/clock", ClockBody(advanceSeconds: seconds), line: step.line)
        case .clockSet(let instant):
            try await call("POST", "/v1/clock", ClockBody(set: try fill(instant, step)), line: step.line)
        case .wait(let seconds):
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .createUser(let name, let msi):
            let data = try await call("POST", "/v1/billpocket/users", BillpocketUserBody(name: try fill(name, step), msi: msi), line: step.line)
            try save(step, data)
        case .rotateUser(let user):
            let data = try await call("POST", "/v1/billpocket/users/\(try fill(user, step))/rotate", line: step.line)
            try save(step, data)
        case .invalidateUser(let user):
            let data = try await call("POST", "/v1/billpocket/users/\(try fill(user, step))/invalidate", line: step.line)
            try save(step, data)
        case .issueDeviceToken(let user, let alias):
            guard let id = Int64(try fill(user, step)) else { throw fail(step, "issue_device_token.user: not a user id") }
            let data = try await call("POST", "/v1/billpocket/device-tokens", DeviceTokenBody(user: id, alias: alias), line: step.line)
            try save(step, data)
        case .worldline(let w):
            try await worldline(w, step)
        case .notifications(let n):
            try await notifications(n, step)
        case .citcon(let c):
            try await citcon(c, step)
        case .iso8583Echo(let signOn):
            let heard = iso8583Host?.receivedCount ?? 0
            let data = try await call("POST", terminalPath + "/iso8583/echo", ISO8583EchoBody(signOn: signOn ? true : nil), line: step.line)
            guard let echo = try? JSONDecoder().decode(ISO8583EchoView.self, from: data) else {
                throw fail(step, "iso8583_echo: the daemon's answer is not an echo: \(String(decoding: data, as: UTF8.self))")
            }
            let (heardNow, problems) = iso8583Host?.received(from: heard) ?? ([], [])
            if let problem = problems.first { throw fail(step, "iso8583_host: \(problem)") }
            func failure(_ what: String) -> StepFailure {
                fail(step, "\(what)\n    \(echo.function) (STAN \(echo.stan)): \(echo.responseCode.map { "answered \($0)" } ?? "no answer: \(echo.error ?? "")")")
            }
            let values = ["answered": String(echo.answered), "responseCode": echo.responseCode ?? "(none)", "function": echo.function]
            if let name = step.save { saved[name] = values.merging(["stan": echo.stan]) { a, _ in a } }
            let wanted = step.expect?.echo ?? [("answered", "true"), ("responseCode", "00")]
            for (field, value) in wanted where values[field] != value {
                throw failure("echo.\(field): expected \"\(value)\", got \"\(values[field] ?? "(none)")\"")
            }
            if let expected = step.expect?.iso8583 { try checkISO8583(expected, heardNow, step, failure) }
        }
    }

    // MARK: Citcon

    /// A Citcon step: the request through the control API (the payer's answers through the
    /// wallet and challenge routes), then its checks.
    mutating func citcon(_ c: Scenario.CitconStep, _ step: Scenario.Step) async throws {
        let m = try fill(c.merchant, step)
        if !citconMerchants.contains(m) {
            try await call("POST", "/v1/citcon/merchants", CitconMerchantBody(merchantId: m), line: step.line)
            citconMerchants.insert(m)
        }
        var http = 0
        var body: [String: Any] = [:]
        var chargeID: String?
        func viaPlatform(_ method: String, _ path: String, _ object: [String: Any]?) async throws {
            let data = try await call("POST", "/v1/citcon/requests",
                                      CitconRequestBody(merchantId: m, method: method, path: path, body: object.map { Self.jsonText($0) }), line: step.line)
            let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            http = answer["status"] as? Int ?? 0
            body = answer["body"] as? [String: Any] ?? [:]
        }
        func number(_ text: String?, _ what: String) throws -> Int? {
            guard let text else { return nil }
            guard let n = Int(try fill(text, step)) else { throw fail(step, "citcon.\(what): a whole number, got \"\(text)\"") }
            return n
        }
        switch c.kind {
        case .host(let code, let unavailable, let delay):
            try await call("POST", "/v1/citcon/merchants/\(m)/host-queue",
                           HostOutcomeBody(code: code, unavailable: unavailable ? true : nil, delayMs: delay), line: step.line)
            return
        case .chargeback(let charge, let action, let amount):
            chargeID = try fill(charge, step)
            let reply = try await client.send(method: "POST", "/v1/citcon/charges/\(chargeID!)/chargebacks",
                                              json: CitconChargebackBody(action: action, amount: try number(amount, "amount"), reason: try c.reference.map { try fill($0, step) }))
            http = reply.status
            let answer = (try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any] ?? [:]
            body = ["status": reply.status == 200 ? "success" : "fail", "data": answer["charge"] ?? ["message": reply.errorMessage]]
        case .payer(let charge, let action), .challenge(let charge, let action):
            chargeID = try fill(charge, step)
            let route: String
            if case .payer = c.kind { route = "payer" } else { route = "challenge" }
            let reply = try await client.send(method: "POST", "/v1/citcon/charges/\(chargeID!)/\(route)", json: CitconAnswerBody(action: action))
            http = reply.status
            let answer = (try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any] ?? [:]
            body = ["status": reply.status == 200 ? "success" : "fail", "data": answer["charge"] ?? ["message": reply.errorMessage]]
        case .charge(let f):
            var transaction: [String: Any] = ["reference": try fill(f["reference"] ?? "sc-{{run.id}}-\(step.line)", step),
                                              "amount": try number(f["amount"], "charge.amount")!, "currency": try fill(f["currency"] ?? "USD", step),
                                              "country": try fill(f["country"] ?? "US", step)]
            if let a = f["auto_capture"] { transaction["auto_capture"] = a == "true" }
            if let n = f["note"] { transaction["note"] = try fill(n, step) }
            var payment: [String: Any] = ["client": ["mobile_native"]]
            if let path = f["card"] {
                let values = try Self.cardValues(path)
                var data: [String: Any] = ["pan": values.number, "expiry": String(values.expiry.prefix(2)) + "/" + String(values.expiry.suffix(2))]
                if let cvv = values.cvv { data["cvv"] = cvv }
                if let e = f["expiry"] { data["expiry"] = try fill(e, step) }
                if let v = f["cvv"] { data["cvv"] = try fill(v, step) }
                payment["data"] = data
                payment["method"] = "card"
            } else if let n = f["number"] {
                payment["data"] = ["pan": try fill(n, step), "expiry": try fill(f["expiry"] ?? "12/30", step), "cvv": try fill(f["cvv"] ?? "123", step)]
                payment["method"] = "card"
            }
            if let method = f["method"] { payment["method"] = try fill(method, step) }
            if f["three_ds"] == "true" { payment["request_3ds"] = true }
            if f["request_token"] == "true" { payment["requestToken"] = true }
            if let t = f["vault_token"] {
                payment["token"] = try fill(t, step)
                payment["method"] = "card"
            }
            var urls: [String: Any] = ["success": "https://shop.example/ok", "fail": "https://shop.example/fail", "cancel": "https://shop.example/cancel"]
            if let ipn = f["ipn"] { urls["ipn"] = try fill(ipn, step) }
            var object: [String: Any] = ["transaction": transaction, "payment": payment, "urls": urls]
            if let consumer = f["consumer"] { object["consumer"] = ["reference": try fill(consumer, step)] }
            if let scheme = f["scheme"] { object["scheme"] = try fill(scheme, step) }
            if let link = f["universal_link"] { object["universalLink"] = try fill(link, step) }
            // `sdk: "true"`: the order as the app's SDK sends it (requestOrder), its CPayResult the answer.
            try await viaPlatform("POST", f["sdk"] == "true" ? "/citcon/sdk/requestOrder" : "/v1/charges", object)
        case .confirm(let token, let method):
            try await viaPlatform("POST", "/v1/charges/\(try fill(token, step))", method.map { ["payment": ["method": $0]] } ?? [:])
        case .requestOrder(let token, let method):
            var object: [String: Any] = ["charge_token": try fill(token, step)]
            if let method { object["payment"] = ["method": method] }
            try await viaPlatform("POST", "/citcon/sdk/requestOrder", object)
        case .capture(let charge, let amount), .refund(let charge, let amount):
            chargeID = try fill(charge, step)
            var object: [String: Any] = ["transaction_id": chargeID!, "reference": c.reference ?? "op-{{run.id}}-\(step.line)"]
            object["reference"] = try fill(object["reference"] as! String, step)
            if let a = try number(amount, "amount") { object["amount"] = a }
            if case .capture = c.kind { try await viaPlatform("POST", "/v1/captures", object) } else { try await viaPlatform("POST", "/v1/refunds", object) }
        case .cancel(let charge):
            chargeID = try fill(charge, step)
            try await viaPlatform("POST", "/v1/cancels", ["transaction_id": chargeID!, "reference": try fill(c.reference ?? "cx-{{run.id}}-\(step.line)", step)])
        case .inquire(let charge):
            chargeID = try fill(charge, step)
            try await viaPlatform("GET", "/v1/transactions/\(chargeID!)", nil)
        case .request(let method, let path, let text):
            let data = try await call("POST", "/v1/citcon/requests",
                                      CitconRequestBody(merchantId: m, method: method, path: try fill(path, step), body: try text.map { try fill($0, step) }),
                                      line: step.line)
            let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            http = answer["status"] as? Int ?? 0
            body = answer["body"] as? [String: Any] ?? [:]
        }
        let data = body["data"] as? [String: Any] ?? [:]
        if chargeID == nil { chargeID = (data["object"] as? String == "charge" ? data["id"] : data["transaction_id"]) as? String }
        if let name = step.save {
            var values: [String: String] = ["http": String(http), "result": body["status"] as? String ?? ""]
            for key in ["id", "charge_token", "status", "code"] { if let v = data[key] { values[key] = "\(v)" } }
            if let chargeID {
                values["charge"] = chargeID
                // The vault token the charge's card became, as its inquiry shows it.
                let record = (try? JSONSerialization.jsonObject(with: try await call("GET", "/v1/citcon/charges/\(chargeID)", line: step.line))) as? [String: Any]
                if let token = ((record?["charge"] as? [String: Any])?["payment"] as? [String: Any])?["token"] as? String { values["vault_token"] = token }
            }
            saved[name] = values
        }
        guard let x = step.expect?.citcon else { return }
        let shown = Self.jsonText(body)
        func failure(_ what: String) -> StepFailure { fail(step, "\(what)\n    HTTP \(http): \(shown.prefix(600))") }
        func text(_ v: Any?) -> String { v.map { $0 is NSNull ? "" : "\($0)" } ?? "" }
        if let wanted = x.http, wanted != http { throw failure("http: expected \(wanted), got \(http)") }
        if let wanted = x.result, wanted != body["status"] as? String { throw failure("result: expected \(wanted), got \(text(body["status"]))") }
        if let wanted = x.status, wanted != text(data["status"]) { throw failure("status: expected \(wanted), got \(text(data["status"]))") }
        if let wanted = x.code, wanted != text(data["code"]) { throw failure("code: expected \(wanted), got \(text(data["code"]))") }
        if let wanted = x.amountCaptured, wanted != text(data["amount_captured"]) {
            throw failure("amount_captured: expected \(wanted), got \(text(data["amount_captured"]))")
        }
        if let wanted = x.amountRefunded, wanted != text(data["amount_refunded"]) {
            throw failure("amount_refunded: expected \(wanted), got \(text(data["amount_refunded"]))")
        }
        for (field, wanted) in x.data ?? [] {
            // A dotted field reaches into the data (`chargebacks.data.0.status`).
            let got: Any? = field.contains(".") ? Self.member(data, field) : data[field].flatMap { $0 is NSNull ? nil : $0 }
            switch wanted {
            case "present": if got == nil { throw failure("data.\(field): expected a value, got none") }
            case "absent": if let got { throw failure("data.\(field): expected none, got \(text(got))") }
            default: if wanted != text(got) { throw failure("data.\(field): expected \(wanted), got \(text(got))") }
            }
        }
        if x.ipns != nil || x.ledger != nil {
            guard let chargeID else { throw failure("ipns/ledger: the answer names no charge") }
            let record = (try? JSONSerialization.jsonObject(with: try await call("GET", "/v1/citcon/charges/\(chargeID)", line: step.line))) as? [String: Any] ?? [:]
            if let wanted = x.ipns {
                let statuses = (record["ipns"] as? [[String: Any]] ?? []).map { text($0["status"]) }
                if statuses != wanted { throw failure("ipns: expected \(wanted), queued \(statuses)") }
            }
            if let wanted = x.ledger {
                guard let last = (record["transactions"] as? [[String: Any]])?.last else { throw failure("ledger: the charge has no ledger transaction") }
                for (field, value) in wanted where text(last[field]) != value {
                    throw failure("ledger.\(field): expected \"\(value)\", got \"\(text(last[field]))\"")
                }
            }
        }
    }

    // MARK: Worldline

    /// A Worldline step: the request through the control API, then its checks.
    mutating func worldline(_ w: Scenario.WorldlineStep, _ step: Scenario.Step) async throws {
        let m = try fill(w.merchant, step)
        func money(_ text: String, _ what: String) throws -> Int {
            guard let n = Int(try fill(text, step)) else { throw fail(step, "worldline.\(what): an amount in minor units, got \"\(text)\"") }
            return n
        }
        var paymentID: String?
        let answer: [String: Any]
        switch w.kind {
        case .webhook(let url):
            _ = try await call("PUT", "/v1/worldline/merchants/\(m)/webhook", ["url": try fill(url, step)], line: step.line)
            return
        case .host(let code, let unavailable, let delay):
            try await call("POST", "/v1/worldline/merchants/\(m)/host-queue",
                           HostOutcomeBody(code: code, unavailable: unavailable ? true : nil, delayMs: delay), line: step.line)
            return
        case .checkoutPage(let checkout, let f):
            var form: [String: String] = [:]
            if let card = f["card"] {
                let v = try Self.cardValues(scenario.cards[card]!)
                form = ["cardNumber": v.number, "expiryDate": String(v.expiry.prefix(2)) + "/" + String(v.expiry.suffix(2))]
                if let c = v.cvv { form["cvv"] = c }
            }
            if let n = f["number"] { form["cardNumber"] = try fill(n, step) }
            if let e = f["expiry"] { form["expiryDate"] = try fill(e, step) }
            if let c = f["cvv"] { form["cvv"] = try fill(c, step) }
            if let n = f["name"] { form["cardholderName"] = try fill(n, step) }
            if let t = f["saved_card"] { form["token"] = try fill(t, step) }
            if let a = f["action"] { form["action"] = try fill(a, step) }
            let data = try await call("POST", "/v1/worldline/hostedcheckouts/\(try fill(checkout, step))/page",
                                      WorldlineCheckoutPageBody(form: form, challenge: f["three_ds"]), line: step.line)
            answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        case .redirectPage(let payment, let action):
            paymentID = try fill(payment, step)
            let reply = try await client.send(method: "POST", "/v1/worldline/payments/\(paymentID!)/redirect", json: WorldlineRedirectBody(action: action))
            let body = (try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any] ?? [:]
            let refused: [String: Any] = ["errors": [["id": reply.errorMessage] as [String: Any]]]
            let shown: [String: Any] = reply.status == 200 ? body : refused
            answer = ["status": reply.status, "body": shown]
        case .challenge(let payment, let result):
            paymentID = try fill(payment, step)
            let reply = try await client.send(method: "POST", "/v1/worldline/payments/\(paymentID!)/challenge", json: ["result": result])
            let body = (try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any] ?? [:]
            let refused: [String: Any] = ["errors": [["id": reply.errorMessage] as [String: Any]]]
            let shown: [String: Any] = reply.status == 200 ? body : refused
            answer = ["status": reply.status, "body": shown]
        default:
            var method = "POST", path = "/v2/\(m)/", body: String? = nil
            switch w.kind {
            case .session:
                path += "sessions"
                body = "{}"
            case .pay(let amount, let currency, let mode, let card, let number, let expiry, let cvv, let reference, let returnURL, let token, let onFile):
                var input: [String: Any] = [:]
                if let method = onFile["redirect"] {
                    guard let product = ["paypal": 840, "ideal": 809][method] else { throw fail(step, "pay.redirect: paypal or ideal") }
                    var r: [String: Any] = ["paymentProductId": product, "redirectionData": ["returnUrl": try fill(returnURL ?? "https://shop.example/back", step)]]
                    if let a = onFile["requires_approval"] { r["requiresApproval"] = a == "true" }
                    var order: [String: Any] = ["amountOfMoney": ["amount": try money(amount, "pay.amount"), "currencyCode": try fill(currency, step)]]
                    if let reference { order["references"] = ["merchantReference": try fill(reference, step)] }
                    body = Self.jsonText(["order": order, "redirectPaymentMethodSpecificInput": r])
                    path += "payments"
                    break
                }
                if let wallet = onFile["wallet"] {
                    // A wallet's payment: the card profile as the device card, its payment data made by the daemon.
                    guard let card, let product = ["apple_pay": 302, "google_pay": 320][wallet] else {
                        throw fail(step, "pay.wallet: apple_pay or google_pay, with card: <profile>")
                    }
                    let amountValue = try money(amount, "pay.amount")
                    let cryptogramAmount = try onFile["cryptogram_amount"].map { try money($0, "pay.cryptogram_amount") } ?? amountValue
                    let data = try await call("POST", "/v1/worldline/wallet-data",
                                              WorldlineWalletDataBody(profileYAML: try Self.profileText(scenario.cards[card]!), amount: cryptogramAmount,
                                                                      currency: try fill(currency, step)), line: step.line)
                    let made = try JSONDecoder().decode(WorldlineWalletDataView.self, from: data)
                    var mobile: [String: Any] = ["paymentProductId": product]
                    if let mode { mobile["authorizationMode"] = try fill(mode, step) }
                    if onFile["sealed"] == "true" {
                        mobile["encryptedPaymentData"] = made.encryptedPaymentData
                    } else {
                        let d = made.decryptedPaymentData
                        mobile["decryptedPaymentData"] = ["dpan": d.dpan, "expiryDate": d.expiryDate, "cryptogram": d.cryptogram, "eci": d.eci]
                    }
                    var order: [String: Any] = ["amountOfMoney": ["amount": amountValue, "currencyCode": try fill(currency, step)]]
                    if let reference { order["references"] = ["merchantReference": try fill(reference, step)] }
                    body = Self.jsonText(["order": order, "mobilePaymentMethodSpecificInput": mobile])
                    path += "payments"
                    break
                }
                if let token {
                    input["token"] = try fill(token, step)
                } else {
                    var values: (number: String, expiry: String, cvv: String?)
                    if let card {
                        values = try Self.cardValues(scenario.cards[card]!)
                    } else {
                        values = (try fill(number!, step), "1230", nil)
                    }
                    if let expiry { values.expiry = try fill(expiry, step) }
                    if let cvv { values.cvv = try fill(cvv, step) }
                    // A merchant-initiated payment is made without the cardholder, so without a CVV.
                    if onFile["requestor"] == "merchantInitiated" || onFile["recurring"] == "recurring", cvv == nil { values.cvv = nil }
                    var cardJSON: [String: Any] = ["cardNumber": values.number, "expiryDate": values.expiry]
                    if let c = values.cvv { cardJSON["cvv"] = c }
                    input["card"] = cardJSON
                }
                if let v = onFile["tokenize"] { input["tokenize"] = v == "true" }
                if let v = onFile["requestor"] { input["unscheduledCardOnFileRequestor"] = try fill(v, step) }
                if let v = onFile["sequence"] { input["unscheduledCardOnFileSequenceIndicator"] = try fill(v, step) }
                if let v = onFile["recurring"] { input["recurring"] = ["recurringPaymentSequenceIndicator": try fill(v, step)] }
                if let v = onFile["initial_scheme_id"] { input["initialSchemeTransactionId"] = try fill(v, step) }
                if let mode { input["authorizationMode"] = try fill(mode, step) }
                if let returnURL { input["threeDSecure"] = ["redirectionData": ["returnUrl": try fill(returnURL, step)]] }
                var order: [String: Any] = ["amountOfMoney": ["amount": try money(amount, "pay.amount"), "currencyCode": try fill(currency, step)]]
                if let reference { order["references"] = ["merchantReference": try fill(reference, step)] }
                body = Self.jsonText(["order": order, "cardPaymentMethodSpecificInput": input])
                path += "payments"
            case .capture(let payment, let amount):
                paymentID = try fill(payment, step)
                path += "payments/\(paymentID!)/capture"
                var object: [String: Any] = [:]
                if let amount { object["amount"] = try money(amount, "amount") }
                if let final = w.isFinal { object["isFinal"] = final }
                body = Self.jsonText(object)
            case .cancel(let payment, let amount):
                paymentID = try fill(payment, step)
                path += "payments/\(paymentID!)/cancel"
                var object: [String: Any] = [:]
                // The payment's own currency goes without saying (currencyCode is optional).
                if let amount { object["amountOfMoney"] = ["amount": try money(amount, "amount")] }
                if let final = w.isFinal { object["isFinal"] = final }
                body = Self.jsonText(object)
            case .refund(let payment, let amount):
                paymentID = try fill(payment, step)
                path += "payments/\(paymentID!)/refund"
                body = try amount.map { "{\"amountOfMoney\":{\"amount\":\(try money($0, "amount"))}}" } ?? "{}"
            case .get(let payment):
                paymentID = try fill(payment, step)
                method = "GET"
                path += "payments/\(paymentID!)"
            case .token(let card, let number, let expiry, let name):
                var values: (number: String, expiry: String, cvv: String?) = card != nil
                    ? try Self.cardValues(scenario.cards[card!]!) : (try fill(number!, step), "1230", nil)
                if let expiry { values.expiry = try fill(expiry, step) }
                var cardJSON: [String: Any] = ["cardNumber": values.number, "expiryDate": values.expiry]
                if let name { cardJSON["cardholderName"] = try fill(name, step) }
                body = Self.jsonText(["card": ["data": ["card": cardJSON]]])
                path += "tokens"
            case .hostedCheckout(let f):
                var order: [String: Any] = ["amountOfMoney": ["amount": try money(f["amount"]!, "hosted_checkout.amount"),
                                                              "currencyCode": try fill(f["currency"] ?? "EUR", step)]]
                if let r = f["reference"] { order["references"] = ["merchantReference": try fill(r, step)] }
                var hosted: [String: Any] = [:]
                if let v = f["return_url"] { hosted["returnUrl"] = try fill(v, step) }
                if let v = f["show_result_page"] { hosted["showResultPage"] = v == "true" }
                if let v = f["tokens"] { hosted["tokens"] = try fill(v, step) }
                if let v = f["is_recurring"] { hosted["isRecurring"] = v == "true" }
                if let v = f["locale"] { hosted["locale"] = v }
                if let v = f["attempts"] { hosted["allowedNumberOfPaymentAttempts"] = Int(v) ?? 0 }
                var filters: [String: Any] = [:]
                if let v = f["products"] { filters["restrictTo"] = ["products": v.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }] }
                if let v = f["exclude"] { filters["exclude"] = ["products": v.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }] }
                if !filters.isEmpty { hosted["paymentProductFilters"] = filters }
                var card: [String: Any] = [:]
                if let v = f["mode"] { card["authorizationMode"] = try fill(v, step) }
                if let v = f["tokenize"] { card["tokenize"] = v == "true" }
                body = Self.jsonText(["order": order, "hostedCheckoutSpecificInput": hosted, "cardPaymentMethodSpecificInput": card])
                path += "hostedcheckouts"
            case .getHostedCheckout(let id):
                method = "GET"
                path += "hostedcheckouts/\(try fill(id, step))"
            case .getToken(let token):
                method = "GET"
                path += "tokens/\(try fill(token, step))"
            case .deleteToken(let token):
                method = "DELETE"
                path += "tokens/\(try fill(token, step))"
            case .request(let m2, let p2, let b2):
                method = m2
                path = try fill(p2, step)
                body = try b2.map { try fill($0, step) }
            default: return
            }
            let data = try await call("POST", "/v1/worldline/requests",
                                      WorldlineRequestBody(method: method, path: path, body: body, idempotenceKey: try w.idempotenceKey.map { try fill($0, step) }),
                                      line: step.line)
            answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        }
        let http = answer["status"] as? Int ?? 0
        let body = answer["body"] as? [String: Any] ?? [:]
        // The payment object of the answer, wherever this kind of answer keeps it.
        let payment = (body["payment"] as? [String: Any]) ?? ((body["paymentResult"] as? [String: Any])?["payment"] as? [String: Any])
        let subject = payment ?? body
        let status = subject["status"] as? String
        let statusCode = (subject["statusOutput"] as? [String: Any])?["statusCode"] as? Int
        let error = (body["errors"] as? [[String: Any]])?.first
        if paymentID == nil { paymentID = payment?["id"] as? String }
        if let name = step.save {
            var values: [String: String] = ["http": String(http)]
            if let paymentID { values["id"] = paymentID }
            if let status { values["status"] = status }
            if let statusCode { values["statusCode"] = String(statusCode) }
            for key in ["clientSessionId", "customerId", "tokenStatus", "hostedCheckoutId", "RETURNMAC", "redirectUrl", "step", "location"] {
                if let v = body[key] as? String { values[key] = v }
            }
            // A token: the one a token request made or read, or the one a payment made or paid with.
            let cardOutput = ((payment?["paymentOutput"] as? [String: Any])?["cardPaymentMethodSpecificOutput"] as? [String: Any]) ?? [:]
            if let token = (body["token"] as? String) ?? ((body["creationOutput"] as? [String: Any])?["token"] as? String)
                ?? (cardOutput["token"] as? String) ?? (body["card"] != nil && payment == nil ? body["id"] as? String : nil) {
                values["token"] = token
            }
            for key in ["schemeTransactionId", "initialSchemeTransactionId"] { if let v = cardOutput[key] as? String { values[key] = v } }
            if let operation = body["id"] as? String, payment == nil { values["operation"] = operation }
            saved[name] = values
        }
        guard let x = step.expect?.worldline else { return }
        let shown = Self.jsonText(body)
        func failure(_ what: String) -> StepFailure { fail(step, "\(what)\n    HTTP \(http): \(shown.prefix(600))") }
        if let wanted = x.http, wanted != http { throw failure("http: expected \(wanted), got \(http)") }
        if let wanted = x.status, wanted != status { throw failure("status: expected \(wanted), got \(status ?? "(none)")") }
        if let wanted = x.statusCode, wanted != statusCode { throw failure("status_code: expected \(wanted), got \(statusCode.map(String.init) ?? "(none)")") }
        if let wanted = x.errorID, wanted != error?["id"] as? String {
            throw failure("error_id: expected \(wanted), got \(error?["id"] as? String ?? "(no error)")")
        }
        if let wanted = x.property, wanted != error?["propertyName"] as? String {
            throw failure("property: expected \(wanted), got \(error?["propertyName"] as? String ?? "(none)")")
        }
        if let wanted = x.replayed, wanted != (answer["idempotenceRequestTimestamp"] != nil) {
            throw failure("replayed: expected \(wanted) (X-GCS-Idempotence-Request-Timestamp \(wanted ? "present" : "absent"))")
        }
        for (path, matcher) in x.body {
            if let problem = try mismatch(matcher, Self.member(body, path), step) { throw failure("body.\(path): \(problem)") }
        }
        if x.webhooks != nil || x.ledger != nil {
            guard let paymentID else { throw failure("webhooks/ledger: the answer names no payment") }
            let data = try await call("GET", "/v1/worldline/payments/\(paymentID)/record", line: step.line)
            let record = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            if let wanted = x.webhooks {
                let types = (record["webhooks"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
                if types != wanted { throw failure("webhooks: expected \(wanted), queued \(types)") }
            }
            if let wanted = x.ledger {
                guard let last = (record["transactions"] as? [[String: Any]])?.last else { throw failure("ledger: the payment has no ledger transaction") }
                for (field, value) in wanted where "\(last[field] ?? "(none)")" != value {
                    throw failure("ledger.\(field): expected \"\(value)\", got \"\(last[field] ?? "(none)")\"")
                }
            }
        }
    }

    /// A `notifications:` step: the transaction's notifications, some sent again, then checked.
    mutating func notifications(_ n: Scenario.NotificationsStep, _ step: Scenario.Step) async throws {
        let transaction: String
        switch n.subject {
        case .transaction(let key): transaction = try fill(key, step)
        case .worldlinePayment(let payment):
            let data = try await call("GET", "/v1/worldline/payments/\(try fill(payment, step))/record", line: step.line)
            let record = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            guard let id = ((record["transactions"] as? [[String: Any]])?.first)?["id"] as? Int else {
                throw fail(step, "notifications: the Worldline payment has no ledger transaction")
            }
            transaction = String(id)
        case .citconCharge(let charge):
            let data = try await call("GET", "/v1/citcon/charges/\(try fill(charge, step))", line: step.line)
            let record = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            guard let id = ((record["transactions"] as? [[String: Any]])?.first)?["id"] as? Int else {
                throw fail(step, "notifications: the Citcon charge has no ledger transaction")
            }
            transaction = String(id)
        }
        func list() async throws -> [[String: Any]] {
            let query = transaction.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? transaction
            let data = try await call("GET", "/v1/notifications?transaction=\(query)", line: step.line)
            return (try? JSONSerialization.jsonObject(with: data)) as? [[String: Any]] ?? []
        }
        var found = try await list()
        var outcomes: [String] = []
        if let given = n.resend {
            let wanted = try fill(given, step)
            let chosen = found.filter { wanted == "all" || $0["event"] as? String == wanted }
            guard !chosen.isEmpty else {
                throw fail(step, "notifications.resend: no notification \(wanted == "all" ? "" : "of event \(wanted) ")among \(found.compactMap { $0["event"] as? String })")
            }
            for notification in chosen {
                guard let id = notification["id"] as? Int else { continue }
                let data = try await call("POST", "/v1/notifications/\(id)/resend", line: step.line)
                let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
                outcomes.append(((answer["attempt"] as? [String: Any])?["outcome"] as? String) ?? "(none)")
            }
            found = try await list()
        }
        guard let x = step.expect?.notifications else { return }
        let events = found.map { ($0["event"] as? String) ?? "(none)" }
        let shown = "\(found.count) notification(s): " + found.map { n in
            "#\(n["id"] ?? "?") \(n["event"] ?? "") \(n["status"] ?? "") \((n["history"] as? [[String: Any]] ?? []).map { "\($0["outcome"] ?? "")\(($0["resend"] as? Bool) == true ? "(resend)" : "")" })"
        }.joined(separator: "; ")
        if let wanted = x.count, wanted != found.count { throw fail(step, "notifications.count: expected \(wanted), got \(found.count)\n    \(shown)") }
        if let wanted = x.events, wanted != events { throw fail(step, "notifications.events: expected \(wanted), got \(events)\n    \(shown)") }
        if let wanted = x.status, let other = found.first(where: { $0["status"] as? String != wanted }) {
            throw fail(step, "notifications.status: expected every one \(wanted), #\(other["id"] ?? "?") is \(other["status"] ?? "?")\n    \(shown)")
        }
        if let wanted = x.resends {
            let made = found.reduce(0) { $0 + ($1["history"] as? [[String: Any]] ?? []).filter { ($0["resend"] as? Bool) == true }.count }
            if made != wanted { throw fail(step, "notifications.resends: expected \(wanted) resend attempt(s), the histories hold \(made)\n    \(shown)") }
        }
        if let wanted = x.resent {
            guard !outcomes.isEmpty else { throw fail(step, "notifications.resent: the step sent nothing again (resend: <event> or all)") }
            if let other = outcomes.first(where: { $0 != wanted }) {
                throw fail(step, "notifications.resent: expected every resend \(wanted), one was \(other)\n    \(shown)")
            }
        }
    }

    /// A member of a JSON body by its dotted path (`payment.paymentOutput.amountOfMoney.amount`;
    /// a number indexes a list), as text; nil when it is absent or null.
    static func member(_ body: [String: Any], _ path: String) -> String? {
        var current: Any = body
        for part in path.split(separator: ".") {
            if let object = current as? [String: Any], let next = object[String(part)] {
                current = next
            } else if let list = current as? [Any], let i = Int(part), list.indices.contains(i) {
                current = list[i]
            } else {
                return nil
            }
        }
        switch current {
        case is NSNull: return nil
        case let n as NSNumber where String(cString: n.objCType) == "c": return n.boolValue ? "true" : "false"
        case let s as String: return s
        case let n as NSNumber: return n.stringValue
        default: return jsonText(current)
        }
    }

    /// The card number, MMYY expiry and CVV of a profile file, for a card-not-present payment.
    static func cardValues(_ path: String) throws -> (number: String, expiry: String, cvv: String?) {
        let text = try profileText(path)
        guard let yaml = (try? Yams.load(yaml: text)) as? [String: Any], let pan = yaml["pan"].map({ "\($0)" }),
              let expiry = yaml["expiry"].map({ "\($0)" }), expiry.count == 7 else {
            throw StepFailure(description: "\(path): a profile needs pan and expiry (YYYY-MM) for a Worldline payment")
        }
        let mmyy = String(expiry.suffix(2)) + String(expiry.dropLast(3).suffix(2))
        return (pan, mmyy, yaml["cvv"].map { "\($0)" })
    }

    static func jsonText(_ object: Any) -> String {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    // MARK: Checks

    mutating func check(_ step: Scenario.Step, url: String, reply: DaemonClient.Reply, iso8583Since heard: Int = 0) async throws {
        let expect = step.expect
        let (heardNow, problems) = iso8583Host?.received(from: heard) ?? ([], [])
        if let problem = problems.first { throw fail(step, "iso8583_host: \(problem)") }
        guard reply.status == 200 else {
            if let wanted = expect?.error {
                guard reply.errorMessage.contains(wanted) else {
                    throw fail(step, "error: expected the API to refuse with \"\(wanted)\", it refused with \"\(reply.errorMessage)\"")
                }
                return
            }
            throw fail(step, "open \(url): the API refused it (HTTP \(reply.status)): \(reply.errorMessage)")
        }
        if let wanted = expect?.error {
            throw fail(step, "error: expected the API to refuse with \"\(wanted)\", it answered with a callback: \(String(decoding: reply.body, as: UTF8.self))")
        }
        let result: OpenResult
        do { result = try JSONDecoder().decode(OpenResult.self, from: reply.body) } catch {
            throw fail(step, "the daemon's answer is not an OpenResult: \(String(decoding: reply.body, as: UTF8.self))")
        }
        var detail: TransactionView?
        if let id = result.transaction?.id {
            let data = try await call("GET", "/v1/transactions/\(id)", line: step.line)
            detail = try? JSONDecoder().decode(TransactionView.self, from: data)
        }
        if let name = step.save {
            var values = Dictionary(result.fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
            values["callback"] = result.callback ?? ""
            if let t = detail {
                values["transaction.id"] = String(t.id)
                values["transaction.transactionId"] = t.transactionId
                values["transaction.stan"] = t.stan
                values["transaction.status"] = t.status
            }
            saved[name] = values
        }
        guard let expect else { return }
        let trace = detail?.trace ?? []
        func failure(_ what: String) -> StepFailure {
            let names = trace.suffix(8).map(\.name).joined(separator: ", ")
            return fail(step, "\(what)\n    callback: \(result.callback ?? "(none)")\n    trace (last \(min(8, trace.count)) of \(trace.count)): \(names.isEmpty ? "(no APDUs)" : names)")
        }
        let fields = result.fields
        for (field, matcher, line) in expect.callback {
            let actual = fields.first { $0.name == field }?.value
            if let problem = try mismatch(matcher, actual, step) {
                throw failure("line \(line): callback.\(field): \(problem)")
            }
        }
        if let matcher = expect.callbackURL, let problem = try mismatch(matcher, result.callback, step) {
            throw failure("callback_url: \(problem)")
        }
        if let order = expect.fieldsInOrder, order != fields.map(\.name) {
            throw failure("fields_in_order: expected \(order.joined(separator: ",")), got \(fields.map(\.name).joined(separator: ","))")
        }
        if expect.noLedgerRow, let t = detail {
            throw failure("ledger: expected no transaction, got transaction \(t.id) (\(t.action) \(t.status))")
        }
        if let ledger = expect.ledger {
            guard let t = detail else { throw failure("ledger: expected a transaction, none was recorded") }
            for (field, wanted) in ledger {
                let actual = Self.value(t, field)
                if actual != wanted { throw failure("ledger.\(field): expected \"\(wanted)\", got \"\(actual ?? "(none)")\"") }
            }
        }
        if let wanted = expect.traceContains {
            var remaining = wanted[...]
            for entry in trace where remaining.first == entry.name.uppercased() { remaining = remaining.dropFirst() }
            if let missing = remaining.first {
                throw failure("trace.contains: \(wanted.joined(separator: ", ")) in this order; \(missing) is missing")
            }
        }
        if let excluded = expect.traceExcludes, let found = trace.first(where: { excluded.contains($0.name.uppercased()) }) {
            throw failure("trace.excludes: \(found.name) is in the trace")
        }
        if let oda = expect.oda {
            guard let report = detail?.oda else { throw failure("oda: the transaction has no offline data authentication report") }
            let values: [String: String?] = [
                "method": report.method.rawValue, "result": report.result.rawValue, "failedCheck": report.failedCheck, "caIndex": report.caIndex,
                "rid": report.rid, "issuerIdentifier": report.issuerIdentifier, "issuerKeyBits": report.issuerKeyBits.map(String.init),
                "iccKeyBits": report.iccKeyBits.map(String.init), "issuerCertificateExpiry": report.issuerCertificateExpiry,
                "iccCertificateExpiry": report.iccCertificateExpiry,
            ]
            for (field, wanted) in oda {
                let actual = values[field] ?? nil
                if actual != wanted { throw failure("oda.\(field): expected \"\(wanted)\", got \"\(actual ?? "(none)")\"" + (report.failure.map { " (\($0))" } ?? "")) }
            }
        }
        if let entry = expect.entry {
            guard let report = detail?.entry else { throw failure("entry: the transaction has no card entry report") }
            let values: [String: String?] = [
                "interface": report.interface.rawValue, "posEntryMode": report.posEntryMode, "kernel": report.kernel.map(String.init),
                "outcome": report.outcome, "cvm": report.cvm, "ttq": report.ttq, "ctq": report.ctq,
                "floorLimitExceeded": report.limits.map { String($0.floorLimitExceeded) }, "cvmRequired": report.limits.map { String($0.cvmRequired) },
                "tsi": report.tsi, "cvmResults": report.cvmResults,
            ]
            for (field, wanted) in entry {
                if field == "path" {
                    let path = report.path.joined(separator: " → ")
                    if !path.contains(wanted) { throw failure("entry.path: expected it to contain \"\(wanted)\", got \"\(path)\"") }
                    continue
                }
                let actual = values[field] ?? nil
                if actual != wanted { throw failure("entry.\(field): expected \"\(wanted)\", got \"\(actual ?? "(none)")\" (path: \(report.path.joined(separator: " → ")))") }
            }
        }
        if let wanted = expect.iso8583 {
            guard iso8583Host != nil else { throw failure("iso8583: the scenario has no iso8583_host") }
            try checkISO8583(wanted, heardNow, step, failure)
        }
        if let wanted = expect.hostMessages {
            let messages = detail?.hostMessages ?? []
            let traced = messages.map { "\($0.mti) \($0.direction)" }
            let kinds = wanted.map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
            if traced != kinds { throw failure("host_messages: expected \(kinds), the ledger traced \(traced)") }
            for (entry, message) in zip(wanted, messages) {
                let parts = entry.split(separator: " ")
                guard parts.count == 3 else { continue }
                let check = parts[2].split(separator: "=", maxSplits: 1)
                let number = Int(check[0])!, value = check.count > 1 ? String(check[1]) : ""
                let got = message.fields.first { $0.field == number }?.value
                if got != value { throw failure("host_messages: \(message.mti) \(message.direction) field \(number): expected \(value), got \(got ?? "(none)")") }
            }
        }
        if let original = expect.original {
            guard let originalID = detail?.originalId else { throw failure("original: the transaction acts on no earlier one") }
            let data = try await call("GET", "/v1/transactions/\(originalID)", line: step.line)
            guard let o = try? JSONDecoder().decode(TransactionView.self, from: data) else { throw failure("original: cannot read transaction \(originalID)") }
            for (field, wanted) in original where Self.value(o, field) != wanted {
                throw failure("original.\(field): expected \"\(wanted)\", got \"\(Self.value(o, field) ?? "(none)")\"")
            }
        }
    }

    /// The messages the scripted host received, against the step's `iso8583:` list: the same
    /// MTIs in the same order, and each named field as the trace shows it.
    func checkISO8583(_ wanted: [Scenario.ISO8583Expectation], _ heard: [ScriptedISO8583Host.Received], _ step: Scenario.Step,
                      _ failure: (String) -> StepFailure) throws {
        let mtis = heard.map(\.mti)
        guard mtis == wanted.map(\.mti) else {
            let unreadable = heard.compactMap(\.unreadable).first.map { " (unreadable: \($0))" } ?? ""
            throw failure("iso8583: expected the host to receive \(wanted.map(\.mti)), it received \(mtis)\(unreadable)")
        }
        for (expectation, message) in zip(wanted, heard) {
            let fields = message.described?.fields ?? []
            for (key, matcher) in expectation.fields {
                let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
                let field = fields.first { String($0.field) == parts[0] }
                let actual = parts.count == 2 ? field?.tlv?.first { $0.tag.uppercased() == parts[1] }?.value : field?.value
                if let problem = try mismatch(matcher, actual, step) {
                    throw failure("line \(expectation.line): iso8583 \(expectation.mti) field \(key): \(problem)")
                }
            }
        }
    }

    func mismatch(_ matcher: Scenario.Matcher, _ actual: String?, _ step: Scenario.Step) throws -> String? {
        switch matcher {
        case .absent:
            return actual == nil ? nil : "expected absent, got \"\(actual!)\""
        case .present:
            return actual != nil ? nil : "expected present, it is absent"
        case .equals(let template):
            let wanted = try fill(template, step)
            guard let actual else { return "expected \"\(wanted)\", it is absent" }
            return actual == wanted ? nil : "expected \"\(wanted)\", got \"\(actual)\""
        case .matches(let template):
            let pattern = try fill(template, step)
            guard let actual else { return "expected to match /\(pattern)/, it is absent" }
            let regex = try NSRegularExpression(pattern: pattern)
            let found = regex.firstMatch(in: actual, range: NSRange(actual.startIndex..., in: actual)) != nil
            return found ? nil : "expected to match /\(pattern)/, got \"\(actual)\""
        }
    }

    static func value(_ t: TransactionView, _ field: String) -> String? {
        switch field {
        case "status": t.status
        case "responseCode": t.responseCode
        case "action": t.action
        case "amount": String(t.amount)
        case "tipAmount": String(t.tipAmount)
        case "installments": t.installments.map(String.init)
        case "currency": String(t.currency)
        case "tvr": t.tvr
        case "entryMode": t.entryMode
        case "cvm": t.cvm
        case "aid": t.aid ?? "(none)"
        case "arqc": t.arqc ?? "(none)"
        case "message": t.message ?? ""
        default: nil
        }
    }

    // MARK: Plumbing

    /// `{{name.field}}` from saved values; an unknown one fails the step.
    func fill(_ text: String, _ step: Scenario.Step) throws -> String {
        var out = ""
        var rest = text[...]
        while let open = rest.range(of: "{{") {
            out += rest[..<open.lowerBound]
            guard let close = rest[open.upperBound...].range(of: "}}") else { throw fail(step, "an unclosed {{ in \"\(text)\"") }
            let key = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2, let values = saved[parts[0]] else { throw fail(step, "{{\(key)}}: no step saved \"\(parts[0])\" before this one") }
            guard let value = values[parts[1]] else {
                throw fail(step, "{{\(key)}}: \"\(parts[0])\" has no \(parts[1]) (it has \(values.keys.sorted().joined(separator: ", ")))")
            }
            out += value
            rest = rest[close.upperBound...]
        }
        return out + rest
    }

    mutating func save(_ step: Scenario.Step, _ data: Data) throws {
        guard let name = step.save else { return }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return }
        saved[name] = object.mapValues { "\($0)" }
    }

    @discardableResult
    func call(_ method: String, _ path: String, _ body: (any Encodable)? = nil, line: Int, what: String? = nil) async throws -> Data {
        let reply = try await client.send(method: method, path, json: body, timeout: .seconds(60))
        guard (200..<300).contains(reply.status) else {
            throw StepFailure(description: "\(scenario.file):\(line): \(what ?? "\(method) \(path)"): HTTP \(reply.status): \(reply.errorMessage)")
        }
        return reply.body
    }

    func fail(_ step: Scenario.Step, _ what: String) -> StepFailure {
        StepFailure(description: "\(scenario.file):\(step.line): \(what)")
    }
}

