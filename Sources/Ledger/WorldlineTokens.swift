import LedgerModel
import Foundation
import GRDB

extension Ledger {
    // MARK: Card-on-file tokens

    /// The sealed part of a token row: the token and its card, as JSON.
    private struct SealedCard: Codable {
        let token: String
        let pan: String
        let expiryDate: String
        let cardholderName: String?
    }

    public func storeWorldlineToken(merchantID: String, card: WorldlineVaultedCard, paymentProductID: Int, at now: Int64) throws
        -> (WorldlineToken, WorldlineTokenStatus) {
        let panHash = try panHash(card.pan)
        try Validate.noNUL(card.cardholderName ?? "", field: "cardholderName")
        _ = try ensureWorldlineMerchant(merchantID, at: now)
        let fresh = UUID().uuidString.lowercased()
        let sealedFresh = try sealCard(SealedCard(token: fresh, pan: card.pan, expiryDate: card.expiryDate, cardholderName: card.cardholderName))
        return try write("store a Worldline token") { db in
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM worldline_token WHERE merchant_id = ? AND pan_hash = ? AND deleted_at IS NULL",
                                          arguments: [merchantID, panHash]) {
                let (existing, stored) = try tokenRow(row)
                guard stored.expiryDate != card.expiryDate || (card.cardholderName != nil && stored.cardholderName != card.cardholderName) else {
                    return (existing, .unchanged)
                }
                let resealed = try sealCard(SealedCard(token: existing.token, pan: card.pan, expiryDate: card.expiryDate,
                                                       cardholderName: card.cardholderName ?? stored.cardholderName))
                try db.execute(sql: "UPDATE worldline_token SET sealed = ?, expiry_date = ?, updated_at = ? WHERE token_hash = ?",
                               arguments: [resealed, card.expiryDate, now, Self.tokenHash(existing.token)])
                return (try tokenRow(try Row.fetchOne(db, sql: "SELECT * FROM worldline_token WHERE token_hash = ?",
                                                      arguments: [Self.tokenHash(existing.token)])!).0, .updated)
            }
            try db.execute(sql: """
                INSERT INTO worldline_token (token_hash, merchant_id, pan_hash, sealed, masked_pan, bin, product_id, expiry_date, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Self.tokenHash(fresh), merchantID, panHash, sealedFresh,
                                 String(repeating: "*", count: card.pan.count - 4) + card.pan.suffix(4), String(card.pan.prefix(6)),
                                 paymentProductID, card.expiryDate, now, now])
            return (try tokenRow(try Row.fetchOne(db, sql: "SELECT * FROM worldline_token WHERE token_hash = ?",
                                                  arguments: [Self.tokenHash(fresh)])!).0, .created)
        }
    }

    public func worldlineToken(_ token: String, merchantID: String) throws -> (token: WorldlineToken, card: WorldlineVaultedCard)? {
        let row = try read("read a Worldline token") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM worldline_token WHERE token_hash = ? AND merchant_id = ?"),
                             arguments: [Self.tokenHash(token), merchantID])
        }
        guard let row else { return nil }
        let (record, card) = try tokenRow(row)
        // A hash that matched another token's row would be a collision: answer nothing rather than another card.
        guard record.token == token else { return nil }
        return (record, card)
    }

    public func deleteWorldlineToken(_ token: String, merchantID: String, at now: Int64) throws -> Bool {
        try write("delete a Worldline token") { db in
            try db.execute(sql: "UPDATE worldline_token SET deleted_at = ? WHERE token_hash = ? AND merchant_id = ? AND deleted_at IS NULL",
                           arguments: [now, Self.tokenHash(token), merchantID])
            return db.changesCount == 1
        }
    }

    public func setWorldlineTokenInitialScheme(_ token: String, merchantID: String, schemeTransactionID: String) throws {
        try write("record a Worldline token's first scheme id") { db in
            try db.execute(sql: """
                UPDATE worldline_token SET initial_scheme_transaction_id = coalesce(initial_scheme_transaction_id, ?)
                WHERE token_hash = ? AND merchant_id = ?
                """, arguments: [schemeTransactionID, Self.tokenHash(token), merchantID])
        }
    }

    public func worldlineSessionTokens(sessionID: String) throws -> [String] {
        let rows = try read("read a client session's tokens") { db in
            try String.fetchAll(db, sql: "SELECT sealed FROM worldline_session_token WHERE session_hash = ? ORDER BY position",
                                arguments: [Self.tokenHash(sessionID)])
        }
        return try rows.map { String(decoding: try unseal($0), as: UTF8.self) }
    }

    public func setWorldlineSessionTokens(sessionID: String, tokens: [String]) throws {
        let sealed = try tokens.map { try seal(Array($0.utf8)) }
        try write("record a client session's tokens", durable: false) { db in
            let hash = Self.tokenHash(sessionID)
            try db.execute(sql: "DELETE FROM worldline_session_token WHERE session_hash = ?", arguments: [hash])
            for (i, s) in sealed.enumerated() {
                try db.execute(sql: "INSERT INTO worldline_session_token (session_hash, position, sealed) VALUES (?, ?, ?)",
                               arguments: [hash, i, s])
            }
        }
    }

    private func sealCard(_ card: SealedCard) throws -> String {
        try seal(Array(try JSONEncoder().encode(card)))
    }

    private func tokenRow(_ row: Row) throws -> (WorldlineToken, WorldlineVaultedCard) {
        let opened: SealedCard
        do { opened = try JSONDecoder().decode(SealedCard.self, from: Data(try unseal(row["sealed"]))) } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.database(operation: "read a Worldline token", message: "\(error)")
        }
        let record = WorldlineToken(token: opened.token, merchantID: row["merchant_id"], paymentProductID: row["product_id"],
                                    maskedCardNumber: row["masked_pan"], bin: row["bin"], expiryDate: row["expiry_date"],
                                    cardholderName: opened.cardholderName, initialSchemeTransactionID: row["initial_scheme_transaction_id"],
                                    createdAt: row["created_at"], deletedAt: row["deleted_at"])
        return (record, WorldlineVaultedCard(pan: opened.pan, expiryDate: opened.expiryDate, cardholderName: opened.cardholderName))
    }
}

extension Ledger {
    // MARK: Hosted checkouts

    public func insertWorldlineHostedCheckout(_ checkout: WorldlineHostedCheckout) throws -> WorldlineHostedCheckout {
        _ = try ensureWorldlineMerchant(checkout.merchantID, at: checkout.createdAt)
        return try write("record a Worldline hosted checkout") { db in
            let seq = (try Int64.fetchOne(db, sql: "SELECT max(seq) FROM worldline_hosted_checkout") ?? 0) + 1
            var c = checkout
            // Hosted checkout ids are numbers on the platform.
            c.id = String(8_000_000_000 + seq)
            try db.execute(sql: "INSERT INTO worldline_hosted_checkout (seq, id, merchant_id, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [seq, c.id, c.merchantID, try encodeCheckout(c), c.createdAt])
            return c
        }
    }

    public func updateWorldlineHostedCheckout(_ checkout: WorldlineHostedCheckout) throws {
        try write("update Worldline hosted checkout \(checkout.id)") { db in
            try db.execute(sql: "UPDATE worldline_hosted_checkout SET state = ?, updated_at = ? WHERE id = ?",
                           arguments: [try encodeCheckout(checkout), Self.nowMicros(), checkout.id])
            guard db.changesCount == 1 else { throw LedgerError.invalid(field: "hostedCheckoutId", rule: "no hosted checkout \(checkout.id)") }
        }
    }

    public func worldlineHostedCheckout(id: String, merchantID: String?) throws -> WorldlineHostedCheckout? {
        let state = try read("read Worldline hosted checkout \(id)") { db in
            try String.fetchOne(db, sql: "SELECT state FROM worldline_hosted_checkout WHERE id = ? AND (?2 IS NULL OR merchant_id = ?2)",
                                arguments: [id, merchantID])
        }
        guard let state else { return nil }
        var c: WorldlineHostedCheckout
        do { c = try JSONDecoder().decode(WorldlineHostedCheckout.self, from: Data(state.utf8)) } catch {
            throw LedgerError.database(operation: "read a Worldline hosted checkout", message: "\(error)")
        }
        if let sealed = c.sealedTokens {
            c.tokens = (try? JSONDecoder().decode([String].self, from: Data(try unseal(sealed)))) ?? []
        }
        c.sealedTokens = nil
        return c
    }

    /// A hosted checkout's state as stored: the merchant's tokens sealed, never in clear.
    private func encodeCheckout(_ checkout: WorldlineHostedCheckout) throws -> String {
        var c = checkout
        c.sealedTokens = c.tokens.isEmpty ? nil : try seal(Array(try JSONEncoder().encode(c.tokens)))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(c), as: UTF8.self)
    }
}

extension Ledger {
    // MARK: Hosted tokenization

    public func insertWorldlineHostedTokenization(_ session: WorldlineHostedTokenization) throws -> WorldlineHostedTokenization {
        _ = try ensureWorldlineMerchant(session.merchantID, at: session.createdAt)
        return try write("record a Worldline hosted tokenization") { db in
            let seq = (try Int64.fetchOne(db, sql: "SELECT max(seq) FROM worldline_hosted_tokenization") ?? 0) + 1
            var s = session
            s.id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try db.execute(sql: "INSERT INTO worldline_hosted_tokenization (seq, id, merchant_id, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [seq, s.id, s.merchantID, try encodeTokenization(s), s.createdAt])
            return s
        }
    }

    public func updateWorldlineHostedTokenization(_ session: WorldlineHostedTokenization) throws {
        try write("update Worldline hosted tokenization \(session.id)") { db in
            try db.execute(sql: "UPDATE worldline_hosted_tokenization SET state = ?, updated_at = ? WHERE id = ?",
                           arguments: [try encodeTokenization(session), Self.nowMicros(), session.id])
            guard db.changesCount == 1 else { throw LedgerError.invalid(field: "hostedTokenizationId", rule: "no hosted tokenization \(session.id)") }
        }
    }

    public func worldlineHostedTokenization(id: String, merchantID: String?) throws -> WorldlineHostedTokenization? {
        let state = try read("read Worldline hosted tokenization \(id)") { db in
            try String.fetchOne(db, sql: "SELECT state FROM worldline_hosted_tokenization WHERE id = ? AND (?2 IS NULL OR merchant_id = ?2)",
                                arguments: [id, merchantID])
        }
        guard let state else { return nil }
        var s: WorldlineHostedTokenization
        do { s = try JSONDecoder().decode(WorldlineHostedTokenization.self, from: Data(state.utf8)) } catch {
            throw LedgerError.database(operation: "read a Worldline hosted tokenization", message: "\(error)")
        }
        s.token = try s.sealedToken.map { String(decoding: try unseal($0), as: UTF8.self) }
        s.sealedToken = nil
        return s
    }

    private func encodeTokenization(_ session: WorldlineHostedTokenization) throws -> String {
        var s = session
        s.sealedToken = try s.token.map { try seal(Array($0.utf8)) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(s), as: UTF8.self)
    }
}
