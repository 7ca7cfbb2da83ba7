import Foundation
import GRDB
import Terminal

extension Ledger {
    /// The shape of a synthetic history: how many rows, over which terminals, cards and
    /// client references.
    public struct SyntheticHistory: Sendable {
        public var rows: Int
        /// Terminal names; each is created with a TID derived from its position.
        public var terminals: [String]
        /// Card PANs the rows are spread over (hashed like real ones).
        public var pans: [String]
        /// Distinct client references: `ref-0` … `ref-(n-1)`.
        public var clientReferences: Int
        public var seed: UInt64
        /// Microseconds since 1970 of the first row; rows are a second apart.
        public var start: Int64

        public init(rows: Int, terminals: [String], pans: [String], clientReferences: Int, seed: UInt64, start: Int64) {
            self.rows = rows
            self.terminals = terminals
            self.pans = pans
            self.clientReferences = clientReferences
            self.seed = seed
            self.start = start
        }
    }

    /// Benchmark support: appends `history.rows` completed transactions in one write
    /// transaction, through multi-row inserts, to measure lookups at a realistic size without
    /// a million begin/complete pairs. Rows take STANs from the terminals' counters like real
    /// ones; 90% are approved sales, 7% declined sales, 3% approved refunds of an earlier row.
    /// No traces or outbox rows are written.
    public func appendSyntheticHistory(_ history: SyntheticHistory) throws {
        guard history.rows >= 0, !history.terminals.isEmpty, !history.pans.isEmpty, history.clientReferences >= 1 else {
            throw LedgerError.invalid(field: "history", rule: "needs rows ≥ 0, at least one terminal, one PAN and one client reference")
        }
        for (i, name) in history.terminals.enumerated() {
            _ = try ensureTerminal(name: name, tid: String(format: "%08d", 10_000_000 + i))
        }
        let hashes = try history.pans.map(panHash)
        let masked = history.pans.map { String($0.prefix(6)) + String(repeating: "*", count: $0.count - 10) + String($0.suffix(4)) }
        let columnList = "uuid, terminal_id, provider, action, status, amount, tip_amount, currency, client_reference, stan, rrn, " +
            "authorisation_code, response_code, message, masked_pan, pan_hash, brand, aid, application_label, arqc, atc, tvr, cvm, " +
            "entry_mode, original_id, created_at, completed_at"
        let columnCount = 27
        let perStatement = 256

        try write("append synthetic history") { db in
            let terminals = try history.terminals.map { try Self.terminal(db, name: $0) }
            var stans = terminals.map { $0.lastSTAN }
            let firstID = (try Int64.fetchOne(db, sql: "SELECT max(id) FROM txn") ?? 0) + 1
            var rng = SyntheticRandom(state: history.seed)
            let full = try db.cachedStatement(sql: "INSERT INTO txn (\(columnList)) VALUES "
                + Array(repeating: "(" + Array(repeating: "?", count: columnCount).joined(separator: ",") + ")", count: perStatement).joined(separator: ","))
            var done = 0
            while done < history.rows {
                let n = min(perStatement, history.rows - done)
                var values: [(any DatabaseValueConvertible)?] = []
                values.reserveCapacity(n * columnCount)
                for k in 0..<n {
                    let i = done + k
                    let t = Int(rng.next() % UInt64(terminals.count))
                    let card = Int(rng.next() % UInt64(hashes.count))
                    let roll = rng.next() % 100
                    let stan = stans[t]?.next ?? .first
                    stans[t] = stan
                    let micros = history.start + Int64(i) * 1_000_000
                    let approved = roll < 90 || roll >= 97
                    let refund = roll >= 97 && firstID + Int64(i) > 1
                    values += [
                        UUID().uuidString.lowercased(), terminals[t].id, "viva", refund ? "refund" : "sale",
                        approved ? "approved" : "declined", Int64(100 + rng.next() % 100_000), 0, 978,
                        "ref-\(rng.next() % UInt64(history.clientReferences))", stan.value, Self.rrn(stan: stan, micros: micros),
                        approved ? String(format: "%06d", Int(rng.next() % 1_000_000)) : nil, approved ? "00" : "51",
                        approved ? "Transaction successful." : "Insufficient funds", masked[card], hashes[card], "VISA",
                        "A0000000031010", "VISA CREDIT", String(format: "%016llX", rng.next()), String(format: "%04X", Int(rng.next() % 65_536)),
                        "0000008000", "CHIP-PIN", "ICC", refund ? Int64(rng.next() % UInt64(firstID + Int64(i) - 1)) + 1 : nil,
                        micros, micros + 2_000_000,
                    ]
                }
                if n == perStatement {
                    try full.execute(arguments: StatementArguments(values))
                } else {
                    let tail = try db.makeStatement(sql: "INSERT INTO txn (\(columnList)) VALUES "
                        + Array(repeating: "(" + Array(repeating: "?", count: columnCount).joined(separator: ",") + ")", count: n).joined(separator: ","))
                    try tail.execute(arguments: StatementArguments(values))
                }
                done += n
            }
            for (t, terminal) in terminals.enumerated() {
                try db.execute(sql: "UPDATE terminal SET last_stan = ? WHERE id = ?", arguments: [stans[t]?.value ?? 0, terminal.id])
            }
        }
    }
}

/// SplitMix64, to make a synthetic history reproducible from its seed.
struct SyntheticRandom {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
