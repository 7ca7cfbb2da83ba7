import Foundation
import Testing
import TestSupport

@Suite("cardbench bench sale")
struct BenchSaleTests {
    static let card = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scenarios/cards/visa-credit-cvn10.yaml").path

    struct Report: Decodable {
        let cards: String
        let terminals: Int
        let sales: Int
        let approved: Int
        let salesPerSecond: Double
        let p50Milliseconds: Double
        let p99Milliseconds: Double
        let floorCommitP50Milliseconds: Double
        let httpRoundTripP50Milliseconds: Double
        let p50RatioToFloor: Double
        let p50RatioToFloors: Double
        let daemonCPUMicrosecondsPerSale: Double
        let daemonSystemCPUMicrosecondsPerSale: Double
        let daemonCPUMicrosecondsPerHTTPFloorRequest: Double
        let daemonRSSBeforeKB: Int
        let daemonRSSAfterKB: Int
        let daemonInstructionsPerSale: Double?
        let cardCPUMicrosecondsPerSale: Double
        let daemonOwnCPUMicrosecondsPerSale: Double
        let goalDaemonCPUMicrosecondsPerSale: Double
        let goalRatioToFloors: Double
        let goalSalesPerSecondAt32Terminals: Double
        let goalRSSGrowthKB: Int
    }

    /// A small run through a real cardbenchd: every sale is approved and every figure is there
    /// (the figures themselves are the benchmark's business, not this test's).
    @Test(.timeLimit(.minutes(2)))
    func aSmallRunApprovesEverySaleAndReportsBothFloors() async throws {
        let r = try await onOwnThread { try run(["bench", "sale", "--terminals", "2", "--count", "20", "--floor-commits", "10", "--card", Self.card, "--json"]) }
        #expect(r.status == 0, "\(r.stderr)")
        let report = try JSONDecoder().decode(Report.self, from: Data(r.stdout.utf8))
        #expect(report.cards == "in-process" && report.terminals == 2)
        #expect(report.sales == 20 && report.approved == 20)
        #expect(report.salesPerSecond > 0 && report.p50Milliseconds > 0 && report.p99Milliseconds >= report.p50Milliseconds)
        #expect(report.floorCommitP50Milliseconds > 0 && report.httpRoundTripP50Milliseconds > 0)
        #expect(abs(report.p50RatioToFloor - report.p50Milliseconds / report.floorCommitP50Milliseconds) < 1e-9)
        #expect(abs(report.p50RatioToFloors - report.p50Milliseconds / (report.floorCommitP50Milliseconds + report.httpRoundTripP50Milliseconds)) < 1e-9)
        #expect(report.daemonCPUMicrosecondsPerSale >= report.daemonSystemCPUMicrosecondsPerSale && report.daemonSystemCPUMicrosecondsPerSale >= 0)
        #expect(report.daemonCPUMicrosecondsPerHTTPFloorRequest >= 0)
        // A daemon that is running has a resident set of megabytes.
        #expect(report.daemonRSSBeforeKB > 1024 && report.daemonRSSAfterKB > 1024)
        #expect(report.daemonInstructionsPerSale == nil, "no callgrind, no instruction count")
        // The card's CPU is measured apart and taken from the daemon's total (the card is in process).
        #expect(report.cardCPUMicrosecondsPerSale > 0)
        #expect(abs(report.daemonOwnCPUMicrosecondsPerSale - (report.daemonCPUMicrosecondsPerSale - report.cardCPUMicrosecondsPerSale)) < 1e-6)
        #expect(report.goalDaemonCPUMicrosecondsPerSale == 300 && report.goalRatioToFloors == 2)
        #expect(report.goalSalesPerSecondAt32Terminals == 3000 && report.goalRSSGrowthKB == 5 * 1024)
    }

    @Test func theTextReportSaysWhetherEachGoalIsMet() async throws {
        let r = try await onOwnThread { try run(["bench", "sale", "--terminals", "1", "--count", "5", "--floor-commits", "10", "--card", Self.card]) }
        #expect(r.status == 0, "\(r.stderr)")
        func verdict(_ line: String) -> Bool { line.hasSuffix(", met") || line.hasSuffix(", not met") }
        #expect(r.lines.contains { $0.hasPrefix("goal: Viva sale, the daemon's own CPU ≤ 300 µs (its card's apart): ") && verdict($0) })
        #expect(r.lines.contains { $0.hasPrefix("goal: Viva sale p50 ≤ 2x (commit floor + HTTP floor): ") && verdict($0) })
        #expect(r.lines.contains("goal of 32 terminals: 3,000 sales/s (run with --terminals 32)"))
        #expect(r.lines.contains { $0.hasPrefix("the virtual card's CPU per sale (") })
        #expect(!r.lines.contains { $0.contains("150 µs") || $0.contains("5,000 sales/s") }, "issue 17's goals are replaced")
        #expect(r.lines.contains("goal of 100,000 sales: RSS growth < 5 MB (run with --count 100000)"))
        #expect(r.lines.contains { $0.hasPrefix("floor: an HTTP round trip to the daemon that does nothing") })
        #expect(r.lines.contains { $0.hasPrefix("daemon RSS: ") })
    }

    @Test("bad options: one line naming the option, status 2", arguments: [
        (["--terminals", "0"], "--terminals"),
        (["--terminals", "4", "--count", "3"], "--count"),
        (["--floor-commits", "5"], "--floor-commits"),
        (["--card", "/nonexistent.yaml"], "--card"),
    ])
    func rejects(arguments: [String], option: String) throws {
        let r = try run(["bench", "sale"] + arguments)
        #expect(r.status == 2)
        #expect(r.stderr.contains(option), "\(r.stderr)")
    }
}
