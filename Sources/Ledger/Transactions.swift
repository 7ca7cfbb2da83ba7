import LedgerModel
import Foundation
import Synchronization
import GRDB
import Terminal

extension Ledger {
    /// The message an interrupted transaction is left with.
    public static let interruptedMessage = "interrupted: the daemon stopped before this transaction finished"

    /// Starts a transaction: allocates the terminal's next STAN, computes the RRN and inserts the
    /// row `in_progress`, all in one write transaction.
    ///
    /// Call it before the host is asked. The STAN is never handed out again, even if the process
    /// or the machine dies the next instant: STANs come from a block reserved ahead with a
    /// durable commit (`stanBlock` at a time), so this write itself need not wait for an fsync.
    /// A process that dies leaves the row on disk (the operating system still holds it), and
    /// `recoverInterrupted` fails it at the next start; a machine that dies may lose the row,
    /// and the next open skips the rest of the block (see `skipSTANsReservedBeforeReboot`). The
    /// sale's one durable commit is `complete`, which syncs this row with it.
    public func begin(_ new: NewTransaction) throws -> Started {
        try LedgerRules.validate(new)
        let panHash = try new.pan.map(panHash)
        let uuid = TransactionUUID.make()
        // A second attempt follows a fresh reservation; a third covers another process having
        // used that one up in between. More would mean something else is wrong.
        for _ in 0..<3 {
            let started = try write("begin \(new.action.rawValue) on terminal \(new.terminal)", durable: false) { db -> Started? in
                let terminal = try Self.terminal(db, name: new.terminal)
                if let originalID = new.originalID {
                    try Self.checkOriginal(db, id: originalID, for: new.action, amount: new.amount, currency: new.currency)
                }
                let synced = syncedReservations.value(for: terminal.id)
                guard let stan = try Self.allocateSTAN(db, terminalID: terminal.id, durable: false, syncedReservation: synced) else {
                    return nil
                }
                let rrn = Self.rrn(stan: stan, micros: new.createdAt)
                try db.executeCached(sql: """
                    INSERT INTO txn (uuid, terminal_id, provider, action, status, amount, tip_amount, currency,
                                     client_reference, stan, rrn, pan_hash, installments, original_id, extra, created_at)
                    VALUES (:uuid, :terminal, :provider, :action, 'in_progress', :amount, :tip, :currency,
                            :reference, :stan, :rrn, :panHash, :installments, :original, :extra, :createdAt)
                    """, arguments: [
                        "uuid": uuid, "terminal": terminal.id, "provider": new.provider.rawValue, "action": new.action.rawValue,
                        "amount": new.amount, "tip": new.tipAmount, "currency": new.currency, "reference": new.clientReference,
                        "stan": stan.value, "rrn": rrn, "panHash": panHash, "installments": new.installments,
                        "original": new.originalID, "extra": new.extra, "createdAt": new.createdAt,
                    ])
                return Started(id: db.lastInsertedRowID, uuid: uuid, stan: stan, rrn: rrn)
            }
            if let started { return started }
            try reserveSTANs(terminal: new.terminal)
        }
        throw LedgerError.database(operation: "begin \(new.action.rawValue) on terminal \(new.terminal)",
                                   message: "other writers used up two fresh STAN reservations in a row")
    }

    /// Records a transaction's outcome, in one write transaction: the row's final status and card
    /// fields, its trace, the terminal's batch counters, the original's new status (an approved
    /// cancel, refund or reversal), a reversal row with its own STAN when `result.reversal`, and
    /// the outbox messages. Either all of it is committed or none of it.
    ///
    /// The full PAN in `result.pan` is only hashed; a trace entry, message or outbox payload
    /// that contains it is refused.
    @discardableResult
    public func complete(id: Int64, _ result: Completion, trace: [TraceEntry] = [], outbox: [OutboxMessage] = []) throws -> StoredTransaction {
        try LedgerRules.validate(result, trace: trace, outbox: outbox)
        let panHash = try result.pan.map(panHash)
        let reversalUUID = TransactionUUID.make()
        return try write("complete transaction \(id)") { db in
            try Self.complete(db, id: id, result, panHash: panHash, reversalUUID: reversalUUID, trace: trace, outbox: outbox)
        }
    }

    /// `complete`'s work inside a write transaction the caller holds (a front that records its
    /// own state in the same commit, as the Worldline payments do).
    /// The JSON a completed row keeps is JSON of its shape: `oda` and `cardEntry` objects, each
    /// host message's `fields` an array. SQLite's own JSON reader checks them, in the write that
    /// stores them (a refusal rolls the write back): the texts are never turned into objects.
    static func checkJSON(_ db: Database, _ result: Completion) throws {
        func check(_ text: String?, _ field: @autoclosure () -> String, _ shape: String) throws {
            guard let text else { return }
            let type = try String.fetchOne(db.cachedStatement(sql: "SELECT CASE WHEN json_valid(?1) THEN json_type(?1) END"), arguments: [text])
            guard type == shape else { throw LedgerError.invalid(field: field(), rule: "must be a JSON \(shape)") }
        }
        try check(result.oda, "oda", "object")
        try check(result.cardEntry, "cardEntry", "object")
        for (i, m) in result.hostMessages.enumerated() { try check(m.fields, "hostMessages[\(i)].fields", "array") }
    }

    static func complete(_ db: Database, id: Int64, _ result: Completion, panHash: String?, reversalUUID: String,
                         trace: [TraceEntry], outbox: [OutboxMessage]) throws -> StoredTransaction {
        try checkJSON(db, result)
        let current = try Self.transaction(db, id: id, field: "id")
        guard current.status == .inProgress else {
            throw LedgerError.notInProgress(id: id, status: current.status)
        }
        let final: TransactionStatus = result.reversal ? .reversed : result.status
        try db.executeCached(sql: """
            UPDATE txn SET status = :status, response_code = :responseCode, message = :message,
                authorisation_code = :authorisationCode, masked_pan = :maskedPAN,
                pan_hash = coalesce(:panHash, pan_hash), brand = :brand, aid = :aid,
                application_label = :label, cardholder_name = :cardholder, arqc = :arqc, atc = :atc,
                tvr = :tvr, cvm = :cvm, entry_mode = :entryMode, completed_at = :completedAt, oda = :oda, card_entry = :cardEntry,
                installments = coalesce(:installments, installments)
            WHERE id = :id
            """, arguments: [
                "status": final.rawValue, "responseCode": result.responseCode, "message": result.message,
                "authorisationCode": result.authorisationCode, "maskedPAN": result.maskedPAN, "panHash": panHash,
                "brand": result.brand, "aid": result.aid, "label": result.applicationLabel,
                "cardholder": result.cardholderName, "arqc": result.arqc, "atc": result.atc, "tvr": result.tvr,
                "cvm": result.cvm, "entryMode": result.entryMode?.rawValue, "completedAt": result.completedAt, "id": id,
                "installments": result.installments, "oda": result.oda, "cardEntry": result.cardEntry,
            ])
        try Self.insertTrace(db, transactionID: id, trace)
        for (seq, m) in result.hostMessages.enumerated() {
            try db.executeCached(sql: "INSERT INTO host_message (transaction_id, seq, direction, mti, fields) VALUES (?, ?, ?, ?, ?)",
                                 arguments: [id, seq + 1, m.direction.rawValue, m.mti, m.fields])
        }
        if final == .approved {
            try Self.applyApproval(db, current)
        }
        if result.reversal {
            try Self.insertReversal(db, of: id, uuid: reversalUUID, at: result.completedAt)
        }
        for message in outbox {
            try db.executeCached(sql: """
                INSERT INTO outbox (transaction_id, kind, target, payload, next_attempt_at, created_at, status, attempts, delivered_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [id, message.kind.rawValue, message.target, message.payload,
                                 message.nextAttemptAt ?? result.completedAt, result.completedAt,
                                 message.deliveredAt == nil ? OutboxStatus.pending.rawValue : OutboxStatus.delivered.rawValue,
                                 message.deliveredAt == nil ? 0 : 1, message.deliveredAt])
        }
        // The row as the UPDATE above left it, without reading it back (a third of the
        // ledger's cost of a sale): `LedgerTests` checks this against a fresh read.
        return StoredTransaction(
            id: current.id, uuid: current.uuid, terminalID: current.terminalID, terminalName: current.terminalName, tid: current.tid,
            provider: current.provider, action: current.action, status: final, amount: current.amount, tipAmount: current.tipAmount,
            currency: current.currency, clientReference: current.clientReference, stan: current.stan, rrn: current.rrn,
            authorisationCode: result.authorisationCode, responseCode: result.responseCode, message: result.message,
            maskedPAN: result.maskedPAN, panHash: panHash ?? current.panHash, brand: result.brand, aid: result.aid,
            applicationLabel: result.applicationLabel, cardholderName: result.cardholderName, arqc: result.arqc, atc: result.atc,
            tvr: result.tvr, cvm: result.cvm, entryMode: result.entryMode?.rawValue, installments: result.installments ?? current.installments,
            originalID: current.originalID, extra: current.extra, createdAt: current.createdAt, completedAt: result.completedAt,
            oda: result.oda, cardEntry: result.cardEntry)
    }

    /// At daemon start: every transaction still `in_progress` was interrupted by a stop or a
    /// crash. Each becomes `failed` with `interruptedMessage`, its STAN stays used, and the
    /// rows are returned so the caller can tell whoever was waiting.
    @discardableResult
    public func recoverInterrupted(now: Int64) throws -> [StoredTransaction] {
        try write("recover interrupted transactions") { db in
            let ids = try Int64.fetchAll(db, sql: "SELECT id FROM txn WHERE completed_at IS NULL ORDER BY id")
            guard !ids.isEmpty else { return [] }
            try db.executeCached(sql: """
                UPDATE txn SET status = 'failed', message = ?, completed_at = max(?, created_at)
                WHERE completed_at IS NULL
                """, arguments: [Self.interruptedMessage, now])
            return try ids.map { try Self.transaction(db, id: $0, field: "id") }
        }
    }

    // MARK: - Inside the write transactions

    /// How many STANs a reservation sets aside: the most a machine crash can skip. It may grow
    /// but never shrink: `STANRing.ahead` reads a reservation more than a block ahead as none (a
    /// counter written without its reservation), so a reservation an older build made with a
    /// larger block would be ignored by the skip after a reboot.
    static let stanBlock = 100

    /// The terminal's next STAN: 999999 wraps to 000001, 000000 is never used. Runs inside the
    /// caller's write transaction, so the counter and the row that uses it commit together.
    ///
    /// A STAN must be inside a reservation that is on disk before anyone outside sees it. A
    /// durable caller's own commit makes it so: when the reservation is used up, it extends it
    /// in the same transaction. Any other caller may only use a reservation this process knows
    /// to be synced (`syncedReservation`, the value a durable write read); otherwise it gets nil,
    /// and must call `reserveSTANs` (which extends or just syncs the reservation) and try again.
    static func allocateSTAN(_ db: Database, terminalID: Int64, durable: Bool, syncedReservation: Int? = nil) throws -> STAN? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT last_stan, stan_reserved FROM terminal WHERE id = ?"),
                                         arguments: [terminalID]) else {
            throw LedgerError.database(operation: "allocate a STAN", message: "no terminal with id \(terminalID)")
        }
        let last: Int = row[0], reserved: Int = row[1]
        let next = STAN(last)?.next ?? .first
        if !durable, STANRing.ahead(of: last, to: reserved) == 0 || reserved != syncedReservation {
            return nil
        }
        if STANRing.ahead(of: last, to: reserved) == 0 {
            try db.executeCached(sql: "UPDATE terminal SET stan_reserved = ? WHERE id = ?",
                                 arguments: [STANRing.advance(last, by: stanBlock), terminalID])
            try recordReservationBoot(db)
        }
        try db.executeCached(sql: "UPDATE terminal SET last_stan = ? WHERE id = ?", arguments: [next.value, terminalID])
        return next
    }

    /// Reserves the next `stanBlock` STANs of `terminal` unless some are still reserved, in a
    /// durable write either way: once it returns, the reservation it read is on disk, whoever
    /// made it, and this process may begin within it without a sync.
    func reserveSTANs(terminal name: String) throws {
        let (terminalID, reservation) = try write("reserve STANs on terminal \(name)") { db -> (Int64, Int) in
            let terminal = try Self.terminal(db, name: name)
            let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT last_stan, stan_reserved FROM terminal WHERE id = ?"),
                                       arguments: [terminal.id])
            let last: Int = row?[0] ?? 0, reserved: Int = row?[1] ?? 0
            guard STANRing.ahead(of: last, to: reserved) == 0 else { return (terminal.id, reserved) }
            let extended = STANRing.advance(last, by: Self.stanBlock)
            try db.executeCached(sql: "UPDATE terminal SET stan_reserved = ? WHERE id = ?", arguments: [extended, terminal.id])
            try Self.recordReservationBoot(db)
            return (terminal.id, extended)
        }
        syncedReservations.set(reservation, for: terminalID)
    }

    /// The terminal's next STAN for a message that is no transaction (an ISO 8583 sign-on or echo
    /// test), taken durably so no transaction can be given it after a crash.
    public func networkSTAN(terminal name: String) throws -> STAN {
        try write("allocate a STAN on terminal \(name)") { db in
            let terminal = try Self.terminal(db, name: name)
            guard let stan = try Self.allocateSTAN(db, terminalID: terminal.id, durable: true) else {
                throw LedgerError.database(operation: "allocate a STAN", message: "no STAN for terminal \(name)")
            }
            return stan
        }
    }

    /// Gives back what is reserved ahead (durably, which also syncs every begun row), so a clean
    /// stop followed by a reboot skips no STAN. The daemon calls it when it stops.
    public func releaseSTANReservations() throws {
        try write("release STAN reservations") { db in
            try db.execute(sql: "UPDATE terminal SET stan_reserved = last_stan WHERE stan_reserved != last_stan")
        }
    }

    /// Reservations remember the boot they were made in: within one boot, a commit that did not
    /// wait for its fsync is still in the operating system's cache even if this process died, so
    /// the counters on disk are right. After a reboot they may not be.
    static func recordReservationBoot(_ db: Database) throws {
        try db.executeCached(sql: "INSERT INTO meta (key, value) VALUES ('stan_reservation_boot', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                             arguments: [currentBootID])
    }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`); empty where there is none, which makes
    /// every open count as a new boot (a skip of at most a block per terminal, never a reuse).
    static let currentBootID: String = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return "" }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }()

    /// At open: if STANs were reserved in an earlier boot, the machine may have died holding
    /// begun rows it had not synced, and the host may have seen their STANs. Each terminal's
    /// counter moves to the end of its reservation, so none of them is handed out again.
    func skipSTANsReservedBeforeReboot() throws {
        try write("skip STANs reserved before a reboot") { db in
            let boot = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'stan_reservation_boot'")
            guard let boot, boot != Self.currentBootID || boot.isEmpty else { return }
            for row in try Row.fetchAll(db, sql: "SELECT id, last_stan, stan_reserved FROM terminal") {
                let id: Int64 = row[0], last: Int = row[1], reserved: Int = row[2]
                let skip = STANRing.ahead(of: last, to: reserved)
                let counter = skip > 0 ? reserved : last
                try db.execute(sql: "UPDATE terminal SET last_stan = ?1, stan_reserved = ?1 WHERE id = ?2", arguments: [counter, id])
            }
            try db.execute(sql: "DELETE FROM meta WHERE key = 'stan_reservation_boot'")
        }
    }

    static func rrn(stan: STAN, micros: Int64) -> String {
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        return RRN.make(stan: stan, at: UTCDateParts(secondsSince1970: seconds))
    }

    /// What each action may act on: a capture completes a pre-authorisation; a cancel voids a
    /// sale, capture or pre-authorisation; a refund returns a sale or capture; a reversal undoes
    /// an approved sale, pre-authorisation or capture. (A cancel or refund the card rejects after
    /// host approval is reversed by `Completion.reversal` before it ever counted.)
    static func allowedOriginals(_ action: TransactionAction) -> Set<TransactionAction> {
        switch action {
        case .sale, .preAuth: []
        case .capture: [.preAuth]
        case .cancel: [.sale, .capture, .preAuth]
        case .refund: [.sale, .capture]
        case .reversal: [.sale, .preAuth, .capture]
        }
    }

    static func checkOriginal(_ db: Database, id: Int64, for action: TransactionAction, amount: Int64, currency: Int) throws {
        let original = try transaction(db, id: id, field: "originalID")
        let allowed = allowedOriginals(action)
        guard allowed.contains(original.action) else {
            let names = allowed.map(\.rawValue).sorted().joined(separator: ", ")
            throw LedgerError.invalid(field: "originalID", rule: "transaction \(id) is a \(original.action.rawValue); a \(action.rawValue) acts on: \(names)")
        }
        guard original.status == .approved else {
            throw LedgerError.invalid(field: "originalID", rule: "transaction \(id) is \(original.status.rawValue); a \(action.rawValue) needs an approved original")
        }
        guard currency == original.currency else {
            throw LedgerError.invalid(field: "currency", rule: "\(currency) differs from the original's \(original.currency)")
        }
        guard amount <= original.amount else {
            throw LedgerError.invalid(field: "amount", rule: "\(amount) exceeds the original's \(original.amount)")
        }
        // Refunds may be partial (the Worldline platform's are): together they stay within the original.
        if action == .refund {
            let refunded = try refundedAmount(db, originalID: id)
            guard amount <= original.amount - refunded else {
                throw LedgerError.invalid(field: "amount", rule: "\(amount) exceeds what is left to refund of the original (\(original.amount - refunded) of \(original.amount))")
            }
        }
    }

    /// The approved operations of one kind on `originalID`, in minor units.
    static func approvedAmount(_ db: Database, originalID: Int64, action: TransactionAction) throws -> Int64 {
        // A capture refunded in full is `refunded`, and still a capture of the original.
        try Int64.fetchOne(db.cachedStatement(sql: """
            SELECT coalesce(sum(amount), 0) FROM txn WHERE original_id = ? AND action = ? AND status IN ('approved', 'refunded')
            """), arguments: [originalID, action.rawValue]) ?? 0
    }

    /// The approved refunds of `originalID`, in minor units.
    static func refundedAmount(_ db: Database, originalID: Int64) throws -> Int64 {
        try approvedAmount(db, originalID: originalID, action: .refund)
    }

    /// The trace rows in statements of up to `traceRowsPerStatement` rows each: a sale's dozen
    /// and more single-row INSERTs cost more in binding and stepping than the rows themselves.
    static func insertTrace(_ db: Database, transactionID id: Int64, _ trace: [TraceEntry]) throws {
        var start = 0
        while start < trace.count {
            let end = min(trace.count, start + traceRowsPerStatement)
            var arguments: [(any DatabaseValueConvertible)?] = []
            arguments.reserveCapacity((end - start) * 4)
            for i in start..<end {
                arguments.append(id)
                arguments.append(i + 1)
                arguments.append(trace[i].command)
                arguments.append(trace[i].response)
            }
            try db.executeCached(sql: Self.traceInsertSQL(rows: end - start), arguments: StatementArguments(arguments))
            start = end
        }
    }

    static let traceRowsPerStatement = 64

    /// `INSERT INTO trace … VALUES (?, ?, ?, ?), …` for `rows` rows, made once per row count.
    static func traceInsertSQL(rows: Int) -> String {
        traceInsertSQLs.withLock { cache in
            if let sql = cache[rows] { return sql }
            let sql = "INSERT INTO trace (transaction_id, seq, command, response) VALUES "
                + Array(repeating: "(?, ?, ?, ?)", count: rows).joined(separator: ", ")
            cache[rows] = sql
            return sql
        }
    }

    private static let traceInsertSQLs = Mutex<[Int: String]>([:])

    /// An approved sale or capture adds to the open batch (opening it if it was closed, as a
    /// terminal does); an approved cancel, refund or reversal marks its original and takes it
    /// back out of the batch when it had been counted. A pre-authorisation only holds funds.
    ///
    /// The totals are checked here, in the write that records the operation, whichever surface
    /// asked: what is captured of a pre-authorisation stays within it, what is refunded of a sale
    /// or capture stays within it, and a pre-authorisation with a capture cannot be cancelled.
    /// Two operations racing past their surface's own checks cannot both commit.
    static func applyApproval(_ db: Database, _ row: StoredTransaction) throws {
        switch row.action {
        case .capture:
            guard let originalID = row.originalID else {
                throw LedgerError.invalid(field: "originalID", rule: "a capture needs an original")
            }
            let original = try transaction(db, id: originalID, field: "originalID")
            guard original.status == .approved else {
                throw LedgerError.invalid(field: "originalID", rule: "transaction \(originalID) is already \(original.status.rawValue)")
            }
            let captured = try approvedAmount(db, originalID: originalID, action: .capture)
            let cancelled = try approvedAmount(db, originalID: originalID, action: .cancel)
            guard captured + cancelled <= original.amount else {
                throw LedgerError.invalid(field: "amount", rule: cancelled == 0
                    ? "captures of transaction \(originalID) would total \(captured), more than its authorised \(original.amount)"
                    : "captures of transaction \(originalID) would total \(captured) with \(cancelled) cancelled, more than its authorised \(original.amount)")
            }
            try addToBatch(db, terminalID: row.terminalID, amount: row.amount)
        case .sale:
            try addToBatch(db, terminalID: row.terminalID, amount: row.amount)
        case .preAuth:
            break
        case .cancel, .refund, .reversal:
            guard let originalID = row.originalID else {
                throw LedgerError.invalid(field: "originalID", rule: "a \(row.action.rawValue) needs an original")
            }
            // The original was approved at begin; a second cancel completed meanwhile would
            // undo it twice.
            let original = try transaction(db, id: originalID, field: "originalID")
            guard original.status == .approved else {
                throw LedgerError.invalid(field: "originalID", rule: "transaction \(originalID) is already \(original.status.rawValue)")
            }
            if row.action == .refund {
                let refunded = try refundedAmount(db, originalID: originalID)
                guard refunded <= original.amount else {
                    throw LedgerError.invalid(field: "amount", rule: "refunds of transaction \(originalID) would total \(refunded), more than its \(original.amount)")
                }
            }
            // A pre-authorisation may be cancelled in part (what is not captured is released),
            // never beyond what is left of it uncaptured.
            var cancelledInPart = false
            if row.action == .cancel, original.action == .preAuth {
                let captured = try approvedAmount(db, originalID: originalID, action: .capture)
                let cancelled = try approvedAmount(db, originalID: originalID, action: .cancel)
                if captured > 0, captured + cancelled > original.amount {
                    throw LedgerError.invalid(field: "originalID", rule: "pre-authorisation \(originalID) has been captured; refund the capture instead")
                }
                guard captured + cancelled <= original.amount else {
                    throw LedgerError.invalid(field: "amount", rule: "cancels of pre-authorisation \(originalID) would total \(cancelled), more than its authorised \(original.amount)")
                }
                cancelledInPart = captured > 0 || cancelled < original.amount
            }
            let marked: TransactionStatus = switch row.action {
            case .cancel: .cancelled
            case .refund: .refunded
            default: .reversed
            }
            // A partial refund leaves the original approved (more may be refunded); the refund
            // that completes the amount marks it refunded. This row already counts as approved.
            // A cancel of part of a pre-authorisation leaves it approved, for the rest.
            let whole = row.action == .refund ? try refundedAmount(db, originalID: originalID) >= original.amount : !cancelledInPart
            if whole {
                try db.executeCached(sql: "UPDATE txn SET status = ? WHERE id = ?", arguments: [marked.rawValue, originalID])
            }
            if original.action == .sale || original.action == .capture {
                try addToBatch(db, terminalID: row.terminalID, amount: -row.amount)
            }
        }
    }

    static func addToBatch(_ db: Database, terminalID: Int64, amount: Int64) throws {
        try db.executeCached(sql: """
            UPDATE terminal SET batch_open = 1, batch_count = batch_count + 1, batch_amount = batch_amount + ?
            WHERE id = ?
            """, arguments: [amount, terminalID])
    }

    /// The reversal of `id`: the host approved it but the card did not accept the outcome, so it
    /// is undone with a separate message that needs its own STAN.
    static func insertReversal(_ db: Database, of id: Int64, uuid: String, at micros: Int64) throws {
        let original = try transaction(db, id: id, field: "id")
        guard let stan = try allocateSTAN(db, terminalID: original.terminalID, durable: true) else {
            throw LedgerError.database(operation: "allocate the reversal's STAN", message: "no STAN from a durable allocation")
        }
        try db.executeCached(sql: """
            INSERT INTO txn (uuid, terminal_id, provider, action, status, amount, tip_amount, currency, client_reference,
                             stan, rrn, response_code, message, masked_pan, pan_hash, brand, aid, application_label,
                             original_id, created_at, completed_at)
            SELECT ?, terminal_id, provider, 'reversal', 'approved', amount, tip_amount, currency, client_reference,
                   ?, ?, '00', ?, masked_pan, pan_hash, brand, aid, application_label, id, ?, ?
            FROM txn WHERE id = ?
            """, arguments: [uuid, stan.value, rrn(stan: stan, micros: micros), "reversal of transaction \(id)", micros, micros, id])
    }
}

/// STAN counters as positions on the ring 000001…999999, where a counter of 0 (nothing used
/// yet) stands where 999999 does: the next STAN after either is 000001.
enum STANRing {
    static let size = 999_999

    /// How many STANs after `last` are reserved up to `reserved` (0 when none are). A
    /// reservation is never more than a block ahead; a `reserved` further on is behind `last`
    /// (a counter written without it), which reserves nothing.
    static func ahead(of last: Int, to reserved: Int) -> Int {
        let ahead = ((position(reserved) - position(last)) % size + size) % size
        return ahead <= Ledger.stanBlock ? ahead : 0
    }

    /// The counter `count` STANs after `last`.
    static func advance(_ last: Int, by count: Int) -> Int {
        (position(last) - 1 + count) % size + 1
    }

    private static func position(_ counter: Int) -> Int { counter == 0 ? size : counter }
}

/// Transaction ids as UUID version 7 (RFC 9562): 48 bits of Unix milliseconds first, then random
/// bits. Ids made close in time sort close together, so the `uuid` index takes each new row near
/// the last instead of on a random page: with version 4 ids, every commit of a busy issuer
/// rewrote a random leaf of that index (measured: 55 KB written to the WAL per ISO 8583
/// authorisation). An id says when it was made, as the row's `created_at` does anyway.
enum TransactionUUID {
    static func make(milliseconds: UInt64 = UInt64(Ledger.nowMicros() / 1000)) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - i))) }
        var random = SystemRandomNumberGenerator()
        for i in 6..<16 { bytes[i] = UInt8.random(in: 0...255, using: &random) }
        bytes[6] = 0x70 | (bytes[6] & 0x0F)
        bytes[8] = 0x80 | (bytes[8] & 0x3F)
        let hex = Validate.lowerHex(bytes)
        let h = Array(hex)
        return String(h[0..<8]) + "-" + String(h[8..<12]) + "-" + String(h[12..<16]) + "-" + String(h[16..<20]) + "-" + String(h[20..<32])
    }
}
