import Foundation
import GRDB
import Terminal
import Testing
@testable import Ledger

/// The built `cardbench` executable, beside the test bundle.
func cardbenchExecutable() throws -> URL {
    let url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("cardbench")
    guard FileManager.default.isExecutableFile(atPath: url.path) else {
        throw TestFailure("no cardbench executable at \(url.path); build with --build-tests so the product is built too")
    }
    return url
}

@Suite("SIGKILL in the middle of a burst")
struct CrashTests {
    /// What one killed `cardbench ledger burst` announced before it died.
    struct Round {
        var committed: [(id: Int64, stan: Int)] = []
        var stderr = ""
    }

    /// Starts a burst, reads its announcements until at least `lines`, waits `extraMicros` more
    /// so the kill lands at a different point of begin/complete each round, then SIGKILLs it
    /// and reads whatever it had already written.
    func killedBurst(db: String, key: String, lines: Int, extraMicros: UInt32) throws -> Round {
        let process = Process()
        process.executableURL = try cardbenchExecutable()
        process.arguments = ["ledger", "burst", "--db", db, "--key", key, "--terminal", "burst", "--count", "10000000"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()

        var buffer = Data()
        var newlines = 0
        let reader = out.fileHandleForReading
        while newlines < lines {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            buffer += chunk
            newlines += chunk.filter { $0 == UInt8(ascii: "\n") }.count
        }
        usleep(extraMicros)
        let killed = kill(process.processIdentifier, SIGKILL)
        buffer += reader.readDataToEndOfFile()
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(killed == 0)
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL,
                "the burst ended on its own (status \(process.terminationStatus)): \(errors)")

        var round = Round(stderr: errors)
        // Only whole lines are announcements (a short write to a pipe is atomic, so the kill
        // should never split one).
        var output = String(decoding: buffer, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        output.removeLast()
        for line in output {
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[0] == "committed", let id = Int64(parts[1]), let stan = Int(parts[2]) else {
                Issue.record("unexpected burst output: \(line)")
                continue
            }
            round.committed.append((id, stan))
        }
        return round
    }

    @Test(.timeLimit(.minutes(5)))
    func noCommittedTransactionIsLostAndNoSTANIsReused() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let key = dir.path + "/pan.key"
        var announced: [(id: Int64, stan: Int)] = []
        for (n, extra) in [UInt32(0), 1_700, 3_100].enumerated() {
            let round = try killedBurst(db: dir.database, key: key, lines: 300, extraMicros: extra)
            #expect(round.committed.count >= 300, "round \(n): \(round.committed.count) lines; stderr: \(round.stderr)")
            announced += round.committed

            let ledger = try Ledger(path: dir.database, panKey: try Ledger.loadOrCreatePANKey(at: key))
            let recovered = try ledger.recoverInterrupted(now: Int64(Date().timeIntervalSince1970 * 1_000_000))
            #expect(recovered.count <= 1, "one writer has at most one transaction begun and not completed")
            #expect(recovered.allSatisfy { $0.status == .failed && $0.message == Ledger.interruptedMessage })

            // Every announced commit is there, whole: status, STAN, trace and outbox.
            for (id, stan) in announced {
                let t = try #require(try ledger.transaction(id: id), "announced transaction \(id) is missing")
                #expect(t.status == .approved && t.stan.value == stan && t.terminalName == "burst")
                #expect(t.panHash != nil && t.maskedPAN == "476173******0010")
                #expect(try ledger.trace(transactionID: id).count == 3)
                #expect(try ledger.outbox(transactionID: id).count == 1)
            }
            // No STAN twice, and the counter is at the highest STAN ever stored (including the
            // interrupted row, whose STAN the host may have seen).
            let duplicates = try ledger.rows("SELECT stan FROM txn GROUP BY terminal_id, stan HAVING count(*) > 1")
            #expect(duplicates.isEmpty, "reused STANs: \(duplicates)")
            let rows = try ledger.int("SELECT count(*) FROM txn")
            let maxSTAN = try ledger.int("SELECT max(stan) FROM txn")
            #expect(maxSTAN == rows, "STANs 1…n with no gap or reuse")
            #expect(try ledger.terminal(name: "burst")?.lastSTAN?.value == maxSTAN)
            #expect(try ledger.int("SELECT count(*) FROM txn WHERE status NOT IN ('approved', 'failed')") == 0)

            let next = try ledger.begin(NewTransaction(terminal: "burst", provider: .cli, action: .sale, amount: 1, currency: 978,
                                                       createdAt: leapDay))
            #expect(next.stan.value > maxSTAN)
            try ledger.complete(id: next.id, Completion(status: .failed, message: "test probe", completedAt: leapDay))
            #expect(try ledger.pool.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") } == ["ok"])
            #expect(try ledger.rows("PRAGMA foreign_key_check").isEmpty)
            try ledger.close()
        }
        #expect(Set(announced.map(\.id)).count == announced.count)
        #expect(announced.count >= 900)
    }
}
