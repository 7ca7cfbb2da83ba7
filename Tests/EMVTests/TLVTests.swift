import Foundation
import Testing
@testable import EMV

private func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }

// A Visa application's FCI as a card returns it to SELECT, built so every length is checkable
// by hand: 6F(70) > 84(7), A5(59) > 50 "VISA CREDIT", 87, 9F38 (a 12-byte PDOL), 5F2D "en",
// BF0C(20) > 61(18) > 4F, 50 "VISA", 87.
private let fciHex = "6F46" + "8407A0000000031010"
    + "A53B" + "500B5649534120435245444954" + "870101" + "9F380C9F66049F02069F37045F2A02" + "5F2D02656E"
    + "BF0C14" + "6112" + "4F07A0000000031010" + "500456495341" + "870101"

// GET PROCESSING OPTIONS response, format 2: AIP 1980 and a three-entry AFL.
private let gpoHex = "7712" + "82021980" + "940C080101001001030118010200"

// A READ RECORD response with track 2, PAN, expiry, CDOL1, CDOL2 and a CVM list.
private let recordHex = "7062"
    + "57104111111111111111D25122010000000F"
    + "5A084111111111111111"
    + "5F2403251231"
    + "8C159F02069F03069F1A0295055F2A029A039C019F3704"
    + "8D178A029F02069F03069F1A0295055F2A029A039C019F3704"
    + "8E0E000000000000000042031E031F00"

/// `count` nested E1 templates (E1 is context-specific, constructed) around `inner`.
private func nested(_ count: Int, around inner: [UInt8]) -> [UInt8] {
    var out = inner
    for _ in 0..<count { out = [0xE1] + TLV.encodeLength(out.count) + out }
    return out
}

@Suite("EMVTag")
struct EMVTagTests {
    @Test(arguments: [
        ("5A", UInt32(0x5A), false),
        ("9F02", 0x9F02, false),
        ("5F2A", 0x5F2A, false),
        ("BF0C", 0xBF0C, true),
        ("DF8101", 0xDF8101, false),
        ("70", 0x70, true),
        ("6F", 0x6F, true),
        ("1F00", 0x1F00, false),
    ])
    func parsesHexAndReencodes(hex: String, value: UInt32, constructed: Bool) throws {
        let tag = try EMVTag(hex: hex)
        #expect(tag.value == value)
        #expect(tag.bytes == bytes(hex))
        #expect(tag.description == hex)
        #expect(tag.isConstructed == constructed)
    }

    @Test func namesComeFromTheDictionary() {
        #expect(EMVTag(0x9F02).name == "Amount, Authorised (Numeric)")
        #expect(EMVTag(0xBF0C).name == "File Control Information (FCI) Issuer Discretionary Data")
        #expect(EMVTag(0xDF8101).name == nil)
    }

    @Test func orderIsByValue() {
        #expect(EMVTag(0x5A) < EMVTag(0x9F02))
        #expect([EMVTag(0x9F02), 0x5A, 0x82].sorted() == [0x5A, 0x82, 0x9F02])
    }

    @Test func hexThatIsNotOneTagIsRejected() {
        #expect(throws: EMVError(field: "tag", rule: "'9F0201' holds more than one tag (a tag ends at the first byte with bit 8 clear)")) {
            try EMVTag(hex: "9F0201")
        }
        #expect(throws: EMVError(field: "tag", rule: "'9F' is not a BER-TLV tag: tag starting 9F at offset 0 is cut off")) {
            try EMVTag(hex: "9F")
        }
        #expect(throws: EMVError(field: "t", rule: "'' is not a BER-TLV tag: data ends where a tag was expected at offset 0")) {
            try EMVTag(hex: "", field: "t")
        }
        #expect(throws: EMVError(field: "tag", rule: "must be hexadecimal; character 2 is 'G'")) {
            try EMVTag(hex: "9G")
        }
    }
}

@Suite("TLV parse and encode")
struct TLVTests {
    @Test(arguments: [
        ("5A084111111111111111", UInt32(0x5A), "4111111111111111"),
        ("9F0206000000001000", 0x9F02, "000000001000"),
        ("5F2A020978", 0x5F2A, "0978"),
        ("DF8101020102", 0xDF8101, "0102"),
        ("9F3600", 0x9F36, ""),
    ])
    func primitiveRoundTrip(hex: String, tag: UInt32, value: String) throws {
        let parsed = try TLV.parse(hex: hex)
        #expect(parsed == [TLV(EMVTag(tag), bytes(value))])
        #expect(parsed[0].children.isEmpty)
        #expect(Hex.encode(parsed[0].encoded()) == hex)
    }

    // Length forms of EMV Book 3 Annex B: one byte up to 127, 81 xx up to 255, 82 xxxx above,
    // and 83 xxxxxx which the parser also accepts.
    @Test(arguments: [
        (0, "00"), (1, "01"), (127, "7F"), (128, "8180"), (255, "81FF"), (256, "820100"),
        (65535, "82FFFF"), (65536, "83010000"),
    ])
    func lengthForms(length: Int, encoded: String) throws {
        #expect(Hex.encode(TLV.encodeLength(length)) == encoded)
        let value = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
        let data = [0xDF, 0x81, 0x01] + bytes(encoded) + value
        let parsed = try TLV.parse(data)
        #expect(parsed.count == 1)
        #expect(parsed[0].tag == 0xDF8101)
        #expect(parsed[0].value == value)
        #expect(parsed[0].encoded() == data)
    }

    // A non-minimal length (81 05 where 05 would do) is still read; re-encoding shortens it.
    @Test func nonMinimalLengthIsReadAndReencodedShortest() throws {
        let parsed = try TLV.parse(hex: "5A81051234567890")
        #expect(parsed == [TLV(0x5A, bytes("1234567890"))])
        #expect(Hex.encode(parsed[0].encoded()) == "5A051234567890")
        #expect(try TLV.parse(hex: "5A8200021234") == [TLV(0x5A, bytes("1234"))])
        #expect(try TLV.parse(hex: "5A830000021234") == [TLV(0x5A, bytes("1234"))])
    }

    @Test func fciTree() throws {
        let top = try TLV.parse(hex: fciHex)
        #expect(top.count == 1)
        let fci = top[0]
        #expect(fci.tag == 0x6F)
        #expect(fci.value.count == 70)
        #expect(fci.children.map(\.tag) == [0x84, 0xA5])
        #expect(fci.children[0].value == bytes("A0000000031010"))
        let a5 = fci.children[1]
        #expect(a5.value.count == 59)
        #expect(a5.children.map(\.tag) == [0x50, 0x87, 0x9F38, 0x5F2D, 0xBF0C])
        #expect(a5.children[0].value == Array("VISA CREDIT".utf8))
        #expect(a5.children[2].value == bytes("9F66049F02069F37045F2A02"))
        let bf0c = a5.children[4]
        #expect(bf0c.children.map(\.tag) == [0x61])
        let app = bf0c.children[0]
        #expect(app.children == [TLV(0x4F, bytes("A0000000031010")), TLV(0x50, Array("VISA".utf8)), TLV(0x87, [0x01])])
        #expect(Hex.encode(fci.encoded()) == fciHex)
    }

    @Test func templateBuiltFromChildrenEncodesLikeTheCard() throws {
        let app = TLV(0x61, children: [TLV(0x4F, bytes("A0000000031010")), TLV(0x50, Array("VISA".utf8)), TLV(0x87, [0x01])])
        let fci = TLV(0x6F, children: [
            TLV(0x84, bytes("A0000000031010")),
            TLV(0xA5, children: [
                TLV(0x50, Array("VISA CREDIT".utf8)), TLV(0x87, [0x01]), TLV(0x9F38, bytes("9F66049F02069F37045F2A02")),
                TLV(0x5F2D, Array("en".utf8)), TLV(0xBF0C, children: [app]),
            ]),
        ])
        #expect(Hex.encode(fci.encoded()) == fciHex)
        #expect(try TLV.parse(hex: fciHex) == [fci])
    }

    @Test func gpoFormat2() throws {
        let top = try TLV.parse(hex: gpoHex)
        #expect(top == [TLV(0x77, children: [TLV(0x82, bytes("1980")), TLV(0x94, bytes("080101001001030118010200"))])])
        let afl = try AFLEntry.parseList(try #require(top.first(0x94)).value)
        #expect(afl.map(\.sfi) == [1, 2, 3])
    }

    @Test func readRecordPrimitives() throws {
        let top = try TLV.parse(hex: recordHex)
        #expect(top.count == 1)
        #expect(top[0].tag == 0x70)
        #expect(top[0].children.map(\.tag) == [0x57, 0x5A, 0x5F24, 0x8C, 0x8D, 0x8E])
        let p = top.primitives()
        #expect(p.count == 6)
        #expect(p[0x57] == bytes("4111111111111111D25122010000000F"))
        #expect(p[0x5A] == bytes("4111111111111111"))
        #expect(p[0x5F24] == bytes("251231"))
        #expect(p[0x8C] == bytes("9F02069F03069F1A0295055F2A029A039C019F3704"))
        #expect(p[0x8D] == bytes("8A029F02069F03069F1A0295055F2A029A039C019F3704"))
        #expect(p[0x8E] == bytes("000000000000000042031E031F00"))
        #expect(p[0x70] == nil)
        #expect(Hex.encode(top[0].encoded()) == recordHex)
    }

    @Test func primitivesSkipTemplatesAndKeepTheFirstOccurrence() throws {
        let p = try TLV.parse(hex: fciHex).primitives()
        #expect(Set(p.keys) == [0x84, 0x50, 0x87, 0x9F38, 0x5F2D, 0x4F])
        // 50 appears in A5 ("VISA CREDIT") and later in BF0C > 61 ("VISA"): the first wins.
        #expect(p[0x50] == Array("VISA CREDIT".utf8))
        #expect(p[0x6F] == nil && p[0xA5] == nil && p[0xBF0C] == nil && p[0x61] == nil)
    }

    @Test func firstSearchesDepthFirst() throws {
        // 9F01 "AA" sits two templates deep in the first object, 9F01 "BB" at the top level
        // after it: depth-first order finds "AA"; a breadth-first search would find "BB".
        let list = try TLV.parse(hex: "E106E2049F0101AA" + "9F0101BB")
        #expect(list.first(0x9F01)?.value == [0xAA])
        #expect(list.primitives()[0x9F01] == [0xAA])
        // On one object, the object itself is checked before its children.
        #expect(list[0].first(0xE1) == list[0])
        #expect(list[0].first(0xE2)?.children == [TLV(0x9F01, [0xAA])])
        #expect(list.first(0x5A) == nil)
        #expect(list[1].first(0x9F01)?.value == [0xBB])
    }

    @Test func firstFindsTagsInTheFCI() throws {
        let fci = try TLV.parse(hex: fciHex)
        #expect(fci.first(0x9F38)?.value == bytes("9F66049F02069F37045F2A02"))
        #expect(fci.first(0x4F)?.value == bytes("A0000000031010"))
        #expect(fci.first(0x61)?.children.count == 3)
        #expect(fci.first(0x9F02) == nil)
    }

    @Test func paddingBetweenObjectsIsSkipped() throws {
        let parsed = try TLV.parse(hex: "00FF5A0112000000FF9F020100FFFF")
        #expect(parsed == [TLV(0x5A, [0x12]), TLV(0x9F02, [0x00])])
        #expect(try TLV.parse(hex: "0000FFFF00").isEmpty)
        #expect(try TLV.parse([]).isEmpty)
    }

    @Test func paddingInsideATemplateIsSkippedButKeptInItsValue() throws {
        let parsed = try TLV.parse(hex: "700600005A0112FF")
        #expect(parsed.count == 1)
        #expect(parsed[0].children == [TLV(0x5A, [0x12])])
        #expect(parsed[0].value == bytes("00005A0112FF"))
        #expect(Hex.encode(parsed[0].encoded()) == "700600005A0112FF")
    }

    @Test func emptyTemplateHasNoChildren() throws {
        let parsed = try TLV.parse(hex: "7000")
        #expect(parsed == [TLV(0x70, children: [])])
        #expect(parsed[0].value.isEmpty)
    }

    // 15 templates around a primitive is 16 levels of objects, the most accepted; one more
    // template is refused before its contents are read.
    @Test func nestingLimit() throws {
        #expect(TLV.maximumDepth == 16)
        let deepest = nested(16, around: bytes("5A0112"))
        let parsed = try TLV.parse(deepest)
        var node = try #require(parsed.first)
        var levels = 1
        while let child = node.children.first {
            node = child
            levels += 1
        }
        #expect(levels == 17)
        #expect(node == TLV(0x5A, [0x12]))

        // Each E1 header is 2 bytes, so the 17th template's value starts at offset 34.
        #expect(throws: EMVError(field: "TLV", rule: "templates nested deeper than 16 levels at offset 34")) {
            try TLV.parse(nested(17, around: bytes("5A0112")))
        }
    }

    @Test func hostileNestingThrowsInsteadOfOverflowingTheStack() throws {
        // 3,000 well-formed nested templates would recurse 3,000 deep without the limit.
        let data = nested(3000, around: [])
        #expect(data.count > 9000)
        let error = try #require(throws: EMVError.self) { try TLV.parse(data) }
        #expect(error.field == "TLV")
        #expect(error.rule.hasPrefix("templates nested deeper than 16 levels at offset "))
    }

    @Test(arguments: [
        // Value longer than the data left.
        ("5A084111", "tag 5A at offset 0 declares 8 bytes but only 2 remain"),
        ("5A01129F0205000000", "tag 9F02 at offset 3 declares 5 bytes but only 3 remain"),
        // A child may not run past its template, even when the parent's siblings would cover it.
        ("70035A05123456789000", "tag 5A at offset 2 declares 5 bytes but only 1 remain"),
        // Length field cut off.
        ("5A8201", "length of tag 5A at offset 0 is cut off"),
        ("5A81", "length of tag 5A at offset 0 is cut off"),
        ("9F0283", "length of tag 9F02 at offset 0 is cut off"),
        // Length forms EMV does not allow.
        ("5A840000000112", "tag 5A at offset 0 has a 4-byte length field; at most 3 are allowed"),
        ("5A8F", "tag 5A at offset 0 has a 15-byte length field; at most 3 are allowed"),
        ("70805A01120000", "tag 70 at offset 0 uses the indefinite length form (80), which EMV forbids"),
        // No length byte at all.
        ("9F02", "tag 9F02 at offset 0 has no length byte"),
        ("5A0112DF8101", "tag DF8101 at offset 3 has no length byte"),
        // Tag cut off.
        ("9F", "tag starting 9F at offset 0 is cut off"),
        ("DF81", "tag starting DF at offset 0 is cut off"),
        ("5A01125F", "tag starting 5F at offset 3 is cut off"),
        // Tag longer than three bytes.
        ("DF81810101", "tag at offset 0 is longer than 3 bytes"),
        ("7006DF8181818101", "tag at offset 2 is longer than 3 bytes"),
    ])
    func malformedInput(hex: String, rule: String) {
        #expect(throws: EMVError(field: "TLV", rule: rule)) { try TLV.parse(hex: hex) }
    }

    @Test func nonHexInputNamesTheTLVField() {
        #expect(throws: EMVError(field: "TLV", rule: "must be hexadecimal; character 3 is 'Z'")) { try TLV.parse(hex: "5AZ1") }
        #expect(throws: EMVError(field: "TLV", rule: "must have an even number of hex digits, got 3")) { try TLV.parse(hex: "5A0") }
    }

    @Test func spacesInHexAreIgnored() throws {
        #expect(try TLV.parse(hex: "9F02 06 000000001000") == [TLV(0x9F02, bytes("000000001000"))])
    }

    // Random and mutated input must never crash the parser; anything it accepts must re-encode
    // to bytes that parse to the same tree, and anything it refuses must say where.
    @Test func fuzz() {
        var rng = SplitMix64(state: 0x454D_5654_4C56)
        let seeds = [bytes(fciHex), bytes(gpoHex), bytes(recordHex), nested(6, around: bytes("9F0206000000001000"))]
        let palette: [UInt8] = [0x00, 0xFF, 0x1F, 0x5F, 0x9F, 0xBF, 0xDF, 0x80, 0x81, 0x82, 0x83, 0x84, 0x70, 0x77, 0x6F, 0xA5, 0xE1, 0x01, 0x02, 0x7F]
        var inputs: [[UInt8]] = []
        for _ in 0..<2000 {
            inputs.append((0..<Int.random(in: 0...48, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        for _ in 0..<2000 {
            inputs.append((0..<Int.random(in: 0...32, using: &rng)).map { _ in
                Bool.random(using: &rng) ? palette.randomElement(using: &rng)! : UInt8.random(in: 0...8, using: &rng)
            })
        }
        for _ in 0..<4000 {
            var data = seeds.randomElement(using: &rng)!
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                guard !data.isEmpty else { break }
                let i = Int.random(in: 0..<data.count, using: &rng)
                switch Int.random(in: 0..<5, using: &rng) {
                case 0: data[i] = UInt8.random(in: 0...255, using: &rng)
                case 1: data[i] ^= UInt8(1) << UInt8.random(in: 0...7, using: &rng)
                case 2: data.insert(palette.randomElement(using: &rng)!, at: i)
                case 3: data.remove(at: i)
                default: data = Array(data.prefix(i))
                }
            }
            inputs.append(data)
        }

        var accepted = 0, refused = 0
        var problems: [String] = []
        for input in inputs {
            do {
                let tree = try TLV.parse(input)
                accepted += 1
                let reencoded = tree.flatMap { $0.encoded() }
                do {
                    if try TLV.parse(reencoded) != tree { problems.append("tree changed: \(Hex.encode(input))") }
                } catch {
                    problems.append("re-encoding refused (\(error)): \(Hex.encode(input))")
                }
            } catch {
                refused += 1
                if error.field != "TLV" || !error.rule.contains("offset") { problems.append("vague error \(error): \(Hex.encode(input))") }
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        #expect(accepted + refused == 8000)
        // Both paths must be exercised, or the loop proves little.
        #expect(accepted > 500)
        #expect(refused > 500)
    }
}

@Suite("TLV rendering")
struct TLVRenderingTests {
    @Test func fciTreeLines() throws {
        let fci = try #require(TLV.parse(hex: fciHex).first)
        #expect(fci.treeLines() == [
            "6F File Control Information (FCI) Template [70]",
            "  84 Dedicated File (DF) Name [7]: A0000000031010",
            "  A5 File Control Information (FCI) Proprietary Template [59]",
            "    50 Application Label [11]: 5649534120435245444954 \"VISA CREDIT\"",
            "    87 Application Priority Indicator [1]: 01",
            "    9F38 Processing Options Data Object List (PDOL) [12]: 9F66049F02069F37045F2A02",
            "    5F2D Language Preference [2]: 656E \"en\"",
            "    BF0C File Control Information (FCI) Issuer Discretionary Data [20]",
            "      61 Application Template [18]",
            "        4F Application Dedicated File (ADF) Name [7]: A0000000031010",
            "        50 Application Label [4]: 56495341 \"VISA\"",
            "        87 Application Priority Indicator [1]: 01",
        ])
    }

    @Test func treeLinesOfGPOAndUnknownTags() throws {
        let gpo = try #require(TLV.parse(hex: gpoHex).first)
        #expect(gpo.treeLines(indent: 1) == [
            "  77 Response Message Template Format 2 [18]",
            "    82 Application Interchange Profile [2]: 1980",
            "    94 Application File Locator (AFL) [12]: 080101001001030118010200",
        ])
        #expect(TLV(0xDF8101, [0x01, 0x02]).treeLines() == ["DF8101 [2]: 0102"])
    }

    @Test func textOnlyForPrintableAlphanumericFields() {
        #expect(TLV(0x50, Array("VISA CREDIT".utf8)).text == "VISA CREDIT")
        #expect(TLV(0x5F20, Array("CARDHOLDER/TEST".utf8)).text == "CARDHOLDER/TEST")
        #expect(TLV(0x5F55, Array("GB".utf8)).text == "GB")
        // A binary field is never text, even when its bytes happen to be printable.
        #expect(TLV(0x4F, Array("ABCDE".utf8)).text == nil)
        // Numeric fields are BCD, not text.
        #expect(TLV(0x5F2A, [0x30, 0x31]).text == nil)
        // Unprintable bytes or an empty value give no text.
        #expect(TLV(0x50, [0x56, 0x0A]).text == nil)
        #expect(TLV(0x50, [0x56, 0x7F]).text == nil)
        #expect(TLV(0x50, []).text == nil)
        #expect(TLV(0xDF8101, Array("ABC".utf8)).text == nil)
    }

    @Test func jsonObjectOfFCI() throws {
        let fci = try #require(TLV.parse(hex: fciHex).first)
        let json = fci.jsonObject
        #expect(json.tag == "6F")
        #expect(json.name == "File Control Information (FCI) Template")
        #expect(json.length == 70)
        #expect(json.value == nil)
        #expect(json.text == nil)
        let a5 = try #require(json.children?.last)
        #expect(a5.children?.map(\.tag) == ["50", "87", "9F38", "5F2D", "BF0C"])
        #expect(a5.children?.first == TLVJSON(tag: "50", name: "Application Label", length: 11,
                                               value: "5649534120435245444954", text: "VISA CREDIT", children: nil))
        #expect(json.children?.first == TLVJSON(tag: "84", name: "Dedicated File (DF) Name", length: 7,
                                                 value: "A0000000031010", text: nil, children: nil))
        let app = try #require(a5.children?.last?.children?.first)
        #expect(app.tag == "61")
        #expect(app.children?.map(\.tag) == ["4F", "50", "87"])
    }

    @Test func jsonEncodingOmitsAbsentFields() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let label = String(decoding: try encoder.encode(TLV(0x50, Array("VISA CREDIT".utf8)).jsonObject), as: UTF8.self)
        #expect(label == #"{"length":11,"name":"Application Label","tag":"50","text":"VISA CREDIT","value":"5649534120435245444954"}"#)
        let unknown = String(decoding: try encoder.encode(TLV(0xDF8101, [0xAB]).jsonObject), as: UTF8.self)
        #expect(unknown == #"{"length":1,"tag":"DF8101","value":"AB"}"#)
        let template = String(decoding: try encoder.encode(TLV(0x70, children: [TLV(0x5A, [0x12])]).jsonObject), as: UTF8.self)
        #expect(template == #"{"children":[{"length":1,"name":"Application Primary Account Number (PAN)","tag":"5A","value":"12"}],"length":3,"name":"READ RECORD Response Message Template","tag":"70"}"#)
    }
}
