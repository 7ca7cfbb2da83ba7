import Testing
@testable import EMV

/// Published scheme test PANs (Stripe, Adyen, PayPal lists) and the brand each must detect as.
/// The Carnet one is ActiveMerchant's 506228 sample given a correct check digit.
private let knownPANs: [(pan: String, brand: CardBrand)] = [
    ("4111111111111111", .visa),
    ("4012888888881881", .visa),
    ("4222222222222", .visa),
    ("4111111111111111110", .visa),
    ("5555555555554444", .mastercard),
    ("5105105105105100", .mastercard),
    ("2221000000000009", .mastercard),
    ("2223000048400011", .mastercard),
    ("378282246310005", .americanExpress),
    ("371449635398431", .americanExpress),
    ("6011111111111117", .discover),
    ("6011000990139424", .discover),
    ("6445644564456445", .discover),
    ("3530111333300000", .jcb),
    ("3566002020360505", .jcb),
    ("6200000000000005", .unionPay),
    ("6250941006528599", .unionPay),
    ("8171999927660000", .unionPay),
    ("6759649826438453", .maestro),
    ("6304000000000000", .maestro),
    ("5062280000000002", .carnet),
]

struct LuhnTests {
    @Test(arguments: knownPANs.map(\.pan))
    func knownTestPANsPass(_ pan: String) {
        #expect(Luhn.isValid(pan))
    }

    @Test(arguments: knownPANs.map(\.pan))
    func everySingleDigitChangeFails(_ pan: String) {
        let digits = Array(pan)
        for i in digits.indices {
            for d in "0123456789" where d != digits[i] {
                var changed = digits
                changed[i] = d
                #expect(!Luhn.isValid(String(changed)), "\(String(changed))")
            }
        }
    }

    @Test(arguments: knownPANs.map(\.pan))
    func checkDigitRecomputesTheLastDigit(_ pan: String) {
        #expect(Luhn.checkDigit(for: String(pan.dropLast())) == pan.last)
    }

    @Test(arguments: [
        ("7992739871", "3"),   // Wikipedia's worked example
        ("0", "0"),
        ("1", "8"),
        ("9", "1"),
        ("411111111111111", "1"),
        ("37828224631000", "5"),
        ("506199000000000", "7"),
    ] as [(String, Character)])
    func checkDigitTable(_ partial: String, _ expected: Character) {
        #expect(Luhn.checkDigit(for: partial) == expected)
        #expect(Luhn.isValid(partial + String(expected)))
    }

    @Test(arguments: ["", " ", "abc", "4111 1111 1111 1111", "4111-1111", "-18", "４２", "7992739871\n"])
    func nonDigitsAreNeitherValidNorCheckable(_ text: String) {
        #expect(!Luhn.isValid(text))
        #expect(Luhn.checkDigit(for: text) == nil)
    }
}

struct CardBrandTests {
    @Test(arguments: knownPANs)
    func knownPANsDetect(_ pan: String, _ brand: CardBrand) {
        #expect(CardBrand.detect(pan: pan) == brand)
        #expect(brand.panLengths.contains(pan.count))
    }

    /// The first and last prefix of every range, and the prefixes just outside it.
    @Test(arguments: [
        ("3", nil), ("4", .visa), ("6", nil),
        ("2220", nil), ("2221", .mastercard), ("2720", .mastercard), ("2721", nil),
        ("50", .maestro), ("51", .mastercard), ("55", .mastercard), ("56", .maestro),
        ("58", .maestro), ("59", nil),
        ("33", nil), ("34", .americanExpress), ("35", nil), ("36", nil), ("37", .americanExpress), ("38", nil),
        ("3527", nil), ("3528", .jcb), ("3589", .jcb), ("3590", nil),
        ("6010", nil), ("6011", .discover), ("6012", nil),
        ("643", nil), ("644", .discover), ("649", .discover), ("64", nil),
        ("65", .discover), ("66", nil), ("61", nil),
        ("62", .unionPay), ("622125", .unionPay), ("622126", .unionPay), ("622925", .unionPay),
        ("622926", .unionPay), ("63", nil),
        ("80", nil), ("809999", nil), ("810000", .unionPay), ("817199", .unionPay), ("817200", nil),
        ("6303", nil), ("6304", .maestro), ("6305", nil),
        ("6758", nil), ("6759", .maestro), ("6760", nil), ("6761", .maestro), ("6763", .maestro), ("6764", nil),
        ("676769", nil), ("676770", .maestro), ("676771", nil), ("676773", nil), ("676774", .maestro), ("676775", nil),
        ("286899", nil), ("286900", .carnet), ("286901", nil),
        ("502274", .maestro), ("502275", .carnet), ("502276", .maestro),
        ("506198", .maestro), ("506199", .carnet), ("506499", .carnet), ("506500", .maestro),
        ("588771", .maestro), ("588772", .carnet), ("588773", .maestro),
        ("60462202", nil), ("60462203", .carnet), ("60462204", .carnet), ("60462205", nil),
        ("606332", nil), ("606333", .carnet), ("606334", nil),
        ("627534", .unionPay), ("627535", .carnet), ("627536", .unionPay),
        ("636318", .carnet), ("636379", .carnet), ("639388", .carnet), ("639484", .carnet),
        ("639559", .carnet), ("639560", nil),
    ] as [(String, CardBrand?)])
    func rangeBoundaries(_ prefix: String, _ brand: CardBrand?) {
        #expect(CardBrand.detect(pan: prefix) == brand)
        // Padding to a full PAN must not change the answer.
        let pan = prefix + String(repeating: "0", count: 16 - prefix.count)
        #expect(CardBrand.detect(pan: pan) == brand)
    }

    @Test func aRangeNeedsAllItsDigitsBeforeItCounts() {
        #expect(CardBrand.detect(pan: "5062") == .maestro)
        #expect(CardBrand.detect(pan: "506228") == .carnet)
        #expect(CardBrand.detect(pan: "222") == nil)
        #expect(CardBrand.detect(pan: "6046220") == nil)
    }

    @Test(arguments: ["", " 4111", "4111 1111 1111 1111", "x", "４"])
    func nonDigitsHaveNoBrand(_ text: String) {
        #expect(CardBrand.detect(pan: text) == nil)
    }

    @Test func tableRowsAreWellFormedAndUnambiguous() {
        let rows = CardBrand.iinRanges
        for row in rows {
            #expect(row.low <= row.high, "\(row)")
            #expect(String(row.low).count == row.digits, "\(row)")
            #expect(String(row.high).count == row.digits, "\(row)")
        }
        for (i, a) in rows.enumerated() {
            for b in rows[(i + 1)...] where a.digits == b.digits && a.brand != b.brand {
                #expect(a.high < b.low || b.high < a.low, "\(a) overlaps \(b)")
            }
        }
        #expect(Set(rows.map(\.brand)) == Set(CardBrand.allCases))
    }

    @Test(arguments: [
        (CardBrand.visa, "VISA", 3), (.mastercard, "MASTERCARD", 3), (.americanExpress, "AMERICAN EXPRESS", 4),
        (.discover, "DISCOVER", 3), (.jcb, "JCB", 3), (.unionPay, "UNIONPAY", 3), (.maestro, "MAESTRO", 3),
        (.carnet, "CARNET", 3),
    ])
    func displayNamesAndCVVLengths(_ brand: CardBrand, _ name: String, _ cvv: Int) {
        #expect(brand.displayName == name)
        #expect(brand.cvvLength == cvv)
        #expect(!brand.panLengths.isEmpty)
        #expect(brand.panLengths.allSatisfy { (12...19).contains($0) })
    }
}

struct PANTests {
    @Test(arguments: [
        ("4222222222222", "422222***2222"),
        ("378282246310005", "378282*****0005"),
        ("4111111111111111", "411111******1111"),
        ("5356861234561364", "535686******1364"),
        ("4111111111111111110", "411111*********1110"),
        ("12345678901", "123456*8901"),
        ("1234567890", "******7890"),
        ("12345", "*2345"),
        ("1234", "****"),
        ("", ""),
    ])
    func masked(_ pan: String, _ expected: String) {
        #expect(PAN.masked(pan) == expected)
        #expect(PAN.masked(pan).count == pan.count)
    }

    @Test(arguments: [("4111111111111111", "1111"), ("378282246310005", "0005"), ("12", "12"), ("", "")])
    func last4(_ pan: String, _ expected: String) {
        #expect(PAN.last4(pan) == expected)
    }

    @Test(arguments: knownPANs.map(\.pan) + ["411111111117", "4111111111111111110"])
    func validPANsAreReturned(_ pan: String) throws {
        #expect(try PAN.validate(pan) == pan)
    }

    @Test(arguments: [
        ("", "must not be empty"),
        ("4111 1111 1111 1111", "character 5"),
        ("411111111111111a", "character 16"),
        ("41111111119", "got 11"),
        ("41111111111111111113", "got 20"),
        ("4111111111111112", "Luhn"),
    ])
    func invalidPANsNameTheField(_ pan: String, _ ruleMentions: String) {
        let error = #expect(throws: EMVError.self) { try PAN.validate(pan) }
        #expect(error?.field == "pan")
        #expect(error?.rule.contains(ruleMentions) == true, "\(String(describing: error))")
    }

    @Test func theFieldNameIsTheCallers() {
        let error = #expect(throws: EMVError.self) { try PAN.validate("1", field: "accountNumber") }
        #expect(error?.field == "accountNumber")
    }

    @Test func errorsNeverEchoTheWholePAN() {
        let pan = "4111111111111112"
        let error = #expect(throws: EMVError.self) { try PAN.validate(pan) }
        #expect(error.map { !$0.description.contains(pan) } == true)
    }
}
