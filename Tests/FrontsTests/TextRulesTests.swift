import EMV
import Testing
@testable import Fronts

@Suite("request text rules: control characters, card numbers, ASCII-only case folding")
struct TextRulesTests {
    let viva = "vivapayclient://pay/v1?callback=myapp://result&merchantKey=K&appId=a&action=sale&amount=1200"

    @Test("a Viva value with a control character is refused naming the field, after the callback is known")
    func vivaControls() {
        for (value, found) in [("nulprobe%00tail", "U+0000 at position 9"), ("a%0Ab", "U+000A at position 2"), ("%C2%85", "U+0085 at position 1")] {
            #expect(throws: VivaRequestError(callback: "myapp://result", action: "sale", field: "clientTransactionId",
                                             rule: "must not contain control characters; found \(found)")) {
                try VivaRequest.parse(viva + "&clientTransactionId=" + value)
            }
        }
    }

    @Test("a Viva value holding a card number is refused; in the callback, the callback is not used")
    func vivaCardNumbers() throws {
        #expect(throws: VivaRequestError(callback: "myapp://result", action: "sale", field: "clientTransactionId", rule: TextRules.panRule)) {
            try VivaRequest.parse(viva + "&clientTransactionId=4761%207390%200101%200010")
        }
        #expect(throws: VivaRequestError(callback: "myapp://result", action: "sale", field: "merchantNote", rule: TextRules.panRule)) {
            try VivaRequest.parse(viva + "&merchantNote=4761739001010010")
        }
        for callback in ["myapp://r/4761739001010010", "http://127.0.0.1/cb%3Fpan%3D%2534761739001010010"] {
            do {
                _ = try VivaRequest.parse("vivapayclient://pay/v1?callback=\(callback)&action=sale&amount=1")
                Issue.record("\(callback) was taken")
            } catch {
                #expect(error.callback == nil && error.field == "callback" && error.rule == TextRules.panRule, "\(error)")
            }
        }
        // An order code is the app's own 16 digits: never refused for looking like a card number.
        let cancel = try VivaRequest.parse("vivapayclient://pay/v1?callback=myapp://r&action=cancel&referenceNumber=1&orderCode=6211111111111117")
        #expect(cancel.command.action == .cancel)
    }

    @Test("a bracketed IPv6 callback is a URI; brackets elsewhere are not")
    func ipv6Callback() throws {
        let request = try VivaRequest.parse("vivapayclient://pay/v1?callback=http://%5B::1%5D:8080/cb&action=sale&amount=1")
        #expect(request.callback == "http://[::1]:8080/cb")
        #expect(throws: VivaRequestError.self) { try VivaRequest.parse("vivapayclient://pay/v1?callback=http://h/%5Bx%5D&action=sale&amount=1") }
        #expect(try BillpocketURLScheme.parse("http://[::1]:8080/hook") == .webhook("http://[::1]:8080/hook"))
    }

    @Test("a callback or webhook port is a number up to 65535")
    func ports() throws {
        for callback in ["http://127.0.0.1:-1/cb", "http://127.0.0.1:abc/cb", "http://127.0.0.1:70000/cb", "http://%5B::1%5D:x/cb"] {
            do {
                _ = try VivaRequest.parse("vivapayclient://pay/v1?callback=\(callback)&action=sale&amount=1")
                Issue.record("\(callback) was taken")
            } catch {
                #expect(error.field == "callback" && error.rule == "must be a URI whose port is a number from 0 to 65535", "\(error)")
            }
        }
        #expect(try VivaRequest.parse("vivapayclient://pay/v1?callback=http://127.0.0.1:65535/cb&action=sale&amount=1").callback == "http://127.0.0.1:65535/cb")
        #expect(throws: BillpocketFieldError.self) { try BillpocketURLScheme.parse("http://h:99999/hook") }
    }

    @Test("Billpocket refuses control characters and card numbers in any field but its own transactionId")
    func billpocket() throws {
        let base = "billpocket://transaction=venta&usertoken=t&amount=1.00&identifier=i-1&urlScheme=Sender"
        for (extra, field) in [("&reference=ab%00cd", "reference"), ("&reference=4761739001010010", "reference"),
                               ("&email=4761739001010010%40x.mx", "email")] {
            do {
                _ = try BillpocketRequest.parse(base + extra)
                Issue.record("\(extra) was taken")
            } catch {
                #expect(error.field == field, "\(extra): \(error)")
            }
        }
        do {
            _ = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1.00&identifier=4761739001010010&urlScheme=Sender")
            Issue.record("a card number was taken as identifier")
        } catch {
            #expect(error.field == "identifier" && error.identifier == nil, "the identifier is not echoed: \(error)")
        }
        do {
            _ = try BillpocketURLScheme.parse("http://h/4761739001010010")
            Issue.record("a webhook holding a card number was taken")
        } catch {
            #expect(error.rule == TextRules.panRule)
        }
        // A token is a random credential, hashed at once: its hex may hold any digit run.
        let token = "ab4761739001010010" + String(repeating: "c", count: 46)
        #expect(try BillpocketRequest.parse(base.replacingOccurrences(of: "usertoken=t", with: "usertoken=\(token)")).userToken == token)
        let refund = try BillpocketRequest.parse("billpocket://transaction=devolucion&usertoken=t&transactionId=4111111111111111&identifier=r-1&urlScheme=Sender")
        #expect(refund.identifier == "r-1")
    }

    @Test("schemes and names fold ASCII only: the KELVIN SIGN is not a k")
    func asciiFolding() {
        #expect(ASCII.lowercased("BillPocket") == "billpocket")
        #expect(ASCII.lowercased("billpoc\u{212A}et") != "billpocket")
        #expect(throws: BillpocketRequestError.self) { try BillpocketRequest.parse("billpoc\u{212A}et://transaction=venta") }
        #expect(throws: VivaRequestError.self) { try VivaRequest.parse("viva\u{212A}ayclient://pay/v1?callback=a://b&action=abort") }
    }
}
