/// Generated scenarios: cards × amounts × response codes × fronts, each with the outcome the
/// issuer's queued answer decides (`cardbench scenario generate`, `cardbench bench scenarios
/// --generated`). A library of any size for measuring the runner, each scenario a real
/// transaction with real expectations.
public enum ScenarioGenerator {
    /// The cards the generated scenarios use (profiles of the shipped library's `cards` folder),
    /// with their PINs.
    public static let cards: [(profile: String, pin: String)] = [
        ("visa-credit-cvn10", "1234"), ("mastercard-credit-cvn16", "1234"), ("visa-debit-cvn18", "4315"), ("mastercard-debit-cvn20", "9876"),
    ]
    /// Whole amounts: no cents, so no front's amount table decides instead of the queued answer.
    static let amounts = [1_000, 2_500, 4_700, 12_300, 99_900]
    /// The issuer's answers: an approval and plain declines.
    static let codes = ["00", "05", "51", "54", "57", "61"]

    public enum Front: String, CaseIterable, Sendable {
        case viva, worldline, citcon
    }

    /// Scenario `index` (0-based): its file name and its text. The same index always gives the
    /// same scenario.
    public static func scenario(_ index: Int) -> (file: String, text: String) {
        var n = index
        let front = Front.allCases[n % Front.allCases.count]
        n /= Front.allCases.count
        let code = codes[n % codes.count]
        n /= codes.count
        let amount = amounts[n % amounts.count]
        n /= amounts.count
        let card = cards[n % cards.count]
        let approved = code == "00"
        let ledger = "ledger: {status: \(approved ? "approved" : "declined"), responseCode: \"\(code)\", amount: \(amount)}"
        let name = "generated \(index): \(front.rawValue), \(card.profile), \(amount), host \(code)"
        let text: String
        switch front {
        case .viva:
            text = """
            name: "\(name)"
            cards:
              c: \(card.profile).yaml
            steps:
              - card: {insert: c}
              - keypad: {pin: "\(card.pin)"}
              - host: {respond: "\(code)"}
              - open: "vivapayclient://pay/v1?callback=pos://result&action=sale&amount=\(amount)&clientTransactionId=g\(index)-{{run.id}}"
                expect:
                  callback: {status: \(approved ? "success" : "failed")}
                  \(ledger)

            """
        case .worldline:
            text = """
            name: "\(name)"
            steps:
              - worldline: {merchant: wl-generated, host: {respond: "\(code)"}}
              - worldline: {merchant: wl-generated, pay: {amount: \(amount), mode: SALE, card: \(card.profile)}}
                expect: {http: \(approved ? 201 : 402), status: \(approved ? "CAPTURED" : "REJECTED"), \(ledger)}

            """
        case .citcon:
            text = """
            name: "\(name)"
            steps:
              - citcon: {merchant: cc-generated, host: {respond: "\(code)"}}
              - citcon: {merchant: cc-generated, charge: {amount: \(amount), card: \(card.profile)}}
                expect: {status: \(approved ? "authorized" : "failed"), \(ledger)}

            """
        }
        let number = String(index)
        return (String(repeating: "0", count: max(0, 5 - number.count)) + number + "-\(front.rawValue).yaml", text)
    }
}
