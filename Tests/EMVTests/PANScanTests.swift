import EMV
import Testing

@Suite("PAN.likelyPANRange: card numbers in request text")
struct PANScanTests {
    @Test("finds card numbers, plain or as people type them", arguments: [
        "4761739001010010", "x4761739001010010y", "order 4761 7390 0101 0010 today", "4761-7390-0101-0010",
        "5413330089604004", "378282246310005", "6011111111111117", "card=4111111111111111&x=1",
    ])
    func finds(_ text: String) {
        #expect(PAN.looksLikeItHoldsAPAN(text), "\(text)")
    }

    @Test("leaves other numbers alone", arguments: [
        "", "12345678901234567890123456789012",  // a 32-digit reference: no card number of its own
        "4761739001010011",                      // fails the Luhn check
        "476173900101001",                       // 15 digits: not a Visa length
        "9999999999999995",                      // Luhn-valid, no card brand's IIN
        "20261124000012",                        // a date-time stamp
        "4761  7390 0101 0010",                  // two separators: not typed as one number
        "47617390010100100",                     // 17 digits: a longer number
        "demo-1764000000", "+52 55 1234 5678",
        "47617390-0101-0010-8000-000000000000",  // a UUID of digits: its 8-4-4-4-12 groups are no card number
        "4761739-001010010",                     // a group of 7: not how a card number is typed
    ])
    func ignores(_ text: String) {
        #expect(!PAN.looksLikeItHoldsAPAN(text), "\(text)")
    }

    @Test("the range covers the number and its separators only")
    func range() throws {
        let text = "ref 4761 7390 0101 0010."
        let found = try #require(PAN.likelyPANRange(in: text))
        #expect(text[found] == "4761 7390 0101 0010")
    }

    @Test("control characters are found with their position, C0, DEL and C1 alike")
    func controls() {
        #expect(ControlCharacters.first(in: "plain text é€😀") == nil)
        for (text, position, value) in [("ab\u{0}cd", 3, 0), ("\n", 1, 0x0A), ("x\u{7F}", 2, 0x7F), ("éa\u{85}", 3, 0x85)] {
            let found = ControlCharacters.first(in: text)
            #expect(found?.position == position && found?.scalar.value == UInt32(value), "\(text.debugDescription)")
        }
        #expect(ControlCharacters.describe((9, "\u{0}")) == "U+0000 at position 9")
    }
}
