import Testing
@testable import EMV

/// The card-number mask of the Worldline zh-CN SDK guide.
private let cardMask = "{{9999}} {{9999}} {{9999}} {{9999}} {{999}}"

struct MaskFormatterTests {
    @Test func guideExampleBothWays() throws {
        let f = try MaskFormatter(mask: cardMask)
        // The SDK completes the literal after the last full group; the guide's comment omits
        // that trailing space.
        #expect(f.apply("1234567890123456") == "1234 5678 9012 3456 ")
        #expect(f.remove("1234 5678 9012 3456") == "1234567890123456")
        #expect(f.remove("1234567890123456") == "1234567890123456")
        #expect(f.remove(f.apply("1234567890123456")) == "1234567890123456")
    }

    @Test(arguments: [
        ("", ""),
        ("1", "1"),
        ("123", "123"),
        ("1234", "1234 "),
        ("12345", "1234 5"),
        ("1234 5", "1234 5"),
        ("1234 5678 9012 3456", "1234 5678 9012 3456 "),
        ("1234567890123456789", "1234 5678 9012 3456 789"),
        ("12345678901234567890123", "1234 5678 9012 3456 789"),
        ("1234abcd5678", "1234 5678 "),
        ("1234-5678", "1234 5678 "),
    ])
    func cardMaskApply(_ value: String, _ expected: String) throws {
        #expect(try MaskFormatter(mask: cardMask).apply(value) == expected)
    }

    @Test(arguments: [
        ("1234 5", "12345"),
        ("1234 5678 9012 3456 789", "1234567890123456789"),
        ("12345678901234567890123", "1234567890123456789"),
        ("1234-5678", "12345678"),
        ("", ""),
    ])
    func cardMaskRemove(_ formatted: String, _ expected: String) throws {
        #expect(try MaskFormatter(mask: cardMask).remove(formatted) == expected)
    }

    /// The SDK's own StringFormatterTestCase cases.
    @Test(arguments: [
        ("{{99}} {{99}} {{99}} {{99}} {{99}}", "1234567890", "12 34 56 78 90"),
        ("{{99}} {{99}} {{99}} {{99}} {{99}}", "12345678", "12 34 56 78 "),
        ("{{**}} {{**}} {{**}} {{**}} {{**}}", "!!!!!!!!!!", "!! !! !! !! !!"),
        ("{{aa}} {{aa}} {{aa}} {{aa}} {{aa}}", "abcdefghij", "ab cd ef gh ij"),
    ])
    func sdkCases(_ mask: String, _ value: String, _ expected: String) throws {
        #expect(try MaskFormatter(mask: mask).apply(value) == expected)
    }

    @Test func sdkUnformatCase() throws {
        let f = try MaskFormatter(mask: "{{99}} {{99}} {{99}} {{99}} {{99}}")
        #expect(f.remove("12 34 56 78 90") == "1234567890")
    }

    @Test(arguments: [
        ("{{99}}/{{99}}", "1225", "12/25", "1225"),
        ("{{99}}/{{99}}", "12/25", "12/25", "1225"),
        ("{{99}}/{{99}}", "12", "12/", "12"),
        ("{{99}}/{{99}}", "1", "1", "1"),
        ("{{AA}}-{{9999}}-{{aa}}", "AB1234cd", "AB-1234-cd", "AB1234cd"),
        ("{{AA}}-{{9999}}-{{aa}}", "ABCD", "AB-", "AB"),
        ("({{999}}) {{999}}-{{9999}}", "5551234567", "(555) 123-4567", "5551234567"),
        ("({{999}}) {{999}}-{{9999}}", "", "(", ""),
        ("+52 {{99}} {{9999}} {{9999}}", "+52 5512345678", "+52 55 1234 5678", "5512345678"),
        // A literal equal to the next value character swallows it: the raw number loses its
        // first 5 and 2 to the "+52" prefix. That is what the SDK does.
        ("+52 {{99}} {{9999}} {{9999}}", "5512345678", "+52 51 2345 678", "512345678"),
    ])
    func masksWithOtherLiteralsAndLetters(_ mask: String, _ value: String, _ formatted: String, _ unformatted: String) throws {
        let f = try MaskFormatter(mask: mask)
        #expect(f.apply(value) == formatted)
        #expect(f.remove(value) == unformatted)
        #expect(f.apply(f.apply(value)) == formatted)
    }

    @Test(arguments: [
        (cardMask, 4, "4567350000427412", "**** **** **** 7412"),
        (cardMask, 4, "************7412", "**** **** **** 7412"),
        (cardMask, 4, "4567 3500 0042 7412", "**** **** **** 7412"),
        (cardMask, 0, "4567350000427412", "**** **** **** ****"),
        (cardMask, 20, "4567350000427412", "4567 3500 0042 7412"),
        (cardMask, -1, "4567350000427412", "**** **** **** ****"),
        (cardMask, 4, "4567350000427412123", "**** **** **** ***2 123"),
        ("{{9999}} {{999999}} {{99999}}", 4, "378282246310005", "**** ****** *0005"),
        (cardMask, 4, "", ""),
    ])
    func obfuscation(_ mask: String, _ visible: Int, _ value: String, _ expected: String) throws {
        #expect(try MaskFormatter(mask: mask).obfuscated(last: visible, of: value) == expected)
    }

    @Test(arguments: [
        "",
        "9999 9999",
        "{{9999",
        "9999}}",
        "{{99{{99}}}}",
        "{{}}",
        "{{9x}}",
        "{{99 }}",
        "{9}",
        "{{99}}}",
        "{{99}}{",
    ])
    func malformedMasksAreRefused(_ mask: String) {
        let error = #expect(throws: EMVError.self) { try MaskFormatter(mask: mask) }
        #expect(error?.field == "mask")
    }

    @Test func adjacentGroupsAndLiteralOnlyEdgesParse() throws {
        #expect(try MaskFormatter(mask: "{{99}}{{99}}").apply("1234") == "1234")
        #expect(try MaskFormatter(mask: "<{{9}}>").apply("7") == "<7>")
        #expect(try MaskFormatter(mask: cardMask).mask == cardMask)
    }
}

struct CardFieldValidationTests {
    @Test(arguments: [
        "4111111111111111",
        "4111 1111 1111 1111",
        "3782 822463 10005",
        "5062 2800 0000 0002",
        "6759649826438453",
        "4222222222222",
    ])
    func validCardNumbers(_ value: String) throws {
        try CardFieldValidation.cardNumber(value)
    }

    @Test(arguments: [
        ("", "empty"),
        ("    ", "empty"),
        ("4111-1111-1111-1111", "'-'"),
        ("4111 1111 1111 111a", "'a'"),
        ("9111111111111111", "IIN 911111"),
        ("3611111111111111", "IIN 361111"),
        ("411111111117", "got 12"),
        ("37828224631000", "got 14"),
        ("5555 5555 5555 44440", "got 17"),
        ("4111111111111112", "Luhn"),
        ("5062 2800 0000 0003", "Luhn"),
    ])
    func invalidCardNumbers(_ value: String, _ ruleMentions: String) {
        let error = #expect(throws: EMVError.self) { try CardFieldValidation.cardNumber(value) }
        #expect(error?.field == "cardNumber")
        #expect(error?.rule.contains(ruleMentions) == true, "\(String(describing: error))")
        let digits = value.filter { $0 != " " }
        if digits.count > 6 {
            #expect(error.map { !$0.rule.contains(digits) } == true)
        }
    }

    private static let now = (year: 2025, month: 6)

    @Test(arguments: ["06/25", "0625", "07/25", "12/25", "01/26", "12/50", "1250"])
    func validExpiryDates(_ value: String) throws {
        try CardFieldValidation.expiryDate(value, now: Self.now)
    }

    @Test(arguments: [
        ("", "MM/YY"),
        ("6/25", "MM/YY"),
        ("12-25", "MM/YY"),
        ("12/2025", "MM/YY"),
        ("ab/cd", "MM/YY"),
        ("1a25", "MM/YY"),
        (" 0625", "MM/YY"),
        ("13/25", "01-12"),
        ("00/25", "01-12"),
        ("1325", "01-12"),
        ("05/25", "expired"),
        ("12/24", "expired"),
        ("0100", "expired"),
        ("01/51", "25 years"),
        ("12/99", "25 years"),
    ])
    func invalidExpiryDates(_ value: String, _ ruleMentions: String) {
        let error = #expect(throws: EMVError.self) { try CardFieldValidation.expiryDate(value, now: Self.now) }
        #expect(error?.field == "expiryDate")
        #expect(error?.rule.contains(ruleMentions) == true, "\(String(describing: error))")
    }

    @Test func validThroughTheExpiryMonthAcrossAYearEnd() throws {
        try CardFieldValidation.expiryDate("12/25", now: (year: 2025, month: 12))
        #expect(throws: EMVError.self) { try CardFieldValidation.expiryDate("11/25", now: (year: 2025, month: 12)) }
        try CardFieldValidation.expiryDate("01/26", now: (year: 2025, month: 12))
    }

    @Test(arguments: [
        ("123", CardBrand.visa), ("123", .mastercard), ("123", .carnet), ("1234", .americanExpress),
        ("123", nil), ("1234", nil), ("000", .discover),
    ] as [(String, CardBrand?)])
    func validCVVs(_ value: String, _ brand: CardBrand?) throws {
        try CardFieldValidation.cvv(value, brand: brand)
    }

    @Test(arguments: [
        ("", CardBrand.visa), ("12", .visa), ("1234", .visa), ("123", .americanExpress),
        ("12345", .americanExpress), ("12a", .visa), ("12 3", nil), ("12", nil), ("12345", nil),
        ("", nil), ("١٢٣", nil),
    ] as [(String, CardBrand?)])
    func invalidCVVs(_ value: String, _ brand: CardBrand?) {
        let error = #expect(throws: EMVError.self) { try CardFieldValidation.cvv(value, brand: brand) }
        #expect(error?.field == "cvv")
    }
}
