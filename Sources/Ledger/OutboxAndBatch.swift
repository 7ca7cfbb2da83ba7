import LedgerModel
import GRDB

extension Ledger {
    // MARK: - Outbox

    /// Pending messages due at `now` (microseconds), the longest-waiting first.
    public func pendingOutbox(now: Int64, limit: Int = 100) throws -> [OutboxEntry] {
        try read("read the pending outbox") { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT * FROM outbox WHERE status = 'pending' AND next_attempt_at <= ?
                ORDER BY next_attempt_at, id LIMIT ?
                """), arguments: [now, limit]).map(Self.outboxEntry)
        }
    }

    /// The outbox messages of a transaction, in the order they were committed.
    public func outbox(transactionID: Int64) throws -> [OutboxEntry] {
        try read("read the outbox of \(transactionID)") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM outbox WHERE transaction_id = ? ORDER BY id", arguments: [transactionID])
                .map(Self.outboxEntry)
        }
    }

    /// Records a delivery. Only a pending message can be delivered: a message another worker
    /// already marked is an error rather than a second delivery silently recorded.
    @discardableResult
    public func markDelivered(id: Int64, at micros: Int64, answer: String = "delivered") throws -> OutboxEntry {
        try write("mark outbox message \(id) delivered") { db in
            try Self.pendingOutbox(db, id: id)
            try db.executeCached(sql: "UPDATE outbox SET status = 'delivered', attempts = attempts + 1, delivered_at = ?, last_error = NULL WHERE id = ?",
                           arguments: [micros, id])
            try Self.addAttempt(db, id: id, at: micros, outcome: .delivered, answer: answer, resend: false)
            return try Self.outboxEntry(db, id: id)
        }
    }

    /// Records several deliveries in one transaction (one sync for a whole batch of callbacks);
    /// each message must be pending, as for `markDelivered(id:at:)`, or none is recorded. Each
    /// delivery's attempt is recorded with what the endpoint answered (`answers`, by id).
    public func markDelivered(ids: [Int64], at micros: Int64, answers: [Int64: String] = [:]) throws {
        guard !ids.isEmpty else { return }
        try write("mark \(ids.count) outbox messages delivered") { db in
            for id in ids {
                try Self.pendingOutbox(db, id: id)
                try db.executeCached(sql: "UPDATE outbox SET status = 'delivered', attempts = attempts + 1, delivered_at = ?, last_error = NULL WHERE id = ?",
                               arguments: [micros, id])
                try Self.addAttempt(db, id: id, at: micros, outcome: .delivered, answer: answers[id] ?? "delivered", resend: false)
            }
        }
    }

    /// The attempts to deliver message `id`, in order.
    public func outboxAttempts(id: Int64) throws -> [OutboxAttempt] {
        try read("read the attempts of outbox message \(id)") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM outbox_attempt WHERE outbox_id = ? ORDER BY seq", arguments: [id]).map {
                OutboxAttempt(outboxID: $0["outbox_id"], seq: $0["seq"], at: $0["at"],
                              outcome: OutboxAttempt.Outcome(rawValue: $0["outcome"]) ?? .failed, answer: $0["answer"], resend: ($0["resend"] as Int) == 1)
            }
        }
    }

    /// Outbox message `id`.
    public func outboxEntry(id: Int64) throws -> OutboxEntry? {
        try read("read outbox message \(id)") { db in
            try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE id = ?", arguments: [id]).map(Self.outboxEntry)
        }
    }

    /// Records a delivery someone asked for again (a resend): a new attempt of the same message.
    /// Delivered, a message still pending or given up is delivered from now on; failed, the
    /// message is left as it was (the delivery loop's retries and limit are its own).
    @discardableResult
    public func recordResend(id: Int64, at micros: Int64, delivered: Bool, answer: String) throws -> OutboxAttempt {
        try write("record a resend of outbox message \(id)") { db in
            _ = try Self.outboxEntry(db, id: id)
            if delivered {
                try db.execute(sql: """
                    UPDATE outbox SET status = 'delivered', delivered_at = coalesce(delivered_at, ?), last_error = NULL
                    WHERE id = ? AND status != 'delivered'
                    """, arguments: [micros, id])
            }
            return try Self.addAttempt(db, id: id, at: micros, outcome: delivered ? .delivered : .failed, answer: answer, resend: true)
        }
    }

    @discardableResult
    static func addAttempt(_ db: Database, id: Int64, at micros: Int64, outcome: OutboxAttempt.Outcome, answer: String, resend: Bool) throws -> OutboxAttempt {
        let seq = (try Int.fetchOne(db.cachedStatement(sql: "SELECT max(seq) FROM outbox_attempt WHERE outbox_id = ?"), arguments: [id]) ?? 0) + 1
        let text = String(answer.prefix(1000))
        try db.executeCached(sql: "INSERT INTO outbox_attempt (outbox_id, seq, at, outcome, answer, resend) VALUES (?, ?, ?, ?, ?, ?)",
                             arguments: [id, seq, micros, outcome.rawValue, text, resend ? 1 : 0])
        return OutboxAttempt(outboxID: id, seq: seq, at: micros, outcome: outcome, answer: text, resend: resend)
    }

    /// Records a failed attempt and when to try again; after `outboxMaxAttempts` attempts the
    /// message is `failed` and no longer offered by `pendingOutbox`.
    @discardableResult
    public func markAttemptFailed(id: Int64, error: String, nextAttemptAt: Int64, at micros: Int64? = nil) throws -> OutboxEntry {
        // A whole HTML error page is not a useful last error.
        let error = String(error.prefix(1000))
        return try write("mark outbox message \(id) failed") { db in
            try Self.pendingOutbox(db, id: id)
            try Self.addAttempt(db, id: id, at: micros ?? Self.nowMicros(), outcome: .failed, answer: error, resend: false)
            try db.execute(sql: """
                UPDATE outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,
                    status = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE 'pending' END
                WHERE id = ?
                """, arguments: [error, nextAttemptAt, outboxMaxAttempts, id])
            return try Self.outboxEntry(db, id: id)
        }
    }

    private static func pendingOutbox(_ db: Database, id: Int64) throws {
        let entry = try outboxEntry(db, id: id)
        guard entry.status == .pending else {
            throw LedgerError.outboxNotPending(id: id, status: entry.status)
        }
    }

    private static func outboxEntry(_ db: Database, id: Int64) throws -> OutboxEntry {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM outbox WHERE id = ?"), arguments: [id]) else {
            throw LedgerError.unknownOutbox(id: id)
        }
        return try outboxEntry(row)
    }

    static func outboxEntry(_ row: Row) throws -> OutboxEntry {
        let id: Int64 = row["id"]
        let kind: String = row["kind"], status: String = row["status"]
        guard let k = OutboxKind(rawValue: kind), let s = OutboxStatus(rawValue: status) else {
            throw LedgerError.database(operation: "read outbox message \(id)", message: "kind \"\(kind)\" or status \"\(status)\" is not a known value")
        }
        return OutboxEntry(id: id, transactionID: row["transaction_id"], kind: k, target: row["target"], payload: row["payload"],
                           status: s, attempts: row["attempts"], nextAttemptAt: row["next_attempt_at"],
                           lastError: row["last_error"], createdAt: row["created_at"], deliveredAt: row["delivered_at"])
    }

    // MARK: - Batch

    /// Opens the terminal's batch. A batch is open from the terminal's creation and reopens by
    /// itself with the first approved sale after a close; opening an open batch is an error.
    @discardableResult
    public func openBatch(terminal name: String) throws -> TerminalRecord {
        try write("open the batch of terminal \(name)") { db in
            let terminal = try Self.terminal(db, name: name)
            guard !terminal.batchOpen else {
                throw LedgerError.invalid(field: "batch", rule: "batch \(terminal.batchNumber) of terminal \"\(name)\" is already open")
            }
            try db.execute(sql: "UPDATE terminal SET batch_open = 1 WHERE id = ?", arguments: [terminal.id])
            return try Self.terminal(db, name: name)
        }
    }

    /// Closes the terminal's open batch: returns its totals, then numbers the next batch and
    /// zeroes the counters. Refused while a transaction of the terminal is in progress, whose
    /// outcome would otherwise land in the wrong batch.
    public func closeBatch(terminal name: String) throws -> BatchTotals {
        try write("close the batch of terminal \(name)") { db in
            let terminal = try Self.terminal(db, name: name)
            guard terminal.batchOpen else {
                throw LedgerError.invalid(field: "batch", rule: "terminal \"\(name)\" has no open batch (batch \(terminal.batchNumber) is closed)")
            }
            if let busy = try Int64.fetchOne(db, sql: "SELECT id FROM txn WHERE completed_at IS NULL AND terminal_id = ? LIMIT 1",
                                             arguments: [terminal.id]) {
                throw LedgerError.invalid(field: "batch", rule: "terminal \"\(name)\" has transaction \(busy) in progress; close the batch after it completes")
            }
            try db.execute(sql: """
                UPDATE terminal SET batch_number = batch_number + 1, batch_open = 0, batch_count = 0, batch_amount = 0
                WHERE id = ?
                """, arguments: [terminal.id])
            return BatchTotals(terminal: name, batchNumber: terminal.batchNumber, count: terminal.batchCount, amount: terminal.batchAmount)
        }
    }
}
