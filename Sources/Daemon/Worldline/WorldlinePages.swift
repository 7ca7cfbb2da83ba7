import Crypto
import Foundation
import Fronts
import HTTPTypes
import Hummingbird
import LedgerModel
import NIOCore
import Workflows

/// The consumer's pages of the Worldline platform: the hosted checkout (docs/worldline.md,
/// "Hosted Checkout"). Plain HTML and CSS, no script: a form posts to the page itself, which
/// refuses a post from another site (`PagePost`).
extension WorldlineServer {
    /// `GET /hostedcheckout/{id}/{token}`: the payment page; `POST` the same: its form answered;
    /// `GET …/return`: back from the 3-D Secure challenge.
    func checkoutPages() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        routes.get("hostedcheckout/:id/:token") { _, context in
            let (c, saved, latest) = try front.checkoutPage(id: context.parameters.get("id") ?? "", token: context.parameters.get("token") ?? "")
            if let done = try front.finished(c, latest) { return try Self.checkoutResponse(done, c, saved) }
            return Self.styledPage(Self.checkoutForm(c, saved, message: nil), lang: c.locale)
        }
        routes.post("hostedcheckout/:id/:token") { request, context in
            let id = context.parameters.get("id") ?? "", token = context.parameters.get("token") ?? ""
            let (c, saved, _) = try front.checkoutPage(id: id, token: token)
            if let refused = PagePost.refusal(request) { throw WorldlineError.forbidden(refused) }
            let body = try await Self.body(request)
            var fields: [String: String] = [:]
            for field in RenderedCallback.fields(of: "x:?" + Self.formText(body)) where fields[field.name] == nil { fields[field.name] = field.value }
            let form = fields
            let page = publicURL() + "/hostedcheckout/\(id)/\(token)"
            let step = try await offPool {
                try front.submitCheckout(id: id, token: token, form: form, returnPage: page + "/return") { publicURL() + "/threeds/" + $0 }
            }
            return try Self.checkoutResponse(step, c, saved)
        }
        routes.get("hostedcheckout/:id/:token/return") { _, context in
            let id = context.parameters.get("id") ?? "", token = context.parameters.get("token") ?? ""
            let (c, saved, _) = try front.checkoutPage(id: id, token: token)
            return try Self.checkoutResponse(try await offPool { try front.checkoutReturned(id: id, token: token) }, c, saved)
        }
        return routes
    }

    /// `GET /hostedtokenization/{id}/{token}`: the card form (to sit in the merchant's iframe);
    /// `POST` the same: the card stored as a token, or the form again with what is wrong.
    func tokenizationPages() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        routes.get("hostedtokenization/:id/:token") { _, context in
            let s = try front.tokenizationPage(id: context.parameters.get("id") ?? "", token: context.parameters.get("token") ?? "")
            return Self.styledPage(s.token == nil ? Self.tokenizationForm(s, message: nil) : Self.tokenizationDone(s), lang: s.locale, framed: true)
        }
        routes.post("hostedtokenization/:id/:token") { request, context in
            let id = context.parameters.get("id") ?? "", token = context.parameters.get("token") ?? ""
            _ = try front.tokenizationPage(id: id, token: token)
            if let refused = PagePost.refusal(request) { throw WorldlineError.forbidden(refused) }
            let body = try await Self.body(request)
            var fields: [String: String] = [:]
            for field in RenderedCallback.fields(of: "x:?" + Self.formText(body)) where fields[field.name] == nil { fields[field.name] = field.value }
            let form = fields
            let outcome = try await offPool { try front.submitTokenization(id: id, token: token, form: form) }
            let s = try front.tokenizationPage(id: id, token: token)
            switch outcome {
            case .success(let done): return Self.styledPage(Self.tokenizationDone(done), lang: s.locale, framed: true)
            case .failure(let e): return Self.styledPage(Self.tokenizationForm(s, message: WorldlineFront.pageMessage(e)), lang: s.locale, framed: true)
            }
        }
        return routes
    }

    /// `GET /redirect/{paymentId}/{token}`: the redirect method's page (PayPal, iDEAL): Approve,
    /// Decline, Cancel, Leave pending; `POST` the same answers it and sends the payer back.
    func redirectPages() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        routes.get("redirect/:id/:token") { _, context in
            let p = try front.redirectPayment(paymentID: context.parameters.get("id") ?? "", token: context.parameters.get("token") ?? "")
            return Self.styledPage(Self.redirectPage(p), lang: nil)
        }
        routes.post("redirect/:id/:token") { request, context in
            let id = context.parameters.get("id") ?? ""
            _ = try front.redirectPayment(paymentID: id, token: context.parameters.get("token") ?? "")
            if let refused = PagePost.refusal(request) { throw WorldlineError.forbidden(refused) }
            let body = try await Self.body(request)
            let form = RenderedCallback.fields(of: "x:?" + Self.formText(body))
            guard let text = form.first(where: { $0.name == "action" })?.value, let action = WorldlineFront.RedirectAction(rawValue: text) else {
                throw WorldlineError.invalid("action", "must be approve, decline, cancel or pending")
            }
            let (_, back) = try await offPool { try front.answerRedirect(paymentID: id, action: action) }
            return Response(status: .seeOther, headers: [.location: back, .contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: "See \(back)\n")))
        }
        return routes
    }

    static func redirectPage(_ p: WorldlinePayment) -> String {
        let name = WorldlineCreatePayment.Redirect.products[p.paymentProductID] ?? "Payment"
        let state = p.status == .redirected
            ? """
              <form method="post"><div class="buttons">
              <button type="submit" name="action" value="approve" id="approve" class="primary">Approve</button>
              <button type="submit" name="action" value="decline" id="decline">Decline</button>
              <button type="submit" name="action" value="cancel" id="cancel">Cancel</button>
              <button type="submit" name="action" value="pending" id="pending">Leave it pending</button></div></form>
              """
            : "<p id=\"answered\">This payment was answered: it is \(escape(p.status.rawValue)).</p>"
        return """
            <h1>\(escape(name))</h1>
            <p>Pay <strong>\(escape(amountText(p.amount, p.currency)))</strong>\(p.merchantReference.map { " for order <code>\(escape($0))</code>" } ?? "").</p>
            \(state)
            <p class="muted"><small>cardbench stands in for \(escape(name)): the payer's answer decides the payment (docs/worldline.md).</small></p>
            """
    }

    static func tokenizationForm(_ s: WorldlineHostedTokenization, message: String?) -> String {
        let products = s.products.compactMap { id in WorldlineProducts.offered.first { $0.id == id }?.label }.joined(separator: ", ")
        return """
            \(message.map { "<p class=\"error\" role=\"alert\" id=\"message\">\(escape($0))</p>" } ?? "")
            <form method="post" id="tokenize">
            <p class="muted">Accepted: \(escape(products))</p>
            \(cardFields)
            <div class="buttons"><button type="submit" id="submit" class="primary">Save the card</button></div>
            </form>
            """
    }

    /// A card's fields, as the checkout page and the tokenization form both ask for them.
    static let cardFields = """
        <label for="cardNumber">Card number</label>
        <input id="cardNumber" name="cardNumber" inputmode="numeric" autocomplete="cc-number" maxlength="23">
        <label for="expiryDate">Expiry date (MM/YY)</label>
        <input id="expiryDate" name="expiryDate" inputmode="numeric" autocomplete="cc-exp" maxlength="5" placeholder="MM/YY">
        <label for="cvv">Security code</label>
        <input id="cvv" name="cvv" inputmode="numeric" autocomplete="cc-csc" maxlength="4">
        <label for="cardholderName">Name on the card</label>
        <input id="cardholderName" name="cardholderName" autocomplete="cc-name" maxlength="51">
        """

    static func tokenizationDone(_ s: WorldlineHostedTokenization) -> String {
        "<p id=\"saved\">The card is saved: the shop can now pay with it.</p>"
    }

    static func checkoutResponse(_ step: WorldlineFront.CheckoutStep, _ c: WorldlineHostedCheckout, _ saved: [WorldlineToken]) throws -> Response {
        switch step {
        case .page(let message): return styledPage(checkoutForm(c, saved, message: message), lang: c.locale)
        case .redirect(let url):
            return Response(status: .seeOther, headers: [.location: url, .contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: "See \(url)\n")))
        case .result(let c, let p, let back): return styledPage(resultPage(c, p, back: back), lang: c.locale)
        }
    }

    /// A form body (`application/x-www-form-urlencoded`) as query text: a `+` is a space there.
    static func formText(_ body: [UInt8]) -> String {
        String(decoding: body, as: UTF8.self).replacingOccurrences(of: "+", with: "%20")
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "'", with: "&#39;")
    }

    static func amountText(_ amount: Int64, _ currency: String) -> String {
        String(format: "%.2f", Double(amount) / 100) + " " + currency
    }

    static func checkoutForm(_ c: WorldlineHostedCheckout, _ saved: [WorldlineToken], message: String?) -> String {
        let products = c.products.compactMap { id in WorldlineProducts.offered.first { $0.id == id }?.label }.joined(separator: ", ")
        let savedCards = saved.isEmpty ? "" : """
            <fieldset><legend>A saved card</legend>
            \(saved.enumerated().map { i, t in
                """
                <label class="choice"><input type="radio" name="token" value="\(escape(t.token))" id="saved-\(i)"\(i == 0 ? " checked" : "")> \
                \(escape(WorldlineProducts.offered.first { $0.id == t.paymentProductID }?.label ?? "Card")) \(escape(t.maskedCardNumber)), \
                expires \(escape(String(t.expiryDate.prefix(2)) + "/" + String(t.expiryDate.suffix(2))))</label>
                """
            }.joined(separator: "\n"))
            <label class="choice"><input type="radio" name="token" value="" id="saved-none"> Another card</label>
            </fieldset>
            """
        let alert = message.map { $0.isEmpty ? "" : "<p class=\"error\" role=\"alert\" id=\"message\">\(escape($0))</p>" } ?? ""
        return """
            <h1>Pay \(escape(amountText(c.amount, c.currency)))</h1>
            \(c.merchantReference.map { "<p>Order <code>\(escape($0))</code></p>" } ?? "")
            \(alert)
            <form method="post" id="pay">
            \(savedCards)
            <fieldset><legend>Card</legend>
            <p class="muted">Accepted: \(escape(products))</p>
            \(cardFields)
            </fieldset>
            <div class="buttons"><button type="submit" id="submit" class="primary">Pay \(escape(amountText(c.amount, c.currency)))</button>
            <button type="submit" name="action" value="cancel" id="cancel" formnovalidate>Cancel</button></div>
            </form>
            <p class="muted"><small>cardbench stands in for Worldline's hosted checkout: the bench's issuer decides the outcome (docs/worldline.md).</small></p>
            """
    }

    static func resultPage(_ c: WorldlineHostedCheckout, _ p: WorldlinePayment?, back: String?) -> String {
        let outcome: String
        switch (c.status, p?.status) {
        case (.cancelledByConsumer, _): outcome = "You cancelled the payment."
        case (_, .rejected?): outcome = "The payment was declined."
        case (_, let s?) where s != .redirected && s != .created: outcome = "Thank you: the payment of \(amountText(c.amount, c.currency)) is done."
        default: outcome = "The payment was not made."
        }
        return """
            <h1 id="outcome">\(escape(outcome))</h1>
            \(p.map { "<p>Payment <code>\(escape($0.id))</code>: <span id=\"status\">\(escape($0.status.rawValue))</span></p>" } ?? "")
            \(back.map { "<p><a id=\"back\" href=\"\(escape($0))\">Back to the shop</a></p>" } ?? "<p>You may close this page.</p>")
            """
    }

    static let pageStyle = """
        body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a;background:#fff}
        label{display:block;margin-top:.75rem;font-weight:600}label.choice{font-weight:400}
        input:not([type=radio]){width:100%;box-sizing:border-box;padding:.5rem;font:inherit;border:1px solid #555;border-radius:4px}
        fieldset{border:1px solid #bbb;border-radius:6px;margin:1rem 0;padding:.5rem 1rem 1rem}
        .buttons{display:flex;gap:.75rem;margin-top:1rem}button{font:inherit;padding:.5rem 1rem;border-radius:4px;border:1px solid #333;background:#eee;color:#1a1a1a}
        button.primary{background:#0b5394;color:#fff;border-color:#0b5394}.error{color:#a00000;font-weight:600}.muted{color:#444}
        """

    /// A page with the platform's style; the style is allowed by its hash and nothing else runs.
    /// `framed`: the page may sit in another site's iframe (the tokenization form); any other
    /// page may not be framed at all.
    static func styledPage(_ body: String, lang: String?, framed: Bool = false) -> Response {
        let hash = Data(SHA256.hash(data: Array(pageStyle.utf8))).base64EncodedString()
        let html = """
            <!doctype html>
            <html lang="\(escape(String((lang ?? "en_GB").prefix(2))))"><head><meta charset="utf-8"><title>Payment — cardbench</title>
            <meta name="viewport" content="width=device-width, initial-scale=1"><style>\(pageStyle)</style></head>
            <body>\(body)</body></html>
            """
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8",
                                               .contentSecurityPolicy: "default-src 'none'; style-src 'sha256-\(hash)'; form-action 'self' http: https:; frame-ancestors \(framed ? "*" : "'none'")"],
                        body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
