import EMV
import Foundation
import Fronts
import LedgerModel

/// Card-on-file tokens (`/v2/{merchantId}/tokens`) and what a payment pays with: a card typed
/// in, a token, or an account on file picked in the Client SDK. A token's card is kept sealed by
/// the ledger and opened for one authorisation only (docs/worldline.md, "Tokens and card on file").
extension WorldlineFront {
    /// What a payment request pays with: the card, the token it came from or will be stored as,
    /// and the first payment's scheme id a later payment of the series refers to.
    struct PaymentSource: Sendable {
        var card: WorldlineCard
        var token: WorldlineToken?
        var tokenize: Bool
        var initialSchemeTransactionID: String?
        /// A wallet's cryptogram and ECI, for the issuer to check.
        var networkToken: (cryptogram: [UInt8], eci: String)? = nil
    }

    /// The card a request pays with and the card-on-file rules checked: a token must be a live
    /// one of this merchant; an account on file must be one its client session was given; a
    /// merchant-initiated payment needs the first payment of its series.
    func source(of request: WorldlineCreatePayment, merchantID: String) throws(WorldlineError) -> PaymentSource {
        let p = "cardPaymentMethodSpecificInput."
        var source: PaymentSource
        if let card = request.card {
            source = PaymentSource(card: card, token: nil, tokenize: request.tokenize, initialSchemeTransactionID: nil)
        } else if let token = request.token {
            let (record, card) = try liveToken(token, merchantID: merchantID, property: p + "token")
            source = PaymentSource(card: card, token: record, tokenize: false, initialSchemeTransactionID: record.initialSchemeTransactionID)
        } else if let mobile = request.mobile {
            let data: WorldlineCreatePayment.WalletData
            if let d = mobile.decrypted {
                data = d
            } else {
                // The bench's encrypted format: the same JWE as encrypted customer input, to the
                // Client API's key, holding decryptedPaymentData's members.
                let opened: WorldlineJWE.Opened
                do throws(WorldlineJWE.Failure) { opened = try WorldlineJWE.decrypt(mobile.encrypted ?? "", privateKey: privateKey) } catch {
                    throw .invalid("mobilePaymentMethodSpecificInput.encryptedPaymentData", error.reason)
                }
                let json: WorldlineJSON
                do throws(WorldlineError) { json = try WorldlineJSON.parseCardData(opened.plaintext) } catch {
                    throw .invalid("mobilePaymentMethodSpecificInput.encryptedPaymentData", "its payload is not a JSON object")
                }
                data = try .parse(json, path: "mobilePaymentMethodSpecificInput.encryptedPaymentData.")
            }
            source = PaymentSource(card: data.card, token: nil, tokenize: false, initialSchemeTransactionID: nil, networkToken: (data.cryptogram, data.eci))
        } else if let hosted = request.hostedTokenizationID {
            guard var session = try stored("read the hosted tokenization", { try store.worldlineHostedTokenization(id: hosted, merchantID: merchantID) }) else {
                throw .invalid("hostedTokenizationId", "this merchant has no hosted tokenization \(shownValue(hosted, 64))")
            }
            guard let token = session.token else { throw .invalid("hostedTokenizationId", "its card form was not sent yet") }
            guard !session.used else { throw .invalid("hostedTokenizationId", "it paid once already: a hosted tokenization is good for one payment (pay again with its token)") }
            let (record, stored) = try liveToken(token, merchantID: merchantID, property: "hostedTokenizationId")
            let at = now
            let cvv = tokenizationCVVs.withLock { $0.removeValue(forKey: hosted) }.flatMap { $0.expiresAt > at ? $0.cvv : nil }
            session.used = true
            let used = session
            try self.stored("record the hosted tokenization") { try store.updateWorldlineHostedTokenization(used) }
            let card = try WorldlineCard(pan: stored.pan, expiryDate: stored.expiryDate, cvv: request.isMerchantInitiated ? nil : cvv,
                                         cardholderName: stored.cardholderName, path: "hostedTokenizationId.")
            source = PaymentSource(card: card, token: record, tokenize: false, initialSchemeTransactionID: record.initialSchemeTransactionID)
        } else if let jwe = request.encryptedCustomerInput {
            if request.isMerchantInitiated {
                throw .invalid("encryptedCustomerInput", "a merchant-initiated payment is made without the cardholder, so without their input")
            }
            let input = try customerInput(jwe, merchantID: merchantID)
            if let accountOnFile = input.accountOnFileID {
                let offered = try stored("read the session's tokens") { try store.worldlineSessionTokens(sessionID: input.clientSessionID) }
                guard offered.contains(accountOnFile) else {
                    throw .invalid("encryptedCustomerInput.accountOnFileId", "is not an account on file of the client session it was made in")
                }
                let (record, stored) = try liveToken(accountOnFile, merchantID: merchantID, property: "encryptedCustomerInput.accountOnFileId")
                let card = try WorldlineCard(pan: stored.pan, expiryDate: stored.expiryDate, cvv: input.cvv, cardholderName: stored.cardholderName,
                                             path: "encryptedCustomerInput.paymentValues.")
                source = PaymentSource(card: card, token: record, tokenize: false, initialSchemeTransactionID: record.initialSchemeTransactionID)
            } else if let card = input.card {
                source = PaymentSource(card: card, token: nil, tokenize: request.tokenize || input.tokenize, initialSchemeTransactionID: nil)
            } else {
                throw .missing("encryptedCustomerInput.paymentValues.cardNumber")
            }
            if let product = input.paymentProductID, request.paymentProductID == nil, product != WorldlineStatus.productID(source.card.brand) {
                throw .invalid("encryptedCustomerInput.paymentProductId", "\(product) is not the product of this card number")
            }
        } else {
            throw .missing("encryptedCustomerInput")
        }
        if let given = request.initialSchemeTransactionID { source.initialSchemeTransactionID = given }
        if request.isMerchantInitiated, source.initialSchemeTransactionID == nil {
            throw .invalid(p + "initialSchemeTransactionId",
                           "a merchant-initiated payment follows a first one the cardholder made: give its scheme id, or pay with the token that first payment used")
        }
        if request.beginsSeries, request.initialSchemeTransactionID != nil {
            throw .invalid(p + "initialSchemeTransactionId", "the first payment of a series has no earlier one to refer to")
        }
        return source
    }

    /// Merchant `merchantID`'s live token `token` and its card, ready to authorise.
    func liveToken(_ token: String, merchantID: String, property: String) throws(WorldlineError) -> (WorldlineToken, WorldlineCard) {
        guard let (record, vaulted) = try stored("read the token", { try store.worldlineToken(token, merchantID: merchantID) }) else {
            throw .invalid(property, "this merchant has no token \(shownValue(token, 40))")
        }
        guard record.deletedAt == nil else { throw .invalid(property, "token \(shownValue(token, 40)) was deleted") }
        // The platform's own test numbers need no check digit (WorldlineCard's rule), so a
        // token stores exactly what a payment would accept.
        let card = try WorldlineCard(pan: vaulted.pan, expiryDate: vaulted.expiryDate, cvv: nil, cardholderName: vaulted.cardholderName,
                                     path: property + ".")
        return (record, card)
    }

    /// After a payment's commit: a token it made for a declined payment is taken back, and the
    /// first approved payment of a series gives its token the scheme id the later ones carry.
    func tokenAfterwards(_ before: WorldlinePayment, _ after: WorldlinePayment, request: WorldlineCreatePayment) {
        if before.isNewToken == true, after.token == nil, let token = before.token {
            _ = try? store.deleteWorldlineToken(token, merchantID: before.merchantID, at: now)
        }
        if let token = after.token, let scheme = after.schemeTransactionID, request.beginsSeries || before.isNewToken != nil {
            try? store.setWorldlineTokenInitialScheme(token, merchantID: after.merchantID, schemeTransactionID: scheme)
        }
    }

    /// `POST /v2/{merchantId}/tokens`: the card stored as the merchant's token (its existing
    /// token for the same card when it has one, `UNCHANGED` or `UPDATED`).
    public func createToken(merchantID: String, body: [UInt8]) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineCreateToken.parse(WorldlineJSON.parse(body))
        var card: WorldlineCard
        if let plain = request.card {
            card = plain
        } else if let jwe = request.encryptedCustomerInput {
            let input = try customerInput(jwe, merchantID: merchantID)
            guard let typed = input.card else {
                throw .invalid("encryptedCustomerInput.accountOnFileId", "an account on file is a token already")
            }
            card = typed
        } else {
            throw .missing("card.data.card")
        }
        if let product = request.paymentProductID, product != WorldlineStatus.productID(card.brand) {
            throw .invalid("paymentProductId", "\(product) is not the product of this card number (\(WorldlineStatus.productID(card.brand)))")
        }
        let (token, status) = try stored("store the token") {
            try store.storeWorldlineToken(merchantID: merchantID, card: WorldlineVaultedCard(pan: card.pan, expiryDate: card.expiryDate,
                                                                                             cardholderName: card.cardholderName),
                                          paymentProductID: WorldlineStatus.productID(card.brand), at: now)
        }
        return .tokenCreated(token, status)
    }

    /// `GET /v2/{merchantId}/tokens/{tokenId}`: the card masked; a deleted or unknown token is 404.
    public func getToken(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        guard let (record, _) = try stored("read the token", { try store.worldlineToken(id, merchantID: merchantID) }), record.deletedAt == nil else {
            throw .notFound("UNKNOWN_TOKEN", "no token \(shownValue(id, 40)) for this merchant")
        }
        return .token(record)
    }

    /// `DELETE /v2/{merchantId}/tokens/{tokenId}`: the token pays no more.
    public func deleteToken(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        guard try stored("delete the token", { try store.deleteWorldlineToken(id, merchantID: merchantID, at: now) }) else {
            throw .notFound("UNKNOWN_TOKEN", "no token \(shownValue(id, 40)) for this merchant")
        }
        return .tokenDeleted
    }

    /// The accounts on file a client session shows (its live tokens), as the Client API lists them.
    public func accountsOnFile(sessionID: String, merchantID: String) throws(WorldlineError) -> [WorldlineToken] {
        let tokens = try stored("read the session's tokens") { try store.worldlineSessionTokens(sessionID: sessionID) }
        var records: [WorldlineToken] = []
        for token in tokens {
            if let (record, _) = try stored("read a token", { try store.worldlineToken(token, merchantID: merchantID) }), record.deletedAt == nil {
                records.append(record)
            }
        }
        return records
    }
}
