import CryptoExtras
import EMV
import Foundation
import Fronts
import Testing

@Suite("Worldline: signatures, encrypted customer input, request bodies")
struct WorldlineTests {
    // MARK: Signatures

    @Test("the string to sign: method, content type, date, sorted lower-cased X-GCS headers unfolded, raw path and query")
    func stringToSign() {
        let text = WorldlineAuth.stringToSign(
            method: "post", contentType: "application/json", date: "Tue, 24 Nov 2026 12:00:00 GMT",
            gcsHeaders: [(name: "X-GCS-ServerMetaInfo", value: "  abc\r\n   def  "), (name: "X-GCS-Idempotence-Key", value: "k1"),
                         (name: "User-Agent", value: "not signed")],
            pathAndQuery: "/v2/m1/products?countryCode=NL&isRecurring=True")
        #expect(text == "POST\napplication/json\nTue, 24 Nov 2026 12:00:00 GMT\nx-gcs-idempotence-key:k1\nx-gcs-servermetainfo:abc def\n/v2/m1/products?countryCode=NL&isRecurring=True\n")
        // A GET signs an empty content type line.
        #expect(WorldlineAuth.stringToSign(method: "GET", contentType: nil, date: "d", gcsHeaders: [], pathAndQuery: "/v2/m/x")
            == "GET\n\nd\n/v2/m/x\n")
    }

    @Test("HMAC-SHA256 in base64 (RFC 4231 test case 2), compared in constant time; any change breaks it")
    func signature() {
        // RFC 4231 §4.3: key "Jefe", data "what do ya want for nothing?".
        let sig = WorldlineAuth.signature("what do ya want for nothing?", secret: "Jefe")
        #expect(sig == Data(try! Hex.decode("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")).base64EncodedString())
        #expect(WorldlineAuth.matches(sig, sig))
        #expect(!WorldlineAuth.matches(sig, WorldlineAuth.signature("what do ya want for nothing!", secret: "Jefe")))
        #expect(!WorldlineAuth.matches(sig, String(sig.dropLast())))
    }

    @Test("Authorization values: v1HMAC key id and signature, v1Client session; anything else is none")
    func authorizationValues() {
        #expect(WorldlineAuth.parseHMAC("GCS v1HMAC:key1:c2ln")! == ("key1", "c2ln"))
        #expect(WorldlineAuth.parseHMAC("GCS v1HMAC:key1:") == nil)
        #expect(WorldlineAuth.parseHMAC("Bearer x") == nil)
        #expect(WorldlineAuth.parseClient("GCS v1Client:abc") == "abc")
        #expect(WorldlineAuth.parseClient("GCS v1Client:") == nil)
        #expect(WorldlineAuth.parseDate("Tue, 24 Nov 2026 12:00:00 GMT") == 1_795_521_600)
        #expect(WorldlineAuth.parseDate("2026-11-24T12:00:00Z") == nil)
        // Against Python's calendar.timegm of the same texts.
        #expect(WorldlineAuth.parseDate("Thu, 29 Feb 2024 23:59:59 GMT") == 1_709_251_199)
        #expect(WorldlineAuth.parseDate("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(WorldlineAuth.parseDate("Thu, 29 Feb 2023 23:59:59 GMT") == nil)
        #expect(WorldlineAuth.parseDate("Tue, 24 Nov 2026 12:00:00 UTC") == nil)
        #expect(WorldlineAuth.parseDate("Tue, 24 Nov 2026 24:00:00 GMT") == nil)
    }

    // MARK: JWE

    struct Vector: Decodable { let privateKeyPEM: String; let keyId: String; let jwe: String; let plaintext: String }

    static func vector() throws -> (Vector, _RSA.Encryption.PrivateKey) {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/worldline-jwe-vector.json")
        let v = try JSONDecoder().decode(Vector.self, from: Data(contentsOf: url))
        return (v, try _RSA.Encryption.PrivateKey(pemRepresentation: v.privateKeyPEM))
    }

    @Test("a JWE made by jwcrypto (an independent library) opens to its plaintext, and its card reads back")
    func independentVector() throws {
        let (v, key) = try Self.vector()
        let opened = try WorldlineJWE.decrypt(v.jwe) { $0 == v.keyId ? key : nil }
        #expect(opened.keyID == v.keyId)
        #expect(String(decoding: opened.plaintext, as: UTF8.self) == v.plaintext)
        let input = try WorldlineCustomerInput.parse(opened.plaintext)
        #expect(input.clientSessionID == "vector-session")
        #expect(input.nonce == "0123456789abcdef")
        #expect(input.card?.pan == "4111111111111111")
    }

    @Test("a changed tag, ciphertext, header or key id, or the wrong algorithm, is refused with its reason")
    func tampered() throws {
        let (v, key) = try Self.vector()
        let parts = v.jwe.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        func refuse(_ jwe: String, _ reason: String) {
            do {
                _ = try WorldlineJWE.decrypt(jwe) { $0 == v.keyId ? key : nil }
                Issue.record("opened a JWE that should be refused (\(reason))")
            } catch {
                #expect(error.reason.contains(reason), "\(error.reason)")
            }
        }
        func flip(_ part: String) -> String {
            var bytes = WorldlineJWE.base64URL(part)!
            bytes[bytes.count / 2] ^= 0x01
            return WorldlineJWE.base64URLEncode(bytes)
        }
        refuse([parts[0], parts[1], parts[2], parts[3], flip(parts[4])].joined(separator: "."), "authentication tag")
        refuse([parts[0], parts[1], parts[2], flip(parts[3]), parts[4]].joined(separator: "."), "authentication tag")
        refuse([parts[0], flip(parts[1]), parts[2], parts[3], parts[4]].joined(separator: "."), "content key")
        let other = WorldlineJWE.base64URLEncode(Array(#"{"alg":"RSA-OAEP","enc":"A256CBC-HS512","kid":"someone-else"}"#.utf8))
        refuse([other, parts[1], parts[2], parts[3], parts[4]].joined(separator: "."), "not a key of this platform")
        let weak = WorldlineJWE.base64URLEncode(Array(#"{"alg":"RSA1_5","enc":"A256CBC-HS512","kid":"cardbench-vector-1"}"#.utf8))
        refuse([weak, parts[1], parts[2], parts[3], parts[4]].joined(separator: "."), "alg must be RSA-OAEP")
        refuse(parts.prefix(4).joined(separator: "."), "5 parts")
        refuse("a.b.c.d.e", "protected header")
    }

    // MARK: Request bodies

    static func parse(_ json: String) throws(WorldlineError) -> WorldlineCreatePayment {
        try WorldlineCreatePayment.parse(WorldlineJSON.parse(Array(json.utf8)))
    }

    @Test("a payment request: amount, currency, mode, card; the Objective-C SDK's string numbers and booleans are taken")
    func createPayment() throws {
        let p = try Self.parse(#"{"order":{"amountOfMoney":{"amount":"1000","currencyCode":"EUR"},"references":{"merchantReference":"r1"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","card":{"cardNumber":"4111 1111 1111 1111","expiryDate":"1230","cvv":"123"},"threeDSecure":{"skipAuthentication":"true"}}}"#)
        #expect(p.amount == 1000 && p.currency == "EUR" && p.currencyNumeric == 978 && p.authorizationMode == .sale)
        #expect(p.card?.pan == "4111111111111111" && p.card?.masked == "************1111")
        #expect(p.threeDSecure?.skipAuthentication == true)
        #expect(p.merchantReference == "r1")
    }

    @Test("every bad payment request names the property and the rule")
    func badPayments() {
        func property(_ json: String) -> String? {
            do { _ = try Self.parse(json); return nil } catch { return error.propertyName ?? error.id }
        }
        let card = #""card":{"cardNumber":"4111111111111111","expiryDate":"1230","cvv":"123"}"#
        #expect(property(#"{}"#) == "order")
        #expect(property(#"{"order":{}}"#) == "order.amountOfMoney")
        #expect(property(#"{"order":{"amountOfMoney":{"currencyCode":"EUR"}}}"#) == "order.amountOfMoney.amount")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":-5,"currencyCode":"EUR"}}}"#) == "order.amountOfMoney.amount")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":1.5,"currencyCode":"EUR"}}}"#) == "order.amountOfMoney.amount")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"XXX"}}}"#) == "order.amountOfMoney.currencyCode")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}}}"#) == "encryptedCustomerInput")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"LATER",\#(card)}}"#)
            == "cardPaymentMethodSpecificInput.authorizationMode")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"card":{"cardNumber":"4111111111111112","expiryDate":"1230"}}}"#)
            == "cardPaymentMethodSpecificInput.card.cardNumber")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"card":{"cardNumber":"4111111111111111","expiryDate":"1330"}}}"#)
            == "cardPaymentMethodSpecificInput.card.expiryDate")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"card":{"cardNumber":"4111111111111111","expiryDate":"1230","cvv":"12"}}}"#)
            == "cardPaymentMethodSpecificInput.card.cvv")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}},"encryptedCustomerInput":"x","cardPaymentMethodSpecificInput":{\#(card)}}"#)
            == "encryptedCustomerInput")
        #expect(property(#"{"order":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{\#(card),"threeDSecure":{"redirectionData":{"returnUrl":"javascript:alert(1)"}}}}"#)
            == "cardPaymentMethodSpecificInput.threeDSecure.redirectionData.returnUrl")
        #expect(property(#"[1]"#) == "INVALID_REQUEST_BODY")
        #expect(property(#"{"order":"#) == "INVALID_REQUEST_BODY")
        #expect(property(String(repeating: " ", count: 70_000) + "{}") == "INVALID_REQUEST_BODY")
    }

    @Test("products: the card fields with the document's mask; IIN details by brand, 404-worthy when no brand issues it")
    func products() throws {
        let visa = try #require(WorldlineProducts.product(1, assetURL: "http://x/"))
        let fields = try #require(visa["fields"] as? [[String: Any]])
        #expect(fields.map { $0["id"] as? String } == ["cardNumber", "expiryDate", "cvv", "cardholderName"])
        #expect((fields[0]["displayHints"] as? [String: Any])?["mask"] as? String == "{{9999}} {{9999}} {{9999}} {{9999}} {{999}}")
        let formatted = try MaskFormatter(mask: "{{9999}} {{9999}} {{9999}} {{9999}} {{999}}").apply("4111111111111111")
        #expect(formatted.hasPrefix("4111 1111 1111 1111"), "the SDK's formatter pads the last group: \(formatted)")
        #expect(try WorldlineProducts.iinDetails("411111")?["paymentProductId"] as? Int == 1)
        #expect(try WorldlineProducts.iinDetails("5555554444")?["paymentProductId"] as? Int == 3)
        #expect(try WorldlineProducts.iinDetails("999999") == nil)
        #expect(throws: WorldlineError.self) { try WorldlineProducts.iinDetails("4111") }
    }
}
