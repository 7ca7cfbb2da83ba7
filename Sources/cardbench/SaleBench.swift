import ArgumentParser
import Daemon
import Defaults
import EMV
import Foundation
import Ledger
import Terminal
import VirtualCard
import Workflows

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
        The virtual card's CPU per sale is measured in this client on the same profile through the \
        same kernel, and printed apart: an in-process card runs on the daemon's threads, and a card \
        in a reader costs the daemon nothing. Goals: with one terminal, the daemon's own CPU per \
        sale (its total less the card's) at most 300 µs and the p50 within 2x of the two floors' \
        p50s added; 3,000 sales/s with 32 terminals; the daemon's RSS growing less than 5 MB over \
        100,000 sales.
        """
    )

    @Option(help: "Terminals (1–128), each with its own virtual reader and card.")
    var terminals: Int = 4

    @Option(help: "Sales in all.")
    var count: Int = 2000

    @Option(help: "The card profile the terminals present.")
    var card: String = EmbeddedDefaults.demoCard

    @Option(help: "Floor commits to time, and as many do-nothing HTTP round trips.")
    var floorCommits: Int = 500

    @Flag(help: "Serve each terminal's card from a `cardbench card insert` process over the reader's socket.")
    var socketCards = false

    @Flag(help: "Print the figures as JSON.")
    var json = false

    @Option(help: ArgumentHelp("Run the daemon under valgrind's callgrind, counting only the timed sales, and write its profile to this file.",
                               discussion: "Prints the daemon's instructions per sale, the figure that repeats on a noisy machine. Sales run about 50 times slower; use a --count of a few hundred."))
    var callgrind: String?

    @Option(help: ArgumentHelp("Run the daemon under valgrind's massif and write its heap profile to this file.",
                               discussion: "Shows what the daemon's heap holds after the sales (`ms_print FILE`), for the RSS goal. Sales run about 20 times slower."))
    var massif: String?

    func validate() throws {
        guard (1...128).contains(terminals) else { throw CLIError(message: "--terminals: must be 1 to 128", code: 2) }
        guard count >= terminals, count <= 1_000_000 else { throw CLIError(message: "--count: must be --terminals to 1000000", code: 2) }
        guard (10...100_000).contains(floorCommits) else { throw CLIError(message: "--floor-commits: must be 10 to 100000", code: 2) }
        guard FileManager.default.fileExists(atPath: card) || EmbeddedDefaults.cardProfile(named: card) != nil else {
            throw CLIError(message: "--card: \(card) is neither a file nor an embedded profile", code: 2)
        }
        guard callgrind == nil || massif == nil else { throw CLIError(message: "--massif: one valgrind tool at a time; drop --callgrind or --massif", code: 2) }
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
        /// The sale's p50 over the commit floor's (the first goal, kept for comparison).
        let p50RatioToFloor: Double
        /// The sale's p50 over the sum of both floors' p50s.
        let p50RatioToFloors: Double
        /// CPU time per sale (user + system) of the daemon (with its demo cards) and of this client.
        let daemonCPUMicrosecondsPerSale: Double
        let clientCPUMicrosecondsPerSale: Double
        /// The daemon's resident set (VmRSS) before the timed sales and after them, in kB.
        let daemonRSSBeforeKB: Int
        let daemonRSSAfterKB: Int
        /// The part of the daemon's CPU per sale spent in the kernel (system time).
        let daemonSystemCPUMicrosecondsPerSale: Double
        /// The daemon's CPU per do-nothing HTTP request (the HTTP floor's requests), and this client's.
        let daemonCPUMicrosecondsPerHTTPFloorRequest: Double
        let clientCPUMicrosecondsPerHTTPFloorRequest: Double
        /// This process's CPU per bare durable commit (the commit floor's).
        let cpuMicrosecondsPerFloorCommit: Double
        /// The virtual card's CPU per sale (measured in this process on the same profile through
        /// the same kernel), and the daemon's CPU less it when the cards are in process.
        let cardCPUMicrosecondsPerSale: Double
        let daemonOwnCPUMicrosecondsPerSale: Double
        /// Under --callgrind: the daemon's instructions per timed sale, and per do-nothing request.
        let daemonInstructionsPerSale: Double?
        let daemonInstructionsPerHTTPFloorRequest: Double?
        let goalDaemonCPUMicrosecondsPerSale = 300.0
        let goalRatioToFloors = 2.0
        let goalSalesPerSecondAt32Terminals = 3000.0
        let goalRSSGrowthKB = 5 * 1024
    }

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-sale-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        // The card's own CPU per sale, measured here on the same profile through the same kernel:
        // an in-process card runs on the daemon's threads, and a card in a reader costs the
        // daemon nothing, so the daemon's own CPU is its total less this.
        let cardCPU = try Self.cardCPUPerSale(try loadCardProfile(card, option: "--card"))
        let floorCPUBefore = Self.ownCPUSeconds()
        let floor = try Ledger.measureCommitFloor(path: directory.appendingPathComponent("floor.sqlite").path, count: floorCommits).sorted()
        let floorCPU = Self.ownCPUSeconds() - floorCPUBefore

        let names = (1...terminals).map { "t\($0)" }
        var yaml = "http:\n  port: off\nhost:\n  cards: []\nviva:\n  amount_table: none\ntimeouts:\n  card_seconds: 10\nterminals: [\(names.joined(separator: ", "))]\nterminal:\n"
        for (i, name) in names.enumerated() { yaml += "  \(name):\n    tid: \"\(20_000_001 + i)\"\n" }
        let runtime = directory.appendingPathComponent("run").path
        let bench = try await BenchDaemon(directory: directory, yaml: yaml, extraArguments: ["--demo-card", card], callgrind: callgrind, massif: massif)
        defer { bench.stop() }
        let daemon = bench.process
        let client = bench.client
        let log = bench.log
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
        if callgrind != nil { try Self.callgrindControl("--instr=on", daemon.processIdentifier) }
        let healthCPUBefore = Self.processCPUSeconds(daemon.processIdentifier)
        let healthClientCPUBefore = Self.ownCPUSeconds()
        var roundTrips: [Double] = []
        for _ in 0..<floorCommits {
            let t0 = ContinuousClock.now
            _ = try await client.send(method: "GET", "/v1/health")
            let d = ContinuousClock.now - t0
            roundTrips.append(Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15)
        }
        roundTrips.sort()
        let healthCPU = Self.processCPUSeconds(daemon.processIdentifier) - healthCPUBefore
        let healthClientCPU = Self.ownCPUSeconds() - healthClientCPUBefore
        if callgrind != nil { try Self.callgrindControl("--dump=health", daemon.processIdentifier) }

        let rssBefore = Self.residentKB(daemon.processIdentifier)
        let rssPartsBefore = Self.residentParts(daemon.processIdentifier)
        let daemonCPUBefore = Self.processCPUSeconds(daemon.processIdentifier)
        let daemonSystemBefore = Self.processCPUSeconds(daemon.processIdentifier, systemOnly: true)
        let clientCPUBefore = Self.ownCPUSeconds()
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
        let daemonSystem = Self.processCPUSeconds(daemon.processIdentifier, systemOnly: true) - daemonSystemBefore
        let clientCPU = Self.ownCPUSeconds() - clientCPUBefore
        let rssAfter = Self.residentKB(daemon.processIdentifier)
        let rssPartsAfter = Self.residentParts(daemon.processIdentifier)
        var instructionsPerSale: Double?, instructionsPerHealth: Double?
        if let callgrind {
            try Self.callgrindControl("--dump=timed sales", daemon.processIdentifier)
            try Self.callgrindControl("--instr=off", daemon.processIdentifier)
            instructionsPerHealth = try Self.callgrindInstructions(callgrind + ".1").map { Double($0) / Double(floorCommits) }
            instructionsPerSale = try Self.callgrindInstructions(callgrind + ".2").map { Double($0) / Double(total) }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let latencies = results.flatMap(\.latencies).sorted()
        let approved = results.map(\.approved).reduce(0, +)
        func percentile(_ sorted: [Double], _ p: Int) -> Double { sorted[min(sorted.count - 1, sorted.count * p / 100)] }
        let floorP50 = percentile(floor, 50) / 1000, floorP99 = percentile(floor, 99) / 1000
        let p50 = percentile(latencies, 50), p99 = percentile(latencies, 99)
        let floors = floorP50 + percentile(roundTrips, 50)
        let report = Report(cards: socketCards ? "socket" : "in-process", terminals: terminals, sales: total, approved: approved, seconds: seconds,
                            salesPerSecond: Double(total) / seconds,
                            p50Milliseconds: p50, p99Milliseconds: p99, floorCommitP50Milliseconds: floorP50,
                            floorCommitP99Milliseconds: floorP99, httpRoundTripP50Milliseconds: percentile(roundTrips, 50),
                            p50RatioToFloor: p50 / floorP50, p50RatioToFloors: p50 / floors,
                            daemonCPUMicrosecondsPerSale: daemonCPU * 1e6 / Double(total),
                            clientCPUMicrosecondsPerSale: clientCPU * 1e6 / Double(total),
                            daemonRSSBeforeKB: rssBefore, daemonRSSAfterKB: rssAfter, daemonSystemCPUMicrosecondsPerSale: daemonSystem * 1e6 / Double(total),
                            daemonCPUMicrosecondsPerHTTPFloorRequest: healthCPU * 1e6 / Double(floorCommits),
                            clientCPUMicrosecondsPerHTTPFloorRequest: healthClientCPU * 1e6 / Double(floorCommits),
                            cpuMicrosecondsPerFloorCommit: floorCPU * 1e6 / Double(floorCommits),
                            cardCPUMicrosecondsPerSale: cardCPU,
                            daemonOwnCPUMicrosecondsPerSale: daemonCPU * 1e6 / Double(total) - (socketCards ? 0 : cardCPU),
                            daemonInstructionsPerSale: instructionsPerSale, daemonInstructionsPerHTTPFloorRequest: instructionsPerHealth)
        if json { return try printJSON(report) }
        func verdict(_ met: Bool) -> String { met ? "met" : "not met" }
        print("cardbench bench sale: \(total) Viva sales through cardbenchd, \(terminals) terminal(s) with \(socketCards ? "virtual cards on the readers' sockets (one process each)" : "in-process virtual cards"), one client each")
        print(String(format: "sales: %.0f/s, %d approved, p50 %.3f ms, p99 %.3f ms", report.salesPerSecond, approved, p50, p99))
        print(String(format: "floor: one durable SQLite commit (WAL, synchronous=FULL), p50 %.3f ms, p99 %.3f ms", floorP50, floorP99))
        print(String(format: "floor: an HTTP round trip to the daemon that does nothing (GET /v1/health), one at a time: p50 %.3f ms",
                     report.httpRoundTripP50Milliseconds))
        print(String(format: "CPU per sale: daemon%@ %.0f µs (%.0f µs of it in the kernel), this client %.0f µs", socketCards ? "" : " (with its cards)",
                     report.daemonCPUMicrosecondsPerSale, report.daemonSystemCPUMicrosecondsPerSale, report.clientCPUMicrosecondsPerSale))
        print(String(format: "CPU floors: a do-nothing HTTP request %.0f µs in the daemon (and %.0f µs in this client); a bare durable commit %.0f µs; together %.0f µs in the daemon",
                     report.daemonCPUMicrosecondsPerHTTPFloorRequest, report.clientCPUMicrosecondsPerHTTPFloorRequest, report.cpuMicrosecondsPerFloorCommit,
                     report.daemonCPUMicrosecondsPerHTTPFloorRequest + report.cpuMicrosecondsPerFloorCommit))
        print(String(format: "the virtual card's CPU per sale (%@, measured in this client through the same kernel): %.0f µs; the daemon's own: %.0f µs%@",
                     card, cardCPU, report.daemonOwnCPUMicrosecondsPerSale, socketCards ? " (the cards are in their own processes)" : " (its total less the card's)"))
        if let instructionsPerSale, let instructionsPerHealth {
            print(String(format: "instructions (callgrind, daemon): %.0f per sale, %.0f per do-nothing HTTP request", instructionsPerSale, instructionsPerHealth))
        }
        print(String(format: "daemon RSS: %.1f MB before the timed sales (%@), %.1f MB after (%@): %+.1f MB", Double(rssBefore) / 1024, rssPartsBefore,
                     Double(rssAfter) / 1024, rssPartsAfter, Double(rssAfter - rssBefore) / 1024))
        if terminals == 1 {
            print(String(format: "goal: Viva sale, the daemon's own CPU ≤ 300 µs (its card's apart): %.0f µs, %@", report.daemonOwnCPUMicrosecondsPerSale,
                         verdict(report.daemonOwnCPUMicrosecondsPerSale <= report.goalDaemonCPUMicrosecondsPerSale)))
            print(String(format: "goal: Viva sale p50 ≤ 2x (commit floor + HTTP floor): %.2fx, %@", report.p50RatioToFloors,
                         verdict(report.p50RatioToFloors <= report.goalRatioToFloors)))
        } else {
            print("goals of one terminal: the daemon's own CPU per sale and p50 (run with --terminals 1)")
        }
        print(terminals == 32
              ? String(format: "goal: ≥ 3,000 Viva sales/s with 32 terminals: %.0f, %@", report.salesPerSecond,
                       verdict(report.salesPerSecond >= report.goalSalesPerSecondAt32Terminals))
              : "goal of 32 terminals: 3,000 sales/s (run with --terminals 32)")
        print(total >= 100_000
              ? String(format: "goal: Viva sale RSS growth < 5 MB over %d sales: %+.1f MB, %@", total, Double(rssAfter - rssBefore) / 1024,
                       verdict(rssAfter - rssBefore < report.goalRSSGrowthKB))
              : "goal of 100,000 sales: RSS growth < 5 MB (run with --count 100000)")
    }

    /// The card's CPU per sale: 200 kernel sales against the profile's virtual card, timing only
    /// the card's answers (this thread's CPU clock around each).
    static func cardCPUPerSale(_ profile: CardProfile) throws -> Double {
        let pinKey = try TDESKey(SecureRandom.bytes(16))
        let host = EmulatedHost(pinKey: pinKey, amountTable: .none)
        try host.register(profile)
        let link = TimedCardLink(VirtualCardLink(try VirtualCard(profile: profile)))
        let date = UTCDateParts(secondsSince1970: Int64(Date().timeIntervalSince1970))
        for i in 0..<220 {
            if i == 20 { link.nanoseconds = 0 }
            var kernel = Kernel(configuration: TerminalConfiguration(pinKey: pinKey), card: link, keypad: TerminalKeypad(autoPIN: profile.pin), host: host)
            _ = try kernel.run(TransactionRequest(amount: 1, date: date, stan: STAN(i + 1)!))
        }
        return Double(link.nanoseconds) / 1000 / 200
    }

    /// All the client needs of the answer.
    struct Outcome: Decodable { let status: String }

    /// A sale of one cent: the demo card's balance (50,000.00) lasts five million of them, so a
    /// long run measures approvals, not the card running out.
    static func url(_ n: Int) -> String {
        "vivapayclient://pay/v1?callback=bench://result&merchantKey=K&appId=bench&action=sale&amount=1&clientTransactionId=bench-\(UUID().uuidString.prefix(8))-\(n)"
    }

    /// Runs `callgrind_control` on the daemon under callgrind.
    static func callgrindControl(_ option: String, _ pid: Int32) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/callgrind_control")
        p.arguments = [option, String(pid)]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw CLIError(message: "callgrind_control \(option) \(pid) failed (\(p.terminationStatus))") }
    }

    /// The instructions counted in a callgrind dump: its `totals:` line.
    static func callgrindInstructions(_ file: String) throws -> Int? {
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: file) {
            guard Date() < deadline else { throw CLIError(message: "callgrind wrote no \(file)") }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let text = try String(contentsOfFile: file, encoding: .utf8)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("totals:") || $0.hasPrefix("summary:") }) else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }

    /// This process's user plus system CPU seconds (getrusage: microseconds, where /proc's are ticks).
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// A process's resident set (VmRSS of /proc/<pid>/status), in kB.
    static func residentKB(_ pid: Int32, _ field: String = "VmRSS") -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return 0 }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    }

    /// "anon A MB, file F MB, shmem S MB": what a resident set is made of.
    static func residentParts(_ pid: Int32) -> String {
        String(format: "anonymous %.1f MB, files %.1f MB, shared memory %.1f MB", Double(residentKB(pid, "RssAnon")) / 1024,
               Double(residentKB(pid, "RssFile")) / 1024, Double(residentKB(pid, "RssShmem")) / 1024)
    }

    /// User plus system CPU seconds of a process, from /proc/<pid>/stat (fields 14 and 15).
    static func processCPUSeconds(_ pid: Int32, systemOnly: Bool = false) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return ((systemOnly ? 0 : user) + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A binary installed beside this one.
    static func sibling(_ name: String) -> URL {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(name)
    }
}

/// A card link that adds up the CPU time this thread spends in the card's answers.
final class TimedCardLink: CardLink {
    let card: VirtualCardLink
    var nanoseconds: UInt64 = 0
    init(_ card: VirtualCardLink) { self.card = card }

    private static func threadCPU() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    func powerOn() throws(KernelError) -> [UInt8] {
        let t0 = Self.threadCPU()
        defer { nanoseconds += Self.threadCPU() - t0 }
        return try card.powerOn()
    }

    func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] {
        let t0 = Self.threadCPU()
        defer { nanoseconds += Self.threadCPU() - t0 }
        return try card.transmit(command)
    }
}
