import ArgumentParser
import Daemon
import Foundation
import Ledger

struct SaleBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sale",
        abstract: "Sales per second and latency through a real cardbenchd, beside the bare durable SQLite commit.",
        discussion: """
        Starts `cardbenchd` (the binary beside this one) on a temporary state directory with \
        --terminals terminals in demo mode (each reader holds an in-process virtual card, as a \
        card inserted through the API does; with --socket-cards, each holds a card served by its \
        own `cardbench card insert` process over the reader's Unix socket instead, two thread \
        wake-ups per APDU), then sends --count Viva sale URLs through the control socket, one \
        client per terminal, each waiting for its callback before the next. Latency is the client's: request \
        sent to callback received. The floor, measured in the same run on the same disk, is one bare \
        durable SQLite commit (WAL, synchronous=FULL, one INSERT); a sale makes one durable commit \
        (its outcome with its callback; its STAN comes from a block reserved ahead). A second floor \
        is one HTTP round trip from this client to the daemon that does nothing (GET /v1/health). \
        Goals: p50 within 2x of the commit floor's p50; 1,000 sales/s with 32 terminals.
        """
    )

    @Option(help: "Terminals (1–128), each with its own virtual reader and card.")
    var terminals: Int = 4

    @Option(help: "Sales in all.")
    var count: Int = 2000

    @Option(help: "The card profile the terminals present.")
    var card: String = "Scenarios/cards/visa-credit-cvn10.yaml"

    @Option(help: "Floor commits to time, and as many do-nothing HTTP round trips.")
    var floorCommits: Int = 500

    @Flag(help: "Serve each terminal's card from a `cardbench card insert` process over the reader's socket.")
    var socketCards = false

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard (1...128).contains(terminals) else { throw CLIError(message: "--terminals: must be 1 to 128", code: 2) }
        guard count >= terminals, count <= 1_000_000 else { throw CLIError(message: "--count: must be --terminals to 1000000", code: 2) }
        guard (10...100_000).contains(floorCommits) else { throw CLIError(message: "--floor-commits: must be 10 to 100000", code: 2) }
        guard FileManager.default.fileExists(atPath: card) else { throw CLIError(message: "--card: \(card) does not exist", code: 2) }
    }

    struct Report: Encodable {
        let operation = "viva-sale-through-cardbenchd"
        /// Where the cards live: "in-process" or "socket".
        let cards: String
        let terminals: Int
        let sales: Int
        let approved: Int
        let seconds: Double
        let salesPerSecond: Double
        let p50Milliseconds: Double
        let p99Milliseconds: Double
        let floorCommitP50Milliseconds: Double
        let floorCommitP99Milliseconds: Double
        /// One HTTP round trip from this client to the daemon doing nothing (GET /v1/health).
        let httpRoundTripP50Milliseconds: Double
        let p50RatioToFloor: Double
        /// CPU time per sale (user + system) of the daemon (with its demo cards) and of this client.
        let daemonCPUMillisecondsPerSale: Double
        let clientCPUMillisecondsPerSale: Double
        let goalRatio = 2.0
        let goalSalesPerSecondAt32Terminals = 1000.0
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-sale-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let floor = try Ledger.measureCommitFloor(path: directory.appendingPathComponent("floor.sqlite").path, count: floorCommits).sorted()

        let names = (1...terminals).map { "t\($0)" }
        var yaml = "http:\n  port: off\nhost:\n  cards: []\nviva:\n  amount_table: none\ntimeouts:\n  card_seconds: 10\nterminals: [\(names.joined(separator: ", "))]\nterminal:\n"
        for (i, name) in names.enumerated() { yaml += "  \(name):\n    tid: \"\(20_000_001 + i)\"\n" }
        let config = directory.appendingPathComponent("cardbenchd.yaml")
        try yaml.write(to: config, atomically: true, encoding: .utf8)
        let runtime = directory.appendingPathComponent("run").path
        let daemon = Process()
        daemon.executableURL = Self.sibling("cardbenchd")
        daemon.arguments = ["--config", config.path, "--state-directory", directory.appendingPathComponent("state").path,
                            "--runtime-directory", runtime, "--demo-card", card]
        let log = directory.appendingPathComponent("daemon.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        daemon.standardOutput = handle
        daemon.standardError = handle
        try daemon.run()
        defer {
            daemon.terminate()
            daemon.waitUntilExit()
        }
        let client = DaemonClient(endpoint: DaemonServer.controlSocket(runtimeDirectory: runtime))
        let ready = Date().addingTimeInterval(20)
        while (try? await client.send(method: "GET", "/v1/health", timeout: .seconds(1)))?.status != 200 {
            guard daemon.isRunning, Date() < ready else {
                throw CLIError(message: "cardbenchd did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        var cardProcesses: [Process] = []
        defer {
            for p in cardProcesses where p.isRunning { p.interrupt() }
            for p in cardProcesses { p.waitUntilExit() }
        }
        if socketCards {
            for name in names {
                let p = Process()
                p.executableURL = Self.sibling("cardbench")
                p.arguments = ["card", "insert", "--profile", card, "--reader", "\(runtime)/readers/\(name).sock"]
                p.standardOutput = FileHandle.nullDevice
                try p.run()
                cardProcesses.append(p)
            }
            // The demo card would step in for a reader still empty at the first sale.
            let deadline = Date().addingTimeInterval(20)
            while true {
                let reply = try await client.send(method: "GET", "/v1/readers")
                let readers = (try? JSONDecoder().decode([ReaderView].self, from: reply.body)) ?? []
                if readers.count == names.count, readers.allSatisfy({ $0.cardPresent && $0.card == "socket" }) { break }
                guard Date() < deadline else { throw CLIError(message: "the socket cards did not connect to the readers in 20 s") }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        // One warm-up sale per terminal (first card insertion, first connection).
        for name in names { _ = try await client.send(method: "POST", "/v1/open", json: OpenRequest(url: Self.url(0), terminal: name)) }

        // A second floor: the same client's round trip to the daemon for a request that does
        // nothing (GET /v1/health), one at a time.
        var roundTrips: [Double] = []
        for _ in 0..<floorCommits {
            let t0 = ContinuousClock.now
            _ = try await client.send(method: "GET", "/v1/health")
            let d = ContinuousClock.now - t0
            roundTrips.append(Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15)
        }
        roundTrips.sort()

        let daemonCPUBefore = Self.processCPUSeconds(daemon.processIdentifier)
        let clientCPUBefore = Self.processCPUSeconds(getpid())
        let perTerminal = count / terminals
        let total = perTerminal * terminals
        let clock = ContinuousClock()
        let start = clock.now
        let results: [(latencies: [Double], approved: Int)]
        do {
        results = try await withThrowingTaskGroup(of: (latencies: [Double], approved: Int).self) { group in
            for name in names {
                group.addTask {
                    var latencies: [Double] = []
                    var approved = 0
                    latencies.reserveCapacity(perTerminal)
                    for n in 0..<perTerminal {
                        let t0 = clock.now
                        let reply = try await client.send(method: "POST", "/v1/open", json: OpenRequest(url: Self.url(n + 1), terminal: name))
                        let d = clock.now - t0
                        latencies.append(Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15)
                        if reply.status == 200, let r = try? JSONDecoder().decode(Outcome.self, from: reply.body), r.status == "success" {
                            approved += 1
                        }
                    }
                    return (latencies, approved)
                }
            }
            var all: [(latencies: [Double], approved: Int)] = []
            for try await r in group { all.append(r) }
            return all
        }
        } catch {
            let tail = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(20).joined(separator: "\n")
            throw CLIError(message: "\(error); daemon \(daemon.isRunning ? "running" : "exited with \(daemon.terminationStatus)"), its log:\n\(tail)")
        }
        let elapsed = clock.now - start
        let daemonCPU = Self.processCPUSeconds(daemon.processIdentifier) - daemonCPUBefore
        let clientCPU = Self.processCPUSeconds(getpid()) - clientCPUBefore
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let latencies = results.flatMap(\.latencies).sorted()
        let approved = results.map(\.approved).reduce(0, +)
        func percentile(_ sorted: [Double], _ p: Int) -> Double { sorted[min(sorted.count - 1, sorted.count * p / 100)] }
        let floorP50 = percentile(floor, 50) / 1000, floorP99 = percentile(floor, 99) / 1000
        let p50 = percentile(latencies, 50), p99 = percentile(latencies, 99)
        let report = Report(cards: socketCards ? "socket" : "in-process", terminals: terminals, sales: total, approved: approved, seconds: seconds, salesPerSecond: Double(total) / seconds,
                            p50Milliseconds: p50, p99Milliseconds: p99, floorCommitP50Milliseconds: floorP50,
                            floorCommitP99Milliseconds: floorP99, httpRoundTripP50Milliseconds: percentile(roundTrips, 50),
                            p50RatioToFloor: p50 / floorP50,
                            daemonCPUMillisecondsPerSale: daemonCPU * 1000 / Double(total),
                            clientCPUMillisecondsPerSale: clientCPU * 1000 / Double(total))
        if json { return try printJSON(report) }
        print("cardbench bench sale: \(total) Viva sales through cardbenchd, \(terminals) terminal(s) with \(socketCards ? "virtual cards on the readers' sockets (one process each)" : "in-process virtual cards"), one client each")
        print(String(format: "sales: %.0f/s, %d approved, p50 %.2f ms, p99 %.2f ms", report.salesPerSecond, approved, p50, p99))
        print(String(format: "floor: one durable SQLite commit (WAL, synchronous=FULL), p50 %.3f ms, p99 %.3f ms", floorP50, floorP99))
        print(String(format: "an HTTP round trip to the daemon that does nothing (GET /v1/health), one at a time: p50 %.3f ms (%.2fx the commit floor)",
                     report.httpRoundTripP50Milliseconds, report.httpRoundTripP50Milliseconds / floorP50))
        print(String(format: "CPU per sale: daemon%@ %.2f ms, this client %.2f ms", socketCards ? "" : " (with its cards)", report.daemonCPUMillisecondsPerSale,
                     report.clientCPUMillisecondsPerSale))
        print(String(format: "ratio: sale p50 is %.2fx the commit floor (goal ≤ 2x: %@)", report.p50RatioToFloor,
                     report.p50RatioToFloor <= report.goalRatio ? "met" : "not met"))
        print(terminals == 32
              ? String(format: "throughput: %.0f sales/s with 32 terminals (goal ≥ 1,000: %@)", report.salesPerSecond,
                       report.salesPerSecond >= report.goalSalesPerSecondAt32Terminals ? "met" : "not met")
              : "throughput goal: 1,000 sales/s with 32 terminals (run with --terminals 32)")
    }

    /// All the client needs of the answer.
    struct Outcome: Decodable { let status: String }

    static func url(_ n: Int) -> String {
        "vivapayclient://pay/v1?callback=bench://result&merchantKey=K&appId=bench&action=sale&amount=100&clientTransactionId=bench-\(UUID().uuidString.prefix(8))-\(n)"
    }

    /// User plus system CPU seconds of a process, from /proc/<pid>/stat (fields 14 and 15).
    static func processCPUSeconds(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A binary installed beside this one.
    static func sibling(_ name: String) -> URL {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(name)
    }
}
