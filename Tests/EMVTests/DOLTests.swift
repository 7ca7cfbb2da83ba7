import Testing
@testable import EMV

private func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }


// A Visa qVSDC-style PDOL: TTQ, amount, unpredictable number, currency.
private let visaPDOL = "9F66049F02069F37045F2A02"
// Visa CDOL1: amount, other amount, country, TVR, currency, date, type, UN.
private let visaCDOL1 = "9F02069F03069F1A0295055F2A029A039C019F3704"
// M/Chip CDOL1: Visa's fields plus terminal type, DAC, ICC dynamic number, CVM results.
private let mastercardCDOL1 = "9F02069F03069F1A0295055F2A029A039C019F37049F35019F45029F4C089F3403"

private func entry(_ tag: UInt32, _ length: Int) -> DOL.Entry { DOL.Entry(tag: EMVTag(tag), length: length) }

@Suite("DOL")
struct DOLTests {
    @Test func parsesAVisaPDOL() throws {
        let dol = try DOL.parse(bytes(visaPDOL))
        #expect(dol.entries == [entry(0x9F66, 4), entry(0x9F02, 6), entry(0x9F37, 4), entry(0x5F2A, 2)])
        #expect(dol.dataLength == 16)
        #expect(Hex.encode(dol.bytes) == visaPDOL)
    }

    @Test func parsesCDOL1s() throws {
        let visa = try DOL.parse(bytes(visaCDOL1), field: "CDOL1")
        #expect(visa.entries.map(\.tag) == [0x9F02, 0x9F03, 0x9F1A, 0x95, 0x5F2A, 0x9A, 0x9C, 0x9F37])
        #expect(visa.entries.map(\.length) == [6, 6, 2, 5, 2, 3, 1, 4])
        #expect(visa.dataLength == 29)
        #expect(Hex.encode(visa.bytes) == visaCDOL1)

        let mc = try DOL.parse(bytes(mastercardCDOL1))
        #expect(mc.entries.count == 12)
        #expect(Array(mc.entries.suffix(4)) == [entry(0x9F35, 1), entry(0x9F45, 2), entry(0x9F4C, 8), entry(0x9F34, 3)])
        #expect(mc.dataLength == 43)
        #expect(Hex.encode(mc.bytes) == mastercardCDOL1)
    }

    @Test func emptyDOL() throws {
        let dol = try DOL.parse([])
        #expect(dol.entries.isEmpty)
        #expect(dol.dataLength == 0)
        #expect(dol.fill { _ in [0x01] } == [])
        #expect(try dol.split([]) == [:])
    }

    @Test func threeByteTagsAndZeroLengths() throws {
        let dol = try DOL.parse(bytes("DF8101039F0200"))
        #expect(dol.entries == [entry(0xDF8101, 3), entry(0x9F02, 0)])
        #expect(dol.dataLength == 3)
        #expect(Hex.encode(dol.bytes) == "DF8101039F0200")
    }

    @Test(arguments: [
        ("9F02", "tag 9F02 at offset 0 has no length byte"),
        ("9F02069F37", "tag 9F37 at offset 3 has no length byte"),
        ("95", "tag 95 at offset 0 has no length byte"),
        ("9F0280", "tag 9F02 at offset 0 asks for length 80; DOL lengths are one byte below 80"),
        ("9F0206958105", "tag 95 at offset 3 asks for length 81; DOL lengths are one byte below 80"),
        ("9F02FF", "tag 9F02 at offset 0 asks for length FF; DOL lengths are one byte below 80"),
        ("9F", "tag starting 9F at offset 0 is cut off"),
        ("DF81818101", "tag at offset 0 is longer than 3 bytes"),
    ])
    func parseErrors(hex: String, rule: String) {
        #expect(throws: EMVError(field: "PDOL", rule: rule)) { try DOL.parse(bytes(hex), field: "PDOL") }
    }

    @Test func defaultFieldNameIsDOL() {
        #expect(throws: EMVError(field: "DOL", rule: "tag 9F02 at offset 0 has no length byte")) { try DOL.parse(bytes("9F02")) }
    }

    @Test func fillsAPDOLInOrder() throws {
        let dol = try DOL.parse(bytes(visaPDOL))
        let source: [EMVTag: [UInt8]] = [
            0x9F66: bytes("36004000"), 0x9F02: bytes("1000"), 0x9F37: bytes("52BF4585"), 0x5F2A: bytes("0978"),
        ]
        let data = dol.fill { source[$0] }
        // 9F02 is numeric, so the two-byte 1000 is right-justified with leading zeros.
        #expect(Hex.encode(data) == "36004000" + "000000001000" + "52BF4585" + "0978")
        #expect(data.count == dol.dataLength)
        #expect(try dol.split(data) == [
            0x9F66: bytes("36004000"), 0x9F02: bytes("000000001000"), 0x9F37: bytes("52BF4585"), 0x5F2A: bytes("0978"),
        ])
    }

    @Test func fillsACDOL1() throws {
        let dol = try DOL.parse(bytes(visaCDOL1))
        let source: [EMVTag: [UInt8]] = [
            0x9F02: bytes("000000004000"), 0x9F03: bytes("000000000000"), 0x9F1A: bytes("0124"), 0x95: bytes("8000048000"),
            0x5F2A: bytes("0124"), 0x9A: bytes("191105"), 0x9C: bytes("01"), 0x9F37: bytes("52BF4585"),
        ]
        #expect(Hex.encode(dol.fill { source[$0] }) == "000000004000000000000000012480000480000124191105" + "0152BF4585")
    }

    // EMV Book 3 §5.4: how a value of the wrong length is shaped into its DOL slot.
    @Test(arguments: [
        // n: leading zeros when short, leftmost bytes dropped when long.
        (UInt32(0x9F02), 6, "1234", "000000001234"),
        (0x9F02, 6, "1122334455667788", "334455667788"),
        (0x9A, 2, "191105", "1105"),
        (0x5F2A, 3, "0978", "000978"),
        // cn: trailing FF when short, rightmost bytes dropped when long.
        (0x5A, 10, "4111111111111111", "4111111111111111FFFF"),
        (0x5A, 4, "4111111111111111", "41111111"),
        (0x9F20, 3, "12", "12FFFF"),
        // b: trailing zeros when short, rightmost bytes dropped when long.
        (0x9F37, 2, "11223344", "1122"),
        (0x9F37, 6, "11223344", "112233440000"),
        (0x95, 5, "80000480", "8000048000"),
        // an and ans: as b.
        (0x9F1C, 8, "5445524D3031", "5445524D30310000"),
        (0x9F1C, 4, "5445524D494E414C3031", "5445524D"),
        (0x9F4E, 4, "414243", "41424300"),
        // A tag the dictionary does not know is treated as binary.
        (0xDF8101, 4, "AABB", "AABB0000"),
        (0xDF8101, 1, "AABB", "AA"),
        // Exact lengths pass through untouched, whatever the format.
        (0x9F02, 6, "000000001000", "000000001000"),
        (0x5A, 8, "4111111111111111", "4111111111111111"),
        (0x9F37, 4, "DEADBEEF", "DEADBEEF"),
        // A zero-length slot takes nothing.
        (0x9F02, 0, "1234", ""),
    ])
    func fillShapesValues(tag: UInt32, length: Int, value: String, expected: String) {
        let dol = DOL(entries: [entry(tag, length)])
        #expect(Hex.encode(dol.fill { $0 == EMVTag(tag) ? bytes(value) : nil }) == expected)
    }

    @Test("an empty value is absent: zeros even for cn (5A) and n (9F02)")
    func emptyValuesAreZeros() throws {
        let dol = try DOL.parse(Hex.decode("5A089F0206"))
        #expect(Hex.encode(dol.fill { _ in [] }) == "0000000000000000" + "000000000000")
    }

    @Test func missingValuesAreZeros() {
        let dol = DOL(entries: [entry(0x9F02, 6), entry(0x5A, 4), entry(0x9F1C, 3), entry(0xDF8101, 2)])
        #expect(Hex.encode(dol.fill { _ in nil }) == "000000000000" + "00000000" + "000000" + "0000")
    }

    // A constructed tag cannot be sent in a DOL; its slot is zeros even when the terminal has it.
    @Test(arguments: [UInt32(0x70), 0xBF0C, 0x77, 0xE1])
    func constructedTagsAreZeros(tag: UInt32) {
        let dol = DOL(entries: [entry(tag, 4), entry(0x9C, 1)])
        #expect(Hex.encode(dol.fill { $0 == EMVTag(tag) ? bytes("5A0112") : [0x01] }) == "0000000001")
    }

    @Test func sourceIsAskedForEachTagInOrder() {
        let dol = DOL(entries: [entry(0x9F37, 4), entry(0x9F02, 6), entry(0x9F37, 2)])
        var asked: [EMVTag] = []
        _ = dol.fill { asked.append($0); return nil }
        #expect(asked == [0x9F37, 0x9F02, 0x9F37])
    }

    @Test func splitRejectsTheWrongLength() throws {
        let dol = try DOL.parse(bytes(visaPDOL))
        #expect(throws: EMVError(field: "DOL data", rule: "must be 16 bytes for this DOL, got 15")) {
            try dol.split([UInt8](repeating: 0, count: 15))
        }
        #expect(throws: EMVError(field: "PDOL data", rule: "must be 16 bytes for this DOL, got 17")) {
            try dol.split([UInt8](repeating: 0, count: 17), field: "PDOL data")
        }
    }

    @Test func splitOfACDOL1() throws {
        let dol = try DOL.parse(bytes(mastercardCDOL1))
        let data = bytes("000000009999" + "000000000000" + "0124" + "8000000000" + "0124" + "209906" + "00" + "ABCDEF12"
            + "22" + "0000" + "0102030405060708" + "1F0302")
        let split = try dol.split(data)
        #expect(split.count == 12)
        #expect(split[0x9F02] == bytes("000000009999"))
        #expect(split[0x9F37] == bytes("ABCDEF12"))
        #expect(split[0x9F4C] == bytes("0102030405060708"))
        #expect(split[0x9F34] == bytes("1F0302"))
        // What a card splits, a terminal fills back identically.
        #expect(dol.fill { split[$0] } == data)
    }

    // A DOL that parses re-encodes to the same bytes; random bytes never crash the parser.
    @Test func fuzz() {
        var rng = SplitMix64(state: 0xD0_1D_01)
        var accepted = 0
        for _ in 0..<5000 {
            let data = (0..<Int.random(in: 0...16, using: &rng)).map { _ in
                Bool.random(using: &rng) ? [0x9F, 0x5F, 0xDF, 0x81, 0x02, 0x04, 0x80][Int.random(in: 0..<7, using: &rng)]
                    : UInt8.random(in: 0...255, using: &rng)
            }
            do {
                let dol = try DOL.parse(data)
                accepted += 1
                #expect(dol.bytes == data)
                #expect(dol.fill { _ in nil }.count == dol.dataLength)
            } catch {
                #expect(error.field == "DOL")
                #expect(error.rule.contains("offset"))
            }
        }
        #expect(accepted > 100)
    }
}

@Suite("AFL")
struct AFLTests {
    @Test func parsesARealAFL() throws {
        let afl = try AFLEntry.parseList(bytes("080101001001030118010200"))
        #expect(afl == [
            AFLEntry(sfi: 1, firstRecord: 1, lastRecord: 1, offlineAuthenticationRecords: 0),
            AFLEntry(sfi: 2, firstRecord: 1, lastRecord: 3, offlineAuthenticationRecords: 1),
            AFLEntry(sfi: 3, firstRecord: 1, lastRecord: 2, offlineAuthenticationRecords: 0),
        ])
        #expect(afl.map(\.records) == [1...1, 1...3, 1...2])
        #expect(Hex.encode(afl.flatMap(\.bytes)) == "080101001001030118010200")
    }

    @Test(arguments: [
        ("08010100", 1, 1, 1, 0),
        ("F0050A06", 30, 5, 10, 6),
        ("10FEFF02", 2, 254, 255, 2),
        ("18010101", 3, 1, 1, 1),
    ])
    func boundaryEntries(hex: String, sfi: Int, first: Int, last: Int, oda: Int) throws {
        let afl = try AFLEntry.parseList(bytes(hex))
        #expect(afl == [AFLEntry(sfi: sfi, firstRecord: first, lastRecord: last, offlineAuthenticationRecords: oda)])
        #expect(Hex.encode(afl[0].bytes) == hex)
    }

    @Test(arguments: [
        ("", "length must be a non-zero multiple of 4, got 0"),
        ("080101", "length must be a non-zero multiple of 4, got 3"),
        ("0801010010", "length must be a non-zero multiple of 4, got 5"),
        ("00010100", "entry 1: SFI must be 1–30, got 0"),
        ("F8010100", "entry 1: SFI must be 1–30, got 31"),
        ("09010100", "entry 1: the low 3 bits of the SFI byte must be zero, got 09"),
        ("0C010100", "entry 1: the low 3 bits of the SFI byte must be zero, got 0C"),
        ("08000100", "entry 1: first record must be at least 1"),
        ("08030200", "entry 1: last record 2 is before first record 3"),
        ("08010203", "entry 1: 3 offline-authentication records but only 2 records"),
        ("0801010010000100", "entry 2: first record must be at least 1"),
        ("080101001801020018040100", "entry 3: last record 1 is before first record 4"),
    ])
    func errors(hex: String, rule: String) {
        #expect(throws: EMVError(field: "AFL", rule: rule)) { try AFLEntry.parseList(bytes(hex)) }
    }
}
