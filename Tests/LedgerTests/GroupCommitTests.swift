import Foundation
import Terminal
import Testing
@testable import Ledger

@Suite("group commit")
struct GroupCommitTests {
    @Test("16 threads writing at once: every begin and complete commits, STANs stay unique and consecutive per terminal, batches form")
    func concurrentWriters() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        for t in ["t1", "t2", "t3", "t4"] { _ = try ledger.ensureTerminal(name: t, tid: "1000000\(t.last!)") }
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 16) { worker in
            let terminal = "t\(worker % 4 + 1)"
            for n in 0..<40 {
                do {
                    let started = try ledger.begin(sale(terminal, reference: "w\(worker)-\(n)"))
                    try ledger.complete(id: started.id, approved(), trace: sampleTrace, outbox: [callback()])
                } catch {
                    failures.add("\(error)")
                }
            }
        }
        #expect(failures.all.isEmpty, "\(failures.all.prefix(3))")
        for t in ["t1", "t2", "t3", "t4"] {
            let stans = try ledger.rows("SELECT stan FROM txn JOIN terminal ON terminal.id = txn.terminal_id WHERE terminal.name = ? ORDER BY stan", [t])
                .map { $0["stan"] as Int }
            #expect(stans == Array(1...160), "terminal \(t)")
        }
        #expect(try ledger.int("SELECT count(*) FROM txn WHERE status = 'approved'") == 640)
        #expect(try ledger.int("SELECT count(*) FROM outbox") == 640)
        #expect(try ledger.int("SELECT count(*) FROM trace") == 640 * sampleTrace.count)
    }

    @Test("a failing write in a shared batch fails alone; the others in the batch commit")
    func failureStaysWithItsWriter() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "10000001")
        let failures = Failures()
        let successes = Failures()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for n in 0..<30 {
                do {
                    let started = try ledger.begin(sale("t1", reference: "x\(worker)-\(n)"))
                    // Every third writer completes a row that does not exist: an error of its own.
                    let id = n % 3 == 0 ? started.id + 1_000_000 : started.id
                    try ledger.complete(id: id, approved(), outbox: [callback()])
                    successes.add("\(started.id)")
                } catch {
                    failures.add("\(error)")
                }
            }
        }
        #expect(failures.all.count == 8 * 10)
        #expect(failures.all.allSatisfy { $0.contains("1000") }, "\(failures.all.prefix(2))")
        #expect(successes.all.count == 8 * 20)
        #expect(try ledger.int("SELECT count(*) FROM txn WHERE status = 'approved'") == 160)
        #expect(try ledger.int("SELECT count(*) FROM txn WHERE status = 'in_progress'") == 80, "the failed completes left their rows begun")
        #expect(try ledger.int("SELECT count(*) FROM outbox") == 160)
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ v: String) { lock.withLock { values.append(v) } }
    var all: [String] { lock.withLock { values } }
}
