import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// Runs scenario files for the console (`POST /v1/scenario-runs`). The Scenario module, which
/// builds on this one, provides it and `cardbenchd` hands it over: Daemon cannot name Scenario.
public protocol ScenarioService: Sendable {
    /// The scenario files under `path` (a file, or a folder searched as `cardbench scenario run`
    /// searches it), in run order.
    func files(_ path: String) throws -> [String]
    /// Runs `files` in order, each on a daemon core of its own, calling `each` with every result
    /// as it comes; returns the JUnit report of them all.
    func run(_ files: [String], each: @escaping @Sendable (ScenarioRunView.Result) -> Void) async -> String
}

/// One run of scenario files, as `GET /v1/scenario-runs/{id}` shows it.
public struct ScenarioRunView: Codable, Sendable, Equatable {
    public let id: String
    /// The file or folder run, relative to `scenarios.directory` (`.` for all of it).
    public let path: String
    /// `running`, `passed` (every scenario passed) or `failed`.
    public var state: String
    public let total: Int
    public var passed: Int
    public var failed: Int
    public var results: [Result]

    /// One scenario's outcome.
    public struct Result: Codable, Sendable, Equatable {
        /// The file, relative to `scenarios.directory`.
        public var file: String
        public let name: String
        public let passed: Bool
        public let seconds: Double
        public let failure: String?

        public init(file: String, name: String, passed: Bool, seconds: Double, failure: String?) {
            self.file = file
            self.name = name
            self.passed = passed
            self.seconds = seconds
            self.failure = failure
        }
    }
}

/// `GET /v1/scenarios`: what the configured scenarios directory holds.
public struct ScenarioListView: Codable, Sendable, Equatable {
    /// `scenarios.directory`, or nil when none is configured.
    public let directory: String?
    /// The folders holding scenarios, relative, each with how many files it holds (`.`: all).
    public let folders: [Folder]
    /// Every scenario file, relative.
    public let files: [String]

    public struct Folder: Codable, Sendable, Equatable {
        public let path: String
        public let count: Int
    }
}

/// The scenario runs of this daemon: one at a time (each scenario starts a daemon core of its
/// own; two runs would only share the machine's cores), the last 20 kept with their reports.
final class ScenarioRuns: Sendable {
    private struct Run {
        var view: ScenarioRunView
        var junit: String?
    }

    private struct State {
        var runs: [String: Run] = [:]
        var order: [String] = []
        var running: String?
    }

    let directory: String?
    private let service: (any ScenarioService)?
    private let events: EventHub
    private let clock: @Sendable () -> Int64
    private let state = Mutex(State())
    static let kept = 20
    /// The events a run publishes besides the bench's own (`GET /v1/events`): a run started or
    /// ended, and one scenario's result.
    static let runEvent = "scenario-run", resultEvent = "scenario-result"
    static let eventNames = [runEvent, resultEvent]

    init(directory: String?, service: (any ScenarioService)?, events: EventHub, clock: @escaping @Sendable () -> Int64) {
        self.directory = directory
        self.service = service
        self.events = events
        self.clock = clock
    }

    private func ready() throws(DaemonError) -> (String, any ScenarioService) {
        guard let directory else {
            throw .conflict("no scenarios directory is configured: set scenarios.directory (e.g. /usr/share/cardbench/scenarios)")
        }
        guard let service else { throw .conflict("this daemon cannot run scenarios (built without the scenario runner)") }
        return (directory, service)
    }

    /// `path` inside the directory, or an error naming the rule: relative, no `..`.
    func resolve(_ path: String) throws(DaemonError) -> String {
        let (directory, _) = try ready()
        let trimmed = path.trimmingCharacters(in: .whitespaces)
        guard !trimmed.hasPrefix("/"), !trimmed.split(separator: "/").contains(".."), !trimmed.contains("\0") else {
            throw .badRequest(field: "path", rule: "must be a file or folder inside the scenarios directory, relative to it, without ..")
        }
        let full = trimmed.isEmpty || trimmed == "." ? directory : (directory as NSString).appendingPathComponent(trimmed)
        guard FileManager.default.fileExists(atPath: full) else {
            throw .notFound("no file or folder \(trimmed.debugDescription) in the scenarios directory")
        }
        return full
    }

    func relative(_ file: String) -> String {
        guard let directory else { return file }
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        return file.hasPrefix(prefix) ? String(file.dropFirst(prefix.count)) : file
    }

    func list() throws(DaemonError) -> ScenarioListView {
        guard let directory else { return ScenarioListView(directory: nil, folders: [], files: []) }
        let (_, service) = try ready()
        let files: [String]
        do { files = try service.files(directory).map(relative) } catch { throw .failure("the scenarios directory: \(error)") }
        var counts: [String: Int] = [".": files.count]
        for file in files {
            var parts = file.split(separator: "/").dropLast()
            while !parts.isEmpty {
                counts[parts.joined(separator: "/"), default: 0] += 1
                parts = parts.dropLast()
            }
        }
        return ScenarioListView(directory: directory, folders: counts.keys.sorted().map { .init(path: $0, count: counts[$0]!) }, files: files)
    }

    /// Starts a run of `path`; refused while another runs.
    func start(_ path: String) throws(DaemonError) -> ScenarioRunView {
        let (_, service) = try ready()
        let full = try resolve(path)
        let files: [String]
        do { files = try service.files(full) } catch { throw .badRequest(field: "path", rule: "\(error)") }
        guard !files.isEmpty else { throw .badRequest(field: "path", rule: "holds no scenario files (*.yaml outside cards/ folders)") }
        let id = String(UUID().uuidString.lowercased().prefix(8))
        let shown = path.isEmpty ? "." : path
        let view = ScenarioRunView(id: id, path: shown, state: "running", total: files.count, passed: 0, failed: 0, results: [])
        let busy: String? = state.withLock { s in
            if let running = s.running { return running }
            s.running = id
            s.runs[id] = Run(view: view)
            s.order.append(id)
            while s.order.count > Self.kept { s.runs.removeValue(forKey: s.order.removeFirst()) }
            return nil
        }
        if let busy { throw .conflict("scenario run \(busy) is in progress; one run at a time") }
        events.publish(DaemonEvent(type: Self.runEvent, terminal: nil, at: clock(), data: ["id": id, "path": shown, "state": "running", "total": String(files.count)]))
        Task {
            let junit = await service.run(files) { [self] result in
                var result = result
                result.file = relative(result.file)
                let shown = result
                state.withLock { s in
                    s.runs[id]?.view.results.append(shown)
                    if shown.passed { s.runs[id]?.view.passed += 1 } else { s.runs[id]?.view.failed += 1 }
                }
                events.publish(DaemonEvent(type: Self.resultEvent, terminal: nil, at: clock(),
                                           data: ["id": id, "file": shown.file, "name": shown.name, "passed": String(shown.passed)]))
            }
            let final: ScenarioRunView? = state.withLock { s in
                s.running = nil
                guard var run = s.runs[id] else { return nil }
                run.view.state = run.view.failed == 0 && run.view.passed == run.view.total ? "passed" : "failed"
                run.junit = junit
                s.runs[id] = run
                return run.view
            }
            if let final {
                events.publish(DaemonEvent(type: Self.runEvent, terminal: nil, at: clock(),
                                           data: ["id": id, "path": final.path, "state": final.state, "passed": String(final.passed), "failed": String(final.failed)]))
            }
        }
        return view
    }

    func view(_ id: String) throws(DaemonError) -> ScenarioRunView {
        guard let run = state.withLock({ $0.runs[id] }) else { throw .notFound("no scenario run \(id.prefix(40).debugDescription)") }
        return run.view
    }

    func junit(_ id: String) throws(DaemonError) -> String {
        guard let run = state.withLock({ $0.runs[id] }) else { throw .notFound("no scenario run \(id.prefix(40).debugDescription)") }
        guard let junit = run.junit else { throw .conflict("scenario run \(id) is still running: its report comes when it ends") }
        return junit
    }

    /// The runs kept, newest first.
    func all() -> [ScenarioRunView] {
        state.withLock { s in s.order.reversed().compactMap { s.runs[$0]?.view } }
    }
}

/// `POST /v1/scenario-runs`'s body.
public struct ScenarioRunBody: Codable, Sendable {
    /// A file or folder relative to `scenarios.directory`; `.` or empty for all of it.
    public let path: String

    public init(path: String) { self.path = path }
}

/// The scenarios directory and runs of it.
struct ScenarioRoutes {
    let runs: ScenarioRuns

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let runs = self.runs
        routes.get("/v1/scenarios") { _, _ in json(try runs.list()) }
        routes.get("/v1/scenario-runs") { _, _ in json(runs.all()) }
        routes.post("/v1/scenario-runs") { request, context in
            let body = try await decode(ScenarioRunBody.self, request, context)
            return json(try runs.start(body.path), status: .accepted)
        }
        routes.get("/v1/scenario-runs/:id") { _, context in json(try runs.view(context.parameters.get("id") ?? "")) }
        routes.get("/v1/scenario-runs/:id/junit") { _, context in
            let id = context.parameters.get("id") ?? ""
            let xml = try runs.junit(id)
            return Response(status: .ok, headers: [.contentType: "application/xml; charset=utf-8",
                                                   .contentDisposition: "attachment; filename=\"scenarios-\(id).xml\""],
                            body: .init(byteBuffer: ByteBuffer(string: xml)))
        }
        return routes
    }
}
