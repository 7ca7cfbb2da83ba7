import Testing
import EMV

@Suite("Trace redaction")
struct TraceRedactionTests {
    let pan = "4761739001010010"

    @Test func everyOccurrenceOfThePANIsMaskedAndNothingElseChanges() {
        // A READ RECORD answer with the PAN in 5A and again at the head of track 2 (57).
        let hex = "70205A0847617390010100105713476173900101001" + "0D25122010000000000009000"
        let masked = TraceRedaction.masking(pan: pan, in: hex)
        #expect(masked == "70205A08476173******00105713476173******0010" + "D25122010000000000009000")
        #expect(!masked.contains(pan))
    }

    @Test func aPANAtTheVeryEndOrAlone() {
        #expect(TraceRedaction.masking(pan: pan, in: "5A08" + pan) == "5A08476173******0010")
        #expect(TraceRedaction.masking(pan: pan, in: pan) == "476173******0010")
    }

    @Test func withoutThePANTheTextIsReturnedAsItIs() {
        #expect(TraceRedaction.masking(pan: pan, in: "9000") == "9000")
        #expect(TraceRedaction.masking(pan: pan, in: "") == "")
        // A prefix of the PAN cut off by the end of the text is not the PAN.
        #expect(TraceRedaction.masking(pan: pan, in: "80CA" + pan.dropLast()) == "80CA" + pan.dropLast())
        #expect(TraceRedaction.masking(pan: pan, in: "4761473990010100104761") == "4761473990010100104761")
    }

    @Test func aTooShortPANMasksNothing() {
        #expect(TraceRedaction.masking(pan: "47617390", in: "5A0447617390") == "5A0447617390")
    }

    @Test func aVerifyKeepsItsHeaderAndWithholdsThePINBlock() {
        #expect(TraceRedaction.command([0x00, 0x20, 0x00, 0x80, 0x08, 0x24, 0x12, 0x34, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
                == "0020008008" + String(repeating: "*", count: 16))
        #expect(TraceRedaction.command([0x00, 0xB2, 0x01, 0x0C, 0x00]) == "00B2010C00")
    }
}
