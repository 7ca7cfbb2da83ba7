import Foundation
import Testing

/// `cardbench iso8583 decode`: a message field by field with names, card data masked; its frames,
/// JSON, and the errors of a bad packager, framing or message.
@Suite("cardbench iso8583 decode")
struct ISO8583CommandTests {
    /// A 0200 in pyiso8583's default spec: fields 2, 4, 11, 35, 52, 55 (written out by hand).
    static let sale: String = {
        let ascii = { (s: String) in s.utf8.map { String(format: "%02X", $0) }.joined() }
        return ascii("0200") + "5020000020001200" + ascii("164761730000000119") + ascii("000000001050") + ascii("000042")
            + ascii("244761730000000119=2812201") + "1122334455667788" + ascii("011") + "9F2608AABBCCDDEEFF0011"
    }()

    @Test func decodesAndMasks() throws {
        let r = try run(["iso8583", "decode", Self.sale])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.first == "MTI 0200 (financial request)")
        #expect(r.stdout.contains("  2 Primary Account Number (PAN): 476173******0119"))
        #expect(r.stdout.contains(" 35 Track 2 Data: 476173******0119=(withheld)"))
        #expect(r.stdout.contains(" 52 PIN Data: (PIN block withheld)"))
        #expect(r.stdout.contains("      9F26 Application Cryptogram: AABBCCDDEEFF0011"))
        #expect(!r.stdout.contains("4761730000000119") && !r.stdout.contains("1122334455667788"))
        let framed = try run(["iso8583", "decode", "--framing", "nac", String(format: "%04X", Self.sale.count / 2 + 5) + "6000010002" + Self.sale, "--json"])
        #expect(framed.status == 0, "\(framed.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(framed.stdout.utf8)) as? [String: Any])
        #expect(object["mti"] as? String == "0200" && (object["fields"] as? [Any])?.count == 6)
    }

    @Test("bad input: exit 2 naming what is wrong", arguments: [
        (["iso8583", "decode", "--packager", "iso93", "3038"], "--packager: 'iso93' is not one of"),
        (["iso8583", "decode", "--framing", "hdlc", "3038"], "--framing: 'hdlc' is not one of"),
        (["iso8583", "decode", "3032"], "MTI at byte 0: needs 4 bytes"),
        (["iso8583", "decode", "--framing", "binary2", "0009" + "30323030"], "the header announces 9 bytes, 4 follow"),
        (["iso8583", "decode", "--packager", "jpos-iso87a", "30383030" + "4730303030303030" + "3030303030303030"], "bitmap at byte 4"),
    ])
    func badInput(arguments: [String], expected: String) throws {
        let r = try run(arguments)
        #expect(r.status == 2, "\(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains(expected), "\(r.stderr)")
    }
}
