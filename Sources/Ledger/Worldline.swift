import LedgerModel
import Crypto
import Foundation
import GRDB

extension Ledger {
    // MARK: Sealed secrets

    /// Secrets the daemon must read back (the Worldline API secrets it verifies signatures with,
    /// webhook secrets, the Client API's private keys) are stored sealed: AES-GCM under a key
    /// derived from the ledger's PAN key, so the database alone does not give them away.
    func seal(_ plaintext: [UInt8]) throws -> String {
        do {
            guard let combined = try AES.GCM.seal(plaintext, using: sealingKey).combined else {
                throw LedgerError.database(operation: "seal a secret", message: "AES-GCM gave no combined box")
            }
            return combined.base64EncodedString()
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.database(operation: "seal a secret", message: "\(error)")
        }
    }

    func unseal(_ text: String) throws -> [UInt8] {
        do {
            guard let data = Data(base64Encoded: text) else { throw LedgerError.database(operation: "unseal a secret", message: "not base64") }
            return Array(try AES.GCM.open(AES.GCM.SealedBox(combined: data), using: sealingKey))
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.database(operation: "unseal a secret", message: "\(error) (was the PAN key replaced?)")
        }
    }

    private var sealingKey: SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: panKey, info: Array("cardbench ledger sealed secrets v1".utf8), outputByteCount: 32)
    }

    // MARK: Merchants and keys

    /// The merchant `merchantID`, created (with its ledger terminal) when new.
    public func ensureWorldlineMerchant(_ merchantID: String, at now: Int64) throws -> WorldlineMerchant {
        try Self.validateMerchantID(merchantID)
        // Every request of a merchant asks: a known one is a read, not a durable write.
        if let known = try readOneStatement("read Worldline merchant", { db in try Self.worldlineMerchant(db, merchantID) }) { return known }
        let terminalName = "worldline.\(merchantID)"
        return try write("ensure Worldline merchant \(merchantID)") { db in
            if let existing = try Self.worldlineMerchant(db, merchantID) { return existing }
            // A TID the platform's ledger terminal is known by: 9 then the merchant's number.
            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM worldline_merchant") ?? 0
            let tid = "9" + String(format: "%07d", (count + 1) % 10_000_000)
            try db.execute(sql: "INSERT INTO terminal (name, tid, created_at) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING",
                           arguments: [terminalName, tid, now])
            try db.execute(sql: "INSERT INTO worldline_merchant (merchant_id, terminal_name, created_at) VALUES (?, ?, ?)",
                           arguments: [merchantID, terminalName, now])
            return try Self.worldlineMerchant(db, merchantID)!
        }
    }

    /// The merchant `merchantID`, if it exists.
    public func worldlineMerchant(_ merchantID: String) throws -> WorldlineMerchant? {
        try read("read Worldline merchant") { db in try Self.worldlineMerchant(db, merchantID) }
    }

    /// Every merchant, oldest first.
    public func worldlineMerchants() throws -> [WorldlineMerchant] {
        try read("list Worldline merchants") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM worldline_merchant ORDER BY created_at, merchant_id").map(Self.worldlineMerchant)
        }
    }

    /// Stores a new API key; `secret` is sealed, and shown by no later call but `worldlineAPISecret`.
    public func createWorldlineAPIKey(merchantID: String, keyID: String, secret: String, at now: Int64) throws -> WorldlineAPIKey {
        _ = try ensureWorldlineMerchant(merchantID, at: now)
        let sealed = try seal(Array(secret.utf8))
        return try write("create a Worldline API key") { db in
            try db.execute(sql: "INSERT INTO worldline_api_key (key_id, merchant_id, secret, created_at) VALUES (?, ?, ?, ?)",
                           arguments: [keyID, merchantID, sealed, now])
            return WorldlineAPIKey(keyID: keyID, merchantID: merchantID, createdAt: now, revokedAt: nil)
        }
    }

    /// The API keys (of one merchant, or all), oldest first; never their secrets.
    public func worldlineAPIKeys(merchantID: String? = nil) throws -> [WorldlineAPIKey] {
        try read("list Worldline API keys") { db in
            try Row.fetchAll(db, sql: """
                SELECT key_id, merchant_id, created_at, revoked_at FROM worldline_api_key
                WHERE ?1 IS NULL OR merchant_id = ?1 ORDER BY created_at, key_id
                """, arguments: [merchantID]).map {
                WorldlineAPIKey(keyID: $0["key_id"], merchantID: $0["merchant_id"], createdAt: $0["created_at"], revokedAt: $0["revoked_at"])
            }
        }
    }

    /// The key's merchant and secret, to verify a request's signature; nil for an unknown key.
    public func worldlineAPISecret(keyID: String) throws -> (key: WorldlineAPIKey, secret: String)? {
        let row = try read("read a Worldline API key") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM worldline_api_key WHERE key_id = ?"), arguments: [keyID])
        }
        guard let row else { return nil }
        let key = WorldlineAPIKey(keyID: row["key_id"], merchantID: row["merchant_id"], createdAt: row["created_at"], revokedAt: row["revoked_at"])
        return (key, String(decoding: try unseal(row["secret"]), as: UTF8.self))
    }

    /// Revokes a key: its requests are refused from now on.
    public func revokeWorldlineAPIKey(keyID: String, at now: Int64) throws -> WorldlineAPIKey {
        try write("revoke a Worldline API key") { db in
            try db.execute(sql: "UPDATE worldline_api_key SET revoked_at = coalesce(revoked_at, ?) WHERE key_id = ?", arguments: [now, keyID])
            guard let row = try Row.fetchOne(db, sql: "SELECT key_id, merchant_id, created_at, revoked_at FROM worldline_api_key WHERE key_id = ?",
                                             arguments: [keyID]) else {
                throw LedgerError.invalid(field: "keyId", rule: "no API key \(keyID)")
            }
            return WorldlineAPIKey(keyID: row["key_id"], merchantID: row["merchant_id"], createdAt: row["created_at"], revokedAt: row["revoked_at"])
        }
    }

    /// Sets (or, with a nil `url`, removes) the merchant's webhook endpoint and its signing key.
    public func setWorldlineWebhook(merchantID: String, url: String?, keyID: String?, secret: String?, at now: Int64) throws -> WorldlineMerchant {
        _ = try ensureWorldlineMerchant(merchantID, at: now)
        let sealed = try secret.map { try seal(Array($0.utf8)) }
        return try write("set the Worldline webhook of \(merchantID)") { db in
            try db.execute(sql: "UPDATE worldline_merchant SET webhook_url = ?, webhook_key_id = ?, webhook_secret = ? WHERE merchant_id = ?",
                           arguments: [url, keyID, sealed, merchantID])
            return try Self.worldlineMerchant(db, merchantID)!
        }
    }

    /// The merchant's webhook key and secret, to sign a webhook.
    public func worldlineWebhookKey(merchantID: String) throws -> (keyID: String, secret: String)? {
        let row = try read("read a Worldline webhook key") { db in
            try Row.fetchOne(db, sql: "SELECT webhook_key_id, webhook_secret FROM worldline_merchant WHERE merchant_id = ?", arguments: [merchantID])
        }
        guard let row, let keyID: String = row["webhook_key_id"], let sealed: String = row["webhook_secret"] else { return nil }
        return (keyID, String(decoding: try unseal(sealed), as: UTF8.self))
    }

    // MARK: Client API keys and sessions

    /// Every RSA key of the Client API, newest first; the private halves unsealed.
    public func worldlineCryptoKeys() throws -> [WorldlineCryptoKey] {
        let rows = try read("read the Worldline crypto keys") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM worldline_crypto_key ORDER BY created_at DESC, key_id DESC")
        }
        return try rows.map { row in
            WorldlineCryptoKey(keyID: row["key_id"], publicKeyDER: Array(Data(base64Encoded: row["public_key"] as String) ?? Data()),
                               privateKeyDER: try unseal(row["private_key"]), createdAt: row["created_at"], retiredAt: row["retired_at"])
        }
    }

    /// Adds a key pair; the current one (if any) is retired: it still decrypts, but is no longer handed out.
    public func addWorldlineCryptoKey(keyID: String, privateKeyDER: [UInt8], publicKeyDER: [UInt8], at now: Int64) throws {
        let sealed = try seal(privateKeyDER)
        try write("add a Worldline crypto key") { db in
            try db.execute(sql: "UPDATE worldline_crypto_key SET retired_at = ? WHERE retired_at IS NULL", arguments: [now])
            try db.execute(sql: "INSERT INTO worldline_crypto_key (key_id, private_key, public_key, created_at) VALUES (?, ?, ?, ?)",
                           arguments: [keyID, sealed, Data(publicKeyDER).base64EncodedString(), now])
        }
    }

    /// Records a client session by the hash of its id.
    public func createWorldlineSession(sessionID: String, merchantID: String, customerID: String, at now: Int64, expiresAt: Int64) throws {
        try write("create a Worldline client session", durable: false) { db in
            try db.execute(sql: """
                INSERT INTO worldline_session (session_hash, merchant_id, customer_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)
                """, arguments: [Self.tokenHash(sessionID), merchantID, customerID, now, expiresAt])
        }
    }

    /// The client session `sessionID` names, if any.
    public func worldlineSession(sessionID: String) throws -> WorldlineSession? {
        try read("read a Worldline client session") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM worldline_session WHERE session_hash = ?"),
                             arguments: [Self.tokenHash(sessionID)]).map {
                WorldlineSession(merchantID: $0["merchant_id"], customerID: $0["customer_id"], createdAt: $0["created_at"], expiresAt: $0["expires_at"])
            }
        }
    }

    /// Records that `nonce` was used in `sessionID`'s encrypted input; false when it already was (a replay).
    public func useWorldlineNonce(sessionID: String, nonce: String, at now: Int64) throws -> Bool {
        try write("record an encrypted input's nonce") { db in
            try db.execute(sql: "INSERT INTO worldline_nonce (session_hash, nonce, used_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                           arguments: [Self.tokenHash(sessionID), nonce, now])
            return db.changesCount == 1
        }
    }

    // MARK: Payments

    /// Inserts a payment that no ledger transaction backs yet (one waiting for its 3-D Secure
    /// challenge), giving it its id.
    public func insertWorldlinePayment(_ payment: WorldlinePayment) throws -> WorldlinePayment {
        try write("record a Worldline payment") { db in try insertPayment(db, payment) }
    }

    /// Records a payment's authorisation: the ledger transaction's outcome and the new payment, in one commit.
    public func completeWorldlineAuthorisation(transactionID: Int64, _ result: Completion, payment: WorldlinePayment,
                                               outbox: (WorldlinePayment) -> [OutboxMessage]) throws -> (WorldlinePayment, StoredTransaction) {
        try LedgerRules.validate(result, trace: [], outbox: [])
        let panHash = try result.pan.map(panHash)
        return try write("complete Worldline payment transaction \(transactionID)") { db in
            var p = payment
            p.transactionID = transactionID
            if p.id.isEmpty {
                p = try insertPayment(db, p)
            } else {
                try updatePayment(db, p)
            }
            let messages = outbox(p)
            try LedgerRules.validate(result, trace: [], outbox: messages)
            let stored = try Self.complete(db, id: transactionID, result, panHash: panHash, reversalUUID: TransactionUUID.make(),
                                           trace: [], outbox: messages)
            return (p, stored)
        }
    }

    /// Records an operation on a payment (capture, cancel, refund): the ledger transaction's
    /// outcome, when there is one, and the payment's new state, in one commit.
    public func completeWorldlineOperation(transactionID: Int64?, _ result: Completion?, payment: WorldlinePayment,
                                           outbox: [OutboxMessage]) throws {
        if let result { try LedgerRules.validate(result, trace: [], outbox: outbox) }
        try write("update Worldline payment \(payment.id)") { db in
            try updatePayment(db, payment)
            if let transactionID, let result {
                _ = try Self.complete(db, id: transactionID, result, panHash: nil, reversalUUID: TransactionUUID.make(),
                                      trace: [], outbox: outbox)
            }
        }
    }

    /// Records a payment whose requested operations settled, with the webhooks that say so, each
    /// under the ledger row of its operation (already complete), in one commit.
    public func settleWorldlinePayment(_ payment: WorldlinePayment, outbox: [(transactionID: Int64, message: OutboxMessage)], at now: Int64) throws {
        for (i, entry) in outbox.enumerated() {
            try Validate.noNUL(entry.message.target, field: "outbox[\(i)].target")
            try Validate.noNUL(entry.message.payload, field: "outbox[\(i)].payload")
        }
        try write("settle Worldline payment \(payment.id)") { db in
            try updatePayment(db, payment)
            for (transactionID, message) in outbox {
                try db.executeCached(sql: """
                    INSERT INTO outbox (transaction_id, kind, target, payload, next_attempt_at, created_at, status, attempts, delivered_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 0, NULL)
                    """, arguments: [transactionID, message.kind.rawValue, message.target, message.payload, now, now, OutboxStatus.pending.rawValue])
            }
        }
    }

    /// Merchant `merchantID`'s payment `id`, if it has one.
    public func worldlinePayment(id: String, merchantID: String) throws -> WorldlinePayment? {
        try read("read Worldline payment \(id)") { db in
            guard let state = try String.fetchOne(db.cachedStatement(sql: "SELECT state FROM worldline_payment WHERE id = ? AND merchant_id = ?"),
                                                  arguments: [id, merchantID]) else { return nil }
            return try decodePayment(state)
        }
    }

    /// The payment a ledger transaction belongs to (authorisation, capture or refund row), if any.
    public func worldlinePayment(id: String) throws -> WorldlinePayment? {
        try read("read Worldline payment \(id)") { db in
            try String.fetchOne(db, sql: "SELECT state FROM worldline_payment WHERE id = ?", arguments: [id]).map(decodePayment)
        }
    }

    /// Payments with a requested capture or refund due at `now` or before, as (merchant, id),
    /// the earliest first, at most `limit`.
    public func worldlinePaymentsDue(at now: Int64, limit: Int) throws -> [(merchantID: String, id: String)] {
        try read("find Worldline payments due to settle") { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT merchant_id, id FROM worldline_payment WHERE due_at <= ? ORDER BY due_at LIMIT ?"),
                             arguments: [now, limit]).map { ($0["merchant_id"], $0["id"]) }
        }
    }

    func insertPayment(_ db: Database, _ payment: WorldlinePayment) throws -> WorldlinePayment {
        let seq = (try Int64.fetchOne(db, sql: "SELECT max(seq) FROM worldline_payment") ?? 0) + 1
        var p = payment
        // PAYIDs are ten digits on the platform.
        p.id = "\(3_000_000_000 + seq)_0"
        try db.execute(sql: """
            INSERT INTO worldline_payment (seq, id, merchant_id, transaction_id, state, updated_at, due_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            """, arguments: [seq, p.id, p.merchantID, p.transactionID, try encodePayment(p), p.updatedAt, p.dueAt])
        return p
    }

    func updatePayment(_ db: Database, _ p: WorldlinePayment) throws {
        try db.execute(sql: "UPDATE worldline_payment SET state = ?, transaction_id = ?, updated_at = ?, due_at = ? WHERE id = ?",
                       arguments: [try encodePayment(p), p.transactionID, p.updatedAt, p.dueAt, p.id])
        guard db.changesCount == 1 else { throw LedgerError.invalid(field: "paymentId", rule: "no payment \(p.id)") }
    }

    /// A payment's state as stored: its token sealed, never in clear.
    func encodePayment(_ payment: WorldlinePayment) throws -> String {
        var p = payment
        p.sealedToken = try p.token.map { try seal(Array($0.utf8)) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(p), as: UTF8.self)
    }

    func decodePayment(_ text: String) throws -> WorldlinePayment {
        var p: WorldlinePayment
        do { p = try JSONDecoder().decode(WorldlinePayment.self, from: Data(text.utf8)) } catch {
            throw LedgerError.database(operation: "read a Worldline payment", message: "\(error)")
        }
        p.token = try p.sealedToken.map { String(decoding: try unseal($0), as: UTF8.self) }
        p.sealedToken = nil
        return p
    }

    // MARK: Idempotence

    /// Claims `key` for a request of `merchantID` whose method, path and body hash to `requestHash`.
    public func claimWorldlineIdempotence(merchantID: String, key: String, requestHash: String, at now: Int64) throws -> WorldlineIdempotence {
        try write("claim an idempotence key", durable: false) { db in
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM worldline_idempotence WHERE merchant_id = ? AND key = ?",
                                          arguments: [merchantID, key]) {
                let at: Int64 = row["requested_at"]
                if (row["request_hash"] as String) != requestHash { return .differentRequest(requestedAt: at) }
                if let status: Int = row["status"], let body: String = row["body"] {
                    return .done(requestedAt: at, status: status, body: try Self.openIdempotentBody(body, unseal))
                }
                return .inProgress(requestedAt: at)
            }
            try db.execute(sql: "INSERT INTO worldline_idempotence (merchant_id, key, request_hash, requested_at) VALUES (?, ?, ?, ?)",
                           arguments: [merchantID, key, requestHash, now])
            return .new
        }
    }

    /// How a stored answer is marked sealed: an answer can hold a secret (a session's
    /// `clientSessionId`, the Client API's bearer credential), so it is kept sealed like the
    /// platform's other secrets. A ledger from before this kept answers as plain JSON.
    static let sealedBodyPrefix = "sealed:"

    static func openIdempotentBody(_ stored: String, _ unseal: (String) throws -> [UInt8]) throws -> String {
        guard stored.hasPrefix(sealedBodyPrefix) else { return stored }
        return String(decoding: try unseal(String(stored.dropFirst(sealedBodyPrefix.count))), as: UTF8.self)
    }

    /// Stores the answer to an idempotent request, sealed; a nil `status` forgets the key (the request
    /// failed before doing anything, so a retry may run it).
    public func finishWorldlineIdempotence(merchantID: String, key: String, status: Int?, body: String?) throws {
        try write("finish an idempotence key") { db in
            if let status, let body {
                try db.execute(sql: "UPDATE worldline_idempotence SET status = ?, body = ? WHERE merchant_id = ? AND key = ?",
                               arguments: [status, Self.sealedBodyPrefix + (try seal(Array(body.utf8))), merchantID, key])
            } else {
                try db.execute(sql: "DELETE FROM worldline_idempotence WHERE merchant_id = ? AND key = ?", arguments: [merchantID, key])
            }
        }
    }

    // MARK: Rows

    static func worldlineMerchant(_ db: Database, _ id: String) throws -> WorldlineMerchant? {
        try Row.fetchOne(db, sql: "SELECT * FROM worldline_merchant WHERE merchant_id = ?", arguments: [id]).map(worldlineMerchant)
    }

    static func worldlineMerchant(_ row: Row) -> WorldlineMerchant {
        WorldlineMerchant(merchantID: row["merchant_id"], terminalName: row["terminal_name"], webhookURL: row["webhook_url"],
                          webhookKeyID: row["webhook_key_id"], createdAt: row["created_at"])
    }

    /// Merchant ids are path segments and part of a terminal name: 1–40 letters, digits, '-' or '_'.
    static func validateMerchantID(_ id: String) throws {
        let ok = (1...40).contains(id.utf8.count) && id.utf8.allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D || $0 == 0x5F
        }
        guard ok else { throw LedgerError.invalid(field: "merchantId", rule: "must be 1–40 letters, digits, '-' or '_', got \"\(id.prefix(60))\"") }
    }
}
