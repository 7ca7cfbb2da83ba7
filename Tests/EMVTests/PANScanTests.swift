@testable import EMV
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

    @Test("the byte scan of ASCII text finds what the character scan finds, at the same place")
    func asciiScanAgreesWithCharacterScan() {
        var random = SplitMix64(state: 0x5CA7)
        let pans = ["4761739001010010", "5413330089604004", "378282246310005", "6011111111111117", "4111111111111111"]
        let alphabet = Array("0123456789 -ax.&=\r\n")
        var found = 0
        for _ in 0..<20_000 {
            var text = ""
            for _ in 0..<Int(random.next() % 40) {
                if random.next() % 12 == 0 {
                    // A card number, sometimes grouped in fours.
                    let pan = pans[Int(random.next() % UInt64(pans.count))]
                    if random.next() % 2 == 0 {
                        text += pan
                    } else {
                        let separator = random.next() % 2 == 0 ? " " : "-"
                        text += stride(from: 0, to: pan.count, by: 4).map { i in
                            String(pan.dropFirst(i).prefix(4))
                        }.joined(separator: separator)
                    }
                } else {
                    text.append(alphabet[Int(random.next() % UInt64(alphabet.count))])
                }
            }
            let bytes = PAN.asciiLikelyPANRange(in: text), characters = PAN.characterLikelyPANRange(in: text)
            #expect(bytes == characters, "\(text.debugDescription)")
            #expect(PAN.likelyPANRange(in: text) == characters, "\(text.debugDescription)")
            if characters != nil { found += 1 }
        }
        #expect(found > 1000)
    }

    @Test("a digit a combining mark follows is no digit of a card number")
    func combiningMarks() {
        #expect(!PAN.looksLikeItHoldsAPAN("476173900101001\u{0301}0"))
        #expect(PAN.looksLikeItHoldsAPAN("é 4761739001010010"))
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
