import EMV
import Foundation
import Testing
@testable import Fronts

/// The document's approved sale response, verbatim.
private let documentSaleApproved = "mycallbackscheme://result?status=success&message=Transaction%20successful.&action=sale&clientTransactionId=12345678901234567890123456789012&amount=1200&tipAmount=200&verificationMethod=CHIP-PIN&rrn=123456833121&cardType=VISA&accountNumber=479275******9999&referenceNumber=833121&authorisationCode=690882&tid=16016684&orderCode=9256110059000200&installments=10&transactionDate=2019-09-13T12:14:19.8703452+03:00&transactionId=a78e045c-49c3-4743-9071-f1e0ed71810c"

/// The document's failed sale response with its typo corrected: the document has a stray space
/// in "& accountNumber" (docs/viva.md lists it).
private let documentSaleFailed = "mycallbackscheme://result?status=failed&message=Transaction%20declined%20by%20host.&action=sale&clientTransactionId=12345678901234567890123456789012&amount=1200&tipAmount=200&verificationMethod=CHIP-PIN&rrn=123456833121&cardType=VISA&accountNumber=479275******9999&referenceNumber=&authorisationCode=&tid=16016684&orderCode=9256110059000200&transactionDate=2019-09-13T12:14:19.8703452+03:00"

/// The document's approved cancel response with its typo corrected: the document has a stray
/// space in "amount=1200 &".
private let documentCancelApproved = "mycallbackscheme://result?status=success&message=Transaction%20successful.&action=cancel&amount=1200&cardType=VISA&accountNumber=479275******9999&tid=16016684&transactionDate=2019-09-13T12:14:19.8703452+03:00&transactionId=a78e045c-49c3-4743-9071-f1e0ed71810c"

private let callback = "mycallbackscheme://result"

/// The document's sale, field by field.
private func documentSale(status: VivaResult.Status, message: String) -> VivaResult {
    VivaResult(status: status, message: message, action: "sale", clientTransactionId: "12345678901234567890123456789012",
               amount: 1200, tipAmount: 200, verificationMethod: "CHIP-PIN", rrn: "123456833121", cardType: "VISA",
               accountNumber: "479275******9999", referenceNumber: "833121", authorisationCode: "690882", tid: "16016684",
               orderCode: "9256110059000200", installments: 10, transactionDate: "2019-09-13T12:14:19.8703452+03:00",
               transactionId: "a78e045c-49c3-4743-9071-f1e0ed71810c")
}

/// The query items of a URL as the POS app reads them (the document tells it to use URLComponents).
private func queryItems(_ url: String) throws -> [URLQueryItem] {
    let components = try #require(URLComponents(string: url))
    return try #require(components.queryItems)
}

@Suite("VivaCallback")
struct VivaCallbackTests {
    // MARK: The document's examples

    @Test("the document's approved sale, rebuilt field by field")
    func saleApproved() {
        let result = documentSale(status: .success, message: VivaFormat.successMessage)
        #expect(VivaCallback.url(callback: callback, result: result) == documentSaleApproved)
    }

    @Test("the document's failed sale (typo corrected): STAN and auth code empty, no installments or transactionId")
    func saleFailed() {
        // Everything the approved one had, including a STAN and an auth code: failure empties or drops them.
        let result = documentSale(status: .failed, message: VivaFailure.declinedByHost(nil).message)
        #expect(VivaCallback.url(callback: callback, result: result) == documentSaleFailed)
    }

    @Test("the document's approved cancel (typo corrected)")
    func cancelApproved() {
        let result = VivaResult(status: .success, message: VivaFormat.successMessage, action: "cancel", amount: 1200,
                                cardType: "VISA", accountNumber: "479275******9999", tid: "16016684",
                                transactionDate: "2019-09-13T12:14:19.8703452+03:00",
                                transactionId: "a78e045c-49c3-4743-9071-f1e0ed71810c")
        #expect(VivaCallback.url(callback: callback, result: result) == documentCancelApproved)
    }

    @Test("a failed cancel keeps the structure and drops transactionId, like the document's failed example")
    func cancelFailed() {
        let result = VivaResult(status: .failed, message: VivaFailure.alreadyCancelled.message, action: "cancel", amount: 1200,
                                cardType: "VISA", accountNumber: "479275******9999", tid: "16016684",
                                transactionDate: "2019-09-13T12:14:19.8703452+03:00",
                                transactionId: "a78e045c-49c3-4743-9071-f1e0ed71810c")
        #expect(VivaCallback.url(callback: callback, result: result)
                == "mycallbackscheme://result?status=failed&message=Transaction%20already%20cancelled.&action=cancel&amount=1200&cardType=VISA&accountNumber=479275******9999&tid=16016684&transactionDate=2019-09-13T12:14:19.8703452+03:00")
    }

    @Test("the document's examples read back by URLComponents give the same fields, in order")
    func documentExamplesReadBack() throws {
        for (url, result) in [
            (documentSaleApproved, documentSale(status: .success, message: "Transaction successful.")),
            (documentSaleFailed, documentSale(status: .failed, message: "Transaction declined by host.")),
        ] {
            let items = try queryItems(url)
            let fields = VivaCallback.fields(result)
            #expect(items.map(\.name) == fields.map(\.name))
            #expect(items.map { $0.value ?? "" } == fields.map(\.value))
        }
    }

    // MARK: Structures

    @Test("a sale that failed before a card was read keeps the structure with empty values")
    func failedBeforeCard() throws {
        let request = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=abc")
        var result = VivaResult(failing: request, with: .cardRemoved)
        result.tid = "16016684"
        result.transactionDate = "2019-09-13T12:14:19.8703452+03:00"
        #expect(VivaCallback.url(callback: request.callback, result: result)
                == "pos://r?status=failed&message=Card%20removed.&action=sale&clientTransactionId=abc&amount=1200&tipAmount=0&verificationMethod=&rrn=&cardType=&accountNumber=&referenceNumber=&authorisationCode=&tid=16016684&orderCode=&transactionDate=2019-09-13T12:14:19.8703452+03:00")
    }

    @Test("a sale paid at once leaves installments out, as the field's callbacks do")
    func noInstallments() {
        var result = documentSale(status: .success, message: VivaFormat.successMessage)
        result.installments = nil
        let names = VivaCallback.fields(result).map(\.name)
        #expect(!names.contains("installments"))
        #expect(names.suffix(3) == ["orderCode", "transactionDate", "transactionId"])
    }

    @Test("pre_auth, capture_pre_auth and transactionDetails answer with the sale's structure",
          arguments: ["pre_auth", "capture_pre_auth", "transactionDetails"])
    func saleShaped(action: String) {
        var result = documentSale(status: .success, message: VivaFormat.successMessage)
        result.action = VivaResult.Action(action)
        var sale = documentSale(status: .success, message: VivaFormat.successMessage)
        sale.action = "sale"
        #expect(VivaCallback.fields(result).map(\.name) == VivaCallback.fields(sale).map(\.name))
        #expect(VivaCallback.url(callback: callback, result: result)
                == documentSaleApproved.replacingOccurrences(of: "action=sale", with: "action=" + action))
    }

    @Test("abort and unknown or missing actions: status, message, action")
    func bare() throws {
        let aborted = VivaResult(status: .success, message: VivaFormat.successMessage, action: "abort", amount: 5)
        #expect(VivaCallback.url(callback: "pos://r", result: aborted) == "pos://r?status=success&message=Transaction%20successful.&action=abort")
        let error = VivaRequestError(callback: "pos://r", action: "refund", field: "action", rule: "must be one of sale, cancel")
        #expect(VivaCallback.url(callback: "pos://r", result: VivaResult(rejecting: error))
                == "pos://r?status=failed&message=Invalid%20request.%20action:%20must%20be%20one%20of%20sale%2C%20cancel&action=refund")
        let noAction = VivaRequestError(callback: "pos://r", field: "action", rule: "is required")
        #expect(VivaCallback.fields(VivaResult(rejecting: noAction)).map(\.name) == ["status", "message", "action"])
        #expect(VivaCallback.fields(VivaResult(rejecting: noAction)).last?.value == "")
    }

    @Test("batch: status, message, action, command, batchName, batchId")
    func batch() throws {
        let request = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=batch&command=close&batchName=morning")
        var result = VivaResult(failing: request, with: .noOpenBatch)
        #expect(VivaCallback.url(callback: "pos://r", result: result)
                == "pos://r?status=failed&message=No%20open%20batch.&action=batch&command=close&batchName=morning&batchId=")
        result = VivaResult(status: .success, message: VivaFormat.successMessage, action: "batch", batchCommand: "open",
                            batchName: "morning", batchId: "6f1c0a8e-3d4b-4c6e-9a1f-2b3c4d5e6f70")
        #expect(VivaCallback.fields(result).map(\.name) == ["status", "message", "action", "command", "batchName", "batchId"])
    }

    @Test("a rejected sale echoes what the request carried")
    func failingEchoes() throws {
        let request = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=pre_auth&amount=700&clientTransactionId=h1")
        let result = VivaResult(failing: request, with: .terminalBusy)
        #expect(result.action == "pre_auth")
        #expect(result.amount == 700 && result.tipAmount == 0 && result.clientTransactionId == "h1")
        #expect(result.message == "Terminal busy. Another transaction is in progress.")
        let details = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=transactionDetails&clientTransactionId=h1")
        #expect(VivaResult(failing: details, with: .transactionNotFound).clientTransactionId == "h1")
        let cancel = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=cancel&amount=300")
        #expect(VivaResult(failing: cancel, with: .noTransactionsForCard).amount == 300)
        let capture = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=capture_pre_auth&referenceNumber=5&amount=90")
        #expect(VivaResult(failing: capture, with: .transactionNotFound).amount == 90)
        let abort = try VivaRequest.parse("vivapayclient://pay/v1?callback=pos://r&action=abort")
        #expect(VivaResult(failing: abort, with: .noTransactionInProgress).action == "abort")
    }

    @Test("field extras come after the document's fields, only when set")
    func extras() {
        var result = documentSale(status: .success, message: VivaFormat.successMessage)
        result.aid = "A0000000031010"
        result.shortOrderCode = "9256110059"
        result.currency = "978"
        let url = VivaCallback.url(callback: callback, result: result)
        #expect(url == documentSaleApproved + "&aid=A0000000031010&shortOrderCode=9256110059&currency=978")
        result.transactionType = "SALE"
        result.entryMode = "chip"
        result.cardholderName = "DOE/JANE"
        #expect(VivaCallback.fields(result).suffix(6).map(\.name)
                == ["aid", "shortOrderCode", "transactionType", "entryMode", "currency", "cardholderName"])
        #expect(VivaCallback.url(callback: callback, result: result).hasSuffix("&cardholderName=DOE%2FJANE"))
    }

    // MARK: Callback URL shapes and encoding

    @Test("a callback with a query gets '&'; one ending in '?' or '&' gets nothing; a bare scheme name gets '://'")
    func callbackShapes() {
        let result = VivaResult(status: .success, message: "ok", action: "abort")
        #expect(VivaCallback.url(callback: "pos://r?session=7", result: result) == "pos://r?session=7&status=success&message=ok&action=abort")
        #expect(VivaCallback.url(callback: "pos://r?", result: result) == "pos://r?status=success&message=ok&action=abort")
        #expect(VivaCallback.url(callback: "pos://r?a=1&", result: result) == "pos://r?a=1&status=success&message=ok&action=abort")
        #expect(VivaCallback.url(callback: "interapp-callback", result: result) == "interapp-callback://?status=success&message=ok&action=abort")
        #expect(VivaCallback.url(callback: "https://pos.example/cb", result: result)
                == "https://pos.example/cb?status=success&message=ok&action=abort")
    }

    @Test("a value cannot forge a field or a fragment")
    func injection() throws {
        var result = documentSale(status: .failed, message: VivaFailure.declinedByHost("51").message)
        result.clientTransactionId = "x&status=success#frag"
        let url = VivaCallback.url(callback: callback, result: result)
        #expect(url.contains("clientTransactionId=x%26status%3Dsuccess%23frag&"))
        let components = try #require(URLComponents(string: url))
        #expect(components.fragment == nil)
        let items = try #require(components.queryItems)
        #expect(items.filter { $0.name == "status" }.map(\.value) == ["failed"])
        #expect(items.first { $0.name == "clientTransactionId" }?.value == "x&status=success#frag")
        #expect(items.count == VivaCallback.fields(result).count)
    }

    @Test("spaces are %20 and never '+'; non-ASCII is UTF-8 escaped; '*', ':' and '+' stay")
    func encoding() {
        let result = VivaResult(status: .failed, message: "Café & co: 50% off +1 *x* / ? é€", action: "abort")
        #expect(VivaCallback.url(callback: "pos://r", result: result)
                == "pos://r?status=failed&message=Caf%C3%A9%20%26%20co:%2050%25%20off%20+1%20*x*%20%2F%20%3F%20%C3%A9%E2%82%AC&action=abort")
        #expect(!VivaCallback.url(callback: "pos://r", result: VivaResult(status: .failed, message: "a b", action: "abort")).contains("a+b"))
    }

    @Test("every field survives a round trip through URLComponents, for 300 random results")
    func roundTrip() throws {
        var rng = SplitMix64(state: 7)
        let pool = Array("aZ09 -._~*:+&=#%?/@!$'(),;\"<>\\^`{|}[]é€😀\u{1}\n\t")
        func text() -> String { String((0..<Int.random(in: 0...20, using: &rng)).map { _ in pool.randomElement(using: &rng)! }) }
        for _ in 0..<300 {
            let result = VivaResult(status: Bool.random(using: &rng) ? .success : .failed, message: text(),
                                    action: VivaResult.Action(["sale", "cancel", "batch", "abort", text()].randomElement(using: &rng)!),
                                    clientTransactionId: text(), amount: Int.random(in: 1...999_999_999_999, using: &rng),
                                    tipAmount: 0, verificationMethod: text(), rrn: text(), cardType: text(), accountNumber: text(),
                                    referenceNumber: text(), authorisationCode: text(), tid: text(), orderCode: text(),
                                    installments: Bool.random(using: &rng) ? 3 : nil, transactionDate: text(), transactionId: text(),
                                    batchCommand: text(), batchName: text(), batchId: text(), aid: text(), cardholderName: text())
            let url = VivaCallback.url(callback: "pos://result", result: result)
            let components = try #require(URLComponents(string: url), "\(url)")
            #expect(components.fragment == nil)
            let items = try #require(components.queryItems)
            let fields = VivaCallback.fields(result)
            #expect(items.map(\.name) == fields.map(\.name))
            #expect(items.map { $0.value ?? "" } == fields.map(\.value))
        }
    }
}
