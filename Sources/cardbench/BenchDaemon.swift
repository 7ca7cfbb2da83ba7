import Daemon
import Foundation

/// A `cardbenchd` the load benches start on a temporary state directory with a configuration of
/// their own, optionally under valgrind's callgrind (instrumentation off until the timed part).
final class BenchDaemon: @unchecked Sendable {
    let process = Process()
    let directory: URL
    let runtime: String
    let log: URL
    let client: DaemonClient
    let callgrind: String?

    var pid: Int32 { process.processIdentifier }
    var stateDirectory: String { directory.appendingPathComponent("state").path }

    /// Starts the daemon with `yaml` (and `extraArguments`) and waits until it answers on its
    /// control socket; under valgrind's callgrind (counting off until `countInstructions`) or
    /// massif when given their output files.
    init(directory: URL, yaml: String, extraArguments: [String] = [], callgrind: String? = nil, massif: String? = nil) async throws {
        self.directory = directory
        self.callgrind = callgrind
        let config = directory.appendingPathComponent("cardbenchd.yaml")
        try yaml.write(to: config, atomically: true, encoding: .utf8)
        runtime = directory.appendingPathComponent("run").path
        let arguments = ["--config", config.path, "--state-directory", directory.appendingPathComponent("state").path, "--runtime-directory", runtime]
            + extraArguments
        if let tool = callgrind.map({ ["--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=\($0)"] })
            ?? massif.map({ ["--tool=massif", "--time-unit=B", "--detailed-freq=4", "--max-snapshots=100", "--massif-out-file=\($0)"] }) {
            // valgrind 3.19 cannot read Swift 6's DWARF 5: a copy without it keeps the symbols.
            let stripped = directory.appendingPathComponent("cardbenchd").path
            let objcopy = Process()
            objcopy.executableURL = URL(fileURLWithPath: "/usr/bin/objcopy")
            objcopy.arguments = ["--strip-debug", SaleBench.sibling("cardbenchd").path, stripped]
            try objcopy.run()
            objcopy.waitUntilExit()
            guard objcopy.terminationStatus == 0 else { throw CLIError(message: "objcopy --strip-debug of cardbenchd failed") }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/valgrind")
            process.arguments = tool + [stripped] + arguments
        } else {
            process.executableURL = SaleBench.sibling("cardbenchd")
            process.arguments = arguments
        }
        log = directory.appendingPathComponent("daemon.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        client = DaemonClient(endpoint: DaemonServer.controlSocket(runtimeDirectory: runtime))
        let ready = Date().addingTimeInterval(callgrind == nil && massif == nil ? 30 : 180)
        while (try? await client.send(method: "GET", "/v1/health", timeout: .seconds(1)))?.status != 200 {
            guard process.isRunning, Date() < ready else {
                stop()
                throw CLIError(message: "cardbenchd did not start: \(logTail())")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The last lines of the daemon's log.
    func logTail(_ lines: Int = 20) -> String {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// An error that says whether the daemon is still running, with its log's tail.
    func failure(_ error: any Error) -> CLIError {
        CLIError(message: "\(error); cardbenchd \(process.isRunning ? "running" : "exited with \(process.terminationStatus)"), its log:\n\(logTail())")
    }

    /// User plus system CPU seconds the daemon has used, and the system part.
    var cpuSeconds: Double { SaleBench.processCPUSeconds(pid) }
    var systemCPUSeconds: Double { SaleBench.processCPUSeconds(pid, systemOnly: true) }
    var residentKB: Int { SaleBench.residentKB(pid) }

    /// Counts from here (`callgrind_control --instr=on`).
    func countInstructions() throws { if callgrind != nil { try SaleBench.callgrindControl("--instr=on", pid) } }

    /// Dumps what was counted since `countInstructions` as the file's next part and stops
    /// counting; returns the instructions in it.
    func dumpInstructions(part: Int, label: String) throws -> Int? {
        guard let callgrind else { return nil }
        try SaleBench.callgrindControl("--dump=\(label)", pid)
        try SaleBench.callgrindControl("--instr=off", pid)
        return try SaleBench.callgrindInstructions(callgrind + ".\(part)")
    }

    /// Stops the daemon (SIGTERM) and waits for it.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// Figures of a sorted list of latencies.
func percentile(_ sorted: [Double], _ p: Int) -> Double {
    sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, sorted.count * p / 100)]
}

func milliseconds(_ d: Duration) -> Double { Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15 }

func verdict(_ met: Bool) -> String { met ? "met" : "not met" }
