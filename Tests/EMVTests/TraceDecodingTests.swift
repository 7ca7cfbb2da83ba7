import Testing
@testable import EMV

@Suite("trace decoding")
struct TraceDecodingTests {
    typealias X = TraceDecoding.Exchange

    /// A contact Visa transaction's trace as the ledger keeps it: the PAN masked, the PIN withheld.
    static let trace: [X] = [
        X(command: "00A404000E315041592E5359532E444446303100", response: "6F1A840E315041592E5359532E4444463031A5088801015F2D02656E9000"),
        X(command: "80A8000002830000", response: "800E1C00080101001001030018010200" + "9000"),
        X(command: "00B2011400", response: "70155A08476173******00105F24033112319F0702FF009000"),
        X(command: "00B2010C00", response: "700B8D098A02910A95059F3704" + "9000"),
        X(command: "0020008008********", response: "9000"),
        X(command: "80AE800000", response: "801280000267 40D85E006B68D906010A03A40000".replacingOccurrences(of: " ", with: "") + "9000"),
        X(command: "008200000A785A1BA9C227C7943030", response: "9000"),
        X(command: "80AE400015" + "3030" + "785A1BA9C227C7943030" + "0000008000" + "11223344", response: "8012" + "40" + "0002" + "1234567890123456" + "06010A03640000" + "9000"),
        X(command: "00B2FF0C00", response: "6A83"),
    ]

    @Test("commands named and described, status words in words, the withheld PIN and the masked PAN kept")
    func steps() throws {
        let d = TraceDecoding.decode(Self.trace, .init(tvr: "0000008000", tsi: "E800", cvmResults: "410302", aid: "A0000000031010", responseCode: "00"))
        #expect(d.steps.map(\.name) == ["SELECT", "GET PROCESSING OPTIONS", "READ RECORD", "READ RECORD", "VERIFY", "GENERATE AC",
                                        "EXTERNAL AUTHENTICATE", "GENERATE AC", "READ RECORD"])
        #expect(d.steps[0].detail == "the PSE (payment system directory)")
        #expect(d.steps[2].detail == "record 1 of SFI 2")
        #expect(d.steps[4].detail == "plaintext PIN, PIN block withheld")
        #expect(d.steps[5].detail == "asks for ARQC")
        #expect(d.steps[8].status == "6A83" && d.steps[8].statusMeaning.lowercased().contains("record not found"))
        #expect(d.steps[8].tlv == nil)
        let record = try #require(d.steps[2].tlv?.first)
        #expect(record.tag == "70" && record.children?.first?.name == "Application Primary Account Number (PAN)")
        #expect(record.children?.first?.value == "476173******0010", "the mask stays")
        #expect(d.steps[3].tlv?.first?.children?.first?.name == "Card Risk Management Data Object List 2 (CDOL2)")
        #expect(d.steps[1].commandData?.first?.tag == "83")
    }

    @Test("the bit strings explained, the cryptograms picked out, who verified them")
    func bitsAndCryptograms() throws {
        let d = TraceDecoding.decode(Self.trace, .init(tvr: "0000008000", tsi: "E800", cvmResults: "410302", aid: "A0000000031010", responseCode: "00"))
        let fields = d.bits.map(\.field)
        #expect(fields == ["TVR", "TSI", "CVM Results", "AIP", "CVR (Visa)"])
        #expect(d.bits[0].set == ["Transaction exceeds floor limit"])
        #expect(d.bits[2].set.contains("Method: Plaintext PIN verification performed by ICC") && d.bits[2].set.contains("Result: successful"))
        #expect(d.bits[3].hex == "1C00")
        let c = try #require(d.cryptograms)
        #expect(c.firstCryptogram == "6740D85E006B68D9" && c.atc == "0002" && c.firstCID == "80 ARQC (go online)")
        #expect(c.cvn == "Visa CVN 10")
        #expect(c.arpc == "785A1BA9C227C794" && c.issuerAuthenticationData == "785A1BA9C227C7943030")
        #expect(c.secondCID == "40 TC (approved offline)")
        #expect(c.authorisationResponseCode == "00", "read from the second GENERATE AC's data where CDOL2 puts 8A")
        #expect(c.verdict.contains("verified the ARQC"))
        let rejected = TraceDecoding.decode(Array(Self.trace.prefix(6)), .init(aid: "A0000000031010", responseCode: "82"))
        #expect(rejected.cryptograms?.verdict.contains("rejected the ARQC") == true)
    }

    @Test("a Mastercard IAD gives its CVN and CVR")
    func mastercard() throws {
        let ac = X(command: "80AE900000", response: "77219F2701809F360200019F2608AABBCCDDEEFF00119F100A0110A000000000000000" + "9000")
        let d = TraceDecoding.decode([ac], .init(aid: "A0000000041010"))
        #expect(d.cryptograms?.cvn == "Mastercard CVN 16")
        #expect(d.cryptograms?.firstCryptogram == "AABBCCDDEEFF0011")
        #expect(d.steps[0].detail == "asks for ARQC with CDA")
        #expect(d.bits.last?.field == "CVR (Mastercard)")
    }

    @Test("whatever a card answered, decoding does not fail", arguments: ["", "zz", "9", "6F", "6FFF9000", "70 8101", "*", "81829000", "80AE", "801280"])
    func hostile(response: String) {
        let d = TraceDecoding.decode([X(command: "80AE800000", response: response), X(command: response, response: response)], .init(aid: "A0000000031010"))
        #expect(d.steps.count == 2)
    }
}
