import Foundation
import Testing

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
        let daemonCPUMillisecondsPerSale: Double
        let goalRatio: Double
        let goalSalesPerSecondAt32Terminals: Double
    }

    /// A small run through a real cardbenchd: every sale is approved and every figure is there
    /// (the figures themselves are the benchmark's business, not this test's).
    @Test(.timeLimit(.minutes(2)))
    func aSmallRunApprovesEverySaleAndReportsBothFloors() throws {
        let r = try run(["bench", "sale", "--terminals", "2", "--count", "20", "--floor-commits", "10", "--card", Self.card, "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try JSONDecoder().decode(Report.self, from: Data(r.stdout.utf8))
        #expect(report.cards == "in-process" && report.terminals == 2)
        #expect(report.sales == 20 && report.approved == 20)
        #expect(report.salesPerSecond > 0 && report.p50Milliseconds > 0 && report.p99Milliseconds >= report.p50Milliseconds)
        #expect(report.floorCommitP50Milliseconds > 0 && report.httpRoundTripP50Milliseconds > 0)
        #expect(abs(report.p50RatioToFloor - report.p50Milliseconds / report.floorCommitP50Milliseconds) < 1e-9)
        #expect(report.daemonCPUMillisecondsPerSale > 0)
        #expect(report.goalRatio == 2 && report.goalSalesPerSecondAt32Terminals == 1000)
    }

    @Test func theTextReportSaysWhetherEachGoalIsMet() throws {
        let r = try run(["bench", "sale", "--terminals", "1", "--count", "5", "--floor-commits", "10", "--card", Self.card])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.contains { $0.hasPrefix("ratio: sale p50 is ") && ($0.hasSuffix("(goal ≤ 2x: met)") || $0.hasSuffix("(goal ≤ 2x: not met)")) })
        #expect(r.lines.contains("throughput goal: 1,000 sales/s with 32 terminals (run with --terminals 32)"))
        #expect(r.lines.contains { $0.hasPrefix("an HTTP round trip to the daemon that does nothing") })
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
