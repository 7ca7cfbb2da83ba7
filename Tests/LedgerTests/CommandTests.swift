import Foundation
import GRDB
import Terminal
import Testing
@testable import Ledger

/// Runs the built `cardbench` with `arguments` to completion.
func runCardbench(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = try cardbenchExecutable()
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

@Suite("synthetic history, bench ledger and ledger burst")
struct CommandTests {
    @Test func aSyntheticHistoryIsConsistent() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let history = Ledger.SyntheticHistory(rows: 3000, terminals: ["s1", "s2", "s3"], pans: [panA, panB], clientReferences: 1000,
                                              seed: 7, start: leapDay)
        try ledger.appendSyntheticHistory(history)
        #expect(try ledger.int("SELECT count(*) FROM txn") == 3000)
        #expect(try ledger.rows("SELECT 1 FROM txn GROUP BY terminal_id, stan HAVING count(*) > 1").isEmpty)
        for name in history.terminals {
            let terminal = try #require(try ledger.terminal(name: name))
            #expect(terminal.lastSTAN?.value == (try ledger.int("SELECT max(stan) FROM txn WHERE terminal_id = ?", [terminal.id])))
        }
        #expect(try ledger.int("SELECT count(*) FROM txn WHERE action = 'refund'") > 0)
        #expect(try ledger.rows("PRAGMA foreign_key_check").isEmpty)
        #expect(try ledger.int("SELECT count(DISTINCT uuid) FROM txn") == 3000)
        #expect(try ledger.lastTransactions(terminal: "s1", pan: panA).count == 3)
        let sample = try #require(try ledger.transaction(id: 1234))
        #expect(try ledger.transaction(uuid: sample.uuid) == sample)
        #expect(try ledger.transaction(terminal: sample.terminalName, stan: sample.stan) == sample)
        #expect(try ledger.transactions(provider: .viva, clientReference: sample.clientReference ?? "").contains(sample))
        // A later begin continues each terminal's counter.
        let next = try ledger.begin(sale("s2"))
        #expect(next.stan == (try ledger.terminal(name: "s2"))?.lastSTAN)
        #expect(ledgerError { try ledger.appendSyntheticHistory(.init(rows: 1, terminals: [], pans: [panA], clientReferences: 1, seed: 0, start: 0)) }?.field == "history")
    }

    @Test func benchLedgerReportsEveryLookup() throws {
        let r = try runCardbench(["bench", "ledger", "--rows", "3000", "--lookups", "200", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(report["rows"] as? Int == 3000)
        #expect(report["operation"] as? String == "ledger-lookups")
        let lookups = try #require(report["lookups"] as? [[String: Any]])
        #expect(lookups.compactMap { $0["lookup"] as? String }.count == 4)
        #expect(lookups.allSatisfy { ($0["medianMicroseconds"] as? Double ?? 0) > 0 && $0["withinGoal"] is Bool })
        #expect((report["floorMedianMicroseconds"] as? Double ?? 0) > 0)
    }

    @Test("bad options: one line naming the option, status 2", arguments: [
        (["bench", "ledger", "--rows", "0"], "--rows: must be 1–50000000, got 0"),
        (["bench", "ledger", "--lookups", "0"], "--lookups: must be 1–10000000, got 0"),
        (["ledger", "burst", "--db", "/tmp/x.sqlite", "--count", "0"], "--count: must be at least 1, got 0"),
    ])
    func badOptions(arguments: [String], message: String) throws {
        let r = try runCardbench(arguments)
        #expect(r.status == 2)
        #expect(r.stderr.contains(message), "\(r.stderr)")
    }

    @Test func benchLedgerRefusesAnExistingDatabase() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        #expect(FileManager.default.createFile(atPath: dir.database, contents: Data()))
        let r = try runCardbench(["bench", "ledger", "--rows", "10", "--db", dir.database])
        #expect(r.status == 2)
        #expect(r.stderr.contains("--db: \(dir.database) exists; bench ledger fills a new file"), "\(r.stderr)")
    }

    @Test func burstAnnouncesEachCommitAndAKeyOthersCanReadStopsIt() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let r = try runCardbench(["ledger", "burst", "--db", dir.database, "--count", "5", "--terminal", "b1"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").map(String.init) == (1...5).map { "committed \($0) \(STAN($0)!)" })
        let key = Ledger.defaultPANKeyPath(database: dir.database)
        #expect((try FileManager.default.attributesOfItem(atPath: key))[.posixPermissions] as? Int == 0o600)
        chmod(key, 0o644)
        let refused = try runCardbench(["ledger", "burst", "--db", dir.database, "--count", "1"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("panKey: \(key) has mode 644"), "\(refused.stderr)")
    }
}
