import EMV
import Foundation
import Fronts
import LedgerModel
import Terminal

/// Redirect payment methods (docs/worldline.md, "Redirect methods"): PayPal (840) and iDEAL
/// (809). The payment is REDIRECTED to the bench's page for the method, where the payer
/// approves, declines, cancels or leaves it pending; the approval is recorded on the one path
/// (`AuthoriseAndRecord`, the method's own answer in place of the issuer's) with its webhooks.
extension WorldlineFront {
    /// A redirect payment made: REDIRECTED, its page reached by a token stored as its hash.
    func createRedirectPayment(merchantID: String, request: WorldlineCreatePayment, redirect: WorldlineCreatePayment.Redirect,
                               pageURL: (String) -> String) throws(WorldlineError) -> WorldlineResult {
        _ = try stored("find the merchant") { try store.ensureWorldlineMerchant(merchantID, at: now) }
        var payment = WorldlinePayment(merchantID: merchantID, status: .created, amount: request.amount, currency: request.currency,
                                       authorizationMode: request.authorizationMode.rawValue, merchantReference: request.merchantReference,
                                       paymentProductID: redirect.productID, maskedCardNumber: nil, bin: nil, expiryDate: nil, createdAt: now)
        payment.paymentMethod = "redirect"
        payment.status = try step(payment, .challengeRequired).status
        payment.returnURL = redirect.returnURL
        payment.returnMAC = PlatformText.hex(16)
        let page = PageToken.make()
        payment.challengeTokenHash = page.hash
        let made = payment
        payment = try stored("record the payment") { try store.insertWorldlinePayment(made) }
        return .paymentCreated(payment, redirectURL: pageURL(payment.id + "/" + page.token))
    }

    /// What the payer does on the method's page.
    public enum RedirectAction: String, Sendable, CaseIterable {
        case approve, decline, cancel, pending
    }

    /// The payer's answer on the method's page; returns the payment and where the payer goes
    /// back to (the merchant's `returnUrl` with `RETURNMAC` and `paymentId`).
    public func answerRedirect(paymentID: String, action: RedirectAction) throws(WorldlineError) -> (payment: WorldlinePayment, returnURL: String) {
        try serialised(paymentID) { () throws(WorldlineError) -> (payment: WorldlinePayment, returnURL: String) in
            guard let found = try stored("read the payment", { try store.worldlinePayment(id: paymentID) }), found.paymentMethod == "redirect" else {
                throw .notFound("UNKNOWN_PAYMENT_ID", "no redirect payment \(shownValue(paymentID, 40))")
            }
            var p = try payment(found.merchantID, paymentID)
            if p.status == .redirected {
                switch action {
                case .pending: break
                case .cancel:
                    let transition = try step(p, .cancel(open: false))
                    let merchant = try stored("find the merchant") { try store.ensureWorldlineMerchant(p.merchantID, at: now) }
                    p = try cancelBeforeAuthorisation(p, transition, merchant)
                case .approve, .decline:
                    p = try authoriseRedirect(p, approved: action == .approve)
                }
            }
            let back = p.returnURL ?? ""
            return (p, back + (back.contains("?") ? "&" : "?") + "RETURNMAC=" + QueryValue.encode(p.returnMAC ?? "") + "&paymentId=" + QueryValue.encode(p.id))
        }
    }

    /// The payment a redirect page's token opens; an unknown payment and a wrong token are the same 404.
    public func redirectPayment(paymentID: String, token: String) throws(WorldlineError) -> WorldlinePayment {
        guard let p = try stored("read the payment", { try store.worldlinePayment(id: paymentID) }), p.paymentMethod == "redirect",
              PageToken.matches(token, p.challengeTokenHash) else {
            throw .notFound("UNKNOWN_RESOURCE", "no such payment page")
        }
        return p
    }

    /// The payer's approval or decline at the method, recorded on the one path with the
    /// payment's new state and its webhooks: the method answers in the issuer's place.
    func authoriseRedirect(_ payment: WorldlinePayment, approved: Bool) throws(WorldlineError) -> WorldlinePayment {
        let name = WorldlineCreatePayment.Redirect.products[payment.paymentProductID] ?? "the method"
        let answer = AuthorisationResponse(responseCode: approved ? .approved : ResponseCode("05"),
                                           authorisationCode: approved ? PlatformText.digits(6) : nil, issuerAuthenticationData: nil,
                                           rule: "redirect method", message: approved ? "approved by the payer at \(name)" : "declined by the payer at \(name)",
                                           delayMilliseconds: 0)
        return try authorise(payment, card: nil, request: nil, method: (answer, name))
    }
}
