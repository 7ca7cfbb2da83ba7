import Foundation
import Testing
import TestSupport

/// The load benches of the ISO 8583 issuer and the platforms, in small runs through a real
/// cardbenchd: every answer checked, every figure and goal line there (the figures themselves
/// are the benchmarks' business, not these tests').
@Suite("cardbench bench iso8583, worldline, citcon", .serialized)
struct BenchLoadTests {
    func verdict(_ line: String) -> Bool { line.hasSuffix(", met") || line.hasSuffix(", not met") }

    struct ISOReport: Decodable {
        let connections: Int
        let depth: Int
        let authorisations: Int
        let approvedWithValidARPC: Int
        let recordedInLedger: Int
        let authorisationsPerSecond: Double
        let oneAtATimeP50Milliseconds: Double
        let echoRoundTripP50Milliseconds: Double
        let floorCommitP50Milliseconds: Double
        let p50RatioToFloors: Double
        let daemonCPUMicrosecondsPerAuthorisation: Double
        let loadGeneratorCPUMicrosecondsPerAuthorisation: Double
        let goalAuthorisationsPerSecond: Double
        let goalConnections: Int
    }

    @Test(.timeLimit(.minutes(3)))
    func iso8583() async throws {
        let r = try await onOwnThread { try run(["bench", "iso8583", "--connections", "40", "--depth", "3", "--count", "800", "--latency-count", "20", "--json"]) }
        #expect(r.status == 0, "\(r.stderr)")
        let report = try JSONDecoder().decode(ISOReport.self, from: Data(r.stdout.utf8))
        #expect(report.connections == 40 && report.depth == 3)
        // 800 over 40 connections, less the warm-up's sixth (3 of each 20); every answer (the
        // one-at-a-time twenty and the warm-up included) an approval with the card's ARPC, and in
        // the ledger.
        #expect(report.authorisations == 680)
        #expect(report.approvedWithValidARPC == 820 && report.recordedInLedger == 820)
        #expect(report.authorisationsPerSecond > 0 && report.daemonCPUMicrosecondsPerAuthorisation > 0)
        #expect(report.echoRoundTripP50Milliseconds > 0 && report.floorCommitP50Milliseconds > 0)
        #expect(abs(report.p50RatioToFloors - report.oneAtATimeP50Milliseconds / (report.echoRoundTripP50Milliseconds + report.floorCommitP50Milliseconds)) < 1e-9)
        #expect(report.goalAuthorisationsPerSecond == 5000 && report.goalConnections == 1000)
    }

    @Test(.timeLimit(.minutes(3)))
    func iso8583Text() async throws {
        let r = try await onOwnThread { try run(["bench", "iso8583", "--connections", "10", "--count", "100", "--latency-count", "10"]) }
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.contains { $0.hasPrefix("goal: ≥ 5,000 ISO 8583 authorisations/s, load generator included: ") && verdict($0) })
        #expect(r.lines.contains { $0.hasPrefix("goal: ≥ 1,000 connections held open at once, pipelining 4 deep: 10, not met") })
        #expect(r.lines.contains { $0.hasPrefix("goal: ISO 8583 p50 one at a time ≤ 2x (TCP echo round trip + durable commit): ") && verdict($0) })
        #expect(r.lines.contains("goal of 100,000 authorisations: RSS within 5 MB (run with --count 100000)"))
        #expect(r.lines.contains { $0.hasPrefix("checked: 110 answers approved with the ARPC") })
    }

    @Test("bad options: one line naming the option, status 2", arguments: [
        (["iso8583", "--connections", "0"], "--connections"),
        (["iso8583", "--connections", "10", "--count", "5"], "--count"),
        (["iso8583", "--depth", "0"], "--depth"),
        (["iso8583", "--card", "/nonexistent.yaml", "--connections", "1", "--count", "1", "--latency-count", "10"], "--card"),
        (["worldline", "--connections", "0"], "--connections"),
        (["citcon", "--connections", "4", "--count", "2"], "--count"),
    ])
    func rejects(arguments: [String], option: String) throws {
        let r = try run(["bench"] + arguments)
        #expect(r.status != 0)
        #expect(r.stderr.contains(option), "\(r.stderr)")
    }

    @Test(.timeLimit(.minutes(3)), arguments: ["worldline", "citcon"])
    func platform(_ name: String) async throws {
        let r = try await onOwnThread { try run(["bench", name, "--connections", "4", "--count", "40", "--lifecycles", "8"]) }
        #expect(r.status == 0, "\(r.stderr)")
        let first = name == "worldline" ? "createPayment: 40 in " : "card charge: 40 in "
        #expect(r.lines.contains { $0.hasPrefix(first) && $0.contains("CPU per operation: daemon ") })
        // Eight lifecycles over four connections: 2 each, three operations each.
        #expect(r.lines.contains { $0.contains(", capture, refund: 24 in ") })
        let goal = name == "worldline" ? "goal: ≥ 3,000 Worldline payments/s, client signing included: " : "goal: ≥ 3,000 Citcon payments/s: "
        #expect(r.lines.contains { $0.hasPrefix(goal) && verdict($0) })
    }
}
