import EMV
import Testing
@testable import ISO8583
import Terminal

@Suite struct PackerTests {
    static let pan = "4761730000000119"

    /// A sale with a field of every kind: LLVAR numeric, fixed numeric, track, text, binary, LLLVAR
    /// binary, and (with `secondary`) fields of the second bitmap.
    static func sale(secondary: Bool = false) -> ISOMessage {
        var m = ISOMessage(mti: "0200")
        m[2] = pan
        m[3] = "000000"
        m[4] = "000000001050"
        m[7] = "1125093015"
        m[11] = "000042"
        m[14] = "2812"
        m[22] = "051"
        m[23] = "001"
        m[28] = "C00000150"
        m[35] = pan + "=28122011234567"
        m[37] = "533009000042"
        m[41] = "CBTERM01"
        m[42] = "CARDBENCH000001"
        m[49] = "484"
        m.fields[52] = .bytes([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0])
        m.fields[55] = .bytes(TLV(0x9F26, [1, 2, 3, 4, 5, 6, 7, 8]).encoded() + TLV(0x9F36, [0, 7]).encoded())
        if secondary {
            m[70] = "301"
            m[90] = "0200" + "000041" + "1125093015" + String(repeating: "0", count: 22)
            m[102] = "ACCOUNT-1"
        }
        return m
    }

    @Test func tableHasEveryField() {
        #expect(Packager.iso87.count == 129)
        #expect(Packager.iso87[2].length == .llvar(max: 19))
        #expect(Packager.iso87[35].content == .track)
        #expect(Packager.iso87[52] == FieldSpec(number: 52, name: "PIN Data", content: .binary, length: .fixed(8)))
        #expect(Packager.iso87[90].length == .fixed(42))
        #expect(Packager.iso87[104].name == "Transaction Description")
        #expect(Packager.iso87[128].name == "MAC")
        for (i, f) in Packager.iso87.enumerated() { #expect(f.number == i) }
    }

    @Test(arguments: Packager.all, [false, true])
    func roundTrip(packager: Packager, secondary: Bool) throws {
        let m = Self.sale(secondary: secondary)
        let bytes = try packager.pack(m)
        let back = try packager.unpack(bytes)
        #expect(back == m)
    }

    /// jPOS ISO87BPackager's bytes, written out by hand from its field packagers.
    @Test func jposBinaryBytes() throws {
        var m = ISOMessage(mti: "0200")
        m[2] = "4761730000000000119"  // 19 digits: IFB_LLNUM right-pads with a 0 nibble
        m[3] = "000000"
        m[22] = "051"  // IFB_NUMERIC left-pads
        m[35] = "4761=2812"
        m[41] = "CBTERM01"
        m.fields[52] = .bytes([1, 2, 3, 4, 5, 6, 7, 8])
        let bytes = try Packager.jposISO87B.pack(m)
        // Field by field rather than as one string: the track is odd (9 characters).
        #expect(Array(bytes[0..<2]) == [0x02, 0x00])
        #expect(Hex.encode(Array(bytes[2..<10])) == "6000040020801000")
        #expect(Hex.encode(Array(bytes[10..<21])) == "1947617300000000001190")
        #expect(Hex.encode(Array(bytes[21..<24])) == "000000")
        #expect(Hex.encode(Array(bytes[24..<26])) == "0051")
        #expect(Hex.encode(Array(bytes[26..<32])) == "094761D28120")
        #expect(Array(bytes[32..<40]) == Array("CBTERM01".utf8))
        #expect(Hex.encode(Array(bytes[40...])) == "0102030405060708")
        #expect(try Packager.jposISO87B.unpack(bytes) == m)
    }

    /// jPOS ISO87APackager: ASCII everywhere, the bitmap in hex, the PIN block as 16 hex characters.
    @Test func jposASCIIBytes() throws {
        var m = ISOMessage(mti: "0800")
        m[11] = "000001"
        m.fields[52] = .bytes([0xAB, 0, 0, 0, 0, 0, 0, 0xCD])
        m[70] = "301"
        let text = String(decoding: try Packager.jposISO87A.pack(m), as: UTF8.self)
        #expect(text == "0800" + "8020000000001000" + "0400000000000000" + "000001" + "AB000000000000CD" + "301")
    }

    @Test func pyiso8583DefaultBytes() throws {
        var m = ISOMessage(mti: "0810")
        m[39] = "00"
        m.fields[55] = .bytes([0x91, 0x02, 0xAA, 0xBB])
        let bytes = try Packager.pyiso8583Default.pack(m)
        #expect(Array(bytes[0..<4]) == Array("0810".utf8))
        #expect(Hex.encode(Array(bytes[4..<12])) == "0000000002000200")
        #expect(Array(bytes[12...]) == Array("00".utf8) + Array("004".utf8) + [0x91, 0x02, 0xAA, 0xBB])
        // default_ascii: the bitmap and field 55 as hex, its length counting characters.
        let ascii = String(decoding: try Packager.pyiso8583DefaultASCII.pack(m), as: UTF8.self)
        #expect(ascii == "0810" + "0000000002000200" + "00" + "008" + "9102AABB")
    }

    @Test func lengthsAtTheirLimits() throws {
        let p = Packager.pyiso8583Default
        var m = ISOMessage(mti: "0200")
        m[2] = String(repeating: "4", count: 19)
        m.fields[55] = .bytes([UInt8](repeating: 0x5A, count: 255))
        #expect(try p.unpack(p.pack(m)) == m)
        m[2] = String(repeating: "4", count: 20)
        #expect(throws: ISO8583Error(part: "field 2 (Primary Account Number (PAN))", reason: "20 digits, at most 19")) { try p.pack(m) }
        m[2] = "4"
        m.fields[55] = .bytes([UInt8](repeating: 0x5A, count: 256))
        #expect(throws: ISO8583Error(part: "field 55 (ICC Data)", reason: "256 bytes, at most 255")) { try p.pack(m) }
        // jPOS allows 999 bytes in field 55; an LLL prefix of 999 is read, 1000 cannot be written.
        m.fields[55] = .bytes([UInt8](repeating: 0x5A, count: 999))
        #expect(try Packager.jposISO87B.unpack(Packager.jposISO87B.pack(m)) == m)
        m.fields[55] = .bytes([UInt8](repeating: 0x5A, count: 1000))
        #expect(throws: ISO8583Error.self) { try Packager.jposISO87A.pack(m) }
    }

    @Test func malformedInputGetsClearErrors() throws {
        let p = Packager.pyiso8583Default
        let good = try p.pack(Self.sale(secondary: true))
        // Every truncation fails, naming where.
        for n in 0..<good.count {
            #expect(throws: ISO8583Error.self) { try p.unpack(Array(good[0..<n])) }
        }
        #expect(throws: ISO8583Error(part: "message", offset: good.count, reason: "1 bytes left over after the last field the bitmap names")) {
            try p.unpack(good + [0x30])
        }
        #expect(throws: ISO8583Error(part: "MTI", offset: 1, reason: "ASCII digits expected, found byte 41")) {
            try p.unpack(Array("0A00".utf8) + [UInt8](repeating: 0, count: 8))
        }
        // Field 2's length says 25: over its maximum.
        var over = Array("0200".utf8) + [0x40, 0, 0, 0, 0, 0, 0, 0] + Array("25".utf8) + Array(repeating: UInt8(ascii: "4"), count: 25)
        #expect(throws: ISO8583Error(part: "field 2 (Primary Account Number (PAN))", offset: 12, reason: "length 25 is over the field's maximum of 19")) {
            try p.unpack(over)
        }
        // A letter in a numeric field.
        over = Array("0200".utf8) + [0x20, 0, 0, 0, 0, 0, 0, 0] + Array("00X000".utf8)
        #expect(throws: ISO8583Error(part: "field 3 (Processing Code)", offset: 12, reason: "digits only; character 3 is not")) {
            try p.unpack(over)
        }
        // A hex bitmap that is not hex.
        #expect(throws: ISO8583Error(part: "bitmap", offset: 4, reason: "16 hexadecimal characters expected, found 'G000000000000000'")) {
            try Packager.jposISO87A.unpack(Array("0800G000000000000000".utf8))
        }
        // Spaces are not hex: a bitmap padded with them (EMV's hex reader would skip them and
        // leave a short bitmap; the fuzzer found it).
        #expect(throws: ISO8583Error(part: "bitmap", offset: 4, reason: "16 hexadecimal characters expected, found '7020040020      '")) {
            try Packager.pyiso8583DefaultASCII.unpack(Array("02007020040020      ".utf8))
        }
        #expect(throws: ISO8583Error(part: "field 52 (PIN Data)", offset: 20, reason: "hexadecimal characters expected")) {
            try Packager.jposISO87A.unpack(Array("0200000000000000100012345678 ABCDEF0".utf8))
        }
        // A BCD nibble that is not a digit.
        #expect(throws: ISO8583Error(part: "field 3 (Processing Code)", offset: 10, reason: "BCD digit expected, found nibble A")) {
            try Packager.jposISO87B.unpack([0x02, 0x00, 0x20, 0, 0, 0, 0, 0, 0, 0, 0xA0, 0, 0])
        }
        // What cannot be packed.
        #expect(throws: ISO8583Error(part: "MTI", reason: "must be 4 digits, not '200'")) { try p.pack(ISOMessage(mti: "200")) }
        #expect(throws: ISO8583Error(part: "field 1", reason: "fields are numbered 2 to 128 (1 is the secondary bitmap)")) {
            try p.pack(ISOMessage(mti: "0200", fields: [1: .text("x")]))
        }
        #expect(throws: ISO8583Error(part: "field 52 (PIN Data)", reason: "must be 8 bytes, not 3")) {
            try p.pack(ISOMessage(mti: "0200", fields: [52: .bytes([1, 2, 3])]))
        }
    }

    @Test func framing() throws {
        let body: [UInt8] = Array("0800".utf8)
        #expect(try Framing.binary2.frame(body) == [0, 4] + body)
        #expect(try Framing.ascii4.frame(body) == Array("0004".utf8) + body)
        #expect(try Framing.nac.frame(body) == [0, 9] + Framing.defaultTPDU + body)
        #expect(try Framing.nac.bodyLength([0, 9]) == 9)
        #expect(throws: ISO8583Error.self) { try Framing.nac.bodyLength([0, 4]) }
        #expect(throws: ISO8583Error.self) { try Framing.ascii4.bodyLength(Array("00x4".utf8)) }
        #expect(Framing.replyTPDU([0x60, 0x00, 0x01, 0x02, 0x03]) == [0x60, 0x02, 0x03, 0x00, 0x01])
        #expect(throws: ISO8583Error.self) { try Framing.ascii4.frame([UInt8](repeating: 0x30, count: 10_000)) }
    }

    @Test func describedMessageHidesCardData() throws {
        let d = Self.sale().described(direction: "out", packager: .pyiso8583Default)
        let text = d.fields.map { "\($0.field) \($0.name) \($0.value) \($0.tlv?.map { "\($0.tag)=\($0.value)" } ?? [])" }.joined(separator: "\n")
        #expect(!text.contains(Self.pan))
        #expect(!text.contains("123456789ABCDEF0"))
        #expect(d.fields.first { $0.field == 2 }?.value == "476173******0119")
        #expect(d.fields.first { $0.field == 35 }?.value == "476173******0119=(withheld)")
        #expect(d.fields.first { $0.field == 52 }?.value == "(PIN block withheld)")
        #expect(d.fields.first { $0.field == 55 }?.tlv?.first == DescribedTag(tag: "9F26", name: "Application Cryptogram", value: "0102030405060708"))
        #expect(d.meaning == "financial request")
        // A peer that puts the card number in a private field or an unknown tag: masked there too.
        var odd = Self.sale()
        odd[48] = "card " + Self.pan
        odd.fields[55] = .bytes(TLV(0xDF01, [0x47, 0x61, 0x73, 0x00, 0x00, 0x00, 0x01, 0x19]).encoded())
        let shown = odd.described(direction: "in", packager: .jposISO87A)
        #expect(shown.fields.first { $0.field == 48 }?.value == "card 476173******0119")
        #expect(shown.fields.first { $0.field == 55 }?.tlv?.first?.value == "476173******0119")
    }
}
