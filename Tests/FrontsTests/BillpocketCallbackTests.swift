import EMV
import Foundation
import Terminal
import Testing
@testable import Fronts

/// The document's callback example, up to where the document cuts it ("transactionid=72037…").
private let documentExamplePrefix = "myapp://result=aprobada&statusinfo=&amount=100.00&tip=15.00&reference=Pago%20%26%20%25%20%23%20(%20)%20/%20@%20con%20propina%20a%203%20meses%20sin%20intereses&transactionid=72037"

/// An approved sale with every field.
private func approved(reference: String? = tortureReference) -> BillpocketResult {
    BillpocketResult(approving: BillpocketSale(amount: 10000, tip: 1500, msi: 3, reference: reference, email: "ana@example.mx",
                                               phone: "+5215512345678"),
                     identifier: "order-17", transactionId: "7203712345678901", authorization: "A1B2C3", creditCard: "0119",
                     cardType: "VISA", url: "v-7203712345678901", bank: "BBVA MEXICO", accountType: .credit,
                     arqc: "8A3F1C2D4E5B6A79", aid: "A0000000031010", appLabel: "VISA CREDITO")
}

/// Reads a callback the way the document's sender does: cut the `scheme://` prefix, split on
/// `&`, split each pair at its first `=`, percent-decode the value.
private func vendorRead(_ url: String) throws -> [(String, String)] {
    let start = try #require(url.range(of: "://"))
    return url[start.upperBound...].split(separator: "&").map { (pair: Substring) -> (String, String) in
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let value = parts.count > 1 ? String(parts[1]) : ""
        return (String(parts[0]), value.removingPercentEncoding ?? "<bad>")
    }
}

@Suite("BillpocketCallback")
struct BillpocketCallbackTests {
    @Test("the document's example: field order and encoding, byte for byte as far as it goes")
    func documentExample() {
        let url = BillpocketCallback.url(urlScheme: .app("myapp"), result: approved())
        #expect(url.hasPrefix(documentExamplePrefix))
    }

    @Test("an approved sale, field by field, in the table's order")
    func approvedFields() {
        let url = BillpocketCallback.url(urlScheme: .app("myapp"), result: approved())
        #expect(url == documentExamplePrefix + "12345678901&msi=3&authorization=A1B2C3&creditcard=0119&cardtype=VISA"
                + "&email=ana@example.mx&phone=%2B5215512345678&arqc=8A3F1C2D4E5B6A79&aid=A0000000031010&applabel=VISA%20CREDITO"
                + "&url=v-7203712345678901&identifier=order-17&bank=BBVA%20MEXICO&accountType=credit")
        #expect(BillpocketCallback.fields(approved()).map(\.name) == [
            "result", "statusinfo", "amount", "tip", "reference", "transactionid", "msi", "authorization", "creditcard",
            "cardtype", "email", "phone", "arqc", "aid", "applabel", "url", "identifier", "bank", "accountType",
        ])
    }

    @Test("an approved sale without the optional fields: mandatory ones stay, optional ones go")
    func approvedMinimal() {
        let result = BillpocketResult(approving: BillpocketSale(amount: 50), identifier: "i", transactionId: "0000000000000001",
                                      authorization: "123456", creditCard: "4242", cardType: "CARNET", url: "v1", bank: "Banorte",
                                      accountType: .debit)
        #expect(BillpocketCallback.url(urlScheme: .app("Sender"), result: result)
                == "Sender://result=aprobada&statusinfo=&amount=0.50&transactionid=0000000000000001&authorization=123456"
                + "&creditcard=4242&cardtype=CARNET&url=v1&identifier=i&bank=Banorte&accountType=debit")
        // Unknown mandatory values are rendered empty rather than dropped.
        let bare = BillpocketResult(result: .aprobada, amount: 10000)
        #expect(BillpocketCallback.url(urlScheme: .app("a"), result: bare)
                == "a://result=aprobada&statusinfo=&amount=100.00&transactionid=&authorization=&creditcard=&cardtype=&url=&identifier=&bank=&accountType=")
        // msi 0 is one payment: no msi field.
        var zero = result
        zero.msi = 0
        #expect(!BillpocketCallback.fields(zero).contains { $0.name == "msi" })
    }

    @Test("a host decline: result, statusinfo (the issuer's message cut to 40), identifier; nothing else")
    func declined() throws {
        let request = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1002.00&identifier=order-17&urlScheme=myapp")
        let code = try #require(BillpocketAmountTable.responseCode(amount: 100_200))
        var result = BillpocketResult(failing: request, with: .declinedByHost(code))
        result.amount = 100_200
        result.creditCard = "0119"
        #expect(BillpocketCallback.url(urlScheme: request.urlScheme!, result: result)
                == "myapp://result=rechazada&statusinfo=Transaction%20not%20processed.%20Bank%20declined&identifier=order-17")
    }

    @Test("an error: result=error, the failure's statusinfo, identifier")
    func failed() throws {
        let request = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1&identifier=x&urlScheme=myapp")
        #expect(BillpocketCallback.url(urlScheme: .app("myapp"), result: BillpocketResult(failing: request, with: .cardRemoved))
                == "myapp://result=error&statusinfo=Card%20removed&identifier=x")
        #expect(BillpocketCallback.url(urlScheme: .app("myapp"), result: BillpocketResult(failing: request, with: .refund(.tooSoon)))
                == "myapp://result=error&statusinfo=Refund%20too%20soon%3A%20wait%201%20minute&identifier=x")
    }

    @Test("a request that broke a rule: result=error to its urlScheme, identifier echoed or empty")
    func rejected() throws {
        do {
            _ = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1.005&identifier=a%26b&urlScheme=myapp")
            Issue.record("expected an error")
        } catch {
            let scheme = try #require(error.urlScheme)
            #expect(BillpocketCallback.url(urlScheme: scheme, result: BillpocketResult(rejecting: error))
                    == "myapp://result=error&statusinfo=amount%3A%20max%202%20decimals&identifier=a%26b")
            #expect(error.callbackURL == "myapp://result=error&statusinfo=amount%3A%20max%202%20decimals&identifier=a%26b")
        }
        do {
            _ = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1.005&identifier=i&urlScheme=https://pos.example/h")
            Issue.record("expected an error")
        } catch {
            #expect(error.callbackURL == "https://pos.example/h?result=error&statusinfo=amount%3A%20max%202%20decimals&identifier=i")
        }
        do {
            _ = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1.005&identifier=i")
            Issue.record("expected an error")
        } catch {
            #expect(error.callbackURL == nil)
        }
        do {
            _ = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1&urlScheme=myapp")
            Issue.record("expected an error")
        } catch {
            #expect(BillpocketCallback.url(urlScheme: try #require(error.urlScheme), result: BillpocketResult(rejecting: error))
                    == "myapp://result=error&statusinfo=identifier%3A%20required&identifier=")
        }
    }

    @Test("statusinfo longer than 40 characters is cut when rendered")
    func statusInfoCut() {
        let result = BillpocketResult(result: .error, statusInfo: String(repeating: "x", count: 50), identifier: "i")
        let fields = BillpocketCallback.fields(result)
        #expect(fields[1].value == String(repeating: "x", count: 40))
        // Cut by code points, never inside a character.
        let accents = BillpocketResult(result: .error, statusInfo: String(repeating: "e\u{301}", count: 30))
        #expect(BillpocketCallback.fields(accents)[1].value == String(repeating: "e\u{301}", count: 20))
    }

    @Test("the torture reference survives the round trip from request to callback")
    func tortureRoundTrip() throws {
        let request = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=100.00&tip=15.00&payments=3"
                                                  + "&reference=\(tortureReferenceEncoded)&identifier=abc&urlScheme=Sender")
        guard case .venta(let sale) = request.command else { Issue.record("not a sale"); return }
        let result = BillpocketResult(approving: sale, identifier: request.identifier, transactionId: "7203712345678901",
                                      authorization: "123456", creditCard: "0119", cardType: "VISA", url: "v", bank: "B",
                                      accountType: .credit)
        let url = BillpocketCallback.url(urlScheme: request.urlScheme!, result: result)
        #expect(url.contains("&reference=" + tortureReferenceEncoded + "&"))
        let read = try vendorRead(url)
        #expect(read.first { $0.0 == "reference" }?.1 == tortureReference)
        #expect(read.first { $0.0 == "msi" }?.1 == "3")
    }

    @Test("values cannot forge fields: a reference holding &result=… stays one value, for both readers")
    func forgery() throws {
        let forged = "x&result=rechazada&amount=0.01&identifier=evil#frag+1=2?"
        let result = approved(reference: forged)
        let url = BillpocketCallback.url(urlScheme: .app("myapp"), result: result)
        #expect(url.contains("reference=x%26result%3Drechazada%26amount%3D0.01%26identifier%3Devil%23frag%2B1%3D2%3F&"))
        let read = try vendorRead(url)
        #expect(read.filter { $0.0 == "result" }.map(\.1) == ["aprobada"])
        #expect(read.filter { $0.0 == "amount" }.map(\.1) == ["100.00"])
        #expect(read.filter { $0.0 == "identifier" }.map(\.1) == ["order-17"])
        #expect(read.first { $0.0 == "reference" }?.1 == forged)

        let webhook = BillpocketCallback.url(urlScheme: .webhook("https://pos.example/hook"), result: result)
        let items = try #require(URLComponents(string: webhook)?.queryItems)
        #expect(items.filter { $0.name == "result" }.map(\.value) == ["aprobada"])
        #expect(items.first { $0.name == "reference" }?.value == forged)
        #expect(URLComponents(string: webhook)?.fragment == nil)
    }

    @Test("every byte of every value survives, whatever it is")
    func everyByte() throws {
        let all = String(decoding: (1...127).map { UInt8($0) }, as: UTF8.self) + "é€😀"
        let url = BillpocketCallback.url(urlScheme: .app("myapp"), result: approved(reference: all))
        #expect(try vendorRead(url).first { $0.0 == "reference" }?.1 == all)
        let kept = url.split(separator: "&").first { $0.hasPrefix("reference=") }!.dropFirst("reference=".count)
        #expect(kept.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-._~()/@%".contains($0)) })
    }

    @Test("webhooks: ?result=… appended, & when the URL has a query, nothing when it ends in ? or &")
    func webhooks() {
        let result = BillpocketResult(result: .rechazada, statusInfo: "Insufficient funds", identifier: "i")
        let fields = "result=rechazada&statusinfo=Insufficient%20funds&identifier=i"
        #expect(BillpocketCallback.url(urlScheme: .webhook("https://pos.example/hook"), result: result)
                == "https://pos.example/hook?" + fields)
        #expect(BillpocketCallback.url(urlScheme: .webhook("http://pos.example/hook?shop=7"), result: result)
                == "http://pos.example/hook?shop=7&" + fields)
        #expect(BillpocketCallback.url(urlScheme: .webhook("https://pos.example/?"), result: result) == "https://pos.example/?" + fields)
        #expect(BillpocketCallback.url(urlScheme: .webhook("https://pos.example/?a=1&"), result: result)
                == "https://pos.example/?a=1&" + fields)
    }
}

@Suite("Billpocket callback style: statusinfo's language and the instalment plan's name")
struct BillpocketCallbackStyleTests {
    static let failures: [BillpocketFailure] = [
        .declinedByHost("02"), .declinedByHost("03"), .declinedByHost("05"), .declinedByHost("51"), .declinedByHost("Q7"), .declinedByCard,
        .pinTriesExceeded, .hostUnavailable, .cardRemoved, .readerError, .cardError, .cardNotAccepted, .userCancel, .promptTimeout,
        .terminalBusy, .photoRequired, .userTokenUnknown, .userTokenInvalidated, .userTokenRotated, .deviceTokenUnknown,
        .deviceTokenInUse, .msi(.planNotEnabled(months: 6)), .msi(.belowMinimum(months: 12, minimumAmount: 120_000)),
    ] + BillpocketRefundRefusal.allCases.map { .refund($0) }

    @Test("every Spanish statusinfo is whole within 40 characters and free of & = / @ (receivers that decode before they split)")
    func spanishTexts() {
        for failure in Self.failures {
            let text = failure.statusInfo(.es)
            #expect(BillpocketText.length(text) <= BillpocketResult.statusInfoLimit, "\(failure): \(text)")
            #expect(!text.contains(where: { "&=/@".contains($0) }), "\(failure): \(text)")
            #expect(text != failure.statusInfo(.en), "\(failure) has no Spanish text: \(text)")
        }
        // The one text seen from the real app, for a cancelled sale (result=error).
        #expect(BillpocketFailure.userCancel.statusInfo(.es) == "La transacción fue cancelada")
        #expect(BillpocketFailure.userCancel.result == .error)
        // English stays the default.
        let request = try? BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1.00&identifier=i&urlScheme=S")
        #expect(BillpocketResult(failing: request!, with: .userCancel).statusInfo == "Cancelled by user")
        #expect(BillpocketResult(failing: request!, with: .userCancel, language: .es).statusInfo == "La transacción fue cancelada")
    }

    @Test("the plan goes under msi (the document), payments (the vendor's Sender) or both, msi first")
    func installmentNames() {
        let result = BillpocketResult(approving: BillpocketSale(amount: 120_000, msi: 6), identifier: "i", transactionId: "7203712345678901",
                                      authorization: "A1B2C3", creditCard: "0119", cardType: "VISA", url: "v", bank: "B", accountType: .credit)
        func names(_ i: BillpocketCallbackStyle.Installments) -> [String] {
            BillpocketCallback.fields(result, installments: i).map(\.name).filter { $0 == "msi" || $0 == "payments" }
        }
        #expect(names(.msi) == ["msi"])
        #expect(names(.payments) == ["payments"])
        #expect(names(.both) == ["msi", "payments"])
        #expect(BillpocketCallback.url(urlScheme: .app("Sender"), result: result, installments: .payments).contains("&payments=6&"))
        // No plan, no field under either name.
        let single = BillpocketResult(approving: BillpocketSale(amount: 100), identifier: "i", transactionId: "7203712345678901",
                                      authorization: "A1B2C3", creditCard: "0119", cardType: "VISA", url: "v", bank: "B", accountType: .credit)
        #expect(BillpocketCallback.fields(single, installments: .both).allSatisfy { $0.name != "msi" && $0.name != "payments" })
    }
}
