import EMV
import LedgerModel
import Foundation
import GRDB

extension Ledger {
    /// Creates merchant `merchantID` with `key` (stored as a SHA-256 hash to authenticate, and
    /// sealed, because each IPN's `sign` is made with it), or gives an existing one a new key.
    public func setCitconMerchantKey(_ merchantID: String, key: String, at now: Int64) throws -> CitconMerchant {
        try Self.validateMerchantID(merchantID)
        let sealed = try seal(Array(key.utf8))
        let terminalName = "citcon.\(merchantID)"
        return try write("set the key of Citcon merchant \(merchantID)") { db in
            if try Row.fetchOne(db, sql: "SELECT 1 FROM citcon_merchant WHERE merchant_id = ?", arguments: [merchantID]) != nil {
                try db.execute(sql: "UPDATE citcon_merchant SET key_hash = ?, key_sealed = ?, rotated_at = ? WHERE merchant_id = ?",
                               arguments: [Self.tokenHash(key), sealed, now, merchantID])
            } else {
                let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM citcon_merchant") ?? 0
                let tid = "8" + String(format: "%07d", (count + 1) % 10_000_000)
                try db.execute(sql: "INSERT INTO terminal (name, tid, created_at) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING",
                               arguments: [terminalName, tid, now])
                try db.execute(sql: """
                    INSERT INTO citcon_merchant (merchant_id, terminal_name, key_hash, key_sealed, created_at) VALUES (?, ?, ?, ?, ?)
                    """, arguments: [merchantID, terminalName, Self.tokenHash(key), sealed, now])
            }
            return CitconMerchant(merchantID: merchantID, terminalName: terminalName,
                                  createdAt: try Int64.fetchOne(db, sql: "SELECT created_at FROM citcon_merchant WHERE merchant_id = ?",
                                                                arguments: [merchantID]) ?? now)
        }
    }

    /// The merchant whose key is `key`, if any.
    public func citconMerchant(key: String) throws -> CitconMerchant? {
        try read("find a Citcon merchant by key") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM citcon_merchant WHERE key_hash = ?"), arguments: [Self.tokenHash(key)]).map {
                CitconMerchant(merchantID: $0["merchant_id"], terminalName: $0["terminal_name"], createdAt: $0["created_at"])
            }
        }
    }

    /// Every merchant, oldest first.
    public func citconMerchants() throws -> [CitconMerchant] {
        try read("list Citcon merchants") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM citcon_merchant ORDER BY created_at, merchant_id").map {
                CitconMerchant(merchantID: $0["merchant_id"], terminalName: $0["terminal_name"], createdAt: $0["created_at"])
            }
        }
    }

    /// The merchant's key, unsealed, to sign its IPNs.
    public func citconMerchantKey(_ merchantID: String) throws -> String? {
        let sealed = try read("read a Citcon merchant key") { db in
            try String.fetchOne(db, sql: "SELECT key_sealed FROM citcon_merchant WHERE merchant_id = ?", arguments: [merchantID])
        }
        return try sealed.map { String(decoding: try unseal($0), as: UTF8.self) }
    }

    /// Records an access token by its hash.
    public func storeCitconToken(_ token: String, merchantID: String, type: String, at now: Int64, expiresAt: Int64) throws {
        try write("record a Citcon access token", durable: false) { db in
            try db.execute(sql: """
                INSERT INTO citcon_token (token_hash, merchant_id, token_type, created_at, expires_at) VALUES (?, ?, ?, ?, ?)
                """, arguments: [Self.tokenHash(token), merchantID, type, now, expiresAt])
        }
    }

    /// The merchant, type and expiry of an access token, if it is one.
    public func citconToken(_ token: String) throws -> (merchantID: String, type: String, expiresAt: Int64)? {
        try read("read a Citcon access token") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM citcon_token WHERE token_hash = ?"), arguments: [Self.tokenHash(token)]).map {
                ($0["merchant_id"], $0["token_type"], $0["expires_at"])
            }
        }
    }

    /// Records a new charge; nil when the merchant already has a charge with its reference.
    public func insertCitconCharge(_ charge: CitconCharge) throws -> CitconCharge? {
        try write("record a Citcon charge") { db in
            if try Row.fetchOne(db, sql: "SELECT 1 FROM citcon_charge WHERE merchant_id = ? AND reference = ?",
                                arguments: [charge.merchantID, charge.reference]) != nil { return nil }
            try db.execute(sql: """
                INSERT INTO citcon_charge (id, charge_token, merchant_id, reference, transaction_id, state, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                """, arguments: [charge.id, charge.chargeToken, charge.merchantID, charge.reference, charge.transactionID,
                                 try encodeCharge(charge), charge.timeCreated])
            return charge
        }
    }

    /// Records a charge's new state with the outcome of its ledger transaction, when there is
    /// one, and its IPNs, in one commit.
    public func completeCitconCharge(transactionID: Int64?, _ result: Completion?, charge: CitconCharge, outbox: [OutboxMessage]) throws {
        if let result { try LedgerRules.validate(result, trace: [], outbox: outbox) }
        let panHash = try result?.pan.map(panHash)
        try write("update Citcon charge \(charge.id)") { db in
            // The operations this write adds (those the stored charge has were checked when added;
            // a ledger from before the check may hold references used twice, and keeps them).
            let stored = Set(try String.fetchAll(db, sql: """
                SELECT json_extract(o.value, '$.id') FROM citcon_charge c, json_each(c.state, '$.operations') o WHERE c.id = ?
                """, arguments: [charge.id]))
            try db.execute(sql: "UPDATE citcon_charge SET state = ?, transaction_id = ?, updated_at = ? WHERE id = ?",
                           arguments: [try encodeCharge(charge), charge.transactionID, Self.nowMicros(), charge.id])
            guard db.changesCount == 1 else { throw LedgerError.invalid(field: "transaction_id", rule: "no charge \(charge.id)") }
            // Each operation's reference is the merchant's once: a second operation under it is
            // refused here even when two charges race for it.
            for operation in charge.operations where !operation.reference.isEmpty && !stored.contains(operation.id) {
                try db.execute(sql: """
                    INSERT INTO citcon_operation_reference (merchant_id, reference, operation_id) VALUES (?, ?, ?)
                    ON CONFLICT (merchant_id, reference) DO NOTHING
                    """, arguments: [charge.merchantID, operation.reference, operation.id])
                let owner = try String.fetchOne(db, sql: "SELECT operation_id FROM citcon_operation_reference WHERE merchant_id = ? AND reference = ?",
                                                arguments: [charge.merchantID, operation.reference])
                guard owner == operation.id else {
                    throw LedgerError.invalid(field: "reference", rule: LedgerRules.citconReferenceUsed)
                }
            }
            if let transactionID, let result {
                _ = try Self.complete(db, id: transactionID, result, panHash: panHash, reversalUUID: TransactionUUID.make(),
                                      trace: [], outbox: outbox)
            }
        }
    }

    public func recordCitconChargeEvent(_ charge: CitconCharge, outbox: [(transactionID: Int64, message: OutboxMessage)]) throws {
        for (i, entry) in outbox.enumerated() {
            try Validate.noNUL(entry.message.target, field: "outbox[\(i)].target")
            try Validate.noNUL(entry.message.payload, field: "outbox[\(i)].payload")
        }
        try write("record an event of Citcon charge \(charge.id)") { db in
            try db.execute(sql: "UPDATE citcon_charge SET state = ?, updated_at = ? WHERE id = ?",
                           arguments: [try encodeCharge(charge), Self.nowMicros(), charge.id])
            guard db.changesCount == 1 else { throw LedgerError.invalid(field: "transaction_id", rule: "no charge \(charge.id)") }
            let now = Self.nowMicros()
            for (transactionID, message) in outbox {
                try db.execute(sql: """
                    INSERT INTO outbox (transaction_id, kind, target, payload, next_attempt_at, created_at, status, attempts, delivered_at)
                    VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, NULL)
                    """, arguments: [transactionID, message.kind.rawValue, message.target, message.payload, message.nextAttemptAt ?? now, now])
            }
        }
    }

    /// Whether the merchant has a capture, cancel or refund under `reference`.
    public func citconOperationReferenceUsed(merchantID: String, reference: String) throws -> Bool {
        try read("look up a Citcon operation reference") { db in
            try Row.fetchOne(db, sql: "SELECT 1 FROM citcon_operation_reference WHERE merchant_id = ? AND reference = ?",
                             arguments: [merchantID, reference]) != nil
        }
    }

    /// A charge by its id or its charge token.
    /// The charge whose own ledger row is `transactionID`.
    public func citconCharge(transactionID: Int64) throws -> CitconCharge? {
        try read("read a Citcon charge by its row") { db in
            try String.fetchOne(db, sql: "SELECT state FROM citcon_charge WHERE transaction_id = ?", arguments: [transactionID]).map(decodeCharge)
        }
    }

    public func citconCharge(id: String? = nil, chargeToken: String? = nil) throws -> CitconCharge? {
        try read("read a Citcon charge") { db in
            let sql = id != nil ? "SELECT state FROM citcon_charge WHERE id = ?" : "SELECT state FROM citcon_charge WHERE charge_token = ?"
            return try String.fetchOne(db, sql: sql, arguments: [id ?? chargeToken]).map(decodeCharge)
        }
    }

    /// A charge's state as stored: its vault token sealed, never in clear.
    func encodeCharge(_ charge: CitconCharge) throws -> String {
        var c = charge
        c.sealedVaultToken = try c.vaultToken.map { try seal(Array($0.utf8)) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(c), as: UTF8.self)
    }

    func decodeCharge(_ text: String) throws -> CitconCharge {
        var c: CitconCharge
        do { c = try JSONDecoder().decode(CitconCharge.self, from: Data(text.utf8)) } catch {
            throw LedgerError.database(operation: "read a Citcon charge", message: "\(error)")
        }
        c.vaultToken = try c.sealedVaultToken.map { String(decoding: try unseal($0), as: UTF8.self) }
        c.sealedVaultToken = nil
        return c
    }

    // MARK: Vault

    /// Vaults a card for a merchant's consumer: the token of that consumer's card when it has one,
    /// else a new one. The card is sealed; the token is found by its hash.
    public func storeCitconVaultCard(merchantID: String, consumer: String, pan: String, expiry: String, at now: Int64) throws -> (token: String, isNew: Bool) {
        let panHash = try panHash(pan)
        let fresh = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let sealed = try seal(Array(try JSONEncoder().encode(["token": fresh, "pan": pan, "expiry": expiry])))
        return try write("vault a Citcon card") { db in
            if let existing = try String.fetchOne(db, sql: "SELECT sealed FROM citcon_vault WHERE merchant_id = ? AND consumer = ? AND pan_hash = ?",
                                                  arguments: [merchantID, consumer, panHash]) {
                let opened = try JSONDecoder().decode([String: String].self, from: Data(try unseal(existing)))
                return (opened["token"] ?? "", false)
            }
            try db.execute(sql: """
                INSERT INTO citcon_vault (token_hash, merchant_id, consumer, pan_hash, sealed, masked_pan, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Self.tokenHash(fresh), merchantID, consumer, panHash, sealed, PAN.masked(pan), now])
            return (fresh, true)
        }
    }

    /// A vaulted card of `merchantID` by its token: the card and whose it is.
    public func citconVaultCard(token: String, merchantID: String) throws -> (pan: String, expiry: String, consumer: String)? {
        let row = try read("read a Citcon vault card") { db in
            try Row.fetchOne(db, sql: "SELECT consumer, sealed FROM citcon_vault WHERE token_hash = ? AND merchant_id = ?", arguments: [Self.tokenHash(token), merchantID])
        }
        guard let row else { return nil }
        let opened = try JSONDecoder().decode([String: String].self, from: Data(try unseal(row["sealed"])))
        guard opened["token"] == token, let pan = opened["pan"], let expiry = opened["expiry"] else { return nil }
        return (pan, expiry, row["consumer"])
    }
}
