import LedgerModel
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
                Self.clientReferenceSQL(.viva)
            case .cardLast:
                "\(select) WHERE txn.terminal_id = (SELECT id FROM terminal WHERE name = ?) AND txn.pan_hash = ? AND txn.status = ? ORDER BY txn.id DESC"
            }
        }

        /// The provider is written into the SQL, not bound: the Billpocket index is partial on
        /// `provider = 'billpocket'`, and SQLite re-prepares a statement whenever a parameter
        /// compared with a partial index's condition is bound again, which made this lookup
        /// (once per sale, for idempotency) cost a full prepare every time.
        static func clientReferenceSQL(_ provider: Provider) -> String {
            "SELECT \(Ledger.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id "
                + "WHERE txn.provider = '\(provider.rawValue)' AND txn.client_reference = ? ORDER BY txn.id DESC LIMIT ?"
        }
    }

    /// The columns of a `StoredTransaction`, in the order `storedTransaction` reads them by
    /// position: looking a column up by name costs more than the index lookup itself.
    enum Column: Int, CaseIterable {
        case id, uuid, terminalID, terminalName, tid, provider, action, status, amount, tipAmount, currency
        case clientReference, stan, rrn, authorisationCode, responseCode, message, maskedPAN, panHash, brand, aid
        case applicationLabel, cardholderName, arqc, atc, tvr, cvm, entryMode, installments, originalID, extra
        case createdAt, completedAt, oda, cardEntry

        var sql: String {
            switch self {
            case .id: "txn.id"
            case .uuid: "txn.uuid"
            case .terminalID: "txn.terminal_id"
            case .terminalName: "terminal.name"
            case .tid: "terminal.tid"
            case .provider: "txn.provider"
            case .action: "txn.action"
            case .status: "txn.status"
            case .amount: "txn.amount"
            case .tipAmount: "txn.tip_amount"
            case .currency: "txn.currency"
            case .clientReference: "txn.client_reference"
            case .stan: "txn.stan"
            case .rrn: "txn.rrn"
            case .authorisationCode: "txn.authorisation_code"
            case .responseCode: "txn.response_code"
            case .message: "txn.message"
            case .maskedPAN: "txn.masked_pan"
            case .panHash: "txn.pan_hash"
            case .brand: "txn.brand"
            case .aid: "txn.aid"
            case .applicationLabel: "txn.application_label"
            case .cardholderName: "txn.cardholder_name"
            case .arqc: "txn.arqc"
            case .atc: "txn.atc"
            case .tvr: "txn.tvr"
            case .cvm: "txn.cvm"
            case .entryMode: "txn.entry_mode"
            case .installments: "txn.installments"
            case .originalID: "txn.original_id"
            case .extra: "txn.extra"
            case .createdAt: "txn.created_at"
            case .completedAt: "txn.completed_at"
            case .oda: "txn.oda"
            case .cardEntry: "txn.card_entry"
            }
        }
    }

    static let columns = Column.allCases.map(\.sql).joined(separator: ", ")

    /// The transaction with that row id, or nil.
    public func transaction(id: Int64) throws -> StoredTransaction? {
        try read("read transaction \(id)") { db in
            try Self.fetch(db, Lookup.byID.sql, [id]).first
        }
    }

    /// The transaction with that UUID (Viva's transactionId), or nil.
    public func transaction(uuid: String) throws -> StoredTransaction? {
        try Validate.noNUL(uuid, field: "transactionId")
        return try read("read transaction \(uuid)") { db in
            try Self.fetch(db, Lookup.byUUID.sql, [uuid]).first
        }
    }

    /// The most recent transaction of `terminal` with that STAN, or nil. STANs wrap after
    /// 999999, so older transactions may share it; the latest is the one a caller means.
    public func transaction(terminal: String, stan: STAN) throws -> StoredTransaction? {
        try read("find STAN \(stan) on terminal \(terminal)") { db in
            try Self.fetch(db, Lookup.bySTAN.sql, [terminal, stan.value]).first
        }
    }

    /// The transactions a caller's reference names, most recent first (a sale, its cancel or
    /// refund, retries), at most `limit`.
    public func transactions(provider: Provider, clientReference: String, limit: Int = 100) throws -> [StoredTransaction] {
        try Validate.noNUL(clientReference, field: "clientReference")
        return try readOneStatement("find client reference \(clientReference)") { db in
            try Self.fetch(db, Lookup.clientReferenceSQL(provider), [clientReference, limit])
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
            try Self.fetch(db, Lookup.cardLast.sql, [terminal, hash, status.rawValue], limit: limit) {
                actions.contains($0.action) && (provider == nil || $0.provider == provider)
            }
        }
    }

    /// A terminal's transactions newest first, `limit` at a time: pass the last id of a page as
    /// `beforeID` to get the next. `filter` keeps only the rows of a provider, a status, or a span
    /// of creation times; it applies before the limit, so a page is full whenever enough rows match.
    public func transactions(terminal: String, limit: Int = 50, beforeID: Int64? = nil,
                             filter: TransactionFilter = TransactionFilter()) throws -> [StoredTransaction] {
        try read("list transactions of terminal \(terminal)") { db in
            let terminalID = try Self.terminal(db, name: terminal).id
            var sql = """
                SELECT \(Self.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id
                WHERE txn.terminal_id = ? AND txn.id < ?
                """
            var arguments: [any DatabaseValueConvertible] = [terminalID, beforeID ?? Int64.max]
            if let provider = filter.provider { sql += " AND txn.provider = ?"; arguments.append(provider.rawValue) }
            if let status = filter.status { sql += " AND txn.status = ?"; arguments.append(status.rawValue) }
            if let since = filter.createdSince { sql += " AND txn.created_at >= ?"; arguments.append(since) }
            if let until = filter.createdBefore { sql += " AND txn.created_at < ?"; arguments.append(until) }
            sql += " ORDER BY txn.id DESC LIMIT ?"
            arguments.append(limit)
            return try Self.fetch(db, sql, StatementArguments(arguments))
        }
    }

    /// The transactions that act on `id` (its capture, cancel, refund or reversal), oldest first.
    public func transactions(originalID id: Int64) throws -> [StoredTransaction] {
        try read("list transactions acting on \(id)") { db in
            try Self.fetch(db, """
                SELECT \(Self.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id
                WHERE txn.original_id = ? ORDER BY txn.id
                """, [id])
        }
    }

    /// A transaction's trace in order.
    public func trace(transactionID: Int64) throws -> [TraceEntry] {
        try read("read trace of \(transactionID)") { db in
            try Row.fetchAll(db, sql: "SELECT command, response FROM trace WHERE transaction_id = ? ORDER BY seq",
                             arguments: [transactionID]).map { TraceEntry(command: $0["command"], response: $0["response"]) }
        }
    }

    /// The ISO 8583 messages of a transaction, in order.
    public func hostMessages(transactionID: Int64) throws -> [HostMessageEntry] {
        try read("read host messages of \(transactionID)") { db in
            try Row.fetchAll(db, sql: "SELECT direction, mti, fields FROM host_message WHERE transaction_id = ? ORDER BY seq",
                             arguments: [transactionID]).map { HostMessageEntry(direction: HostMessageDirection(rawValue: $0["direction"]) ?? .incoming, mti: $0["mti"], fields: $0["fields"]) }
        }
    }

    static func transaction(_ db: Database, id: Int64, field: String) throws -> StoredTransaction {
        guard let transaction = try fetch(db, Lookup.byID.sql, [id]).first else {
            throw LedgerError.unknownTransaction(field: field, id: id)
        }
        return transaction
    }

    /// Runs a transaction query through the connection's statement cache (GRDB analyses a
    /// statement's tables and columns when it is prepared, which costs more than the lookup)
    /// and decodes rows straight from the cursor, up to `limit` that pass `keep`.
    static func fetch(_ db: Database, _ sql: String, _ arguments: StatementArguments, limit: Int = .max,
                      where keep: (StoredTransaction) -> Bool = { _ in true }) throws -> [StoredTransaction] {
        let cursor = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
        var found: [StoredTransaction] = []
        while found.count < limit, let row = try cursor.next() {
            let transaction = try storedTransaction(row)
            if keep(transaction) { found.append(transaction) }
        }
        return found
    }

    static func storedTransaction(_ row: Row) throws -> StoredTransaction {
        func v<T: DatabaseValueConvertible>(_ column: Column) -> T { row[column.rawValue] }
        let id: Int64 = v(.id)
        func value<T: RawRepresentable>(_ column: Column, _ type: T.Type) throws -> T where T.RawValue == String {
            let raw: String = v(column)
            guard let value = T(rawValue: raw) else {
                throw LedgerError.database(operation: "read transaction \(id)", message: "\(column) \"\(raw)\" is not a known value")
            }
            return value
        }
        let stanValue: Int = v(.stan)
        guard let stan = STAN(stanValue) else {
            throw LedgerError.database(operation: "read transaction \(id)", message: "stan \(stanValue) is out of range")
        }
        return StoredTransaction(
            id: id, uuid: v(.uuid), terminalID: v(.terminalID), terminalName: v(.terminalName), tid: v(.tid),
            provider: try value(.provider, Provider.self), action: try value(.action, TransactionAction.self),
            status: try value(.status, TransactionStatus.self), amount: v(.amount), tipAmount: v(.tipAmount),
            currency: v(.currency), clientReference: v(.clientReference), stan: stan, rrn: v(.rrn),
            authorisationCode: v(.authorisationCode), responseCode: v(.responseCode), message: v(.message),
            maskedPAN: v(.maskedPAN), panHash: v(.panHash), brand: v(.brand), aid: v(.aid),
            applicationLabel: v(.applicationLabel), cardholderName: v(.cardholderName), arqc: v(.arqc), atc: v(.atc),
            tvr: v(.tvr), cvm: v(.cvm), entryMode: v(.entryMode), installments: v(.installments),
            originalID: v(.originalID), extra: v(.extra), createdAt: v(.createdAt), completedAt: v(.completedAt), oda: v(.oda),
            cardEntry: v(.cardEntry))
    }

    /// Test support: `EXPLAIN QUERY PLAN` of a lookup, one detail line per step.
    func queryPlan(_ lookup: Lookup) throws -> [String] {
        let arguments: StatementArguments = switch lookup {
        case .byID: [1]
        case .byUUID: ["x"]
        case .bySTAN: ["t", 1]
        case .byClientReference: ["r", 10]
        case .cardLast: ["t", "h", "approved"]
        }
        return try read("explain") { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + lookup.sql, arguments: arguments).map { $0["detail"] }
        }
    }
}
