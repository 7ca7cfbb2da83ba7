import EMV
import Foundation
import Testing
@testable import Fronts

/// A user token of the shape cardbench issues.
let billpocketUserToken = String(repeating: "0123456789abcdef", count: 4)

/// The vendor sample's reference, and the way it arrives: percent-encoded.
let tortureReference = "Pago & % # ( ) / @ con propina a 3 meses sin intereses"
let tortureReferenceEncoded = "Pago%20%26%20%25%20%23%20(%20)%20/%20@%20con%20propina%20a%203%20meses%20sin%20intereses"

/// The sample sender's sale, with the parameters where a host would be.
private let sale = "billpocket://transaction=venta&usertoken=\(billpocketUserToken)&amount=100.00&identifier=abc&urlScheme=Sender"
private let refund = "billpocket://transaction=devolucion&userToken=\(billpocketUserToken)&identifier=abc&transactionId=7203700000000001"

private func parse(_ url: String) throws -> BillpocketRequest {
    try BillpocketRequest.parse(url)
}

private func saleOf(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> BillpocketSale {
    let request = try BillpocketRequest.parse(url)
    guard case .venta(let sale) = request.command else {
        Issue.record("expected a venta, got \(request.command)", sourceLocation: sourceLocation)
        throw BillpocketRequestError(BillpocketFieldError(field: "test", shortRule: "", rule: ""))
    }
    return sale
}

/// The error a URL gives; fails the test when it parses.
private func error(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) -> BillpocketRequestError? {
    do {
        let request = try BillpocketRequest.parse(url)
        Issue.record("expected an error, parsed \(request.command)", sourceLocation: sourceLocation)
        return nil
    } catch {
        #expect(error.statusInfo.unicodeScalars.count <= 40, "statusinfo too long: \(error.statusInfo)", sourceLocation: sourceLocation)
        return error
    }
}

@Suite("BillpocketRequest")
struct BillpocketRequestTests {
    // MARK: URL forms

    @Test("the vendor sample's sale: parameters where the host would be, no '?', the torture reference decoded")
    func vendorSample() throws {
        let request = try parse("billpocket://transaction=venta&usertoken=\(billpocketUserToken)&amount=100.00&tip=15.00&payments=3"
                                + "&reference=\(tortureReferenceEncoded)&identifier=abc&urlScheme=Sender")
        #expect(request.form == .afterScheme)
        #expect(request.userToken == billpocketUserToken)
        #expect(request.identifier == "abc")
        #expect(request.urlScheme == .app("Sender"))
        #expect(request.command == .venta(BillpocketSale(amount: 10000, tip: 1500, msi: 3, reference: tortureReference)))
        #expect(request.command.transaction == "venta")
        #expect(request.parameters.map(\.name) == ["transaction", "usertoken", "amount", "tip", "payments", "reference", "identifier", "urlScheme"])
        #expect(request.parameter("REFERENCE") == tortureReference)
    }

    @Test("the '?' forms: empty host, any host, a slash; the same request as the vendor's form")
    func queryForms() throws {
        let expected = try parse(sale)
        for prefix in ["billpocket://?", "billpocket://pay?", "billpocket:///?", "billpocket://x/y?"] {
            let request = try parse(prefix + sale.dropFirst("billpocket://".count))
            #expect(request.form == .query, "\(prefix)")
            #expect(request.command == expected.command)
            #expect(request.identifier == expected.identifier)
            #expect(request.urlScheme == expected.urlScheme)
        }
    }

    @Test("a '?' inside a value of the vendor's form stays in the value")
    func questionMarkInValue() throws {
        let request = try parse(sale + "&reference=why?&email=a@b.mx")
        #expect(request.form == .afterScheme)
        #expect(try saleOf(sale + "&reference=why?").reference == "why?")
        #expect(request.parameter("email") == "a@b.mx")
    }

    @Test("the scheme in any case")
    func schemeCase() throws {
        for scheme in ["BILLPOCKET", "BillPocket", "billPocket"] {
            let request = try parse(scheme + sale.dropFirst("billpocket".count))
            #expect(request.userToken == billpocketUserToken)
        }
    }

    @Test("a wrong or malformed scheme: field scheme, nobody to call back")
    func wrongScheme() {
        for url in ["vivapayclient://transaction=venta&urlScheme=myapp", "billpocket:transaction=venta&urlScheme=myapp",
                    "billpockets://transaction=venta&urlScheme=myapp", "transaction=venta&urlScheme=myapp", "billpocket"] {
            let e = error(url)
            #expect(e?.field == "scheme", "\(url)")
            #expect(e?.statusInfo == "scheme: must be billpocket://")
            #expect(e?.urlScheme == nil)
        }
        #expect(error("")?.field == "url")
    }

    // MARK: Names

    @Test("the legacy pin= is the user token, userToken/usertoken/USERTOKEN all are; names are case-insensitive")
    func tokenNames() throws {
        for name in ["pin", "userToken", "usertoken", "USERTOKEN", "PIN"] {
            let url = "billpocket://transaction=venta&\(name)=\(billpocketUserToken)&amount=1&identifier=i&URLSCHEME=myapp"
            let request = try parse(url)
            #expect(request.userToken == billpocketUserToken, "\(name)")
            #expect(request.urlScheme == .app("myapp"))
        }
    }

    @Test("one parameter under two of its names is sent twice")
    func aliasesDuplicate() {
        let e = error(sale + "&pin=\(billpocketUserToken)")
        #expect(e?.field == "userToken")
        #expect(e?.statusInfo == "userToken: sent 2 times")
        #expect(e?.rule.contains("usertoken, pin") == true)
        #expect(error(sale + "&payments=3&msi=3")?.field == "msi")
        #expect(error(sale + "&Amount=100.00")?.field == "amount")
        #expect(error(sale + "&foo=1&FOO=2")?.field == "foo")
    }

    @Test("unknown parameters are kept and ignored; empty items skipped; an empty value is no value")
    func unknownAndEmpty() throws {
        let request = try parse(sale + "&&foo=bar&bare&tip=&msi=&reference=&email=&phone=&showPhotoButton=&devicetoken=&")
        #expect(request.parameter("foo") == "bar")
        #expect(request.parameter("bare") == "")
        #expect(request.deviceToken == nil)
        #expect(request.command == .venta(BillpocketSale(amount: 10000)))
    }

    // MARK: Decoding

    @Test("values are percent-decoded exactly once: %2520 is %20, + stays +, lower-case escapes too")
    func decodeOnce() throws {
        #expect(try saleOf(sale + "&reference=%2520").reference == "%20")
        #expect(try saleOf(sale + "&reference=a+b").reference == "a+b")
        #expect(try saleOf(sale + "&reference=%c3%a9t%C3%A9").reference == "été")
        #expect(try parse(sale.replacingOccurrences(of: "identifier=abc", with: "identifier=a%26b%3Dc")).identifier == "a&b=c")
    }

    @Test("unencoded characters, bad escapes and non-UTF-8 name the parameter")
    func encodingErrors() {
        let space = error(sale + "&reference=a b")
        #expect(space?.field == "reference")
        #expect(space?.statusInfo == "reference: must be percent-encoded")
        #expect(space?.urlScheme == .app("Sender"))
        #expect(error(sale + "&reference=100%")?.statusInfo == "reference: bad %-escape")
        #expect(error(sale + "&reference=%FF")?.statusInfo == "reference: not UTF-8")
        #expect(error(sale + "&pin=%zz")?.field == "userToken")
        #expect(error(sale + "&a%zz=1")?.field == "url")
        #expect(error(sale + "&=1")?.statusInfo == "url: empty parameter name")
    }

    @Test("a '#' ends the parameters: refused, naming the one it cut short")
    func fragment() {
        let e = error(sale + "&reference=Pago #1")
        #expect(e?.field == "reference")
        #expect(e?.statusInfo == "reference: send '#' as %23")
        #expect(e?.urlScheme == .app("Sender"))
        #expect(e?.identifier == "abc")
        #expect(error(sale + "&#x")?.field == "url")
    }

    // MARK: transaction

    @Test("transaction is required and case-sensitive")
    func transaction() {
        #expect(error("billpocket://urlScheme=myapp&identifier=a")?.statusInfo == "transaction: required")
        let e = error(sale.replacingOccurrences(of: "=venta", with: "=Venta"))
        #expect(e?.statusInfo == "transaction: venta or devolucion")
        #expect(e?.rule.contains("did you mean venta?") == true)
        #expect(e?.transaction == "Venta")
        #expect(error(sale.replacingOccurrences(of: "=venta", with: "=cancel"))?.urlScheme == .app("Sender"))
    }

    // MARK: What errors carry

    @Test("errors carry a valid urlScheme and identifier wherever they sit, and the transaction as sent")
    func errorsCarryWhatIsKnown() {
        let e = error("billpocket://transaction=venta&amount=1.005&usertoken=t&identifier=id-1&urlScheme=myapp")
        #expect(e?.field == "amount")
        #expect(e?.statusInfo == "amount: max 2 decimals")
        #expect(e?.urlScheme == .app("myapp"))
        #expect(e?.identifier == "id-1")
        #expect(e?.transaction == "venta")
        #expect(e?.description.hasPrefix("amount: must have at most 2 decimals") == true)
    }

    @Test("no usable urlScheme: missing, invalid or repeated; the error has none and the daemon answers 400")
    func noUsableURLScheme() {
        let missing = error("billpocket://transaction=venta&usertoken=t&amount=1&identifier=i")
        #expect(missing?.field == "urlScheme")
        #expect(missing?.statusInfo == "urlScheme: required")
        #expect(missing?.urlScheme == nil)
        #expect(missing?.identifier == "i")
        let invalid = error("billpocket://transaction=venta&usertoken=t&amount=x&identifier=i&urlScheme=my%20app")
        #expect(invalid?.field == "urlScheme")
        #expect(invalid?.urlScheme == nil)
        #expect(error(sale + "&urlScheme=other")?.urlScheme == nil)
    }

    @Test("a bad identifier is not echoed; the error still has the urlScheme")
    func badIdentifier() {
        let long = String(repeating: "i", count: 257)
        let e = error(sale.replacingOccurrences(of: "identifier=abc", with: "identifier=\(long)"))
        #expect(e?.statusInfo == "identifier: max 256 characters")
        #expect(e?.identifier == nil)
        #expect(e?.urlScheme == .app("Sender"))
        let missing = error(sale.replacingOccurrences(of: "&identifier=abc", with: ""))
        #expect(missing?.statusInfo == "identifier: required")
        #expect(missing?.urlScheme == .app("Sender"))
    }

    // MARK: Lengths: the boundary passes, one over fails

    @Test("userToken: 64 characters pass, 65 fail; required")
    func userTokenLength() throws {
        let base = "billpocket://transaction=venta&amount=1&identifier=i&urlScheme=myapp&userToken="
        #expect(try parse(base + String(repeating: "x", count: 64)).userToken.count == 64)
        #expect(error(base + String(repeating: "x", count: 65))?.statusInfo == "userToken: max 64 characters")
        #expect(error("billpocket://transaction=venta&amount=1&identifier=i&urlScheme=myapp")?.statusInfo == "userToken: required")
    }

    @Test("devicetoken: 8 and 12 characters pass, 7 and 13 fail")
    func deviceTokenLength() throws {
        #expect(try parse(sale + "&devicetoken=ABCDEFGH").deviceToken == "ABCDEFGH")
        #expect(try parse(sale + "&devicetoken=ABCDEFGHJKMN").deviceToken == "ABCDEFGHJKMN")
        #expect(error(sale + "&devicetoken=ABCDEFG")?.statusInfo == "devicetoken: 8-12 characters")
        #expect(error(sale + "&devicetoken=ABCDEFGHJKMNP")?.statusInfo == "devicetoken: 8-12 characters")
    }

    @Test("reference: 256 characters pass (counted as code points), 257 fail")
    func referenceLength() throws {
        #expect(try saleOf(sale + "&reference=" + String(repeating: "r", count: 256)).reference?.count == 256)
        #expect(try saleOf(sale + "&reference=" + String(repeating: "%C3%A9", count: 256)).reference?.count == 256)
        #expect(error(sale + "&reference=" + String(repeating: "r", count: 257))?.statusInfo == "reference: max 256 characters")
    }

    @Test("email: 256 characters pass, 257 fail; it must look like an address")
    func email() throws {
        let local = String(repeating: "e", count: 250)
        #expect(try saleOf(sale + "&email=\(local)@b.com").email == local + "@b.com")
        #expect(error(sale + "&email=\(local)@bb.com")?.statusInfo == "email: max 256 characters")
        for bad in ["nobody", "@b.mx", "a@", "a%20b@c.mx"] {
            #expect(error(sale + "&email=" + bad)?.statusInfo == "email: not an email address", "\(bad)")
        }
    }

    @Test("phone: 14 characters pass, 15 fail; digits, +, -, (, ) and spaces only")
    func phone() throws {
        #expect(try saleOf(sale + "&phone=(55)%201234-5678").phone == "(55) 1234-5678")
        #expect(try saleOf(sale + "&phone=+5215512345678").phone == "+5215512345678")
        #expect(error(sale + "&phone=+52155123456789")?.statusInfo == "phone: max 14 characters")
        #expect(error(sale + "&phone=55-CALL-ME")?.statusInfo == "phone: digits, spaces, + - ( ) only")
        #expect(error(sale + "&phone=---")?.field == "phone")
    }

    @Test("identifier: 256 characters pass, 257 fail")
    func identifierLength() throws {
        let id = String(repeating: "i", count: 256)
        #expect(try parse(sale.replacingOccurrences(of: "identifier=abc", with: "identifier=\(id)")).identifier == id)
    }

    @Test("urlScheme: 50 characters pass, 51 fail; an app scheme name or an http(s) URL")
    func urlScheme() throws {
        let base = sale.replacingOccurrences(of: "&urlScheme=Sender", with: "")
        let name50 = "a" + String(repeating: "b", count: 49)
        #expect(try parse(base + "&urlScheme=" + name50).urlScheme == .app(name50))
        #expect(error(base + "&urlScheme=" + name50 + "c")?.statusInfo == "urlScheme: max 50 characters")
        #expect(try parse(base + "&urlScheme=my.app-2+x").urlScheme == .app("my.app-2+x"))
        #expect(try parse(base + "&urlScheme=https://pos.example/h?k=1").urlScheme == .webhook("https://pos.example/h?k=1"))
        #expect(try parse(base + "&urlScheme=HTTP%3A%2F%2Fpos.example").urlScheme == .webhook("HTTP://pos.example"))
        let webhook50 = "https://pos.example/" + String(repeating: "p", count: 30)
        #expect(try parse(base + "&urlScheme=" + webhook50).urlScheme == .webhook(webhook50))
        #expect(error(base + "&urlScheme=" + webhook50 + "p")?.statusInfo == "urlScheme: max 50 characters")
        for bad in ["myapp://", "myapp://result", "2app", "my_app", "ftp://x.mx"] {
            let e = error(base + "&urlScheme=" + bad)
            #expect(e?.statusInfo == "urlScheme: app scheme or http(s) URL", "\(bad)")
            #expect(e?.urlScheme == nil)
        }
        #expect(error(base + "&urlScheme=myapp://")?.rule.contains("without '://'") == true)
        #expect(error(base + "&urlScheme=https://")?.statusInfo == "urlScheme: webhook URL needs a host")
        #expect(error(base + "&urlScheme=https://a.mx/%23x")?.statusInfo == "urlScheme: webhook URL with '#'")
        #expect(error(base + "&urlScheme=https://a.mx/%2520%25")?.statusInfo == "urlScheme: bad %-escape in webhook URL")
        #expect(error(base + "&urlScheme=https://a.mx/a%20b")?.statusInfo == "urlScheme: webhook URL not encoded")
    }

    @Test("transactionId: 64 characters pass, 65 fail; required for devolucion")
    func transactionIdLength() throws {
        let base = refund.replacingOccurrences(of: "&transactionId=7203700000000001", with: "")
        let id = String(repeating: "7", count: 64)
        #expect(try parse(base + "&transactionId=" + id).command == .devolucion(BillpocketRefund(transactionId: id)))
        #expect(error(base + "&transactionId=" + id + "7")?.statusInfo == "transactionId: max 64 characters")
        #expect(error(base)?.statusInfo == "transactionId: required")
    }

    // MARK: Types

    @Test("amount: decimals with at most 2 places; 100 is 100.00 and 0.5 is 0.50")
    func amounts() throws {
        let base = sale.replacingOccurrences(of: "&amount=100.00", with: "")
        let cases: [(String, Int)] = [("100", 10000), ("100.5", 10050), ("100.50", 10050), ("0.5", 50), ("0.01", 1),
                                      ("0100.00", 10000), ("9999999999.99", 999_999_999_999)]
        for (text, cents) in cases {
            #expect(try saleOf(base + "&amount=" + text).amount == cents, "\(text)")
        }
        #expect(error(base)?.statusInfo == "amount: required")
        #expect(error(base + "&amount=100.505")?.statusInfo == "amount: max 2 decimals")
        #expect(error(base + "&amount=1.500")?.statusInfo == "amount: max 2 decimals")
        for bad in ["abc", "1,000.00", "-1", "+1", ".5", "5.", "1e3", "1.2.3", "%20100", "%EF%BC%91"] {
            #expect(error(base + "&amount=" + bad)?.statusInfo == "amount: must be a decimal number", "\(bad)")
        }
        #expect(error(base + "&amount=0")?.statusInfo == "amount: must be greater than 0")
        #expect(error(base + "&amount=0.00")?.statusInfo == "amount: must be greater than 0")
        #expect(error(base + "&amount=10000000000.00")?.statusInfo == "amount: too large")
        #expect(error(base + "&amount=99999999999999999999999")?.statusInfo == "amount: too large")
    }

    @Test("tip: like amount, 0 allowed; amount plus tip must fit 12 digits")
    func tips() throws {
        #expect(try saleOf(sale + "&tip=0").tip == 0)
        #expect(try saleOf(sale + "&tip=15").tip == 1500)
        #expect(try saleOf(sale + "&tip=15.5").total == 11550)
        #expect(error(sale + "&tip=1.234")?.statusInfo == "tip: max 2 decimals")
        #expect(error(sale + "&tip=-1")?.statusInfo == "tip: must be a decimal number")
        let big = sale.replacingOccurrences(of: "amount=100.00", with: "amount=9999999999.99")
        #expect(try saleOf(big).amount == 999_999_999_999)
        #expect(error(big + "&tip=0.01")?.statusInfo == "tip: amount + tip too large")
    }

    @Test("msi: 0, 3, 6, 9, 12 (also as the sample's payments); anything else fails")
    func msiValues() throws {
        for months in [0, 3, 6, 9, 12] {
            #expect(try saleOf(sale + "&msi=\(months)").msi == months)
            #expect(try saleOf(sale + "&payments=\(months)").msi == months)
        }
        #expect(try saleOf(sale).msi == 0)
        for bad in ["1", "4", "18", "03", "3.0", "tres", "-3"] {
            #expect(error(sale + "&msi=" + bad)?.statusInfo == "msi: must be 0, 3, 6, 9 or 12", "\(bad)")
        }
    }

    @Test("booleans: true/false in any case, 1/0; anything else names the field")
    func booleans() throws {
        let yes = try saleOf(sale + "&showPhotoButton=TRUE&mandatoryPhoto=1&comesFromQR=true")
        #expect(yes.showPhotoButton && yes.mandatoryPhoto && yes.comesFromQR)
        let no = try saleOf(sale + "&showPhotoButton=false&mandatoryPhoto=0&comesFromQR=False")
        #expect(!no.showPhotoButton && !no.mandatoryPhoto && !no.comesFromQR)
        #expect(error(sale + "&showPhotoButton=yes")?.statusInfo == "showPhotoButton: must be true or false")
        #expect(error(sale + "&mandatoryPhoto=si")?.statusInfo == "mandatoryPhoto: must be true or false")
        #expect(error(sale + "&comesFromQR=2")?.statusInfo == "comesFromQR: must be true or false")
    }

    @Test("mandatoryPhoto only counts with showPhotoButton=true")
    func photo() throws {
        #expect(try saleOf(sale).photo == .none)
        #expect(try saleOf(sale + "&mandatoryPhoto=true").photo == .none)
        #expect(try saleOf(sale + "&showPhotoButton=true").photo == .optional)
        #expect(try saleOf(sale + "&showPhotoButton=true&mandatoryPhoto=true").photo == .mandatory)
    }

    // MARK: devolucion

    @Test("devolucion: userToken, identifier, transactionId; urlScheme optional; devicetoken allowed")
    func devolucion() throws {
        let request = try parse(refund)
        #expect(request.command == .devolucion(BillpocketRefund(transactionId: "7203700000000001")))
        #expect(request.command.transaction == "devolucion")
        #expect(request.urlScheme == nil)
        #expect(try parse(refund + "&urlScheme=myapp&devicetoken=ABCDEFGHJK").urlScheme == .app("myapp"))
        #expect(error(refund.replacingOccurrences(of: "userToken", with: "x"))?.statusInfo == "userToken: required")
        #expect(error(refund.replacingOccurrences(of: "&identifier=abc", with: ""))?.statusInfo == "identifier: required")
    }

    @Test("parameters the table marks N/A are accepted and ignored, by the document's names (the vendor's Sender sends every field)")
    func notApplicable() throws {
        // The Sender sample's default request: a devolucion with every slot, amount and reference filled in.
        let sender = "billpocket://transaction=devolucion&pin=tok&transactionid=7203700000000001&amount=100.00&tip=&payments=&"
            + "reference=Pago%20%26%20%25%20%23%20(%20)%20/%20@%20con%20propina%20a%203%20meses%20sin%20intereses&email=&phone=&"
            + "identifier=Ticket12345&urlScheme=Sender"
        let request = try parse(sender)
        #expect(request.command == .devolucion(BillpocketRefund(transactionId: "7203700000000001")))
        #expect(request.ignored == ["amount", "reference"])
        #expect(try parse(refund + "&showPhotoButton=true&payments=3").ignored == ["msi", "showPhotoButton"])
        #expect(try parse(sale + "&transactionId=1").ignored == ["transactionId"])
        #expect(try parse(refund).ignored.isEmpty)
        // Ignored, but still scanned: a card number in an ignored field is refused like anywhere else.
        #expect(error(refund + "&reference=4012888888881881")?.field == "reference")
        #expect(error(sale + "&transactionId=4012888888881881")?.field == "transactionId")
    }

    // MARK: statusinfo

    @Test("every request error's statusinfo is at most 40 characters and starts with its field")
    func statusInfoShape() {
        let long = String(repeating: "n", count: 60)
        let urls = [
            sale + "&\(long)=%zz", sale + "&\(long)=1&\(long)=2", sale + "&showPhotoButton=a%20b", sale + "&mandatoryPhoto=%",
            refund + "&transactionId=" + long + long, refund.replacingOccurrences(of: "&identifier=abc", with: ""),
            sale.replacingOccurrences(of: "=venta", with: "=" + long),
        ]
        for url in urls {
            guard let e = error(url) else { continue }
            let prefix = String(e.field.prefix(10))
            #expect(e.statusInfo.hasPrefix(prefix), "\(e.statusInfo)")
            #expect(e.statusInfo.unicodeScalars.count <= 40)
        }
        #expect(error(sale + "&\(long)=%zz")?.statusInfo == String(repeating: "n", count: 25) + "…: bad %-escape")
    }

    @Test("parsing never crashes on 1500 random and mutated inputs; errors always fit statusinfo")
    func fuzz() {
        var rng = SplitMix64(state: 0xB111_B0C7)
        let alphabet = Array("billpocket:/?#&=%+ 0123456789abcdefABCDEF.-_@()éx\u{0}")
        let seeds = [sale, refund, sale + "&reference=" + tortureReferenceEncoded, "billpocket://?transaction=venta&urlScheme=https://a.mx/?q"]
        for round in 0..<1500 {
            var chars: [Character]
            if round % 3 == 0 {
                chars = (0..<Int.random(in: 0...120, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            } else {
                chars = Array(seeds.randomElement(using: &rng)!)
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    let i = Int.random(in: 0..<chars.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: chars.insert(alphabet.randomElement(using: &rng)!, at: i)
                    case 1: chars.remove(at: i)
                    default: chars[i] = alphabet.randomElement(using: &rng)!
                    }
                }
            }
            do {
                _ = try BillpocketRequest.parse(String(chars))
            } catch {
                #expect(!error.field.isEmpty)
                #expect(error.statusInfo.unicodeScalars.count <= 40, "\(error.statusInfo)")
            }
        }
    }
}
