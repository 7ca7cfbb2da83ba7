import Fronts
import Testing

@Suite("Citcon request bodies")
struct CitconRequestTests {
    static func parse(_ json: String, version: String = "2.2.0") throws(CitconError) -> CitconChargeRequest {
        try CitconChargeRequest.parse(Array(json.utf8), version: version)
    }

    @Test("a card charge: transaction, card data, urls (the old *_url names too)")
    func cardCharge() throws {
        let r = try Self.parse(#"{"transaction":{"reference":"r1","amount":"1000","currency":"USD","country":"US","auto_capture":"true","ipn_url":"https://m.example/ipn"},"payment":{"method":"CARD","client":["mobile_native"],"request_3ds":true,"data":{"pan":"4111 1111 1111 1111","expiry":"12/30","cvv":"123"}}}"#)
        #expect(r.reference == "r1" && r.amount == 1000 && r.autoCapture && r.method == "card" && r.request3DS)
        #expect(r.card?.pan == "4111111111111111" && r.card?.expiry == "12/30")
        #expect(r.urls["ipn"] == "https://m.example/ipn")
        #expect(r.clients == ["mobile_native"])
    }

    @Test("every refusal is 4000 naming the field in debug")
    func refusals() {
        func debug(_ json: String, version: String = "2.2.0") -> String? {
            do { _ = try Self.parse(json, version: version); return nil } catch {
                #expect(error.code == "4000" && error.httpStatus == 400, "\(error)")
                return error.debug ?? "(none)"
            }
        }
        #expect(debug(#"{}"#) == "transaction")
        #expect(debug(#"{"transaction":{"amount":1,"currency":"USD","country":"US"}}"#) == "transaction.reference")
        #expect(debug(#"{"transaction":{"reference":"r","currency":"USD","country":"US"}}"#) == "transaction.amount")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"usd","country":"US"}}"#) == "transaction.currency")
        // An unknown code is refused, not recorded as another currency.
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"XXX","country":"US"}}"#) == "transaction.currency")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"USA"}}"#) == "transaction.country")
        // "country String Required" (CPayTransaction, both document versions).
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD"}}"#) == "transaction.country")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD"}}"#, version: "2.1.0") == "transaction.country")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"payment":{"method":"card"}}"#) == "payment.data")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"payment":{"method":"card","data":{"pan":"4111111111111112","expiry":"12/30"}}}"#)
            == "payment.data.pan")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"payment":{"method":"card","data":{"pan":"4111111111111111","expiry":"1230"}}}"#)
            == "payment.data.expiry")
        #expect(debug(#"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"urls":{"ipn":"ftp://x"}}"#) == "urls.ipn")
        #expect(debug(#"{"transaction":"#) == "(none)")
    }

    @Test("PayPal and Venmo are methods in both document versions (2.1.0's own table: 1.0.0 added card, PayPal and Venmo); Cash App from 2.2.0")
    func versions() throws {
        for method in ["paypal", "venmo"] {
            let body = #"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"payment":{"method":"\#(method)"}}"#
            #expect(try Self.parse(body).method == method)
            #expect(try Self.parse(body, version: "2.1.0").method == method)
        }
        let cashApp = #"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"payment":{"method":"cashapppay"}}"#
        #expect(try Self.parse(cashApp).method == "cashapppay")
        #expect(throws: CitconError.self) { try Self.parse(cashApp, version: "2.1.0") }
        #expect(try Self.parse(#"{"transaction":{"reference":"r","amount":1,"currency":"USD","country":"US"},"payment":{"method":"wechatpay"}}"#, version: "2.1.0").method == "wechatpay")
    }

    @Test("an operation body: transaction_id required, amount optional")
    func operations() throws {
        #expect(try CitconOperationRequest.parse(Array(#"{"transaction_id":"abc","amount":5}"#.utf8)).amount == 5)
        #expect(throws: CitconError.self) { try CitconOperationRequest.parse(Array(#"{"amount":5}"#.utf8)) }
    }
}
