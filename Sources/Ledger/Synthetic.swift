import LedgerModel
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
            _ = try ensureTerminal(name: name, tid: String(10_000_000 + i))
        }
        let hashes = try history.pans.map { try panHash($0).databaseValue }
        let masked = history.pans.map { (String($0.prefix(6)) + String(repeating: "*", count: $0.count - 10) + String($0.suffix(4))).databaseValue }
        // Values every row shares, converted once.
        let (viva, saleAction, refundAction, approvedStatus, declinedStatus) = ("viva".databaseValue, "sale".databaseValue,
            "refund".databaseValue, "approved".databaseValue, "declined".databaseValue)
        let (zero, eur, code00, code51) = (0.databaseValue, 978.databaseValue, "00".databaseValue, "51".databaseValue)
        let (successful, insufficient) = ("Transaction successful.".databaseValue, "Insufficient funds".databaseValue)
        let (visa, aid, label, tvr, cvm, icc) = ("VISA".databaseValue, "A0000000031010".databaseValue, "VISA CREDIT".databaseValue,
                                                 "0000008000".databaseValue, "CHIP-PIN".databaseValue, "ICC".databaseValue)
        let columnList = "uuid, terminal_id, provider, action, status, amount, tip_amount, currency, client_reference, stan, rrn, " +
            "authorisation_code, response_code, message, masked_pan, pan_hash, brand, aid, application_label, arqc, atc, tvr, cvm, " +
            "entry_mode, original_id, created_at, completed_at"
        let columnCount = 27
        let perStatement = 256

        // The whole history is one transaction: with SQLite's default 2 MB page cache its pages
        // spill to the WAL and are read back again and again, so the writer gets room for them
        // while it fills, and its default back afterwards.
        let defaultCache = try write("read the cache size") { try Int.fetchOne($0, sql: "PRAGMA cache_size") } ?? -2000
        try setWriterCacheSize(kibibytes: 1_048_576)
        defer { try? setWriterCacheSize(kibibytes: -defaultCache) }
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
                var values: [DatabaseValue] = []
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
                    let original = refund ? Int64(rng.next() % UInt64(firstID + Int64(i) - 1)) + 1 : nil
                    let row: [DatabaseValue] = [
                        SyntheticRandom.uuid(rng.next(), rng.next()).databaseValue, terminals[t].id.databaseValue, viva,
                        refund ? refundAction : saleAction, approved ? approvedStatus : declinedStatus,
                        Int64(100 + rng.next() % 100_000).databaseValue, zero, eur,
                        ("ref-" + String(rng.next() % UInt64(history.clientReferences))).databaseValue, stan.value.databaseValue,
                        Self.rrn(stan: stan, micros: micros).databaseValue,
                        approved ? SyntheticRandom.digits(rng.next() % 1_000_000, 6).databaseValue : .null,
                        approved ? code00 : code51, approved ? successful : insufficient, masked[card], hashes[card], visa, aid,
                        label, SyntheticRandom.hex(rng.next(), 16).databaseValue, SyntheticRandom.hex(rng.next() % 65_536, 4).databaseValue,
                        tvr, cvm, icc, original.databaseValue, micros.databaseValue, (micros + 2_000_000).databaseValue,
                    ]
                    values += row
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
                try db.execute(sql: "UPDATE terminal SET last_stan = ?1, stan_reserved = ?1 WHERE id = ?2", arguments: [stans[t]?.value ?? 0, terminal.id])
            }
        }
    }
}

extension Ledger {
    func setWriterCacheSize(kibibytes: Int) throws {
        do {
            try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA cache_size = \(-kibibytes)") }
        } catch {
            throw LedgerError.database(operation: "set the cache size", message: Self.describe(error))
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

    /// A version 4 UUID string, lower case, from 128 random bits.
    static func uuid(_ a: UInt64, _ b: UInt64) -> String {
        let hi = (a & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let lo = (b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let h = hex(hi, 16).lowercased(), l = hex(lo, 16).lowercased()
        return "\(h.prefix(8))-\(h.dropFirst(8).prefix(4))-\(h.suffix(4))-\(l.prefix(4))-\(l.suffix(12))"
    }

    /// `value` as `width` upper-case hex digits, zero-padded.
    static func hex(_ value: UInt64, _ width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// `value` as `width` decimal digits, zero-padded.
    static func digits(_ value: UInt64, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
