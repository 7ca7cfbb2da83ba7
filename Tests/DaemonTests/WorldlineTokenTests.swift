import Foundation
import Testing
import DaemonTestSupport
import TestSupport

/// Card-on-file tokens over HTTP: `/v2/{merchantId}/tokens`, `tokenize`, payments with a token
/// and their card-on-file series, and a client session's accounts on file.
@Suite("Worldline platform, tokens and card on file over HTTP", .serialized)
struct WorldlineTokenTests {
    typealias Platform = WorldlineHTTPTests.Platform
    typealias Answer = WorldlineHTTPTests.Answer

    static let pan = "4761739001010010"

    static func message(_ a: Answer) -> String { ((a.json["errors"] as? [[String: Any]])?.first?["message"] as? String) ?? "" }
    static func payment(_ a: Answer) -> [String: Any] { a.json["payment"] as? [String: Any] ?? [:] }
    static func cardOutput(_ p: [String: Any]) -> [String: Any] {
        ((p["paymentOutput"] as? [String: Any])?["cardPaymentMethodSpecificOutput"] as? [String: Any]) ?? [:]
    }

    static func tokenPayment(_ token: String, amount: Int = 500, extra: String = "") -> String {
        #"{"order":{"amountOfMoney":{"amount":\#(amount),"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","token":"\#(token)"\#(extra)}}"#
    }

    @Test("a token is made, read masked, pays, and once deleted pays no more; the same card again is the same token; the PAN is in no row")
    func tokenLife() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let body = #"{"paymentProductId":1,"card":{"data":{"card":{"cardNumber":"\#(Self.pan)","expiryDate":"1231","cardholderName":"Ada Bench"}}}}"#
        let made = try p.send("POST", "/v2/m1/tokens", body: body)
        #expect(made.status == 201, "\(made.json)")
        let token = try #require(made.json["token"] as? String)
        #expect(made.json["tokenStatus"] as? String == "CREATED" && made.json["isNewToken"] as? Bool == true)
        #expect((made.json["card"] as? [String: Any])?["cardNumber"] as? String == "************0010")

        let again = try p.send("POST", "/v2/m1/tokens", body: body)
        #expect(again.status == 200 && again.json["token"] as? String == token && again.json["tokenStatus"] as? String == "UNCHANGED")
        let renewed = try p.send("POST", "/v2/m1/tokens", body: body.replacingOccurrences(of: "Ada Bench", with: "Ada B. Bench"))
        #expect(renewed.json["token"] as? String == token && renewed.json["tokenStatus"] as? String == "UPDATED")

        let read = try p.send("GET", "/v2/m1/tokens/\(token)")
        #expect(read.status == 200 && read.json["id"] as? String == token && read.json["paymentProductId"] as? Int == 1)
        let card = ((read.json["card"] as? [String: Any])?["data"] as? [String: Any])?["cardWithoutCvv"] as? [String: Any]
        #expect(card?["cardNumber"] as? String == "************0010" && card?["expiryDate"] as? String == "1231")
        #expect(card?["cardholderName"] as? String == "Ada B. Bench")

        // Another merchant does not see it.
        let other = try JSONDecoder().decode(WorldlineEndToEndTests.Key.self, from: try await p.daemon.client.send(
            method: "POST", "/v1/worldline/api-keys", json: ["merchantId": "m2"]).body)
        let p2 = Platform.with(p, keyID: other.keyId, secret: other.secretApiKey ?? "")
        #expect(try p2.send("GET", "/v2/m2/tokens/\(token)").errorID == "UNKNOWN_TOKEN")
        let foreign = try p2.send("POST", "/v2/m2/payments", body: Self.tokenPayment(token))
        #expect(foreign.status == 400 && foreign.property == "cardPaymentMethodSpecificInput.token")

        let paid = try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(token))
        #expect(paid.status == 201, "\(paid.json)")
        #expect(Self.payment(paid)["status"] as? String == "CAPTURED")
        #expect(Self.cardOutput(Self.payment(paid))["token"] as? String == token)
        // The payment read back shows its token (stored sealed).
        let id = try #require(Self.payment(paid)["id"] as? String)
        #expect(Self.cardOutput(try p.send("GET", "/v2/m1/payments/\(id)").json)["token"] as? String == token)

        #expect(try p.send("DELETE", "/v2/m1/tokens/\(token)").status == 204)
        #expect(try p.send("GET", "/v2/m1/tokens/\(token)").status == 404)
        #expect(try p.send("DELETE", "/v2/m1/tokens/\(token)").status == 404)
        let gone = try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(token))
        #expect(gone.status == 400 && gone.property == "cardPaymentMethodSpecificInput.token" && Self.message(gone).contains("deleted"))

        // Neither the PAN nor the token is in the ledger file in clear.
        let dump = try Data(contentsOf: URL(fileURLWithPath: p.daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data(Self.pan.utf8)) == nil)
        #expect(dump.range(of: Data(token.utf8)) == nil)
    }

    @Test("tokenize on an approved payment makes a token; a declined one makes none; bad token requests name the property")
    func tokenize() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let first = try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(extra: #","tokenize":true"#))
        #expect(first.status == 201, "\(first.json)")
        let creation = first.json["creationOutput"] as? [String: Any] ?? [:]
        let token = try #require(creation["token"] as? String)
        #expect(creation["isNewToken"] as? Bool == true && creation["tokenizationSucceeded"] as? Bool == true)
        #expect(Self.cardOutput(Self.payment(first))["token"] as? String == token)
        #expect((Self.cardOutput(Self.payment(first))["schemeTransactionId"] as? String)?.count == 15)
        // The same card tokenised again: the same token, not new.
        let second = try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(extra: #","tokenize":true"#))
        #expect((second.json["creationOutput"] as? [String: Any])?["token"] as? String == token)
        #expect((second.json["creationOutput"] as? [String: Any])?["isNewToken"] as? Bool == false)

        // A declined payment (wrong CVV) of a card with no token stores none (Scenarios/cards/mastercard-credit-cvn16.yaml).
        let declined = try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(
            card: #"{"cardNumber":"5413330089604004","expiryDate":"0929","cvv":"999"}"#, extra: #","tokenize":true"#))
        #expect(declined.status == 402)
        let result = declined.json["paymentResult"] as? [String: Any] ?? [:]
        #expect((result["creationOutput"] as? [String: Any])?["token"] == nil)
        #expect((result["creationOutput"] as? [String: Any])?["tokenizationSucceeded"] as? Bool == false)
        // The same card paid right: its token is a new one (the declined payment's was taken back).
        let approved = try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(
            card: #"{"cardNumber":"5413330089604004","expiryDate":"0929","cvv":"123"}"#, extra: #","tokenize":true"#))
        #expect((approved.json["creationOutput"] as? [String: Any])?["isNewToken"] as? Bool == true, "\(approved.json)")

        // Refusals, each naming its property.
        #expect(try p.send("POST", "/v2/m1/tokens", body: "{}").property == "card.data.card")
        #expect(try p.send("POST", "/v2/m1/tokens", body: #"{"card":{"data":{"card":{"cardNumber":"4761739001010011","expiryDate":"1231"}}}}"#)
            .property == "card.data.card.cardNumber")
        #expect(try p.send("POST", "/v2/m1/tokens", body: #"{"paymentProductId":3,"card":{"data":{"card":{"cardNumber":"\#(Self.pan)","expiryDate":"1231"}}}}"#)
            .property == "paymentProductId")
        let both = try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(extra: #","token":"\#(token)""#))
        #expect(both.status == 400 && both.property == "cardPaymentMethodSpecificInput.token")
        // A card number where a token goes is refused as anywhere else, and not echoed.
        let pan = try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(Self.pan))
        #expect(pan.status == 400 && !Self.message(pan).contains(Self.pan))
    }

    @Test("a card-on-file series: the cardholder's first payment, then merchant-initiated ones carrying its scheme id; the rules of a series")
    func cardOnFileSeries() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let cit = #","tokenize":true,"unscheduledCardOnFileRequestor":"cardholderInitiated","unscheduledCardOnFileSequenceIndicator":"first""#
        let first = try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(extra: cit))
        #expect(first.status == 201, "\(first.json)")
        let token = try #require((first.json["creationOutput"] as? [String: Any])?["token"] as? String)
        let scheme = try #require(Self.cardOutput(Self.payment(first))["schemeTransactionId"] as? String)

        let mit = #","unscheduledCardOnFileRequestor":"merchantInitiated","unscheduledCardOnFileSequenceIndicator":"subsequent""#
        // A 3-D Secure return URL is no challenge for a merchant-initiated payment.
        let later = try p.send("POST", "/v2/m1/payments",
                               body: Self.tokenPayment(token, extra: mit + #","returnUrl":"https://shop.example/back""#))
        #expect(later.status == 201, "\(later.json)")
        #expect(Self.payment(later)["status"] as? String == "CAPTURED")
        #expect(Self.cardOutput(Self.payment(later))["initialSchemeTransactionId"] as? String == scheme)
        #expect(Self.cardOutput(Self.payment(later))["schemeTransactionId"] as? String != scheme)

        // Recurring: the first sets the token's series if it had none; here it keeps the first.
        let recurring = try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(token, extra: #","recurring":{"recurringPaymentSequenceIndicator":"recurring"}"#))
        #expect(recurring.status == 201 && Self.cardOutput(Self.payment(recurring))["initialSchemeTransactionId"] as? String == scheme)

        // Refusals: a merchant-initiated first; a merchant-initiated payment with a CVV; one with
        // no first payment to follow; an unknown indicator; both recurring and unscheduled.
        let plainToken = try #require(try p.send("POST", "/v2/m1/tokens",
                                                  body: #"{"card":{"data":{"card":{"cardNumber":"4111111111111111","expiryDate":"1230"}}}}"#).json["token"] as? String)
        #expect(try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(plainToken,
            extra: #","unscheduledCardOnFileRequestor":"merchantInitiated","unscheduledCardOnFileSequenceIndicator":"first""#))
            .property == "cardPaymentMethodSpecificInput.unscheduledCardOnFileSequenceIndicator")
        #expect(try p.send("POST", "/v2/m1/payments", body: WorldlineHTTPTests.payment(extra: mit))
            .property == "cardPaymentMethodSpecificInput.card.cvv")
        let orphan = try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(plainToken, extra: mit))
        #expect(orphan.status == 400 && orphan.property == "cardPaymentMethodSpecificInput.initialSchemeTransactionId")
        let given = try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(plainToken, extra: mit + #","initialSchemeTransactionId":"123456789012345""#))
        #expect(given.status == 201 && Self.cardOutput(Self.payment(given))["initialSchemeTransactionId"] as? String == "123456789012345")
        #expect(try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(plainToken, extra: #","unscheduledCardOnFileRequestor":"someone""#))
            .property == "cardPaymentMethodSpecificInput.unscheduledCardOnFileRequestor")
        #expect(try p.send("POST", "/v2/m1/payments", body: Self.tokenPayment(plainToken,
            extra: #","recurring":{"recurringPaymentSequenceIndicator":"first"},"unscheduledCardOnFileSequenceIndicator":"first""#))
            .property == "cardPaymentMethodSpecificInput.recurring")
    }

    @Test("a session with tokens: unknown ones come back invalid, the known ones are accounts on file, and encrypted input pays with one")
    func accountsOnFile() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let token = try #require(try p.send("POST", "/v2/m1/tokens",
                                             body: #"{"card":{"data":{"card":{"cardNumber":"\#(Self.pan)","expiryDate":"1231","cardholderName":"Ada Bench"}}}}"#)
            .json["token"] as? String)
        let session = try p.send("POST", "/v2/m1/sessions", body: #"{"tokens":["\#(token)","not-a-token"]}"#)
        #expect(session.status == 201)
        #expect(session.json["invalidTokens"] as? [String] == ["not-a-token"])
        let id = try #require(session.json["clientSessionId"] as? String), customer = try #require(session.json["customerId"] as? String)
        let clients = WorldlineClientTests()
        let products = try clients.client(p, "/client/v1/\(customer)/products?countryCode=NL&currencyCode=EUR", session: id)
        let visa = (products.json["paymentProducts"] as? [[String: Any]] ?? []).first { $0["id"] as? Int == 1 }
        let account = (visa?["accountsOnFile"] as? [[String: Any]])?.first
        #expect(account?["id"] as? String == token)
        let alias = (account?["attributes"] as? [[String: Any]])?.first { $0["key"] as? String == "alias" }
        #expect(alias?["value"] as? String == "************0010")
        #expect((try clients.client(p, "/client/v1/\(customer)/products/3", session: id)).json["accountsOnFile"] == nil)

        let key = try clients.client(p, "/client/v1/\(customer)/crypto/publickey", session: id)
        let keyID = try #require(key.json["keyId"] as? String)
        let der = Array(try #require(Data(base64Encoded: key.json["publicKey"] as? String ?? "")))
        func input(_ account: String, nonce: String) -> String {
            #"{"clientSessionId":"\#(id)","nonce":"\#(nonce)","paymentProductId":1,"accountOnFileId":"\#(account)","paymentValues":[{"key":"cvv","value":"123"}]}"#
        }
        func pay(_ jwe: String) throws -> Answer {
            try p.send("POST", "/v2/m1/payments",
                       body: #"{"order":{"amountOfMoney":{"amount":700,"currencyCode":"EUR"}},"encryptedCustomerInput":"\#(jwe)","cardPaymentMethodSpecificInput":{"authorizationMode":"SALE"}}"#)
        }
        let paid = try pay(try WorldlineClientTests.encrypt(input(token, nonce: "a-1"), keyID: keyID, publicKeyDER: der))
        #expect(paid.status == 201, "\(paid.json)")
        #expect(Self.cardOutput(Self.payment(paid))["token"] as? String == token)
        // An account this session was not given is refused, naming the property.
        let other = try #require(try p.send("POST", "/v2/m1/tokens",
                                             body: #"{"card":{"data":{"card":{"cardNumber":"4111111111111111","expiryDate":"1230"}}}}"#).json["token"] as? String)
        let refused = try pay(try WorldlineClientTests.encrypt(input(other, nonce: "a-2"), keyID: keyID, publicKeyDER: der))
        #expect(refused.status == 400 && refused.property == "encryptedCustomerInput.accountOnFileId")
        // A wrong CVV typed for the account on file is the issuer's decline.
        let wrong = try pay(try WorldlineClientTests.encrypt(input(token, nonce: "a-3").replacingOccurrences(of: "\"123\"", with: "\"999\""),
                                                             keyID: keyID, publicKeyDER: der))
        #expect(wrong.status == 402)
    }
}
