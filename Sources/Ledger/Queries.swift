import GRDB
import Terminal

extension Ledger {
    /// The lookups the daemon makes while a caller waits, kept as SQL constants so a test can
    /// hold each one's query plan to an index.
    enum Lookup: CaseIterable {
        case byID, byUUID, bySTAN, byClientReference, cardLast

        var sql: String {
            let select = "SELECT \(Ledger.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id"
            return switch self {
            case .byID:
                "\(select) WHERE txn.id = ?"
            case .byUUID:
                "\(select) WHERE txn.uuid = ?"
            case .bySTAN:
                "\(select) WHERE txn.terminal_id = (SELECT id FROM terminal WHERE name = ?) AND txn.stan = ? ORDER BY txn.id DESC LIMIT 1"
            case .byClientReference:
                "\(select) WHERE txn.provider = ? AND txn.client_reference = ? ORDER BY txn.id DESC LIMIT ?"
            case .cardLast:
                "\(select) WHERE txn.terminal_id = (SELECT id FROM terminal WHERE name = ?) AND txn.pan_hash = ? AND txn.status = ? ORDER BY txn.id DESC"
            }
        }
    }

    static let columns = """
        txn.id, txn.uuid, txn.terminal_id, terminal.name AS terminal_name, terminal.tid, txn.provider, txn.action, \
        txn.status, txn.amount, txn.tip_amount, txn.currency, txn.client_reference, txn.stan, txn.rrn, \
        txn.authorisation_code, txn.response_code, txn.message, txn.masked_pan, txn.pan_hash, txn.brand, txn.aid, \
        txn.application_label, txn.cardholder_name, txn.arqc, txn.atc, txn.tvr, txn.cvm, txn.entry_mode, \
        txn.installments, txn.original_id, txn.extra, txn.created_at, txn.completed_at
        """

    /// The transaction with that row id, or nil.
    public func transaction(id: Int64) throws -> StoredTransaction? {
        try read("read transaction \(id)") { db in
            try Row.fetchOne(db, sql: Lookup.byID.sql, arguments: [id]).map(Self.storedTransaction)
        }
    }

    /// The transaction with that UUID (Viva's transactionId), or nil.
    public func transaction(uuid: String) throws -> StoredTransaction? {
        try read("read transaction \(uuid)") { db in
            try Row.fetchOne(db, sql: Lookup.byUUID.sql, arguments: [uuid]).map(Self.storedTransaction)
        }
    }

    /// The most recent transaction of `terminal` with that STAN, or nil. STANs wrap after
    /// 999999, so older transactions may share it; the latest is the one a caller means.
    public func transaction(terminal: String, stan: STAN) throws -> StoredTransaction? {
        try read("find STAN \(stan) on terminal \(terminal)") { db in
            try Row.fetchOne(db, sql: Lookup.bySTAN.sql, arguments: [terminal, stan.value]).map(Self.storedTransaction)
        }
    }

    /// The transactions a caller's reference names, most recent first (a sale, its cancel or
    /// refund, retries), at most `limit`.
    public func transactions(provider: Provider, clientReference: String, limit: Int = 100) throws -> [StoredTransaction] {
        try read("find client reference \(clientReference)") { db in
            try Row.fetchAll(db, sql: Lookup.byClientReference.sql, arguments: [provider.rawValue, clientReference, limit])
                .map(Self.storedTransaction)
        }
    }

    /// The most recent transactions made with the card `pan` on `terminal`, newest first, at
    /// most `limit`, among those whose status is `status` and action is one of `actions`.
    ///
    /// The defaults are what "cancel: pick one of this card's last 3" needs: only approved sales
    /// (a declined, failed, already cancelled, refunded or reversed one cannot be cancelled),
    /// filtered before the limit so the card's 3 cancellable sales are found even behind newer
    /// declines. `provider` restricts them to one front's sales.
    public func lastTransactions(terminal: String, pan: String, limit: Int = 3, status: TransactionStatus = .approved,
                                 actions: Set<TransactionAction> = [.sale], provider: Provider? = nil) throws -> [StoredTransaction] {
        let hash = try panHash(pan)
        guard limit > 0 else { return [] }
        return try read("find the card's last transactions on terminal \(terminal)") { db in
            // The index walks this card's rows with that status newest first; the action and
            // provider filters only skip the odd refund among them.
            let rows = try Row.fetchCursor(db, sql: Lookup.cardLast.sql, arguments: [terminal, hash, status.rawValue])
            var found: [StoredTransaction] = []
            while found.count < limit, let row = try rows.next() {
                let transaction = try Self.storedTransaction(row)
                if actions.contains(transaction.action), provider == nil || transaction.provider == provider {
                    found.append(transaction)
                }
            }
            return found
        }
    }

    /// A terminal's transactions newest first, `limit` at a time: pass the last id of a page as
    /// `beforeID` to get the next.
    public func transactions(terminal: String, limit: Int = 50, beforeID: Int64? = nil) throws -> [StoredTransaction] {
        try read("list transactions of terminal \(terminal)") { db in
            let terminalID = try Self.terminal(db, name: terminal).id
            return try Row.fetchAll(db, sql: """
                SELECT \(Self.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id
                WHERE txn.terminal_id = ? AND txn.id < ? ORDER BY txn.id DESC LIMIT ?
                """, arguments: [terminalID, beforeID ?? Int64.max, limit]).map(Self.storedTransaction)
        }
    }

    /// The transactions that act on `id` (its capture, cancel, refund or reversal), oldest first.
    public func transactions(originalID id: Int64) throws -> [StoredTransaction] {
        try read("list transactions acting on \(id)") { db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id
                WHERE txn.original_id = ? ORDER BY txn.id
                """, arguments: [id]).map(Self.storedTransaction)
        }
    }

    /// A transaction's trace in order.
    public func trace(transactionID: Int64) throws -> [TraceEntry] {
        try read("read trace of \(transactionID)") { db in
            try Row.fetchAll(db, sql: "SELECT command, response FROM trace WHERE transaction_id = ? ORDER BY seq",
                             arguments: [transactionID]).map { TraceEntry(command: $0["command"], response: $0["response"]) }
        }
    }

    static func transaction(_ db: Database, id: Int64, field: String) throws -> StoredTransaction {
        guard let row = try Row.fetchOne(db, sql: Lookup.byID.sql, arguments: [id]) else {
            throw LedgerError.unknownTransaction(field: field, id: id)
        }
        return try storedTransaction(row)
    }

    static func storedTransaction(_ row: Row) throws -> StoredTransaction {
        let id: Int64 = row["id"]
        func value<T: RawRepresentable>(_ column: String, _ type: T.Type) throws -> T where T.RawValue == String {
            let raw: String = row[column]
            guard let value = T(rawValue: raw) else {
                throw LedgerError.database(operation: "read transaction \(id)", message: "\(column) \"\(raw)\" is not a known value")
            }
            return value
        }
        let stanValue: Int = row["stan"]
        guard let stan = STAN(stanValue) else {
            throw LedgerError.database(operation: "read transaction \(id)", message: "stan \(stanValue) is out of range")
        }
        return StoredTransaction(
            id: id, uuid: row["uuid"], terminalID: row["terminal_id"], terminalName: row["terminal_name"], tid: row["tid"],
            provider: try value("provider", Provider.self), action: try value("action", TransactionAction.self),
            status: try value("status", TransactionStatus.self), amount: row["amount"], tipAmount: row["tip_amount"],
            currency: row["currency"], clientReference: row["client_reference"], stan: stan, rrn: row["rrn"],
            authorisationCode: row["authorisation_code"], responseCode: row["response_code"], message: row["message"],
            maskedPAN: row["masked_pan"], panHash: row["pan_hash"], brand: row["brand"], aid: row["aid"],
            applicationLabel: row["application_label"], cardholderName: row["cardholder_name"], arqc: row["arqc"],
            atc: row["atc"], tvr: row["tvr"], cvm: row["cvm"], entryMode: row["entry_mode"],
            installments: row["installments"], originalID: row["original_id"], extra: row["extra"],
            createdAt: row["created_at"], completedAt: row["completed_at"])
    }

    /// Test support: `EXPLAIN QUERY PLAN` of a lookup, one detail line per step.
    func queryPlan(_ lookup: Lookup) throws -> [String] {
        let arguments: StatementArguments = switch lookup {
        case .byID: [1]
        case .byUUID: ["x"]
        case .bySTAN: ["t", 1]
        case .byClientReference: ["viva", "r", 10]
        case .cardLast: ["t", "h", "approved"]
        }
        return try read("explain") { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + lookup.sql, arguments: arguments).map { $0["detail"] }
        }
    }
}
