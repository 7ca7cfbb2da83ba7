import AsyncHTTPClient
import Daemon
import Foundation
import NIOCore
import Testing
import DaemonTestSupport
import TestSupport

/// Hosted Checkout over HTTP: the merchant's calls signed as the SDK signs them, the consumer's
/// page walked as a browser without script would (its form posted, redirects read, not followed).
@Suite("Worldline platform, hosted checkout over HTTP", .serialized)
struct WorldlineCheckoutTests {
    typealias Platform = WorldlineHTTPTests.Platform

    struct Page {
        let status: Int
        let location: String?
        let html: String
    }

    /// The consumer's browser: GETs and form POSTs, no redirect followed.
    final class Browser: @unchecked Sendable {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        deinit { try? client.syncShutdown() }

        func get(_ url: String) async throws -> Page {
            try await send(HTTPClientRequest(url: url))
        }

        func post(_ url: String, _ form: [(String, String)], headers: [(String, String)] = []) async throws -> Page {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            for (k, v) in headers { request.headers.add(name: k, value: v) }
            let body = form.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.1)" }.joined(separator: "&")
            request.body = .bytes(ByteBuffer(string: body))
            return try await send(request)
        }

        private func send(_ request: HTTPClientRequest) async throws -> Page {
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            return Page(status: Int(response.status.code), location: response.headers.first(name: "location"), html: String(buffer: body))
        }
    }

    static func checkout(_ p: Platform, amount: Int = 2500, input: String = #"{"returnUrl":"https://shop.example/back?o=1"}"#,
                         card: String = #"{"authorizationMode":"FINAL_AUTHORIZATION"}"#) throws -> WorldlineHTTPTests.Answer {
        try p.send("POST", "/v2/m1/hostedcheckouts", body: #"{"order":{"amountOfMoney":{"amount":\#(amount),"currencyCode":"EUR"},"references":{"merchantReference":"order-1"}},"hostedCheckoutSpecificInput":\#(input),"cardPaymentMethodSpecificInput":\#(card)}"#)
    }

    static func status(_ p: Platform, _ id: String) throws -> (String?, [String: Any]?) {
        let a = try p.send("GET", "/v2/m1/hostedcheckouts/\(id)")
        return (a.json["status"] as? String, (a.json["createdPaymentOutput"] as? [String: Any]))
    }

    static func card(_ number: String, expiry: String = "12/31", cvv: String = "123") -> [(String, String)] {
        [("cardNumber", number), ("expiryDate", expiry), ("cvv", cvv), ("cardholderName", "Ada Bench")]
    }

    @Test("a card typed on the page pays, and the consumer goes back with hostedCheckoutId and RETURNMAC; the status shows the payment")
    func frictionless() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let made = try Self.checkout(p, input: #"{"returnUrl":"https://shop.example/back?o=1","showResultPage":false,"locale":"fr_FR"}"#)
        #expect(made.status == 201, "\(made.json)")
        let id = try #require(made.json["hostedCheckoutId"] as? String), mac = try #require(made.json["RETURNMAC"] as? String)
        let url = try #require(made.json["redirectUrl"] as? String)
        #expect((made.json["partialRedirectUrl"] as? String).map { url.hasSuffix($0) && !$0.contains("://") } == true)
        #expect(made.json["merchantReference"] as? String == "order-1")
        #expect(try Self.status(p, id).0 == "IN_PROGRESS")

        let browser = Browser()
        let page = try await browser.get(url)
        #expect(page.status == 200 && page.html.contains("Pay 25.00 EUR") && page.html.contains(#"name="cardNumber""#) && page.html.contains(#"lang="fr""#))
        // The platform's frictionless test card: no challenge.
        let paid = try await browser.post(url, Self.card("4330264936344675"))
        #expect(paid.status == 303 && paid.location == "https://shop.example/back?o=1&hostedCheckoutId=\(id)&RETURNMAC=\(mac)", "\(paid)")
        let (status, output) = try Self.status(p, id)
        #expect(status == "PAYMENT_CREATED" && output?["paymentStatusCategory"] as? String == "SUCCESSFUL")
        #expect((output?["payment"] as? [String: Any])?["status"] as? String == "PENDING_CAPTURE")
        // The page again: done, straight back to the shop.
        #expect(try await browser.get(url).location?.hasPrefix("https://shop.example/back") == true)
        // Another merchant's checkout is unknown; a wrong page token is the same 404 as no checkout.
        #expect(try await browser.get(url.replacingOccurrences(of: "/" + id + "/", with: "/" + id + "/0")).status == 404)
        #expect(try await browser.get(url.replacingOccurrences(of: "/" + id + "/", with: "/9" + id + "/")).status == 404)
        // A post from another site is refused.
        #expect(try await browser.post(url, Self.card("4330264936344675"), headers: [("Sec-Fetch-Site", "cross-site")]).status == 403)
        let dump = try Data(contentsOf: URL(fileURLWithPath: p.daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4330264936344675".utf8)) == nil)
    }

    @Test("3-D Secure on the page: the challenge passed, the consumer comes back to the result page and on to the shop")
    func challenge() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let made = try Self.checkout(p)
        let url = try #require(made.json["redirectUrl"] as? String), id = try #require(made.json["hostedCheckoutId"] as? String)
        let browser = Browser()
        let asked = try await browser.post(url, Self.card("4874970686672022"))
        let challenge = try #require(asked.location)
        #expect(asked.status == 303 && challenge.contains("/threeds/"), "\(asked)")
        #expect(try Self.status(p, id).1?["paymentStatusCategory"] as? String == "STATUS_UNKNOWN")
        let answered = try await browser.post(challenge, [("result", "pass")])
        let back = try #require(answered.location)
        #expect(back.hasPrefix(url + "/return"))
        let result = try await browser.get(back)
        #expect(result.status == 200 && result.html.contains("Thank you") && result.html.contains("https://shop.example/back?o=1&amp;hostedCheckoutId=\(id)"))
        #expect(try Self.status(p, id).1?["paymentStatusCategory"] as? String == "SUCCESSFUL")
    }

    @Test("on the page: a field's rule, a decline with attempts left, a product the merchant excluded, a cancel")
    func refusals() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let browser = Browser()
        let made = try Self.checkout(p, input: #"{"returnUrl":"https://shop.example/back","paymentProductFilters":{"restrictTo":{"products":[1]}},"allowedNumberOfPaymentAttempts":2}"#,
                                     card: #"{"authorizationMode":"SALE"}"#)
        let url = try #require(made.json["redirectUrl"] as? String), id = try #require(made.json["hostedCheckoutId"] as? String)
        let luhn = try await browser.post(url, Self.card("4761739001010011"))
        #expect(luhn.status == 200 && luhn.html.contains("Card number:"), "\(luhn.html)")
        let master = try await browser.post(url, Self.card("5413330089604004", expiry: "09/29"))
        #expect(master.html.contains("MasterCard is not accepted"), "\(master.html)")
        #expect(try Self.status(p, id).0 == "CLIENT_NOT_ELIGIBLE_FOR_SELECTED_PAYMENT_PRODUCT")
        // Scenarios/cards/visa-credit-cvn10.yaml with a wrong CVV: declined, one attempt left.
        // A card that is not one of the platform's frictionless test cards is challenged: passed, the page says what came of it.
        func pay(_ form: [(String, String)]) async throws -> Page {
            let asked = try await browser.post(url, form)
            guard asked.status == 303, let challenge = asked.location else { return asked }
            let answered = try await browser.post(challenge, [("result", "pass")])
            return try await browser.get(try #require(answered.location))
        }
        let declined = try await pay(Self.card("4761739001010010", cvv: "999"))
        #expect(declined.status == 200 && declined.html.contains("declined"), "\(declined.html)")
        #expect(try Self.status(p, id).1?["paymentStatusCategory"] as? String == "REJECTED")
        let second = try await pay(Self.card("4761739001010010"))
        #expect(second.status == 200 && second.html.contains("Thank you"), "\(second.html)")
        #expect(try Self.status(p, id).1?["paymentStatusCategory"] as? String == "SUCCESSFUL")

        let other = try Self.checkout(p)
        let otherURL = try #require(other.json["redirectUrl"] as? String), otherID = try #require(other.json["hostedCheckoutId"] as? String)
        let cancelled = try await browser.post(otherURL, [("action", "cancel")])
        #expect(cancelled.status == 200 && cancelled.html.contains("You cancelled"))
        #expect(try Self.status(p, otherID).0 == "CANCELLED_BY_CONSUMER")
        #expect(try await browser.post(otherURL, Self.card("4330264936344675")).html.contains("You cancelled"), "a cancelled checkout takes no payment")

        // The merchant's bad requests name the property.
        #expect(try Self.checkout(p, input: #"{"returnUrl":"shop"}"#).property == "hostedCheckoutSpecificInput.returnUrl")
        #expect(try Self.checkout(p, input: #"{"locale":"english"}"#).property == "hostedCheckoutSpecificInput.locale")
        #expect(try Self.checkout(p, input: #"{"paymentProductFilters":{"restrictTo":{"products":[4242]}}}"#).property == "hostedCheckoutSpecificInput.paymentProductFilters")
        #expect(try p.send("GET", "/v2/m1/hostedcheckouts/123").errorID == "UNKNOWN_HOSTED_CHECKOUT_ID")
    }

    @Test("saved cards: the merchant's tokens are offered, unknown ones come back invalid, and one pays; tokenize stores a typed card")
    func savedCards() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let token = try #require(try p.send("POST", "/v2/m1/tokens", body: #"{"card":{"data":{"card":{"cardNumber":"4761739001010010","expiryDate":"1231"}}}}"#)
            .json["token"] as? String)
        let made = try Self.checkout(p, input: #"{"returnUrl":"https://shop.example/back","tokens":"\#(token),nope","showResultPage":false}"#)
        #expect(made.json["invalidTokens"] as? [String] == ["nope"])
        let url = try #require(made.json["redirectUrl"] as? String), id = try #require(made.json["hostedCheckoutId"] as? String)
        let browser = Browser()
        let page = try await browser.get(url)
        #expect(page.html.contains("************0010") && page.html.contains(#"value="\#(token)""#))
        let paid = try await browser.post(url, [("token", token), ("cvv", "123")])
        // A saved card is challenged like any card that is not a frictionless test card.
        let challenge = try #require(paid.location)
        _ = try await browser.post(challenge, [("result", "pass")])
        let output = try Self.status(p, id).1
        let card = ((output?["payment"] as? [String: Any])?["paymentOutput"] as? [String: Any])?["cardPaymentMethodSpecificOutput"] as? [String: Any]
        #expect(card?["token"] as? String == token)

        let tokenizing = try Self.checkout(p, input: #"{"returnUrl":"https://shop.example/back"}"#, card: #"{"authorizationMode":"SALE","tokenize":true}"#)
        let tURL = try #require(tokenizing.json["redirectUrl"] as? String), tID = try #require(tokenizing.json["hostedCheckoutId"] as? String)
        _ = try await browser.post(tURL, Self.card("4330264936344675"))
        let made2 = ((try Self.status(p, tID).1?["payment"] as? [String: Any])?["paymentOutput"] as? [String: Any])?["cardPaymentMethodSpecificOutput"] as? [String: Any]
        #expect((made2?["token"] as? String)?.isEmpty == false)
    }

    @Test("hosted tokenization: the form stores the card as a token the merchant reads and pays with once, its CVV checked; refusals on the form")
    func hostedTokenization() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let made = try p.send("POST", "/v2/m1/hostedtokenizations", body: #"{"locale":"en_GB","tokens":"nope","paymentProductFilters":{"exclude":{"products":[3]}}}"#)
        #expect(made.status == 201, "\(made.json)")
        let id = try #require(made.json["hostedTokenizationId"] as? String), url = try #require(made.json["hostedTokenizationUrl"] as? String)
        #expect(made.json["invalidTokens"] as? [String] == ["nope"])
        #expect(try p.send("GET", "/v2/m1/hostedtokenizations/\(id)").json["token"] == nil, "nothing before the form is sent")
        let browser = Browser()
        let form = try await browser.get(url)
        #expect(form.status == 200 && form.html.contains(#"name="cardNumber""#))
        #expect(try await browser.post(url, Self.card("5413330089604004", expiry: "09/29")).html.contains("MasterCard is not accepted"))
        #expect(try await browser.post(url, Self.card("4761739001010011")).html.contains("Card number:"))
        let saved = try await browser.post(url, Self.card("4761739001010010", cvv: "999"))
        #expect(saved.html.contains("The card is saved"), "\(saved.html)")
        let got = try p.send("GET", "/v2/m1/hostedtokenizations/\(id)")
        let token = try #require((got.json["token"] as? [String: Any])?["id"] as? String)
        #expect(got.json["tokenStatus"] as? String == "CREATED")
        // The CVV typed on the form (999, not the card's) goes with the payment made with the session: declined.
        let pay = #"{"order":{"amountOfMoney":{"amount":800,"currencyCode":"EUR"}},"hostedTokenizationId":"\#(id)","cardPaymentMethodSpecificInput":{"authorizationMode":"SALE"}}"#
        let declined = try p.send("POST", "/v2/m1/payments", body: pay)
        #expect(declined.status == 402, "\(declined.json)")
        #expect(try p.send("POST", "/v2/m1/payments", body: pay).property == "hostedTokenizationId", "good for one payment")
        // The token itself pays on (no CVV).
        let paid = try p.send("POST", "/v2/m1/payments", body: #"{"order":{"amountOfMoney":{"amount":800,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","token":"\#(token)"}}"#)
        #expect(paid.status == 201)
        #expect(try p.send("POST", "/v2/m1/payments", body: pay.replacingOccurrences(of: id, with: "0" + id)).property == "hostedTokenizationId")
        #expect(try p.send("GET", "/v2/m1/hostedtokenizations/x\(id)").errorID == "UNKNOWN_HOSTED_TOKENIZATION_ID")
        #expect(try await browser.get(url + "0").status == 404)
        let dump = try Data(contentsOf: URL(fileURLWithPath: p.daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4761739001010010".utf8)) == nil && dump.range(of: Data(token.utf8)) == nil)
    }

    @Test("mobile wallets: Apple Pay and Google Pay pay with the device card's cryptogram, decrypted or sealed; the issuer refuses a cryptogram for another amount")
    func wallets() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        func data(amount: Int, profile: String = "visa-credit-cvn10") async throws -> WorldlineWalletDataView {
            let reply = try await p.daemon.client.send(method: "POST", "/v1/worldline/wallet-data",
                                                       json: WorldlineWalletDataBody(profile: profile, amount: amount, currency: "EUR"))
            #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            return try JSONDecoder().decode(WorldlineWalletDataView.self, from: reply.body)
        }
        func pay(product: Int, amount: Int, _ mobile: String) throws -> WorldlineHTTPTests.Answer {
            try p.send("POST", "/v2/m1/payments", body: #"{"order":{"amountOfMoney":{"amount":\#(amount),"currencyCode":"EUR"}},"mobilePaymentMethodSpecificInput":{"paymentProductId":\#(product),"authorizationMode":"SALE",\#(mobile)}}"#)
        }
        func decrypted(_ d: WorldlineWalletDataView.Decrypted) -> String {
            #""decryptedPaymentData":{"dpan":"\#(d.dpan)","expiryDate":"\#(d.expiryDate)","cryptogram":"\#(d.cryptogram)","eci":"\#(d.eci)"}"#
        }
        let apple = try await data(amount: 1250)
        #expect(apple.decryptedPaymentData.eci == "05" && apple.decryptedPaymentData.dpan == "4761739001010010")
        let paid = try pay(product: 302, amount: 1250, decrypted(apple.decryptedPaymentData))
        #expect(paid.status == 201, "\(paid.json)")
        let payment = paid.json["payment"] as? [String: Any] ?? [:]
        let output = payment["paymentOutput"] as? [String: Any] ?? [:]
        let mobile = output["mobilePaymentMethodSpecificOutput"] as? [String: Any] ?? [:]
        #expect(payment["status"] as? String == "CAPTURED" && output["paymentMethod"] as? String == "mobile")
        #expect(mobile["paymentProductId"] as? Int == 302 && mobile["network"] as? String == "VISA"
                && (mobile["paymentData"] as? [String: Any])?["dpan"] as? String == "************0010")
        // The same cryptogram for another amount, and a changed byte: the issuer's 82.
        let other = try pay(product: 302, amount: 1300, decrypted(apple.decryptedPaymentData))
        #expect(other.status == 402 && Self.message(other).contains("82"), "\(other.json)")
        var bytes = Array(Data(base64Encoded: apple.decryptedPaymentData.cryptogram)!)
        bytes[5] ^= 1
        let tampered = WorldlineWalletDataView.Decrypted(dpan: apple.decryptedPaymentData.dpan, expiryDate: apple.decryptedPaymentData.expiryDate,
                                                         cryptogram: Data(bytes).base64EncodedString(), eci: "05")
        #expect(try pay(product: 302, amount: 1250, decrypted(tampered)).status == 402)
        // Google Pay with the payment data sealed for the platform, a Mastercard (ECI 02).
        let google = try await data(amount: 990, profile: "mastercard-credit-cvn16")
        #expect(google.decryptedPaymentData.eci == "02")
        let sealed = try pay(product: 320, amount: 990, #""encryptedPaymentData":"\#(google.encryptedPaymentData)""#)
        #expect(sealed.status == 201 && ((sealed.json["payment"] as? [String: Any])?["paymentOutput"] as? [String: Any]).map {
            ($0["mobilePaymentMethodSpecificOutput"] as? [String: Any])?["network"] as? String } == "MASTERCARD", "\(sealed.json)")
        // A number no issuer knows: its cryptogram cannot be checked.
        let unknown = WorldlineWalletDataView.Decrypted(dpan: "4111111111111111", expiryDate: "1230", cryptogram: apple.decryptedPaymentData.cryptogram, eci: "05")
        #expect(try pay(product: 302, amount: 1250, decrypted(unknown)).status == 402)
        // Refusals name the property.
        #expect(try pay(product: 999, amount: 1, decrypted(apple.decryptedPaymentData)).property == "mobilePaymentMethodSpecificInput.paymentProductId")
        #expect(try pay(product: 302, amount: 1, #""decryptedPaymentData":{"dpan":"4761739001010010","expiryDate":"1231","cryptogram":"AAAA","eci":"05"}"#)
            .property == "mobilePaymentMethodSpecificInput.decryptedPaymentData.cryptogram")
        #expect(try pay(product: 302, amount: 1, #""encryptedPaymentData":"a.b.c.d.e""#).property == "mobilePaymentMethodSpecificInput.encryptedPaymentData")
        // The Client API lists the wallets.
        let products = try p.send("GET", "/v2/m1/products?countryCode=NL&currencyCode=EUR")
        let ids = (products.json["paymentProducts"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
        #expect(ids.contains(302) && ids.contains(320))
        let dump = try Data(contentsOf: URL(fileURLWithPath: p.daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("5413330089604004".utf8)) == nil)
    }

    static func message(_ a: WorldlineHTTPTests.Answer) -> String { ((a.json["errors"] as? [[String: Any]])?.first?["message"] as? String) ?? "" }

    @Test("redirect methods: PayPal and iDEAL send the payer to the method's page; approved, declined, cancelled or left pending, back to returnUrl, with webhooks")
    func redirects() async throws {
        let receiver = try CountingReceiver()
        defer { receiver.stop() }
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        _ = try await p.daemon.client.send(method: "PUT", "/v1/worldline/merchants/m1/webhook", json: ["url": "http://127.0.0.1:\(receiver.port)/hooks"])
        let browser = Browser()
        func redirect(_ product: Int, amount: Int = 3000, extra: String = "") throws -> WorldlineHTTPTests.Answer {
            try p.send("POST", "/v2/m1/payments", body: #"{"order":{"amountOfMoney":{"amount":\#(amount),"currencyCode":"EUR"},"references":{"merchantReference":"r-1"}},"redirectPaymentMethodSpecificInput":{"paymentProductId":\#(product),"redirectionData":{"returnUrl":"https://shop.example/back"}\#(extra)}}"#)
        }
        func page(_ a: WorldlineHTTPTests.Answer) throws -> (id: String, url: String, mac: String) {
            let action = try #require(a.json["merchantAction"] as? [String: Any])
            let data = try #require(action["redirectData"] as? [String: Any])
            let payment = try #require(a.json["payment"] as? [String: Any])
            return (try #require(payment["id"] as? String), try #require(data["redirectURL"] as? String), try #require(data["RETURNMAC"] as? String))
        }
        func status(_ id: String) throws -> (String?, Int?) {
            let a = try p.send("GET", "/v2/m1/payments/\(id)")
            return (a.json["status"] as? String, (a.json["statusOutput"] as? [String: Any])?["statusCode"] as? Int)
        }
        // PayPal approved: captured at once.
        let made = try redirect(840)
        #expect(made.status == 201 && (made.json["merchantAction"] as? [String: Any])?["actionType"] as? String == "REDIRECT", "\(made.json)")
        let paypal = try page(made)
        #expect(try status(paypal.id) == ("REDIRECTED", 46))
        let shown = try await browser.get(paypal.url)
        #expect(shown.html.contains("PayPal") && shown.html.contains("30.00 EUR") && shown.html.contains(#"value="approve""#))
        let back = try await browser.post(paypal.url, [("action", "approve")])
        #expect(back.status == 303 && back.location == "https://shop.example/back?RETURNMAC=\(paypal.mac)&paymentId=\(paypal.id)", "\(back)")
        #expect(try status(paypal.id) == ("CAPTURED", 9))
        let got = try p.send("GET", "/v2/m1/payments/\(paypal.id)").json
        #expect((got["paymentOutput"] as? [String: Any])?["paymentMethod"] as? String == "redirect")
        // Answered once: the page says so and changes nothing.
        #expect(try await browser.get(paypal.url).html.contains("This payment was answered"))
        _ = try await browser.post(paypal.url, [("action", "decline")])
        #expect(try status(paypal.id).0 == "CAPTURED")
        // A refund of it, as of any payment.
        #expect(try p.send("POST", "/v2/m1/payments/\(paypal.id)/refund", body: "{}").status == 201)

        // PayPal waiting for approval: PENDING_CAPTURE, then a capture.
        let approval = try page(try redirect(840, extra: #","requiresApproval":true"#))
        _ = try await browser.post(approval.url, [("action", "approve")])
        #expect(try status(approval.id) == ("PENDING_CAPTURE", 5))
        // iDEAL declined, cancelled, left pending.
        let declined = try page(try redirect(809))
        _ = try await browser.post(declined.url, [("action", "decline")])
        #expect(try status(declined.id).0 == "REJECTED")
        let cancelled = try page(try redirect(809))
        _ = try await browser.post(cancelled.url, [("action", "cancel")])
        #expect(try status(cancelled.id) == ("CANCELLED", 1))
        let pending = try page(try redirect(809))
        let left = try await browser.post(pending.url, [("action", "pending")])
        let pendingStatus = try status(pending.id)
        #expect(left.status == 303 && pendingStatus == ("REDIRECTED", 46))
        // Webhooks: each recorded payment's.
        let deadline = Date().addingTimeInterval(20)
        while receiver.bodies.count < 5, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let types = receiver.bodies.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["type"] as? String }
        #expect(types.contains("payment.captured") && types.contains("payment.rejected") && types.contains("payment.pending_capture") && types.contains("payment.cancelled"), "\(types)")
        // Refusals name the property.
        #expect(try redirect(999).property == "redirectPaymentMethodSpecificInput.paymentProductId")
        #expect(try p.send("POST", "/v2/m1/payments", body: #"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"USD"}},"redirectPaymentMethodSpecificInput":{"paymentProductId":809,"redirectionData":{"returnUrl":"https://shop.example/back"}}}"#)
            .property == "order.amountOfMoney.currencyCode")
        #expect(try redirect(809, extra: #","requiresApproval":true"#).property == "redirectPaymentMethodSpecificInput.requiresApproval")
        #expect(try await browser.post(pending.url, [("action", "maybe")]).status == 400)
        #expect(try await browser.get(pending.url + "0").status == 404)
    }
}
