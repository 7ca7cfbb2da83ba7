import EMV
import Foundation
import Fronts
import LedgerModel

/// The Hosted Tokenization Page (docs/worldline.md, "Hosted Tokenization"): a card form the
/// merchant puts in an iframe; sent, it stores the card as the merchant's token, which the
/// merchant reads (`GET …/hostedtokenizations/{id}`) and pays with (`hostedTokenizationId`, or
/// the token). The CVV typed is kept in memory for that one payment only.
extension WorldlineFront {
    /// `POST /v2/{merchantId}/hostedtokenizations`. `pageURL(id, token)` is the form's address.
    public func createHostedTokenization(merchantID: String, body: [UInt8], pageURL: (String, String) -> String) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineHostedTokenizationRequest.parse(WorldlineJSON.parse(body))
        guard !request.offeredProducts.isEmpty else { throw .invalid("paymentProductFilters", "the filters leave no payment product to offer") }
        var invalid: [String] = []
        for token in request.tokens {
            let found = try stored("read a token") { try store.worldlineToken(token, merchantID: merchantID) }
            if found == nil || found?.token.deletedAt != nil { invalid.append(token) }
        }
        let page = PageToken.make()
        var session = WorldlineHostedTokenization(merchantID: merchantID, products: request.offeredProducts, pageTokenHash: page.hash,
                                                  createdAt: now, expiresAt: now + settings.sessionLifetime.components.seconds * 1_000_000)
        session.locale = request.locale
        session.variant = request.variant
        let made = session
        let inserted = try stored("record the hosted tokenization") { try store.insertWorldlineHostedTokenization(made) }
        return .hostedTokenizationCreated(inserted, url: pageURL(inserted.id, page.token), invalidTokens: invalid)
    }

    /// `GET /v2/{merchantId}/hostedtokenizations/{id}`.
    public func getHostedTokenization(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        guard let s = try stored("read the hosted tokenization", { try store.worldlineHostedTokenization(id: id, merchantID: merchantID) }) else {
            throw .notFound("UNKNOWN_HOSTED_TOKENIZATION_ID", "no hosted tokenization \(shownValue(id, 64)) for this merchant")
        }
        guard let token = s.token else { return .hostedTokenization(s, nil) }
        return .hostedTokenization(s, try stored("read the token") { try store.worldlineToken(token, merchantID: merchantID)?.token })
    }

    /// The session a form page's token opens; an unknown session and a wrong token are the same 404.
    public func tokenizationPage(id: String, token: String) throws(WorldlineError) -> WorldlineHostedTokenization {
        guard let s = try stored("read the hosted tokenization", { try store.worldlineHostedTokenization(id: id, merchantID: nil) }),
              PageToken.matches(token, s.pageTokenHash) else {
            throw .notFound("UNKNOWN_RESOURCE", "no such tokenization page")
        }
        return s
    }

    /// The form sent: the card checked as a payment's would be and stored as the merchant's
    /// token. Returns the session, or the message the form shows again.
    public func submitTokenization(id: String, token: String, form: [String: String]) throws(WorldlineError) -> Result<WorldlineHostedTokenization, WorldlineError> {
        var s = try tokenizationPage(id: id, token: token)
        guard s.token == nil else { return .success(s) }
        guard s.expiresAt > now else { return .failure(.invalid("hostedTokenizationId", "this form has expired")) }
        let card: WorldlineCard
        do throws(WorldlineError) {
            let cvv = form["cvv"].flatMap { $0.isEmpty ? nil : $0 }
            card = try WorldlineCard(pan: form["cardNumber"] ?? "", expiryDate: (form["expiryDate"] ?? "").replacingOccurrences(of: "/", with: ""),
                                     cvv: cvv, cardholderName: form["cardholderName"].flatMap { $0.isEmpty ? nil : $0 }, path: "")
            // The rest of the form is the consumer's text: a card number in it is refused as in any request.
            if let name = card.cardholderName, PAN.looksLikeItHoldsAPAN(name) { throw .invalid("cardholderName", TextRules.panRule) }
        } catch {
            return .failure(error)
        }
        let product = WorldlineStatus.productID(card.brand)
        guard s.products.contains(product) else {
            return .failure(.invalid("cardNumber", "\(WorldlineProducts.offered.first { $0.id == product }?.label ?? "this card") is not accepted here"))
        }
        let (stored, status) = try self.stored("store the token") {
            try store.storeWorldlineToken(merchantID: s.merchantID, card: WorldlineVaultedCard(pan: card.pan, expiryDate: card.expiryDate,
                                                                                                 cardholderName: card.cardholderName),
                                          paymentProductID: product, at: now)
        }
        s.token = stored.token
        s.tokenStatus = status.rawValue
        let done = s
        try self.stored("record the hosted tokenization") { try store.updateWorldlineHostedTokenization(done) }
        let at = now
        tokenizationCVVs.withLock { cvvs in
            // A CVV no payment came for is forgotten when its session expires.
            cvvs = cvvs.filter { $0.value.expiresAt > at }
            if let cvv = card.cvv { cvvs[s.id] = (cvv, s.expiresAt) }
        }
        return .success(s)
    }
}
