import Foundation
import GRDB
import GRDBSQLite
import Terminal
import Testing
@testable import Ledger

@Suite("STAN reservations and the one durable commit per sale")
struct STANReservationTests {
    func open(_ dir: TempDir) throws -> Ledger {
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        return ledger
    }

    func counters(_ ledger: Ledger) throws -> (last: Int, reserved: Int) {
        try ledger.pool.read { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT last_stan, stan_reserved FROM terminal WHERE name = 't1'"))
            return (row[0], row[1])
        }
    }


    @Test func theRingWrapsAt999999AndCountsZeroAsItsEnd() {
        #expect(STANRing.advance(0, by: 100) == 100)
        #expect(STANRing.advance(999_950, by: 100) == 51)
        #expect(STANRing.advance(999_899, by: 100) == 999_999)
        #expect(STANRing.ahead(of: 0, to: 100) == 100)
        #expect(STANRing.ahead(of: 999_950, to: 51) == 100)
        #expect(STANRing.ahead(of: 999_999, to: 0) == 0, "0 and 999999 are the same place")
        #expect(STANRing.ahead(of: 42, to: 42) == 0)
        #expect(STANRing.ahead(of: 500, to: 400) == 0, "a reservation behind the counter reserves nothing")
    }

    @Test func stansComeFromABlockReservedAheadAndTheBlockIsRenewedWhenUsedUp() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        #expect(try counters(ledger) == (0, 0))
        let first = try ledger.begin(sale())
        #expect(first.stan == STAN(1))
        #expect(try counters(ledger) == (1, Ledger.stanBlock))
        for _ in 2...Ledger.stanBlock { _ = try ledger.begin(sale()) }
        #expect(try counters(ledger) == (Ledger.stanBlock, Ledger.stanBlock))
        let next = try ledger.begin(sale())
        #expect(next.stan == STAN(Ledger.stanBlock + 1))
        #expect(try counters(ledger) == (Ledger.stanBlock + 1, 2 * Ledger.stanBlock))
    }

    @Test func theBlockWrapsPast999999() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        try ledger.setLastSTAN(terminal: "t1", 999_990)
        #expect(try ledger.begin(sale()).stan == STAN(999_991))
        #expect(try counters(ledger) == (999_991, 999_990 + Ledger.stanBlock - 999_999))
        for _ in 0..<8 { _ = try ledger.begin(sale()) }
        #expect(try ledger.begin(sale()).stan == STAN(1), "999999 wraps to 000001 inside the reservation")
    }

    @Test func beginDoesNotWaitForAnFsyncAndCompleteDoes() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        let before = ledger.group.syncs
        _ = try ledger.begin(sale()) // reserves the block (durably), then begins
        #expect(ledger.group.syncs == before + 1)
        let started = try ledger.begin(sale())
        #expect(ledger.group.syncs == before + 1, "the begin of a sale inside the reservation does not wait for an fsync")
        try ledger.complete(id: started.id, approved(), trace: sampleTrace, outbox: [callback()])
        #expect(ledger.group.syncs == before + 2, "the outcome is synced before complete returns")
    }

    @Test func reopeningInTheSameBootContinuesWithoutAGap() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        var ledger = try open(dir)
        _ = try ledger.begin(sale())
        _ = try ledger.begin(sale())
        try ledger.close() // no release: as if the process had died
        ledger = try open(dir)
        #expect(try ledger.begin(sale()).stan == STAN(3), "the page cache kept the begun rows; no STAN is skipped")
    }

    @Test func afterARebootTheRestOfTheReservationIsSkipped() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        var ledger = try open(dir)
        _ = try ledger.begin(sale())
        _ = try ledger.begin(sale())
        try ledger.pool.write { try $0.execute(sql: "UPDATE meta SET value = 'an-earlier-boot' WHERE key = 'stan_reservation_boot'") }
        try ledger.close()
        ledger = try open(dir)
        // Rows begun without an fsync may be gone after a machine crash, with STANs the host
        // saw: none of the block is handed out again.
        #expect(try counters(ledger) == (Ledger.stanBlock, Ledger.stanBlock))
        #expect(try ledger.begin(sale()).stan == STAN(Ledger.stanBlock + 1))
        try ledger.close()
        ledger = try open(dir)
        #expect(try ledger.begin(sale()).stan == STAN(Ledger.stanBlock + 2), "the skip happens once per reboot")
    }

    @Test func aReleasedReservationSkipsNothingAfterAReboot() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        var ledger = try open(dir)
        _ = try ledger.begin(sale())
        _ = try ledger.begin(sale())
        try ledger.releaseSTANReservations()
        #expect(try counters(ledger) == (2, 2))
        try ledger.pool.write { try $0.execute(sql: "UPDATE meta SET value = 'an-earlier-boot' WHERE key = 'stan_reservation_boot'") }
        try ledger.close()
        ledger = try open(dir)
        #expect(try ledger.begin(sale()).stan == STAN(3))
    }

    @Test func aReversalTakesItsSTANFromTheReservationOrExtendsItDurably() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        try ledger.setLastSTAN(terminal: "t1", 41)
        let started = try ledger.begin(sale())
        for _ in 0..<(Ledger.stanBlock - 1) { _ = try ledger.begin(sale()) }
        #expect(try counters(ledger) == (41 + Ledger.stanBlock, 41 + Ledger.stanBlock))
        let stored = try ledger.complete(id: started.id, approved(reversal: true))
        #expect(stored.status == .reversed)
        let reversal = try #require(try ledger.transactions(originalID: started.id).first)
        #expect(reversal.stan == STAN(42 + Ledger.stanBlock))
        #expect(try counters(ledger) == (42 + Ledger.stanBlock, 41 + 2 * Ledger.stanBlock))
    }

    @Test func aReservationThisProcessHasNotSeenSyncedIsSyncedBeforeABeginUsesIt() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let a = try open(dir)
        let b = try Ledger(path: dir.database, panKey: keyA) // another process on the same file
        _ = try a.begin(sale()) // a reserves 1…100 and syncs
        let before = b.group.syncs
        #expect(try b.begin(sale()).stan == STAN(2))
        #expect(b.group.syncs == before + 1, "b syncs the reservation it read (it might not be on disk yet) before using it")
        #expect(try counters(b) == (2, Ledger.stanBlock), "no new block: the reservation had room")
        #expect(try b.begin(sale()).stan == STAN(3))
        #expect(b.group.syncs == before + 1, "then it knows it is synced")
    }

    @Test func aBlockExtendedInsideCompleteIsSyncedBeforeABeginUsesIt() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        let sale1 = try ledger.begin(sale())
        for _ in 1..<Ledger.stanBlock { _ = try ledger.begin(sale()) }
        try ledger.complete(id: sale1.id, approved(reversal: true)) // the reversal's STAN extends the block
        #expect(try counters(ledger) == (Ledger.stanBlock + 1, 2 * Ledger.stanBlock + 1 - 1))
        let before = ledger.group.syncs
        #expect(try ledger.begin(sale()).stan == STAN(Ledger.stanBlock + 2))
        #expect(ledger.group.syncs == before + 1)
    }

    @Test func afterASyncFailsNoWriteIsAccepted() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let pool = try DatabasePool(path: dir.database)
        defer { try? pool.close() }
        try pool.write { try $0.execute(sql: "CREATE TABLE t (x INTEGER)") }
        struct DiskError: Error {}
        let group = GroupCommit(syncWAL: { throw DiskError() })
        try group.write(pool, durable: false) { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
        for durable in [true, false, true] {
            do {
                try group.write(pool, durable: durable) { try $0.execute(sql: "INSERT INTO t VALUES (2)") }
                Issue.record("a write was accepted after the sync failed")
            } catch let error as LedgerError {
                #expect(error.description.contains("sync the ledger's WAL") && error.description.contains("no further writes"), "\(error)")
            }
        }
        #expect(try pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t WHERE x = 2") } == 1,
                "only the write whose sync failed was committed (and was not told it was durable)")
    }

    @Test func syncsRunOneAtATimeWhileTheNextBatchCommits() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let pool = try DatabasePool(path: dir.database)
        defer { try? pool.close() }
        try pool.write { try $0.execute(sql: "CREATE TABLE t (x INTEGER)") }
        final class Probe: @unchecked Sendable {
            let lock = NSLock()
            var inFlight = 0, most = 0, calls = 0
        }
        let probe = Probe()
        let group = GroupCommit(syncWAL: {
            probe.lock.withLock { probe.inFlight += 1; probe.most = max(probe.most, probe.inFlight); probe.calls += 1 }
            usleep(300) // long enough for the next batch to commit and reach its sync
            probe.lock.withLock { probe.inFlight -= 1 }
        })
        DispatchQueue.concurrentPerform(iterations: 8) { n in
            for i in 0..<25 {
                try? group.write(pool) { try $0.execute(sql: "INSERT INTO t VALUES (?)", arguments: [n * 100 + i]) }
            }
        }
        #expect(try pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } == 200)
        #expect(probe.calls >= 2 && probe.calls <= 200)
        #expect(probe.most == 1, "a sync may only start once the one before it has finished")
    }

    @Test func theWALFileRefusesToSyncOnceClosed() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        _ = try ledger.begin(sale())
        try ledger.walFile.sync()
        try ledger.close()
        #expect(throws: LedgerError.self) { try ledger.walFile.sync() }
    }

    @Test func theClientReferenceLookupIsNotPreparedAgainAtEachCall() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try open(dir)
        _ = try ledger.transactions(provider: .viva, clientReference: "order-1") // creates the Billpocket index's table state
        let (ours, bound) = try ledger.pool.read { db in
            func reprepares(_ sql: String, _ arguments: StatementArguments) throws -> Int32 {
                for _ in 0..<3 { _ = try Ledger.fetch(db, sql, arguments) }
                return sqlite3_stmt_status(try db.cachedStatement(sql: sql).sqliteStatement, SQLITE_STMTSTATUS_REPREPARE, 0)
            }
            let ours = try reprepares(Ledger.Lookup.clientReferenceSQL(.viva), ["order-1", 10])
            // The same lookup with the provider bound: SQLite prepares it again at every call,
            // because the Billpocket index is partial on provider.
            let bound = try reprepares(Ledger.Lookup.clientReferenceSQL(.viva).replacingOccurrences(of: "'viva'", with: "?"),
                                       ["viva", "order-1", 10])
            return (ours, bound)
        }
        #expect(ours == 0)
        #expect(bound > 0, "the reason the provider is not bound")
    }
}
