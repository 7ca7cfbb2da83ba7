import ArgumentParser
import EMV
import Foundation
import Ledger
import Terminal
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct LedgerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Tools for the ledger, the SQLite (WAL) file of terminals, STANs, transactions, traces and callbacks.",
        discussion: """
        The ledger's PAN key (the HMAC key of stored card hashes) is read from --key, by default \
        <db>.pan-key beside the database; it is created with mode 0600 if missing.
        """,
        subcommands: [LedgerBurst.self]
    )

    static func keyPath(_ key: String?, db: String) -> String { key ?? Ledger.defaultPANKeyPath(database: db) }

    /// Opens a ledger for a command; ledger errors become one line on stderr and exit status 1.
    static func open(db: String, key: String?) throws -> Ledger {
        do {
            return try Ledger(path: db, panKey: Ledger.loadOrCreatePANKey(at: keyPath(key, db: db)))
        } catch let error as LedgerError {
            throw CLIError(message: "ledger \(db): \(error)")
        }
    }
}

/// The writer the SIGKILL test kills: committed transactions are announced only after
/// `complete` has returned, so every announced line must survive the kill.
struct LedgerBurst: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "burst",
        abstract: "Testing tool: write begin + complete pairs as fast as possible, announcing each commit.",
        discussion: """
        For crash tests. Each iteration begins an approved test sale on --terminal (created with \
        --tid if missing), completes it with a 3-entry masked trace and one callback in the outbox, \
        and only then prints `committed <id> <stan>` and flushes stdout. A test kills the process \
        mid-burst and checks that every printed transaction is in the ledger and no STAN was \
        handed out twice. The card is the public Visa test PAN 4761739001010010.
        """
    )

    @Option(help: "The ledger database file (created if missing).")
    var db: String

    @Option(help: "The PAN key file (default: <db>.pan-key).")
    var key: String?

    @Option(help: "The terminal's name.")
    var terminal: String = "burst"

    @Option(help: "The terminal's TID when it is created: 8 digits.")
    var tid: String = "90000001"

    @Option(help: "How many transactions to write.")
    var count: Int = 1000

    func validate() throws {
        guard count >= 1 else { throw CLIError(message: "--count: must be at least 1, got \(count)", code: 2) }
    }

    static let pan = "4761739001010010"
    static let trace = [
        TraceEntry(command: "00A404000E315041592E5359532E444446303100", response: "6F1A840E315041592E5359532E4444463031A5088801025F2D02656E9000"),
        TraceEntry(command: "00B2010C00", response: "70185A08476173FFFFFF00105F24032512315F3401019000"),
        TraceEntry(command: "80AE80001D", response: "7716980180000000000000009F2701809F3602001C9000"),
    ]

    func run() throws {
        let ledger = try LedgerCommand.open(db: db, key: key)
        do {
            _ = try ledger.ensureTerminal(name: terminal, tid: tid)
            for i in 0..<count {
                let now = Self.nowMicros()
                let started = try ledger.begin(NewTransaction(terminal: terminal, provider: .cli, action: .sale,
                                                              amount: Int64(100 + i % 1000), currency: 978,
                                                              clientReference: "burst-\(i)", createdAt: now))
                let done = Self.nowMicros()
                _ = try ledger.complete(id: started.id, Completion(
                    status: .approved, responseCode: "00", message: "Transaction successful.",
                    authorisationCode: String(format: "%06d", i % 1_000_000), maskedPAN: "476173******0010", pan: Self.pan,
                    brand: "VISA", aid: "A0000000031010", applicationLabel: "VISA CREDIT", arqc: "29CCA15AE665FA2E",
                    atc: "001C", tvr: "0000008000", cvm: "PIN", entryMode: .chip, completedAt: done),
                    trace: Self.trace,
                    outbox: [OutboxMessage(kind: .callback, target: "cardbench-test://result",
                                           payload: "cardbench-test://result?status=success&referenceNumber=\(started.stan)")])
                print("committed \(started.id) \(started.stan)")
                fflush(nil)
            }
        } catch let error as LedgerError {
            throw CLIError(message: "ledger burst: \(error)")
        }
    }

    static func nowMicros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }
}

struct LedgerBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Ledger lookups at a million rows: by STAN, client reference, the card's last 3 and UUID, beside a primary-key floor.",
        discussion: """
        Fills a new ledger with --rows completed transactions (one write transaction, multi-row \
        inserts, the real schema and indexes) spread over 10 terminals, 3,000 card PANs and \
        rows/2 client references, then times --lookups calls of each public lookup with random \
        keys that exist. The floor, measured in the same run through the same connection pool, \
        is `transaction(id:)`: a primary-key SELECT with the same join and row decoding. Figures \
        are median and p99 microseconds per call; the goal is p99 under 1 ms.
        """
    )

    @Option(help: "Transactions to fill the ledger with.")
    var rows: Int = 1_000_000

    @Option(help: "Timed calls per lookup.")
    var lookups: Int = 20_000

    @Option(help: "Keep the filled ledger at this path (must not exist); by default a temporary file is used and removed.")
    var db: String?

    @Option(help: "Workload seed.")
    var seed: UInt64 = 20261122

    @Flag(help: "Print the figures as JSON.")
    var json = false

    static let goalMicroseconds = 1000.0
    static let terminalCount = 10
    static let cardCount = 3000

    func validate() throws {
        guard (1...50_000_000).contains(rows) else { throw CLIError(message: "--rows: must be 1–50000000, got \(rows)", code: 2) }
        guard (1...10_000_000).contains(lookups) else { throw CLIError(message: "--lookups: must be 1–10000000, got \(lookups)", code: 2) }
        if let db, FileManager.default.fileExists(atPath: db) {
            throw CLIError(message: "--db: \(db) exists; bench ledger fills a new file", code: 2)
        }
    }

    func run() throws {
        var template = Array("/tmp/cardbench-ledger-XXXXXX".utf8CString)
        let directory: String? = db == nil ? mkdtemp(&template).map { String(cString: $0) } : nil
        if db == nil, directory == nil {
            throw CLIError(message: "bench ledger: cannot make a temporary directory under /tmp: \(String(cString: strerror(errno)))")
        }
        defer { if let directory { try? FileManager.default.removeItem(atPath: directory) } }
        let path = db ?? directory! + "/ledger.sqlite"
        do {
            try measure(path: path)
        } catch let error as LedgerError {
            throw CLIError(message: "bench ledger: \(error)")
        }
    }

    private func measure(path: String) throws {
        let ledger = try LedgerCommand.open(db: path, key: nil)
        var rng = SplitMix64(state: seed)
        let terminals = (1...Self.terminalCount).map { "bench-\($0)" }
        let pans = (0..<Self.cardCount).map { _ in "4" + String(format: "%015llu", rng.next() % 1_000_000_000_000_000) }
        let history = Ledger.SyntheticHistory(rows: rows, terminals: terminals, pans: pans, clientReferences: max(1, rows / 2),
                                              seed: seed, start: 1_767_225_600_000_000)
        let clock = ContinuousClock()
        let fillStart = clock.now
        try ledger.appendSyntheticHistory(history)
        let fillSeconds = Self.seconds(clock.now - fillStart)
        let fileBytes = Self.fileSize(path) + Self.fileSize(path + "-wal")

        let lastSTANs = try terminals.map { try ledger.terminal(name: $0)?.lastSTAN?.value ?? 1 }
        let ids = (0..<lookups).map { _ in Int64(rng.next() % UInt64(rows)) + 1 }
        let uuids = try ids.map { try ledger.transaction(id: $0)?.uuid ?? "" }
        let stanKeys = (0..<lookups).map { _ -> (String, STAN) in
            let t = Int(rng.next() % UInt64(terminals.count))
            return (terminals[t], STAN(Int(rng.next() % UInt64(lastSTANs[t])) + 1)!)
        }
        let references = (0..<lookups).map { _ in "ref-\(rng.next() % UInt64(history.clientReferences))" }
        let cards = (0..<lookups).map { _ in (terminals[Int(rng.next() % UInt64(terminals.count))], pans[Int(rng.next() % UInt64(pans.count))]) }

        var found = 0
        let floor = try Self.time(lookups) { i in found += try ledger.transaction(id: ids[i]) == nil ? 0 : 1 }
        let results: [(String, Timing)] = [
            ("by STAN (terminal, STAN), most recent", try Self.time(lookups) { i in
                found += try ledger.transaction(terminal: stanKeys[i].0, stan: stanKeys[i].1) == nil ? 0 : 1 }),
            ("by client reference (provider, reference)", try Self.time(lookups) { i in
                found += try ledger.transactions(provider: .viva, clientReference: references[i]).count }),
            ("the card's last 3 approved sales", try Self.time(lookups) { i in
                found += try ledger.lastTransactions(terminal: cards[i].0, pan: cards[i].1).count }),
            ("by UUID", try Self.time(lookups) { i in found += try ledger.transaction(uuid: uuids[i]) == nil ? 0 : 1 }),
        ]
        guard found > 0 else { throw CLIError(message: "bench ledger: no lookup found anything; refusing to report timings of empty work") }

        let figures = results.map { name, timing in
            LookupFigures(lookup: name, medianMicroseconds: Self.round1(timing.median), p99Microseconds: Self.round1(timing.p99),
                          ratioToFloor: (timing.median / floor.median * 100).rounded() / 100,
                          withinGoal: timing.p99 < Self.goalMicroseconds)
        }
        if json {
            try printJSON(Report(operation: "ledger-lookups", rows: rows, terminals: Self.terminalCount, cards: Self.cardCount,
                                 clientReferences: history.clientReferences, seed: seed, fillSeconds: Self.round1(fillSeconds),
                                 fillRowsPerSecond: (Double(rows) / fillSeconds).rounded(), fileBytes: fileBytes,
                                 lookupsPerKind: lookups, goalP99Microseconds: Self.goalMicroseconds,
                                 floorMedianMicroseconds: Self.round1(floor.median), floorP99Microseconds: Self.round1(floor.p99),
                                 withinGoal: figures.allSatisfy(\.withinGoal), lookups: figures))
            return
        }
        print("cardbench bench ledger: lookups in a ledger of \(Self.grouped(Double(rows))) transactions (SQLite WAL through GRDB), beside a primary-key floor")
        print("fill: \(Self.grouped(Double(rows))) rows over \(Self.terminalCount) terminals, \(Self.grouped(Double(Self.cardCount))) cards, "
              + "\(Self.grouped(Double(history.clientReferences))) client references in "
              + String(format: "%.1f s (%@ rows/s), %@ MB on disk", fillSeconds, Self.grouped(Double(rows) / fillSeconds), Self.grouped(Double(fileBytes) / 1e6)))
        print("\(Self.grouped(Double(lookups))) calls per lookup, random keys that exist; median and p99 per call")
        print(String(format: "floor: transaction(id:), primary key: median %.1f µs, p99 %.1f µs", floor.median, floor.p99))
        for f in figures {
            print(String(format: "%@: median %.1f µs, p99 %.1f µs, %.2fx the floor; p99 under 1 ms: %@",
                         f.lookup, f.medianMicroseconds, f.p99Microseconds, f.ratioToFloor, f.withinGoal ? "yes" : "NO"))
        }
    }

    struct Timing {
        let median: Double
        let p99: Double
    }

    /// Times each call on its own, after a warm-up pass over the first keys.
    static func time(_ count: Int, _ body: (Int) throws -> Void) rethrows -> Timing {
        for i in 0..<min(count, 500) { try body(i) }
        let clock = ContinuousClock()
        var micros = [Double](repeating: 0, count: count)
        for i in 0..<count {
            let start = clock.now
            try body(i)
            micros[i] = seconds(clock.now - start) * 1e6
        }
        micros.sort()
        return Timing(median: micros[count / 2], p99: micros[min(count - 1, count * 99 / 100)])
    }

    struct Report: Encodable {
        let operation: String
        let rows: Int
        let terminals: Int
        let cards: Int
        let clientReferences: Int
        let seed: UInt64
        let fillSeconds: Double
        let fillRowsPerSecond: Double
        let fileBytes: Int64
        let lookupsPerKind: Int
        let goalP99Microseconds: Double
        let floorMedianMicroseconds: Double
        let floorP99Microseconds: Double
        let withinGoal: Bool
        let lookups: [LookupFigures]
    }

    struct LookupFigures: Encodable {
        let lookup: String
        let medianMicroseconds: Double
        let p99Microseconds: Double
        let ratioToFloor: Double
        let withinGoal: Bool
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    static func round1(_ value: Double) -> Double { (value * 10).rounded() / 10 }

    static func fileSize(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    static func grouped(_ value: Double) -> String {
        let digits = String(Int(value.rounded()))
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0, i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }
}
