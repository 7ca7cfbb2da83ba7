import Crypto
import EMV
import Foundation
import GRDB
import Terminal
import Testing
@testable import Ledger

@Suite("opening: migrations, WAL, terminals")
struct OpeningTests {
    @Test func freshFileGetsTheSchemaInWALWithFullSync() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let tables = try ledger.rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").map { $0["name"] as String }
        #expect(tables.contains("terminal") && tables.contains("txn") && tables.contains("trace") && tables.contains("outbox"))
        let migrations = try ledger.rows("SELECT identifier FROM grdb_migrations").map { $0["identifier"] as String }
        #expect(migrations == ["v1-terminals-transactions-traces-outbox", "v2-billpocket-users-tokens-devices", "v3-stan-reservations", "v4-platform-providers-worldline", "v5-citcon",
                               "v6-offline-data-authentication", "v7-card-entry", "v8-iso8583", "v9-platform-operations", "v10-worldline-tokens",
                               "v11-outbox-attempts", "v12-worldline-hosted-checkouts", "v13-worldline-hosted-tokenizations", "v14-citcon-vault"])
        #expect(try ledger.pool.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") } == "wal")
        let synchronous = try ledger.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        #expect(synchronous == 1, "NORMAL: the group commit syncs the WAL itself before a durable write returns")
        #expect(FileManager.default.fileExists(atPath: dir.database + "-wal"))
        let mode = try FileManager.default.attributesOfItem(atPath: dir.database)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func reopeningKeepsDataAndDoesNotMigrateAgain() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        do {
            let ledger = try Ledger(path: dir.database, panKey: keyA)
            _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
            let s = try ledger.begin(sale())
            try ledger.complete(id: s.id, approved())
            try ledger.close()
        }
        let again = try Ledger(path: dir.database, panKey: keyA)
        #expect(try again.int("SELECT count(*) FROM grdb_migrations") == 14)
        #expect(try again.terminal(name: "t1")?.lastSTAN == STAN(1))
        #expect(try again.transaction(id: 1)?.status == .approved)
        #expect(try again.begin(sale()).stan == STAN(2))
    }

    /// v9 on a ledger made by an earlier build: a Worldline payment a capture or cancel closed
    /// stays closed (the rest was released at the issuer); a Citcon charge whose operations used
    /// a reference twice (allowed then) can still be written; its references are taken.
    @Test func v9ClosesEarlierPaymentsAndKeepsEarlierReferences() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        func worldline(_ id: String, status: String, captured: Int64, transaction: Int64?) -> String {
            """
            {"amount":1000,"authorizationMode":"PRE_AUTHORIZATION","capturedAmount":\(captured),"createdAt":1,"currency":"EUR","id":"\(id)",\
            "merchantID":"m1","operations":[],"paymentProductID":1,"refundedAmount":0,"status":"\(status)",\
            \(transaction.map { "\"transactionID\":\($0)," } ?? "")"updatedAt":1}
            """
        }
        do {
            let queue = try DatabaseQueue(path: dir.database)
            try Schema.migrator.migrate(queue, upTo: "v8-iso8583")
            try queue.write { db in
                try db.execute(sql: "INSERT INTO terminal (name, tid, last_stan, created_at) VALUES ('worldline.m1', '90000001', 1, 1)")
                try db.execute(sql: """
                    INSERT INTO txn (uuid, terminal_id, provider, action, status, amount, currency, stan, rrn, created_at, completed_at)
                    VALUES ('u-1', 1, 'worldline', 'pre_auth', 'approved', 1000, 978, 1, '632900000001', 1, 2)
                    """)
                try db.execute(sql: "INSERT INTO worldline_merchant (merchant_id, terminal_name, created_at) VALUES ('m1', 'worldline.m1', 1)")
                for (seq, id, state) in [(1, "3000000001_0", worldline("3000000001_0", status: "CAPTURED", captured: 600, transaction: 1)),
                                         (2, "3000000002_0", worldline("3000000002_0", status: "CANCELLED", captured: 0, transaction: 1)),
                                         (3, "3000000003_0", worldline("3000000003_0", status: "PENDING_CAPTURE", captured: 0, transaction: 1))] {
                    try db.execute(sql: "INSERT INTO worldline_payment (seq, id, merchant_id, transaction_id, state, updated_at) VALUES (?, ?, 'm1', 1, ?, 1)",
                                   arguments: [seq, id, state])
                }
                try db.execute(sql: "INSERT INTO citcon_merchant (merchant_id, terminal_name, key_hash, key_sealed, created_at) VALUES ('c1', 'citcon.c1', 'h', 's', 1)")
                let ops = #"[{"object":"refund","id":"o1","reference":"r1","amount":100,"status":"succeeded","timeCreated":1},"#
                    + #"{"object":"refund","id":"o2","reference":"r1","amount":100,"status":"succeeded","timeCreated":2}]"#
                let charge = #"{"id":"ch1","chargeToken":"t1","merchantID":"c1","reference":"c-ref","amount":1000,"currency":"USD","country":"US","#
                    + #""autoCapture":true,"method":"card","status":"succeeded","timeCreated":1,"urls":{},"challengePending":false,"operations":"# + ops + "}"
                try db.execute(sql: "INSERT INTO citcon_charge (id, charge_token, merchant_id, reference, state, updated_at) VALUES ('ch1', 't1', 'c1', 'c-ref', ?, 1)",
                               arguments: [charge])
            }
            try queue.close()
        }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let captured = try #require(try ledger.worldlinePayment(id: "3000000001_0"))
        #expect(captured.captureClosed == true && captured.capturable == 0)
        let cancelled = try #require(try ledger.worldlinePayment(id: "3000000002_0"))
        #expect(cancelled.captureClosed == true && cancelled.cancelledAmount == 1000 && cancelled.capturable == 0)
        let open = try #require(try ledger.worldlinePayment(id: "3000000003_0"))
        #expect(open.captureClosed == nil && open.capturable == 1000)
        // The charge with r1 twice is written again as it is, and r1 is taken for what comes next.
        var charge = try #require(try ledger.citconCharge(id: "ch1"))
        #expect(charge.operations.count == 2)
        charge.note = "touched"
        try ledger.completeCitconCharge(transactionID: nil, nil, charge: charge, outbox: [])
        #expect(try ledger.citconOperationReferenceUsed(merchantID: "c1", reference: "r1"))
    }

    /// v8 rebuilds the transactions table to let provider `iso8583` in: a ledger made by an earlier
    /// build keeps its rows, its other columns, its indexes and the rows that refer to them.
    @Test func v8KeepsAnEarlierLedgersTransactions() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let indexesBefore: [String]
        do {
            let queue = try DatabaseQueue(path: dir.database)
            try Schema.migrator.migrate(queue, upTo: "v7-card-entry")
            try queue.write { db in
                try db.execute(sql: "INSERT INTO terminal (name, tid, last_stan, created_at) VALUES ('t1', '16016684', 1, 1)")
                try db.execute(sql: """
                    INSERT INTO txn (uuid, terminal_id, provider, action, status, amount, currency, stan, rrn, created_at, completed_at,
                                     card_entry, oda)
                    VALUES ('u-1', 1, 'viva', 'sale', 'approved', 1000, 978, 1, '632900000001', 1, 2, '{"interface":"contact"}', '{"method":"dda"}')
                    """)
                try db.execute(sql: "INSERT INTO trace (transaction_id, seq, command, response) VALUES (1, 1, '00A4', '9000')")
            }
            indexesBefore = try queue.read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'txn' ORDER BY name") }
            try queue.close()
        }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let t = try #require(try ledger.transaction(id: 1))
        #expect(t.uuid == "u-1" && t.status == .approved && t.amount == 1000 && t.cardEntry == #"{"interface":"contact"}"# && t.oda == #"{"method":"dda"}"#)
        #expect(try ledger.trace(transactionID: 1) == [TraceEntry(command: "00A4", response: "9000")])
        let indexesAfter = try ledger.rows("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'txn' ORDER BY name").map { $0["name"] as String }
        #expect(indexesAfter == indexesBefore && indexesAfter.count >= 8)
        #expect(try ledger.int("PRAGMA foreign_key_check") == 0)
        // The new provider is accepted, with its host messages.
        _ = try ledger.ensureTerminal(name: "iso8583.host", tid: "80000000")
        let s = try ledger.begin(NewTransaction(terminal: "iso8583.host", provider: .iso8583, action: .sale, amount: 500, currency: 978, createdAt: 3))
        var done = Completion(status: .declined, responseCode: "51", completedAt: 4)
        done.hostMessages = [HostMessageEntry(direction: .incoming, mti: "0200", fields: #"[{"field":4,"name":"Amount","value":"000000000500"}]"#)]
        try ledger.complete(id: s.id, done)
        #expect(try ledger.hostMessages(transactionID: s.id) == done.hostMessages)
        #expect(try ledger.transaction(id: s.id)?.provider == .iso8583)
    }

    @Test func hostMessagesAreChecked() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        let pan = panA
        for (entry, field) in [(HostMessageEntry(direction: .outgoing, mti: "02x0", fields: "[]"), "hostMessages[0].mti"),
                               (HostMessageEntry(direction: .outgoing, mti: "0200", fields: "{}"), "hostMessages[0].fields"),
                               (HostMessageEntry(direction: .outgoing, mti: "0200", fields: #"[{"value":"\#(pan)"}]"#), "hostMessages[0].fields")] {
            let s = try ledger.begin(sale())
            var done = approved()
            done.hostMessages = [entry]
            #expect {
                try ledger.complete(id: s.id, done)
            } throws: { error in
                guard case LedgerError.invalid(let f, _) = error else { return false }
                return f == field
            }
        }
        // The JSON the row keeps is checked in the write (SQLite's reader): a refusal leaves the
        // row in progress, with nothing of the completion written.
        var cases: [(Completion, String)] = []
        var broken = approved()
        broken.hostMessages = [HostMessageEntry(direction: .outgoing, mti: "0200", fields: "[]"),
                               HostMessageEntry(direction: .incoming, mti: "0210", fields: "[{\"field\":39,")]
        cases.append((broken, "hostMessages[1].fields"))
        var oda = approved()
        oda.oda = "[]"
        cases.append((oda, "oda"))
        var entry = approved()
        entry.cardEntry = "not json"
        cases.append((entry, "cardEntry"))
        for (done, field) in cases {
            let s = try ledger.begin(sale())
            #expect {
                try ledger.complete(id: s.id, done)
            } throws: { error in
                guard case LedgerError.invalid(let f, let rule) = error else { return false }
                return f == field && rule.hasPrefix("must be a JSON ")
            }
            #expect(try ledger.transaction(id: s.id)?.status == .inProgress)
            #expect(try ledger.hostMessages(transactionID: s.id).isEmpty)
        }
    }

    @Test func openingWithAnotherKeyIsRefused() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try Ledger(path: dir.database, panKey: keyA).close()
        let error = ledgerError { _ = try Ledger(path: dir.database, panKey: keyB) }
        #expect(error?.field == "panKey")
        #expect(error?.description.contains("not the key this ledger was created with") == true)
        #expect(ledgerError { _ = try Ledger(path: dir.database, panKey: [1, 2, 3]) }?.description == "panKey: must be 32 bytes, got 3")
    }

    @Test func anUnopenablePathIsADatabaseErrorNamingTheOperation() throws {
        let error = ledgerError { _ = try Ledger(path: "/nonexistent-dir/x/ledger.sqlite", panKey: keyA) }
        #expect(error?.field == "database")
        #expect(error?.description.hasPrefix("database: open /nonexistent-dir/x/ledger.sqlite failed:") == true)
    }

    @Test func ensureTerminalCreatesOnceAndValidates() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let t = try ledger.ensureTerminal(name: "t1", tid: "16016684", createdAt: 42)
        #expect(t.name == "t1" && t.tid == "16016684" && t.lastSTAN == nil && t.batchNumber == 1 && t.batchOpen && t.createdAt == 42)
        #expect(try ledger.ensureTerminal(name: "t1", tid: "16016684") == t)
        #expect(ledgerError { _ = try ledger.ensureTerminal(name: "t2", tid: "1601668") }?.description == "tid: must be 8 digits, got \"1601668\"")
        #expect(ledgerError { _ = try ledger.ensureTerminal(name: "t2", tid: "1601668x") }?.field == "tid")
        let changed = ledgerError { _ = try ledger.ensureTerminal(name: "t1", tid: "99999999") }
        #expect(changed?.field == "tid")
        #expect(changed?.description.contains("has tid 16016684") == true)
        #expect(ledgerError { _ = try ledger.ensureTerminal(name: "", tid: "16016684") }?.field == "name")
        #expect(ledgerError { _ = try ledger.ensureTerminal(name: "a b", tid: "16016684") }?.field == "name")
        #expect(try ledger.terminal(name: "nope") == nil)
        #expect(ledgerError { _ = try ledger.begin(sale("nope")) } == .unknownTerminal(name: "nope"))
    }
}

@Suite("STAN and RRN")
struct STANTests {
    @Test func stansCountFromOneAndTheRRNCarriesDateHourAndSTAN() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        _ = try ledger.ensureTerminal(name: "t2", tid: "16016685")
        let a = try ledger.begin(sale())
        let b = try ledger.begin(sale())
        let other = try ledger.begin(sale("t2"))
        #expect(a.stan.description == "000001" && b.stan.description == "000002")
        #expect(other.stan == STAN(1), "each terminal has its own counter")
        // 2024-02-29 13:45 UTC: year digit 4, day 060, hour 13.
        #expect(a.rrn == "406013000001")
        #expect(b.rrn == "406013000002")
        #expect(a.rrn.count == 12 && a.rrn.allSatisfy(\.isNumber))
        #expect(a.uuid.count == 36 && a.uuid == a.uuid.lowercased() && a.uuid != b.uuid)
        let stored = try #require(try ledger.transaction(id: a.id))
        #expect(stored.status == .inProgress && stored.stan == a.stan && stored.rrn == a.rrn && stored.completedAt == nil)
        #expect(try ledger.terminal(name: "t1")?.lastSTAN == STAN(2))
    }

    @Test func stanWrapsFrom999999To000001AndNeverUses000000() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        let early = try ledger.begin(sale(reference: "early"))
        #expect(early.stan == STAN(1))
        try ledger.setLastSTAN(terminal: "t1", 999_998)
        let last = try ledger.begin(sale())
        let wrapped = try ledger.begin(sale(reference: "late"))
        let after = try ledger.begin(sale())
        #expect(last.stan.description == "999999")
        #expect(wrapped.stan.description == "000001")
        #expect(after.stan == STAN(2))
        #expect(try ledger.int("SELECT count(*) FROM txn WHERE stan = 0") == 0)
        // Two rows now hold STAN 000001: the lookup means the recent one.
        #expect(try ledger.transaction(terminal: "t1", stan: STAN(1)!)?.id == wrapped.id)
        #expect(try ledger.transaction(terminal: "t1", stan: STAN(1)!)?.clientReference == "late")
        #expect(try ledger.transaction(terminal: "t1", stan: STAN(3)!) == nil)
    }

    @Test func twoLedgersOnOneFileNeverShareASTAN() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let first = try Ledger(path: dir.database, panKey: keyA)
        let second = try Ledger(path: dir.database, panKey: keyA)
        _ = try first.ensureTerminal(name: "t1", tid: "16016684")
        let stans = try await withThrowingTaskGroup(of: [Int].self) { group in
            for ledger in [first, second] {
                group.addTask {
                    try (0..<40).map { _ in try ledger.begin(sale()).stan.value }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(stans.count == 80)
        #expect(Set(stans) == Set(1...80))
    }
}

@Suite("complete")
struct CompleteTests {
    func ledgerWithTerminal(_ dir: TempDir) throws -> Ledger {
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        return ledger
    }

    @Test func anApprovedSaleStoresItsFieldsTraceOutboxAndBatch() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(NewTransaction(terminal: "t1", provider: .viva, action: .sale, amount: 1200, tipAmount: 200,
                                                currency: 978, clientReference: "order-1", installments: 3,
                                                extra: #"{"orderCode":"9256110059000200"}"#, createdAt: leapDay))
        let stored = try ledger.complete(id: s.id, approved(), trace: sampleTrace, outbox: [callback(), callback("second")])
        #expect(stored.status == .approved && stored.responseCode == "00" && stored.authorisationCode == "690882")
        #expect(stored.maskedPAN == maskedA && stored.brand == "VISA" && stored.aid == "A0000000031010")
        #expect(stored.applicationLabel == "VISA CREDIT" && stored.cardholderName == "TEST/CARD" && stored.arqc == "29CCA15AE665FA2E")
        #expect(stored.atc == "001C" && stored.tvr == "0000008000" && stored.cvm == "PIN" && stored.entryMode == "chip")
        #expect(stored.amount == 1200 && stored.tipAmount == 200 && stored.currency == 978 && stored.installments == 3)
        #expect(stored.clientReference == "order-1" && stored.extra == #"{"orderCode":"9256110059000200"}"#)
        #expect(stored.terminalName == "t1" && stored.tid == "16016684" && stored.provider == .viva && stored.action == .sale)
        #expect(stored.createdAt == leapDay && stored.completedAt == leapDay + 5_000_000)
        #expect(stored.panHash == (try ledger.panHash(panA)))
        #expect(try ledger.trace(transactionID: s.id) == sampleTrace)
        let outbox = try ledger.outbox(transactionID: s.id)
        #expect(outbox.map(\.payload) == ["cb://result?status=success", "second"])
        #expect(outbox.allSatisfy { $0.status == .pending && $0.attempts == 0 && $0.nextAttemptAt == leapDay + 5_000_000 })
        let terminal = try #require(try ledger.terminal(name: "t1"))
        #expect(terminal.batchCount == 1 && terminal.batchAmount == 1200)
        #expect(try ledger.transaction(uuid: s.uuid) == stored)
    }

    @Test func completingTwiceIsAnErrorNamingTheIdAndStatus() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(sale())
        try ledger.complete(id: s.id, declined())
        let error = ledgerError { try ledger.complete(id: s.id, approved()) }
        #expect(error == .notInProgress(id: s.id, status: .declined))
        #expect(error?.description == "status: transaction \(s.id) is declined; only an in_progress transaction can be completed")
        #expect(ledgerError { try ledger.complete(id: 999, approved()) }?.description == "id: no transaction with id 999")
        #expect(try ledger.terminal(name: "t1")?.batchCount == 0, "a decline does not count")
    }

    /// A database failure in the middle of complete(): a trigger aborts the second outbox insert,
    /// after the status update, the trace, the batch counters and the original's status were
    /// written in the same transaction. None of it may remain.
    @Test func aFailureInsideCompleteRollsEverythingBack() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(sale())
        try ledger.complete(id: s.id, approved())
        let cancel = try ledger.begin(undo(.cancel, of: s.id))
        try ledger.pool.write { db in
            try db.execute(sql: """
                CREATE TRIGGER engineered_failure BEFORE INSERT ON outbox WHEN NEW.target = 'boom'
                BEGIN SELECT RAISE(ABORT, 'engineered failure'); END
                """)
        }
        let before = try #require(try ledger.terminal(name: "t1"))
        // Approved: the original's status and the batch change before the outbox insert fails.
        // Reversed: a reversal row and its STAN are written before it fails.
        for completion in [approved(), approved(reversal: true)] {
            let error = ledgerError {
                try ledger.complete(id: cancel.id, completion, trace: sampleTrace,
                                    outbox: [callback(), OutboxMessage(kind: .webhook, target: "boom", payload: "x")])
            }
            #expect(error?.field == "database")
            #expect(error?.description.contains("complete transaction \(cancel.id) failed") == true)
            #expect(error?.description.contains("engineered failure") == true)
            #expect(try ledger.transaction(id: cancel.id)?.status == .inProgress)
            #expect(try ledger.transaction(id: cancel.id)?.completedAt == nil)
            #expect(try ledger.transaction(id: s.id)?.status == .approved)
            #expect(try ledger.trace(transactionID: cancel.id).isEmpty)
            #expect(try ledger.outbox(transactionID: cancel.id).isEmpty)
            #expect(try ledger.terminal(name: "t1") == before, "neither the batch nor the STAN counter moved")
            #expect(try ledger.transactions(originalID: cancel.id).isEmpty, "no reversal row")
        }

        // The same completion without the failing message goes through whole.
        try ledger.complete(id: cancel.id, approved(), trace: sampleTrace, outbox: [callback()])
        #expect(try ledger.transaction(id: s.id)?.status == .cancelled)
        #expect(try ledger.trace(transactionID: cancel.id).count == 2)
    }

    @Test func cancelAndRefundMarkTheOriginalAndTheBatch() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let a = try ledger.begin(sale(amount: 1000))
        try ledger.complete(id: a.id, approved())
        let b = try ledger.begin(sale(amount: 700))
        try ledger.complete(id: b.id, approved())
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 1700)

        let cancel = try ledger.begin(undo(.cancel, of: a.id, amount: 1000))
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 1700, "only an approved cancel counts")
        try ledger.complete(id: cancel.id, approved())
        #expect(try ledger.transaction(id: a.id)?.status == .cancelled)
        // A partial refund leaves the sale approved, with what is left refundable; the refund
        // that completes the amount marks it refunded.
        let refund = try ledger.begin(undo(.refund, of: b.id, amount: 500))
        try ledger.complete(id: refund.id, approved())
        #expect(try ledger.transaction(id: b.id)?.status == .approved)
        #expect(throws: LedgerError.self) { try ledger.begin(undo(.refund, of: b.id, amount: 201)) }
        let rest = try ledger.begin(undo(.refund, of: b.id, amount: 200))
        try ledger.complete(id: rest.id, approved())
        #expect(try ledger.transaction(id: b.id)?.status == .refunded)
        let terminal = try #require(try ledger.terminal(name: "t1"))
        #expect(terminal.batchAmount == 1700 - 1000 - 700)
        #expect(terminal.batchCount == 5)
        #expect(try ledger.transactions(originalID: a.id).map(\.id) == [cancel.id])

        // The original is no longer approved: a second cancel is refused at begin.
        let again = ledgerError { _ = try ledger.begin(undo(.cancel, of: a.id, amount: 1000)) }
        #expect(again?.description == "originalID: transaction \(a.id) is cancelled; a cancel needs an approved original")
    }

    @Test func aDeclinedCancelLeavesTheOriginalApproved() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let a = try ledger.begin(sale())
        try ledger.complete(id: a.id, approved())
        let cancel = try ledger.begin(undo(.cancel, of: a.id))
        try ledger.complete(id: cancel.id, declined())
        #expect(try ledger.transaction(id: a.id)?.status == .approved)
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 1200)
    }

    @Test func originalRules() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let a = try ledger.begin(sale())
        #expect(ledgerError { _ = try ledger.begin(undo(.cancel, of: a.id)) }?.description
                == "originalID: transaction \(a.id) is in_progress; a cancel needs an approved original")
        try ledger.complete(id: a.id, approved())
        #expect(ledgerError { _ = try ledger.begin(undo(.capture, of: a.id)) }?.description
                == "originalID: transaction \(a.id) is a sale; a capture acts on: pre_auth")
        #expect(ledgerError { _ = try ledger.begin(undo(.refund, of: a.id, amount: 1201)) }?.description
                == "amount: 1201 exceeds the original's 1200")
        #expect(ledgerError { _ = try ledger.begin(undo(.refund, of: 77)) }?.description == "originalID: no transaction with id 77")
        var noOriginal = undo(.refund, of: a.id)
        noOriginal.originalID = nil
        #expect(ledgerError { _ = try ledger.begin(noOriginal) }?.description == "originalID: a refund needs the transaction it acts on")
        var saleWithOriginal = sale()
        saleWithOriginal.originalID = a.id
        #expect(ledgerError { _ = try ledger.begin(saleWithOriginal) }?.field == "originalID")
        var otherCurrency = undo(.refund, of: a.id)
        otherCurrency.currency = 840
        #expect(ledgerError { _ = try ledger.begin(otherCurrency) }?.description == "currency: 840 differs from the original's 978")
    }

    @Test func preAuthCountsOnlyWhenCaptured() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        var auth = sale(amount: 5000)
        auth.action = .preAuth
        let p = try ledger.begin(auth)
        try ledger.complete(id: p.id, approved())
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 0)
        let capture = try ledger.begin(undo(.capture, of: p.id, amount: 4500))
        try ledger.complete(id: capture.id, approved())
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 4500)
        #expect(try ledger.transaction(id: p.id)?.status == .approved)
    }

    @Test func aReversalMarksTheSaleAndRecordsItsOwnSTAN() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(sale(reference: "order-9"))
        let stored = try ledger.complete(id: s.id, approved(at: leapDay + 7_000_000, reversal: true), trace: sampleTrace, outbox: [callback()])
        #expect(stored.status == .reversed)
        #expect(stored.authorisationCode == "690882", "the host's answer is kept")
        let reversals = try ledger.transactions(originalID: s.id)
        #expect(reversals.count == 1)
        let r = try #require(reversals.first)
        #expect(r.action == .reversal && r.status == .approved && r.originalID == s.id)
        #expect(r.stan == s.stan.next && r.rrn == "406013" + s.stan.next.description)
        #expect(r.amount == 1200 && r.clientReference == "order-9" && r.maskedPAN == maskedA && r.panHash == stored.panHash)
        #expect(r.createdAt == leapDay + 7_000_000 && r.completedAt == leapDay + 7_000_000 && r.uuid != s.uuid)
        #expect(try ledger.terminal(name: "t1")?.lastSTAN == s.stan.next)
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 0, "a reversed sale never counted")
        #expect(try ledger.outbox(transactionID: s.id).count == 1)
        #expect(try ledger.begin(sale()).stan == s.stan.next.next)
    }

    @Test func anExplicitReversalTakesAnApprovedSaleOutOfTheBatch() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(sale())
        try ledger.complete(id: s.id, approved())
        let r = try ledger.begin(undo(.reversal, of: s.id))
        try ledger.complete(id: r.id, approved())
        #expect(try ledger.transaction(id: s.id)?.status == .reversed)
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 0)
    }

    @Test func recoverInterruptedFailsInProgressRowsAndKeepsTheirSTANs() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        do {
            let ledger = try ledgerWithTerminal(dir)
            let done = try ledger.begin(sale())
            try ledger.complete(id: done.id, approved())
            _ = try ledger.begin(sale())
            _ = try ledger.begin(sale())
            try ledger.close()
        }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let recovered = try ledger.recoverInterrupted(now: leapDay + 99_000_000)
        #expect(recovered.map(\.stan) == [STAN(2), STAN(3)])
        #expect(recovered.allSatisfy { $0.status == .failed && $0.message == Ledger.interruptedMessage && $0.completedAt == leapDay + 99_000_000 })
        #expect(try ledger.transaction(id: 1)?.status == .approved)
        #expect(try ledger.recoverInterrupted(now: leapDay).isEmpty)
        #expect(try ledger.begin(sale()).stan == STAN(4))
    }

    @Test("validation errors name the field", arguments: [
        (sale(amount: 0), "amount: must be more than 0 minor units, got 0"),
        (sale(amount: 100, tip: 101), "tipAmount: must be 0 to amount (100), got 101"),
        (NewTransaction(terminal: "t1", provider: .viva, action: .sale, amount: 1, currency: 9780, createdAt: 0),
         "currency: must be a numeric ISO 4217 code, 1–999, got 9780"),
        (NewTransaction(terminal: "t1", provider: .viva, action: .sale, amount: 1, currency: 978, installments: 0, createdAt: 0),
         "installments: must be 1–99 when given, got 0"),
        (NewTransaction(terminal: "t1", provider: .viva, action: .sale, amount: 1, currency: 978, extra: "[1]", createdAt: 0),
         "extra: must be a JSON object"),
        (sale(reference: ""), "clientReference: must be 1–2048 characters when given, got 0"),
        (sale(reference: String(repeating: "r", count: 2049)), "clientReference: must be 1–2048 characters when given, got 2049"),
        (sale(reference: "nulprobe\u{0}tail"), "clientReference: must not contain control characters; found U+0000 at position 9"),
        (sale(reference: "order 4761 7390 0101 0010"), "clientReference: must not hold a card number; only masked card data may be stored"),
        (sale(pan: "4761"), "pan: must be 12–19 digits (got 4 characters)"),
        (sale(reference: "x" + panA, pan: panA), "clientReference: must not hold a card number; only masked card data may be stored"),
    ])
    func beginValidation(new: NewTransaction, message: String) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        #expect(ledgerError { _ = try ledger.begin(new) }?.description == message)
        #expect(try ledger.terminal(name: "t1")?.lastSTAN == nil, "a refused begin allocates nothing")
    }

    @Test("completion errors name the field")
    func completionValidation() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(sale())
        func failure(_ c: Completion, trace: [TraceEntry] = [], outbox: [OutboxMessage] = []) -> String? {
            ledgerError { try ledger.complete(id: s.id, c, trace: trace, outbox: outbox) }?.description
        }
        var c = approved()
        c.status = .refunded
        #expect(failure(c) == "status: a completion is approved, declined, failed or cancelled, not refunded")
        c = approved(masked: panA)
        #expect(failure(c) == "maskedPAN: must show at most the first 8 and last 4 digits, the rest masked with '*'")
        c = approved()
        c.arqc = "29CC"
        #expect(failure(c) == "arqc: must be 8 bytes of hex, got \"29CC\"")
        c = approved()
        c.tvr = "00000080ZZ"
        #expect(failure(c)?.hasPrefix("tvr: must be 5 bytes of hex") == true)
        c = approved()
        c.responseCode = "000"
        #expect(failure(c) == "responseCode: must be 2 letters or digits, got \"000\"")
        c = approved()
        c.authorisationCode = "1234567"
        #expect(failure(c)?.hasPrefix("authorisationCode:") == true)
        let leaky = [sampleTrace[0], TraceEntry(command: "00B2010C00", response: "70185A08" + panA + "5F24032512319000")]
        #expect(failure(approved(), trace: leaky) == "trace[1].response: contains the full PAN; only masked card data may be stored")
        #expect(failure(approved(), trace: [TraceEntry(command: "00A4XYZ", response: "9000")])?.hasPrefix("trace[0].command: must be") == true)
        #expect(failure(approved(), outbox: [callback("accountNumber=" + panA)]) == "outbox[0].payload: contains the full PAN; only masked card data may be stored")
        #expect(failure(approved(), outbox: [OutboxMessage(kind: .callback, target: "", payload: "x")]) == "outbox[0].target: must not be empty")
        #expect(try ledger.transaction(id: s.id)?.status == .inProgress, "nothing was recorded")
        #expect(try ledger.trace(transactionID: s.id).isEmpty)
    }
}

@Suite("queries")
struct QueryTests {
    @Test func clientReferenceIsPerProviderMostRecentFirst() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        let first = try ledger.begin(sale(reference: "order-1"))
        let retry = try ledger.begin(sale(reference: "order-1"))
        let billpocket = try ledger.begin(sale(reference: "order-1", provider: .billpocket))
        _ = try ledger.begin(sale(reference: "order-2"))
        #expect(try ledger.transactions(provider: .viva, clientReference: "order-1").map(\.id) == [retry.id, first.id])
        #expect(try ledger.transactions(provider: .viva, clientReference: "order-1", limit: 1).map(\.id) == [retry.id])
        #expect(try ledger.transactions(provider: .billpocket, clientReference: "order-1").map(\.id) == [billpocket.id])
        #expect(try ledger.transactions(provider: .cli, clientReference: "order-1").isEmpty)
        #expect(try ledger.transaction(uuid: billpocket.uuid)?.id == billpocket.id)
        #expect(try ledger.transaction(uuid: "00000000-0000-0000-0000-000000000000") == nil)
    }

    /// What "cancel: pick one of this card's last 3" sees: approved sales of this card on this
    /// terminal, newest first, skipping declines, cancelled sales, other cards and terminals.
    @Test func theCardsLastThreeCancellableSales() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        _ = try ledger.ensureTerminal(name: "t2", tid: "16016685")
        var salesA: [Int64] = []
        for _ in 0..<5 {
            let s = try ledger.begin(sale())
            try ledger.complete(id: s.id, approved())
            salesA.append(s.id)
        }
        let cancel = try ledger.begin(undo(.cancel, of: salesA[4]))
        try ledger.complete(id: cancel.id, approved())
        for _ in 0..<4 {
            let d = try ledger.begin(sale())
            try ledger.complete(id: d.id, declined())
        }
        let b = try ledger.begin(sale())
        try ledger.complete(id: b.id, approved(pan: panB, masked: maskedB))
        let elsewhere = try ledger.begin(sale("t2"))
        try ledger.complete(id: elsewhere.id, approved())
        let billpocket = try ledger.begin(sale(provider: .billpocket))
        try ledger.complete(id: billpocket.id, approved())

        let last3 = try ledger.lastTransactions(terminal: "t1", pan: panA)
        #expect(last3.map(\.id) == [billpocket.id, salesA[3], salesA[2]])
        #expect(try ledger.lastTransactions(terminal: "t1", pan: panA, provider: .viva).map(\.id) == [salesA[3], salesA[2], salesA[1]])
        #expect(try ledger.lastTransactions(terminal: "t1", pan: panB).map(\.id) == [b.id])
        #expect(try ledger.lastTransactions(terminal: "t2", pan: panA).map(\.id) == [elsewhere.id])
        #expect(try ledger.lastTransactions(terminal: "t1", pan: panA, limit: 10, status: .declined).count == 4)
        #expect(try ledger.lastTransactions(terminal: "t1", pan: panA, status: .cancelled).map(\.id) == [salesA[4]])
        #expect(try ledger.lastTransactions(terminal: "t1", pan: panA, actions: [.cancel]).map(\.id) == [cancel.id])
        #expect(try ledger.lastTransactions(terminal: "t1", pan: "4000000000000002").isEmpty)
        #expect(ledgerError { _ = try ledger.lastTransactions(terminal: "t1", pan: "12") }?.field == "pan")
    }

    @Test func listingPagesBackwards() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        _ = try ledger.ensureTerminal(name: "t2", tid: "16016685")
        var ids: [Int64] = []
        for i in 0..<7 {
            ids.append(try ledger.begin(sale()).id)
            _ = try ledger.begin(sale("t2", reference: "noise-\(i)"))
        }
        let page1 = try ledger.transactions(terminal: "t1", limit: 3)
        let page2 = try ledger.transactions(terminal: "t1", limit: 3, beforeID: page1.last?.id)
        let page3 = try ledger.transactions(terminal: "t1", limit: 3, beforeID: page2.last?.id)
        #expect((page1 + page2 + page3).map(\.id) == ids.reversed())
        #expect(ledgerError { _ = try ledger.transactions(terminal: "t9") } == .unknownTerminal(name: "t9"))
    }

    /// Each lookup a waiting caller makes must walk an index, never scan the table.
    @Test("lookups use an index", arguments: Ledger.Lookup.allCases)
    func queryPlans(lookup: Ledger.Lookup) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        let plan = try ledger.queryPlan(lookup)
        let txnSteps = plan.filter { $0.contains(" txn ") || $0.hasSuffix(" txn") }
        #expect(!txnSteps.isEmpty, "\(plan)")
        for step in plan {
            #expect(!step.hasPrefix("SCAN"), "\(lookup): \(plan)")
            #expect(!step.contains("TEMP B-TREE"), "\(lookup) sorts instead of walking the index: \(plan)")
        }
        let expected = switch lookup {
        case .byID: "USING INTEGER PRIMARY KEY"
        case .byUUID: "USING INDEX txn_uuid (uuid=?)"
        case .bySTAN: "USING INDEX txn_stan (terminal_id=? AND stan=?)"
        case .byClientReference: "USING INDEX txn_client_reference (provider=? AND client_reference=?)"
        case .cardLast: "USING INDEX txn_card (terminal_id=? AND pan_hash=? AND status=?)"
        }
        #expect(txnSteps.contains { $0.contains(expected) }, "\(lookup): \(plan)")
    }
}

@Suite("the PAN and its key")
struct PANTests {
    @Test func theFullPANNeverReachesTheFile() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        for pan in [panA, panB] {
            let s = try ledger.begin(sale(pan: pan))
            try ledger.complete(id: s.id, approved(pan: pan, masked: pan == panA ? maskedA : maskedB, reversal: pan == panB),
                                trace: sampleTrace, outbox: [callback()])
        }
        let s = try ledger.begin(sale())
        _ = ledgerError { try ledger.complete(id: s.id, approved(), trace: [TraceEntry(command: "00", response: "5A08" + panA)]) }
        #expect(try ledger.lastTransactions(terminal: "t1", pan: panA).count == 1, "found by its hash")

        /// The database, its WAL and its shared memory, as bytes.
        func fileBytes() -> Data {
            ["", "-wal", "-shm"].reduce(into: Data()) { $0 += FileManager.default.contents(atPath: dir.database + $1) ?? Data() }
        }
        func bcd(_ pan: String) -> Data {
            let d = Array(pan.utf8).map { $0 - 0x30 }
            return Data(stride(from: 0, to: d.count, by: 2).map { d[$0] << 4 | d[$0 + 1] })
        }
        for stage in ["open", "closed"] {
            if stage == "closed" { try ledger.close() }
            let bytes = fileBytes()
            // The search must be able to succeed: the masked PAN and the trace are there.
            #expect(bytes.range(of: Data(maskedA.utf8)) != nil, "\(stage): the masked PAN should be on disk")
            #expect(bytes.range(of: Data(sampleTrace[1].response.utf8)) != nil, "\(stage): the trace should be on disk")
            for pan in [panA, panB] {
                #expect(bytes.range(of: Data(pan.utf8)) == nil, "\(stage): the PAN's digits are in the ledger files")
                #expect(bytes.range(of: bcd(pan)) == nil, "\(stage): the PAN as BCD is in the ledger files")
            }
        }
    }

    @Test func thePANHashIsKeyed() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let a = try Ledger(path: dir.path + "/a.sqlite", panKey: keyA)
        let b = try Ledger(path: dir.path + "/b.sqlite", panKey: keyB)
        let hash = try a.panHash(panA)
        #expect(hash.count == 64 && hash.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(hash == (try a.panHash(panA)))
        #expect(hash != (try b.panHash(panA)))
        #expect(hash != (try a.panHash(panB)))
        // HMAC-SHA256 under the key, not a plain SHA-256 anyone could recompute from a guess.
        let hmac = HMAC<SHA256>.authenticationCode(for: Array(panA.utf8), using: SymmetricKey(data: keyA))
        #expect(hash == hmac.map { String(format: "%02x", $0) }.joined())
        #expect(hash != SHA256.hash(data: Array(panA.utf8)).map { String(format: "%02x", $0) }.joined())
    }

    @Test func theKeyFileIsCreatedPrivateAndReloaded() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path + "/pan.key"
        let key = try Ledger.loadOrCreatePANKey(at: path)
        #expect(key.count == 32)
        #expect(key != [UInt8](repeating: 0, count: 32))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        #expect(try Ledger.loadOrCreatePANKey(at: path) == key)
        #expect(try Ledger.loadOrCreatePANKey(at: dir.path + "/other.key") != key)
    }

    @Test func aKeyFileOthersCanReadOrOfTheWrongSizeIsRefused() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path + "/pan.key"
        _ = try Ledger.loadOrCreatePANKey(at: path)
        chmod(path, 0o644)
        let readable = ledgerError { _ = try Ledger.loadOrCreatePANKey(at: path) }
        #expect(readable?.description == "panKey: \(path) has mode 644; it must not be readable or writable by group or others (chmod 600)")
        chmod(path, 0o640)
        #expect(ledgerError { _ = try Ledger.loadOrCreatePANKey(at: path) }?.field == "panKey")
        let short = dir.path + "/short.key"
        #expect(FileManager.default.createFile(atPath: short, contents: Data(repeating: 7, count: 16), attributes: [.posixPermissions: 0o600]))
        #expect(ledgerError { _ = try Ledger.loadOrCreatePANKey(at: short) }?.description == "panKey: \(short) holds 16 bytes; a PAN key is exactly 32")
        #expect(ledgerError { _ = try Ledger.loadOrCreatePANKey(at: dir.path + "/missing/dir/pan.key") }?.field == "panKey")
    }
}

@Suite("outbox and batch")
struct OutboxBatchTests {
    @Test func outboxLifecycle() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA, outboxMaxAttempts: 3)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        let s = try ledger.begin(sale())
        let now = leapDay + 5_000_000
        try ledger.complete(id: s.id, approved(at: now), outbox: [
            callback("now"), OutboxMessage(kind: .webhook, target: "https://example.test/hook", payload: "later", nextAttemptAt: now + 60_000_000),
        ])
        let due = try ledger.pendingOutbox(now: now)
        #expect(due.map(\.payload) == ["now"])
        #expect(try ledger.pendingOutbox(now: now + 60_000_000).map(\.payload) == ["now", "later"])
        let id = try #require(due.first?.id)

        var entry = try ledger.markAttemptFailed(id: id, error: "connection refused", nextAttemptAt: now + 1_000_000)
        #expect(entry.status == .pending && entry.attempts == 1 && entry.lastError == "connection refused")
        #expect(try ledger.pendingOutbox(now: now).isEmpty, "backing off")
        entry = try ledger.markAttemptFailed(id: id, error: "timeout", nextAttemptAt: now + 2_000_000)
        #expect(entry.status == .pending && entry.attempts == 2)
        entry = try ledger.markAttemptFailed(id: id, error: "HTTP 500", nextAttemptAt: now + 4_000_000)
        #expect(entry.status == .failed && entry.attempts == 3 && entry.lastError == "HTTP 500")
        #expect(try ledger.pendingOutbox(now: .max).map(\.payload) == ["later"])
        #expect(ledgerError { try ledger.markDelivered(id: id, at: now) } == .outboxNotPending(id: id, status: .failed))

        let later = try #require(try ledger.pendingOutbox(now: .max).first)
        let delivered = try ledger.markDelivered(id: later.id, at: now + 61_000_000)
        #expect(delivered.status == .delivered && delivered.deliveredAt == now + 61_000_000 && delivered.attempts == 1)
        #expect(ledgerError { try ledger.markDelivered(id: later.id, at: now) }?.description
                == "outbox: outbox message \(later.id) is delivered; only a pending message can be marked")
        #expect(ledgerError { try ledger.markAttemptFailed(id: 404, error: "x", nextAttemptAt: 0) } == .unknownOutbox(id: 404))
        #expect(try ledger.pendingOutbox(now: .max).isEmpty)
    }

    @Test func closingABatchReturnsItsTotalsAndStartsTheNext() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        for amount: Int64 in [1000, 250] {
            let s = try ledger.begin(sale(amount: amount))
            try ledger.complete(id: s.id, approved())
        }
        let pending = try ledger.begin(sale())
        let busy = ledgerError { _ = try ledger.closeBatch(terminal: "t1") }
        #expect(busy?.description == "batch: terminal \"t1\" has transaction \(pending.id) in progress; close the batch after it completes")
        try ledger.complete(id: pending.id, declined())

        #expect(try ledger.closeBatch(terminal: "t1") == BatchTotals(terminal: "t1", batchNumber: 1, count: 2, amount: 1250))
        let closed = try #require(try ledger.terminal(name: "t1"))
        #expect(closed.batchNumber == 2 && !closed.batchOpen && closed.batchCount == 0 && closed.batchAmount == 0)
        #expect(ledgerError { _ = try ledger.closeBatch(terminal: "t1") }?.description
                == "batch: terminal \"t1\" has no open batch (batch 2 is closed)")
        #expect(try ledger.openBatch(terminal: "t1").batchOpen)
        #expect(ledgerError { try ledger.openBatch(terminal: "t1") }?.description == "batch: batch 2 of terminal \"t1\" is already open")
        #expect(try ledger.closeBatch(terminal: "t1") == BatchTotals(terminal: "t1", batchNumber: 2, count: 0, amount: 0))

        // An approved sale on a closed batch opens it, as a terminal does.
        let s = try ledger.begin(sale(amount: 99))
        try ledger.complete(id: s.id, approved())
        let reopened = try #require(try ledger.terminal(name: "t1"))
        #expect(reopened.batchOpen && reopened.batchNumber == 3 && reopened.batchAmount == 99)
        #expect(ledgerError { _ = try ledger.closeBatch(terminal: "t9") } == .unknownTerminal(name: "t9"))
    }
}

@Suite("typed columns")
struct TypedColumnTests {
    @Test("the CVM column reads back as the method it was written from; text naming no method as none")
    func cvm() {
        for method in [CVMethod.failCVM, .plaintextPINByICC, .encipheredPINOnline, .plaintextPINByICCAndSignature, .encipheredPINByICC,
                       .encipheredPINByICCAndSignature, .signature, .noCVMRequired, .notAvailable] {
            #expect(StoredTransaction.cvMethod(described: "\(method)") == method)
        }
        #expect(StoredTransaction.cvMethod(described: nil) == nil)
        #expect(StoredTransaction.cvMethod(described: "PIN") == nil)
    }
}

@Suite("complete: what it returns is what the ledger holds")
struct CompleteReturnsTheRowTests {
    @Test("approved, declined, reversed, failed, with and without card data, installments and a trace: the returned row equals a fresh read")
    func returnedRowEqualsAFreshRead() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        var withInstallments = approved()
        withInstallments.installments = 6
        let cases: [(NewTransaction, Completion)] = [
            (sale(reference: "r-1"), approved()),
            (sale(reference: "r-2", pan: panA), declined(pan: nil)),
            (sale(amount: 99), declined()),
            (sale(), approved(reversal: true)),
            (sale(), Completion(status: .failed, message: "card removed", completedAt: leapDay + 1)),
            (sale(), Completion(status: .cancelled, completedAt: leapDay + 2)),
            (NewTransaction(terminal: "t1", provider: .billpocket, action: .sale, amount: 300, tipAmount: 15, currency: 484,
                            clientReference: "b-1", installments: 3, createdAt: leapDay, pan: nil), withInstallments),
        ]
        for (new, completion) in cases {
            let started = try ledger.begin(new)
            let returned = try ledger.complete(id: started.id, completion, trace: sampleTrace, outbox: [callback()])
            let read = try #require(try ledger.transaction(id: started.id))
            #expect(returned == read)
        }
    }
}

@Suite("complete: a trace goes in as multi-row INSERTs")
struct TraceInsertTests {
    @Test("a trace longer than one statement's rows keeps every entry, in order", arguments: [1, 63, 64, 65, 150])
    func longTrace(count: Int) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        let started = try ledger.begin(sale())
        let trace = (0..<count).map { i in TraceEntry(command: String(format: "00B2%02X0C00", i % 256), response: String(format: "%04X9000", i)) }
        try ledger.complete(id: started.id, approved(), trace: trace)
        #expect(try ledger.trace(transactionID: started.id) == trace)
        #expect(try ledger.int("SELECT max(seq) FROM trace WHERE transaction_id = \(started.id)") == count)
    }
}

@Suite("transaction ids")
struct TransactionUUIDTests {
    @Test("version 7: the time first, so ids made later sort later; the version and variant bits set; random bits differ")
    func version7() throws {
        let a = TransactionUUID.make(milliseconds: 1_764_300_000_000)
        let b = TransactionUUID.make(milliseconds: 1_764_300_000_001)
        let c = TransactionUUID.make(milliseconds: 1_764_300_000_001)
        #expect(a < b && a < c && b != c)
        for id in [a, b, c] {
            let parts = id.split(separator: "-").map(String.init)
            #expect(parts.map(\.count) == [8, 4, 4, 4, 12], "\(id)")
            #expect(parts[2].hasPrefix("7") && "89ab".contains(parts[3].first!), "\(id)")
            #expect(UUID(uuidString: id) != nil && id == id.lowercased())
        }
        // The first 48 bits are the milliseconds.
        #expect(a.replacingOccurrences(of: "-", with: "").prefix(12) == String(1_764_300_000_000, radix: 16).leftPadded(12))
    }

    @Test("a row's id is one")
    func rowsGetThem() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        let first = try ledger.begin(sale())
        let second = try ledger.begin(sale())
        #expect(first.uuid.split(separator: "-")[2].hasPrefix("7") && first.uuid <= second.uuid)
    }
}

private extension String {
    func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
