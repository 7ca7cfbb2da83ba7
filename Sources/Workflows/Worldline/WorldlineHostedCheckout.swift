import EMV
import Foundation
import Fronts
import LedgerModel

/// Hosted Checkout (docs/worldline.md, "Hosted Checkout"): the merchant creates a checkout, the
/// consumer pays on the platform's page — a card typed in or a saved card, 3-D Secure, or a
/// cancel — and goes back to the merchant's `returnUrl` with `hostedCheckoutId` and `RETURNMAC`.
/// Every payment the page makes is an ordinary `createPayment` on the one path: the same
/// checks, issuer, ledger record and webhooks as a payment the merchant's server makes.
extension WorldlineFront {
    /// Where a page's form sends the consumer next.
    public enum CheckoutStep: Sendable {
        /// The page again, with what went wrong (a field's rule, a decline with attempts left).
        case page(message: String)
        /// Another page: the 3-D Secure challenge, or the merchant's return URL.
        case redirect(String)
        /// The platform's result page; `back` is the merchant's return URL, when it gave one.
        case result(WorldlineHostedCheckout, WorldlinePayment?, back: String?)
    }

    /// `POST /v2/{merchantId}/hostedcheckouts`. `pageURL(id, token)` is the page's address.
    public func createHostedCheckout(merchantID: String, body: [UInt8], pageURL: (String, String) -> String) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineHostedCheckoutRequest.parse(WorldlineJSON.parse(body))
        guard !request.offeredProducts.isEmpty else {
            throw .invalid("hostedCheckoutSpecificInput.paymentProductFilters", "the filters leave no payment product to offer")
        }
        var known: [String] = [], invalid: [String] = []
        for token in request.tokens {
            let found = try stored("read a token") { try store.worldlineToken(token, merchantID: merchantID) }
            if let found, found.token.deletedAt == nil { if !known.contains(token) { known.append(token) } } else { invalid.append(token) }
        }
        let page = PageToken.make()
        let now = self.now
        var checkout = WorldlineHostedCheckout(merchantID: merchantID, amount: request.amount, currency: request.currency,
                                               merchantReference: request.merchantReference, returnURL: request.returnURL,
                                               returnMAC: PlatformText.hex(16), authorizationMode: request.authorizationMode.rawValue,
                                               pageTokenHash: page.hash, createdAt: now,
                                               expiresAt: now + Int64(request.sessionTimeoutMinutes) * 60_000_000)
        checkout.locale = request.locale
        checkout.variant = request.variant
        checkout.showResultPage = request.showResultPage
        checkout.tokenize = request.tokenize
        checkout.isRecurring = request.isRecurring
        checkout.products = request.offeredProducts
        checkout.tokens = known
        checkout.allowedAttempts = request.allowedAttempts
        let made = checkout
        let inserted = try stored("record the hosted checkout") { try store.insertWorldlineHostedCheckout(made) }
        return .hostedCheckoutCreated(inserted, redirectURL: pageURL(inserted.id, page.token), invalidTokens: invalid)
    }

    /// `GET /v2/{merchantId}/hostedcheckouts/{id}`: its status, and its latest payment as it is now.
    public func getHostedCheckout(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        guard let c = try stored("read the hosted checkout", { try store.worldlineHostedCheckout(id: id, merchantID: merchantID) }) else {
            throw .notFound("UNKNOWN_HOSTED_CHECKOUT_ID", "no hosted checkout \(shownValue(id, 40)) for this merchant")
        }
        guard let last = c.paymentIDs.last else { return .hostedCheckout(c, nil) }
        return .hostedCheckout(c, try current(merchantID, last))
    }

    /// The checkout a page's token opens, the saved cards it offers and its latest payment. An
    /// unknown checkout and a wrong token are the same 404.
    /// A nil `token` is the control API's trusted way in (a scenario filling the page).
    public func checkoutPage(id: String, token: String?) throws(WorldlineError) -> (WorldlineHostedCheckout, [WorldlineToken], WorldlinePayment?) {
        guard let c = try stored("read the hosted checkout", { try store.worldlineHostedCheckout(id: id, merchantID: nil) }),
              token.map({ PageToken.matches($0, c.pageTokenHash) }) ?? true else {
            throw .notFound("UNKNOWN_RESOURCE", "no such checkout page")
        }
        var saved: [WorldlineToken] = []
        for t in c.tokens {
            if let (record, _) = try stored("read a token", { try store.worldlineToken(t, merchantID: c.merchantID) }), record.deletedAt == nil,
               c.products.contains(record.paymentProductID) {
                saved.append(record)
            }
        }
        guard let last = c.paymentIDs.last else { return (c, saved, nil) }
        return (c, saved, try payment(c.merchantID, last))
    }

    /// The page's form, answered: `action=cancel`, or a card (`cardNumber`, `expiryDate` MM/YY,
    /// `cvv`, `cardholderName`) or a saved card (`token`, `cvv`). `returnPage` is where the
    /// 3-D Secure challenge sends the consumer back to; `challengeURL` the challenge page's.
    public func submitCheckout(id: String, token: String?, form: [String: String], returnPage: String,
                               challengeURL: (String) -> String) throws(WorldlineError) -> CheckoutStep {
        let (checkout, saved, latest) = try checkoutPage(id: id, token: token)
        return try context.payments.run("worldline-checkout:" + id) { () throws(WorldlineError) -> CheckoutStep in
            var c = try stored("read the hosted checkout", { try store.worldlineHostedCheckout(id: checkout.id, merchantID: nil) }) ?? checkout
            if let done = try finished(c, latest) { return done }
            guard c.expiresAt > now else { return .page(message: "This checkout has expired: go back to the shop and start again.") }
            if form["action"] == "cancel" {
                c.status = .cancelledByConsumer
                let cancelled = c
                try stored("record the hosted checkout") { try store.updateWorldlineHostedCheckout(cancelled) }
                return leave(c, latest)
            }
            let productID: Int
            let source: WorldlineRender.CheckoutSource
            if let chosen = form["token"], !chosen.isEmpty {
                guard let record = saved.first(where: { $0.token == chosen }) else { return .page(message: "That saved card is not offered here.") }
                source = .token(chosen)
                productID = record.paymentProductID
            } else {
                let number = (form["cardNumber"] ?? "").filter { $0 != " " }
                guard !number.isEmpty else { return .page(message: "Card number: type the card's number.") }
                productID = WorldlineStatus.productID(CardBrand.detect(pan: number))
                source = .card(number: number, expiryDate: (form["expiryDate"] ?? "").replacingOccurrences(of: "/", with: ""),
                               cvv: form["cvv"].flatMap { $0.isEmpty ? nil : $0 }, cardholderName: form["cardholderName"].flatMap { $0.isEmpty ? nil : $0 })
            }
            guard c.products.contains(productID) else {
                c.status = .clientNotEligible
                let refused = c
                try stored("record the hosted checkout") { try store.updateWorldlineHostedCheckout(refused) }
                let name = WorldlineProducts.offered.first { $0.id == productID }?.label ?? "this card"
                return .page(message: "\(name) is not accepted for this payment: use another card.")
            }
            let body = WorldlineRender.checkoutPaymentBody(amount: c.amount, currency: c.currency, merchantReference: c.merchantReference,
                                                           authorizationMode: c.authorizationMode, returnPage: returnPage, source: source,
                                                           tokenize: c.tokenize, recurring: c.isRecurring)
            let created: WorldlineResult
            do throws(WorldlineError) {
                created = try createPayment(merchantID: c.merchantID, body: body, challengeURL: challengeURL)
            } catch where error.httpStatus == 400 {
                return .page(message: Self.pageMessage(error))
            }
            guard case .paymentCreated(let p, let redirect) = created else { throw .internalError("the checkout's payment made no payment") }
            c.paymentIDs.append(p.id)
            c.status = .paymentCreated
            let paid = c
            try stored("record the hosted checkout") { try store.updateWorldlineHostedCheckout(paid) }
            if let redirect { return .redirect(redirect) }
            return try afterPayment(c, p)
        }
    }

    /// Back from the 3-D Secure challenge: the payment's outcome decides the next page.
    public func checkoutReturned(id: String, token: String?) throws(WorldlineError) -> CheckoutStep {
        let (c, _, latest) = try checkoutPage(id: id, token: token)
        guard let latest else { return .page(message: "") }
        return try afterPayment(c, latest)
    }

    /// A payment made: a decline with attempts left shows the form again; anything else is done.
    func afterPayment(_ c: WorldlineHostedCheckout, _ p: WorldlinePayment) throws(WorldlineError) -> CheckoutStep {
        if p.status == .rejected, c.paymentIDs.count < c.allowedAttempts {
            return .page(message: "The payment was declined (\(WorldlineStatus.declineError(responseCode: p.responseCode, message: p.message).message)). Try another card.")
        }
        return leave(c, p)
    }

    /// A checkout that may take no more payments, and where its page goes: nil while it may.
    public func finished(_ c: WorldlineHostedCheckout, _ latest: WorldlinePayment?) throws(WorldlineError) -> CheckoutStep? {
        switch c.status {
        case .cancelledByConsumer: return leave(c, latest)
        case .paymentCreated:
            guard let latest else { return nil }
            if latest.status == .redirected { return nil }
            if latest.status == .rejected, c.paymentIDs.count < c.allowedAttempts { return nil }
            return leave(c, latest)
        default: return nil
        }
    }

    /// Done: the result page, or straight back to the merchant when it asked for no result page.
    func leave(_ c: WorldlineHostedCheckout, _ p: WorldlinePayment?) -> CheckoutStep {
        let back = c.returnURL.map { url in
            url + (url.contains("?") ? "&" : "?") + "hostedCheckoutId=" + QueryValue.encode(c.id) + "&RETURNMAC=" + QueryValue.encode(c.returnMAC)
        }
        if !c.showResultPage, let back { return .redirect(back) }
        return .result(c, p, back: back)
    }

    /// A platform refusal as the page words it: the field as the consumer knows it, and the rule.
    public static func pageMessage(_ e: WorldlineError) -> String {
        let field = e.propertyName.map { p -> String in
            switch p.split(separator: ".").last.map(String.init) ?? p {
            case "cardNumber": "Card number"
            case "expiryDate": "Expiry date"
            case "cvv": "Security code"
            case "cardholderName": "Name on the card"
            default: p
            }
        }
        return [field, e.rule ?? e.message].compactMap { $0 }.joined(separator: ": ")
    }
}
