import Foundation
import Fronts
import Testing

@Suite("Citcon IPN signature")
struct CitconSignTests {
    /// The worked example of Citcon's guide "How to verify UPI IPN signature" (secret `braintree`).
    static let example: [String: String] = [
        "id": "84571d30e61711eba6a94911fce35a55", "transaction_type": "charge", "reference": "reference132", "amount": "100",
        "currency": "USD", "status": "authorized", "time_completed": "2021-08-14T09:47:43.000Z", "time_created": "2021-07-16T09:23:44.000Z",
        "payment_method": "paypal", "amount_captured": "", "amount_refunded": "",
        "fields": "id,transaction_type,reference,amount,currency,status,time_completed,time_created,payment_method,amount_captured,amount_refunded",
    ]

    @Test("the guide's worked example gives its sign")
    func workedExample() {
        #expect(CitconSign.sign(Self.example, secret: "braintree") == "621233f017ad8139fe97d47b4653735e121b9f6e7dafe3638eba0fcd80801db5")
    }

    @Test("keys not in fields are not signed; a listed key's value, the secret and fields itself are")
    func coverage() {
        var extra = Self.example
        extra["note"] = "not listed"
        #expect(CitconSign.sign(extra, secret: "braintree") == CitconSign.sign(Self.example, secret: "braintree"))
        var changed = Self.example
        changed["amount"] = "101"
        #expect(CitconSign.sign(changed, secret: "braintree") != CitconSign.sign(Self.example, secret: "braintree"))
        #expect(CitconSign.sign(Self.example, secret: "other") != CitconSign.sign(Self.example, secret: "braintree"))
        #expect(CitconSign.signedText(["fields": "b,a", "a": "1", "b": ""], secret: "s") == "a=1&b=&fields=b,a&secret=s")
    }
}

extension CitconSignTests {
    @Test("500 random notifications sign as an independent Python implementation signs them")
    func againstPython() throws {
        var g = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz_0123456789-:.TZ ,é=&%")
        func word(_ n: Int) -> String { String((0..<n).map { _ in alphabet.randomElement(using: &g)! }) }
        var cases: [[String: Any]] = []
        for _ in 0..<500 {
            var values: [String: String] = [:]
            let names = (0..<Int.random(in: 1...12, using: &g)).map { _ in word(Int.random(in: 1...10, using: &g)).filter { $0 != "," && $0 != "=" && $0 != "&" } }.filter { !$0.isEmpty }
            for name in names { values[name] = Bool.random(using: &g) ? "" : word(Int.random(in: 1...20, using: &g)) }
            values["fields"] = names.filter { _ in Int.random(in: 0..<4, using: &g) > 0 }.joined(separator: ",")
            cases.append(["values": values, "secret": word(16)])
        }
        let python = ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/bin/python3"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Oracle/citcon_sign.py").path]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: cases))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let theirs = try #require(try JSONSerialization.jsonObject(with: data) as? [String])
        #expect(theirs.count == cases.count)
        for (c, sign) in zip(cases, theirs) {
            #expect(CitconSign.sign(c["values"] as! [String: String], secret: c["secret"] as! String) == sign, "\(c)")
        }
    }
}
