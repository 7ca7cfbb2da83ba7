import Foundation
import Testing
import EMV
import Yams
@testable import Scenario

/// docs/scenarios.md's CI examples are YAML their CI servers read: they are parsed here, and each
/// must run every shard of one count, with the options `cardbench scenario run` has.
@Suite("the CI snippets in docs/scenarios.md")
struct CISnippetTests {
    static func snippets() throws -> [String] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/scenarios.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Shards").dropFirst().first)
        return section.components(separatedBy: "```yaml\n").dropFirst().compactMap { $0.components(separatedBy: "```").first }
    }

    @Test("GitHub Actions: a matrix of shards 1…N, each running --shard k/N with a JUnit report")
    func ciSnippets() throws {
        let yaml = try Self.snippets()
        #expect(yaml.count == 2)
        let github = try #require(try Yams.load(yaml: yaml[0]) as? [String: Any])
        let job = try #require((github["jobs"] as? [String: Any])?["scenarios"] as? [String: Any])
        let shards = try #require(((job["strategy"] as? [String: Any])?["matrix"] as? [String: Any])?["shard"] as? [Int])
        let run = try #require((job["steps"] as? [[String: Any]])?.compactMap { $0["run"] as? String }.first)
        #expect(shards == Array(1...shards.count) && run.contains("--shard ${{ matrix.shard }}/\(shards.count)"), "\(shards) \(run)")
        #expect(run.hasPrefix("cardbench scenario run ") && run.contains("--junit "))

        let gitlab = try #require(try Yams.load(yaml: yaml[1]) as? [String: Any])
        let scenarios = try #require(gitlab["scenarios"] as? [String: Any])
        #expect((scenarios["parallel"] as? Int ?? 0) > 1)
        let script = try #require((scenarios["script"] as? [String])?.first)
        #expect(script.contains("--shard $CI_NODE_INDEX/$CI_NODE_TOTAL") && script.contains("--junit shard.xml"), "\(script)")
        let junit = (((scenarios["artifacts"] as? [String: Any])?["reports"] as? [String: Any])?["junit"] as? String)
        #expect(junit == "shard.xml")
        // The shard the servers name (1-based) is one ScenarioShard takes.
        #expect(ScenarioShard("\(shards.count)/\(shards.count)") != nil && ScenarioShard("0/\(shards.count)") == nil)
    }
}

@Suite("shards of a library")
struct ShardTests {
    @Test("for any library and count, with or without timings, the shards are disjoint and cover it, each in library order", arguments: 0..<20)
    func cover(seed: UInt64) {
        var random = SplitMix64(state: seed)
        let files = (0..<Int(random.next() % 40)).map { "Scenarios/f\($0 % 3)/s\($0).yaml" }
        let count = Int(random.next() % 6) + 1
        let timings: [String: Double]? = seed % 2 == 0 ? nil
            : Dictionary(files.filter { _ in random.next() % 4 != 0 }.map { ($0, Double(random.next() % 1000) / 100) }, uniquingKeysWith: { $1 })
        let parts = (1...count).map { ScenarioShard("\($0)/\(count)")!.select(files, timings: timings) }
        #expect(parts.flatMap { $0 }.sorted() == files.sorted(), "seed \(seed)")
        #expect(Set(parts.flatMap { $0 }).count == files.count)
        for part in parts { #expect(part == files.filter { part.contains($0) }, "library order") }
        if timings == nil { #expect(parts.map(\.count).max()! - parts.map(\.count).min()! <= 1, "by count, balanced") }
    }

    @Test("K/N is read strictly")
    func parsing() {
        #expect(ScenarioShard("2/4") == ScenarioShard("2/4") && ScenarioShard("2/4")?.index == 2 && ScenarioShard("2/4")?.count == 4)
        for bad in ["", "1", "0/3", "4/3", "1/0", "a/b", "1/2/3", " 1/2", "1/1001"] { #expect(ScenarioShard(bad) == nil, "\(bad)") }
    }
}
