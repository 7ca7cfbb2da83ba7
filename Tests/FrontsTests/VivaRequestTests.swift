import EMV
import Testing
@testable import Fronts

/// The base every request in these tests starts from: the vendor sample's own prefix.
private let base = "vivapayclient://pay/v1?callback=interapp-callback&merchantKey=SG23323424EXS3&appId=com.vivawallet.InterAppDemo"

private func parse(_ url: String) throws -> VivaRequest {
    try VivaRequest.parse(url)
}

/// The error a URL gives; fails the test when it parses.
private func error(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) -> VivaRequestError? {
    do {
        let request = try VivaRequest.parse(url)
        Issue.record("expected an error, parsed \(request.command)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

@Suite("VivaRequest")
struct VivaRequestTests {
    // MARK: The document's and the samples' requests

    @Test("the document's sale request, as its createSaleRequest builds it")
    func documentSale() throws {
        let request = try parse(base + "&action=sale&amount=1200&tipAmount=200&withInstallments=false")
        #expect(request.callback == "interapp-callback")
        #expect(request.merchantKey == "SG23323424EXS3")
        #expect(request.appId == "com.vivawallet.InterAppDemo")
        #expect(request.command == .sale(VivaSale(amount: 1200, tipAmount: 200)))
        #expect(request.command.action == .sale)
        #expect(request.parameters.map(\.name) == ["callback", "merchantKey", "appId", "action", "amount", "tipAmount", "withInstallments"])
        #expect(request.parameter("tipAmount") == "200")
    }

    @Test("a sale with every field, installments and a client transaction id")
    func fullSale() throws {
        let request = try parse(base + "&action=sale&amount=1200&clientTransactionId=12345678901234567890123456789012"
                                + "&withInstallments=TRUE&preferredInstallments=10")
        #expect(request.command == .sale(VivaSale(amount: 1200, tipAmount: 0, clientTransactionId: "12345678901234567890123456789012",
                                                  withInstallments: true, preferredInstallments: 10)))
    }

    @Test("the document's cancel request: referenceNumber 60646 is STAN 060646")
    func documentCancel() throws {
        let request = try parse(base + "&action=cancel&referenceNumber=60646")
        #expect(request.command == .cancel(VivaCancel(referenceNumber: "060646")))
        #expect(request.command.action == .cancel)
    }

    @Test("cancel without a reference leaves the choice to the operator; every cancel field is read")
    func cancelFields() throws {
        #expect(try parse(base + "&action=cancel").command == .cancel(VivaCancel()))
        #expect(try parse(base + "&action=cancel&referenceNumber=").command == .cancel(VivaCancel()))
        let request = try parse(base + "&action=cancel&amount=500&referenceNumber=833121&orderCode=9256110059000200"
                                + "&shortOrderCode=9256110059&txnDateFrom=2024-11-01T00:00:00&txnDateTo=2024-11-17T23:59:59"
                                + "&show_receipt=true&show_transaction_result=true")
        #expect(request.command == .cancel(VivaCancel(referenceNumber: "833121", amount: 500, orderCode: "9256110059000200",
                                                      shortOrderCode: "9256110059", txnDateFrom: "2024-11-01T00:00:00",
                                                      txnDateTo: "2024-11-17T23:59:59")))
    }

    @Test("the vendor's Android sample: empty merchantKey, callback last, extra show_* parameters")
    func androidSample() throws {
        let request = try parse("vivapayclient://pay/v1?merchantKey=&appId=com.example.myapp&action=sale&clientTransactionId=1234567801234"
                                + "&amount=1500&tipAmount=0&show_receipt=true&show_rating=false&withInstallments=false"
                                + "&preferredInstallments=&callback=mycallbackscheme://result")
        #expect(request.callback == "mycallbackscheme://result")
        #expect(request.merchantKey == "")
        #expect(request.command == .sale(VivaSale(amount: 1500, clientTransactionId: "1234567801234")))
        #expect(request.parameter("show_rating") == "false")
    }

    @Test("a request seen in the field: an encoded callback, ISV-style extras with %2b and %3d")
    func fieldRequest() throws {
        let request = try parse("vivapayclient://pay/v1?appId=eu.example.app&action=sale&clientTransactionId=29d6e88a-432a-44bd-8390-20af43d48df0"
                                + "&amount=100&callback=instoreapp%3a%2f%2fresult&show_receipt=false&aadeProviderSignature=MEQC%2bThM%3d%3d")
        #expect(request.callback == "instoreapp://result")
        #expect(request.merchantKey == nil)
        #expect(request.parameter("aadeProviderSignature") == "MEQC+ThM==")
        #expect(request.command == .sale(VivaSale(amount: 100, clientTransactionId: "29d6e88a-432a-44bd-8390-20af43d48df0")))
    }

    @Test("scheme and host in any case; the path exactly /v1")
    func caseOfSchemeAndHost() throws {
        let request = try parse("VivaPayClient://PAY/v1?callback=x://r&action=abort")
        #expect(request.command == .abort)
    }

    @Test("pre_auth has a sale's fields")
    func preAuth() throws {
        let request = try parse(base + "&action=pre_auth&amount=5000&clientTransactionId=hotel-42")
        #expect(request.command == .preAuth(VivaSale(amount: 5000, clientTransactionId: "hotel-42")))
        #expect(request.command.action == .preAuth)
    }

    @Test("capture_pre_auth: the pre-authorisation's STAN, and an amount or none")
    func capture() throws {
        #expect(try parse(base + "&action=capture_pre_auth&referenceNumber=1").command
                == .capturePreAuth(VivaCapture(referenceNumber: "000001")))
        #expect(try parse(base + "&action=capture_pre_auth&referenceNumber=833121&amount=4500").command
                == .capturePreAuth(VivaCapture(referenceNumber: "833121", amount: 4500)))
        #expect(VivaCommand.capturePreAuth(VivaCapture(referenceNumber: "000001")).action == .capturePreAuth)
    }

    @Test("abort, batch and transactionDetails")
    func otherActions() throws {
        #expect(try parse(base + "&action=abort").command == .abort)
        #expect(try parse(base + "&action=batch&command=open&batchName=morning").command
                == .batch(VivaBatch(command: .open, batchName: "morning")))
        #expect(try parse(base + "&action=batch&command=close&batchId=6f1c0a8e-3d4b-4c6e-9a1f-2b3c4d5e6f70").command
                == .batch(VivaBatch(command: .close, batchId: "6f1c0a8e-3d4b-4c6e-9a1f-2b3c4d5e6f70")))
        #expect(try parse(base + "&action=transactionDetails&clientTransactionId=abc").command
                == .transactionDetails(clientTransactionId: "abc"))
        #expect(VivaCommand.batch(VivaBatch(command: .open)).action == .batch)
        #expect(VivaCommand.transactionDetails(clientTransactionId: "x").action == .transactionDetails)
        #expect(VivaCommand.abort.action == .abort)
    }

    // MARK: Decoding

    @Test("values are percent-decoded exactly once; '+' stays '+', as URLComponents does")
    func decodedOnce() throws {
        let request = try parse(base + "&action=sale&amount=100&clientTransactionId=a%2520b+c%26d%3De%23f%C3%A9")
        #expect(request.command == .sale(VivaSale(amount: 100, clientTransactionId: "a%20b+c&d=e#fé")))
    }

    @Test("lower-case escapes, a bare name without '=' and empty items are accepted")
    func lenientShapes() throws {
        let request = try parse(base + "&&action=sale&amount=100&show_receipt&clientTransactionId=%c3%a9&")
        #expect(request.parameter("show_receipt") == "")
        #expect(request.command == .sale(VivaSale(amount: 100, clientTransactionId: "é")))
    }

    @Test("empty optional values are the same as absent ones")
    func emptyOptionals() throws {
        let request = try parse(base + "&action=sale&amount=100&tipAmount=&clientTransactionId=&withInstallments=&preferredInstallments=")
        #expect(request.command == .sale(VivaSale(amount: 100)))
    }

    @Test("limits: the largest amount, a tip equal to the amount, a 2048-character id, 999 instalments, leading zeros")
    func limits() throws {
        #expect(try parse(base + "&action=sale&amount=999999999999").command == .sale(VivaSale(amount: 999_999_999_999)))
        #expect(try parse(base + "&action=sale&amount=0001200&tipAmount=1200").command == .sale(VivaSale(amount: 1200, tipAmount: 1200)))
        let id = String(repeating: "é", count: 2048)
        #expect(try parse(base + "&action=sale&amount=1&clientTransactionId=" + String(repeating: "%C3%A9", count: 2048)).command
                == .sale(VivaSale(amount: 1, clientTransactionId: id)))
        #expect(try parse(base + "&action=sale&amount=1&withInstallments=true&preferredInstallments=999").command
                == .sale(VivaSale(amount: 1, withInstallments: true, preferredInstallments: 999)))
        #expect(try parse(base + "&action=cancel&referenceNumber=999999").command == .cancel(VivaCancel(referenceNumber: "999999")))
    }

    @Test("a callback that already has a query, and a callback that is a bare scheme name")
    func callbackShapes() throws {
        #expect(try parse("vivapayclient://pay/v1?callback=myapp%3A%2F%2Fresult%3Fsession%3D7&action=abort").callback
                == "myapp://result?session=7")
        #expect(try parse("vivapayclient://pay/v1?callback=my-app.v2+x&action=abort").callback == "my-app.v2+x")
        #expect(try parse("vivapayclient://pay/v1?callback=https://pos.example/cb/1&action=abort").callback
                == "https://pos.example/cb/1")
    }

    // MARK: Rules

    struct Case: CustomTestStringConvertible, Sendable {
        let url: String
        let field: String
        let rule: String
        /// Whether the error knows the callback (so the daemon can answer it).
        let answerable: Bool
        let action: String?
        var testDescription: String { url }

        init(_ url: String, _ field: String, _ rule: String, answerable: Bool = true, action: String? = "sale") {
            self.url = url
            self.field = field
            self.rule = rule
            self.answerable = answerable
            self.action = action
        }
    }

    static let cases: [Case] = [
        // URL shape
        Case("", "url", "must not be empty", answerable: false, action: nil),
        Case("https://pay/v1?callback=x://r&action=sale&amount=1", "scheme", "must be vivapayclient://pay/v1", answerable: false, action: nil),
        Case("vivapayclient://pay/v2?callback=x://r&action=sale&amount=1", "scheme", "got \"vivapayclient://pay/v2\"", answerable: false, action: nil),
        Case("vivapayclient://pay/v1/?callback=x://r&action=sale&amount=1", "scheme", "must be vivapayclient://pay/v1", answerable: false, action: nil),
        Case("vivapayclient://payment/v1?callback=x://r", "scheme", "must be vivapayclient://pay/v1", answerable: false, action: nil),
        Case("vivapayclient:pay/v1?callback=x://r", "scheme", "must be vivapayclient://pay/v1", answerable: false, action: nil),
        Case("vivapayclient", "scheme", "must be vivapayclient://pay/v1", answerable: false, action: nil),
        Case("vivapayclient://pay/v1#x?callback=x://r", "url", "must not have a fragment", answerable: false, action: nil),
        Case(base + "&action=sale&amount=1&clientTransactionId=a#b", "clientTransactionId", "send '#' as %23"),
        Case(base + "&action=sale&amount=1&#b", "url", "send '#' as %23"),
        Case(base + "&action=sale&amount=1&clientTransactionId=a b", "clientTransactionId", "character 2 (\" \") must be percent-encoded"),
        Case(base + "&action=sale&amount=1&clientTransactionId=café", "clientTransactionId", "(\"é\") must be percent-encoded"),
        Case(base + "&action=sale&amount=1&clientTransactionId=50%", "clientTransactionId", "'%' at character 3 must be followed by two hex digits"),
        Case(base + "&action=sale&amount=1&clientTransactionId=%G1", "clientTransactionId", "must be followed by two hex digits"),
        Case(base + "&action=sale&amount=1&clientTransactionId=%FF", "clientTransactionId", "not UTF-8"),
        Case(base + "&action=sale&amount=1&=x", "url", "empty name"),
        Case(base + "&action=sale&amount=1&a%ZZ=x", "url", "parameter name \"a%ZZ\""),
        // callback
        Case("vivapayclient://pay/v1", "callback", "is required", answerable: false, action: nil),
        Case("vivapayclient://pay/v1?action=sale&amount=100", "callback", "is required", answerable: false),
        Case("vivapayclient://pay/v1?callback=&action=sale&amount=100", "callback", "is required", answerable: false),
        Case("vivapayclient://pay/v1?callback=my%20app://r&action=sale", "callback", "must be a URI", answerable: false),
        Case("vivapayclient://pay/v1?callback=/result&action=sale", "callback", "with a scheme", answerable: false),
        Case("vivapayclient://pay/v1?callback=1app://r&action=sale", "callback", "with a scheme", answerable: false),
        Case("vivapayclient://pay/v1?callback=x://r%23frag&action=sale", "callback", "must not contain '#'", answerable: false),
        Case("vivapayclient://pay/v1?callback=x://r%25zz&action=sale", "callback", "%XX escape", answerable: false),
        Case("vivapayclient://pay/v1?callback=x://a&callback=x://b&action=sale", "callback", "must appear once; it appears 2 times",
             answerable: false),
        // duplicates
        Case(base + "&action=sale&amount=1&amount=2", "amount", "must appear once; it appears 2 times"),
        Case(base + "&action=sale&amount=1&show_receipt=true&show_receipt=false", "show_receipt", "must appear once"),
        // action
        Case(base, "action", "is required; one of sale, pre_auth, capture_pre_auth, cancel, abort, batch, transactionDetails", action: nil),
        Case(base + "&action=", "action", "is required", action: nil),
        Case(base + "&action=refund", "action", "must be one of sale, pre_auth, capture_pre_auth, cancel, abort, batch, transactionDetails",
             action: "refund"),
        Case(base + "&action=Sale", "action", "did you mean sale?", action: "Sale"),
        // amount
        Case(base + "&action=sale", "amount", "is required"),
        Case(base + "&action=sale&amount=", "amount", "is required"),
        Case(base + "&action=sale&amount=abc", "amount", "must be a whole number of cents greater than 0"),
        Case(base + "&action=sale&amount=0", "amount", "must be a whole number of cents greater than 0"),
        Case(base + "&action=sale&amount=000", "amount", "greater than 0"),
        Case(base + "&action=sale&amount=-5", "amount", "must be a whole number of cents greater than 0"),
        Case(base + "&action=sale&amount=12.00", "amount", "must be a whole number of cents greater than 0"),
        Case(base + "&action=sale&amount=%2B5", "amount", "must be a whole number of cents"),
        Case(base + "&action=sale&amount=1000000000000", "amount", "must be at most 999999999999 cents"),
        Case(base + "&action=sale&amount=99999999999999999999999", "amount", "must be at most 999999999999 cents"),
        Case(base + "&action=cancel&amount=0", "amount", "greater than 0", action: "cancel"),
        // tipAmount
        Case(base + "&action=sale&amount=100&tipAmount=abc", "tipAmount", "must be a whole number of cents, 0 or more"),
        Case(base + "&action=sale&amount=100&tipAmount=-1", "tipAmount", "must be a whole number of cents, 0 or more"),
        Case(base + "&action=sale&amount=100&tipAmount=101", "tipAmount", "must not exceed amount (100)"),
        Case(base + "&action=pre_auth&amount=100&tipAmount=10", "tipAmount", "must be 0 for a pre_auth", action: "pre_auth"),
        Case(base + "&action=sale&amount=100&tipAmount=10&withInstallments=true", "tipAmount", "must be 0 when withInstallments is true"),
        // installments
        Case(base + "&action=sale&amount=100&withInstallments=yes", "withInstallments", "must be true or false"),
        Case(base + "&action=sale&amount=100&withInstallments=1", "withInstallments", "must be true or false"),
        Case(base + "&action=sale&amount=100&preferredInstallments=abc", "preferredInstallments", "from 0 to 999"),
        Case(base + "&action=sale&amount=100&preferredInstallments=-1", "preferredInstallments", "from 0 to 999"),
        Case(base + "&action=sale&amount=100&preferredInstallments=1000", "preferredInstallments", "from 0 to 999"),
        // clientTransactionId
        Case(base + "&action=sale&amount=100&clientTransactionId=" + String(repeating: "x", count: 2049), "clientTransactionId",
             "must be at most 2048 characters"),
        Case(base + "&action=transactionDetails", "clientTransactionId", "is required for transactionDetails", action: "transactionDetails"),
        // referenceNumber
        Case(base + "&action=cancel&referenceNumber=12a", "referenceNumber", "must be a STAN: 1 to 6 digits", action: "cancel"),
        Case(base + "&action=cancel&referenceNumber=1234567", "referenceNumber", "1 to 6 digits", action: "cancel"),
        Case(base + "&action=cancel&referenceNumber=0000001", "referenceNumber", "1 to 6 digits", action: "cancel"),
        Case(base + "&action=cancel&referenceNumber=000000", "referenceNumber", "000001-999999", action: "cancel"),
        Case(base + "&action=cancel&referenceNumber=-1", "referenceNumber", "1 to 6 digits", action: "cancel"),
        Case(base + "&action=capture_pre_auth", "referenceNumber", "is required for capture_pre_auth", action: "capture_pre_auth"),
        Case(base + "&action=capture_pre_auth&referenceNumber=1&amount=x", "amount", "whole number", action: "capture_pre_auth"),
        Case(base + "&action=cancel&orderCode=92561100590002001", "orderCode", "must be 1 to 16 digits", action: "cancel"),
        Case(base + "&action=cancel&shortOrderCode=ABC", "shortOrderCode", "must be 1 to 10 digits", action: "cancel"),
        // batch
        Case(base + "&action=batch", "command", "is required for batch: open or close", action: "batch"),
        Case(base + "&action=batch&command=OPEN", "command", "must be open or close; got \"OPEN\"", action: "batch"),
        Case(base + "&action=batch&command=flush", "command", "must be open or close", action: "batch"),
    ]

    @Test("every rule names its field and rule", arguments: cases)
    func rules(_ c: Case) throws {
        let e = try #require(error(c.url))
        #expect(e.field == c.field)
        #expect(e.rule.contains(c.rule), "rule was: \(e.rule)")
        #expect(e.description == "\(e.field): \(e.rule)")
        #expect(e.action == c.action)
        if c.answerable {
            #expect(e.callback == "interapp-callback")
        } else {
            #expect(e.callback == nil)
        }
    }

    @Test("an error after a valid callback carries it even when the callback comes last or other items are broken")
    func callbackKnownEarly() throws {
        let e = try #require(error("vivapayclient://pay/v1?action=sale&amount=1&clientTransactionId=a%ZZ&callback=pos%3A%2F%2Fr"))
        #expect(e.field == "clientTransactionId")
        #expect(e.callback == "pos://r")
        #expect(e.action == "sale")
        let hash = try #require(error("vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1&clientTransactionId=a#b"))
        #expect(hash.callback == "pos://r")
    }

    // MARK: Robustness

    @Test("parsing never crashes on 1500 random and mutated inputs, and errors always name a field")
    func fuzz() {
        var rng = SplitMix64(state: 0xF0F0_1234)
        let alphabet = Array("vivapayclient:/?#&=%+ *.-_~0123456789ABCDEFabcdefé€\u{0}\u{7F}\n\"<>\\|{}[]@!$'(),;")
        let seeds = [
            base + "&action=sale&amount=1200&tipAmount=200&withInstallments=true&preferredInstallments=10&clientTransactionId=x",
            base + "&action=cancel&referenceNumber=60646&amount=12&orderCode=1&shortOrderCode=2",
            base + "&action=batch&command=open&batchName=b",
            base + "&action=capture_pre_auth&referenceNumber=1&amount=1",
            base + "&action=transactionDetails&clientTransactionId=%C3%A9",
        ]
        var parsed = 0
        var inputs: [String] = []
        for _ in 0..<500 {
            let length = Int.random(in: 0...120, using: &rng)
            inputs.append(String((0..<length).map { _ in alphabet.randomElement(using: &rng)! }))
        }
        for _ in 0..<1000 {
            var chars = Array(seeds.randomElement(using: &rng)!)
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let i = Int.random(in: 0...chars.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0 where i < chars.count: chars.remove(at: i)
                case 1: chars.insert(alphabet.randomElement(using: &rng)!, at: i)
                default: if i < chars.count { chars[i] = alphabet.randomElement(using: &rng)! }
                }
            }
            inputs.append(String(chars))
        }
        for input in inputs {
            do {
                let request = try VivaRequest.parse(input)
                parsed += 1
                #expect(!request.callback.isEmpty)
                #expect(VivaAction.allCases.contains(request.command.action))
            } catch {
                #expect(!error.field.isEmpty && !error.rule.isEmpty)
                #expect(error.description == "\(error.field): \(error.rule)")
            }
        }
        // Enough mutants survive for the success path to be exercised too.
        #expect(parsed > 50)
    }

    @Test("any value encoded the way callbacks are encoded parses back unchanged")
    func encodedValuesRoundTrip() throws {
        var rng = SplitMix64(state: 42)
        // Control characters are refused in every value (see "control characters and card numbers are refused").
        let pool = Array("aZ09 -._~*:+&=#%?/@!$'(),;\"<>\\^`{|}é€😀")
        for _ in 0..<300 {
            let value = String((0..<Int.random(in: 1...30, using: &rng)).map { _ in pool.randomElement(using: &rng)! })
            let request = try parse(base + "&action=transactionDetails&clientTransactionId=" + PercentEncoding.encodeValue(value))
            #expect(request.command == .transactionDetails(clientTransactionId: value))
        }
    }
}
