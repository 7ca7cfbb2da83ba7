import Testing
@testable import EMV

@Suite("TagDictionary")
struct TagDictionaryTests {
    @Test("names follow EMV Book 3 Annex A", arguments: [
        (UInt32(0x42), "Issuer Identification Number (IIN)"),
        (0x4F, "Application Dedicated File (ADF) Name"),
        (0x5A, "Application Primary Account Number (PAN)"),
        (0x5F2A, "Transaction Currency Code"),
        (0x5F34, "Application Primary Account Number (PAN) Sequence Number"),
        (0x82, "Application Interchange Profile"),
        (0x84, "Dedicated File (DF) Name"),
        (0x8E, "Cardholder Verification Method (CVM) List"),
        (0x95, "Terminal Verification Results"),
        (0x9F02, "Amount, Authorised (Numeric)"),
        (0x9F26, "Application Cryptogram"),
        (0x9F36, "Application Transaction Counter (ATC)"),
        (0x9F4E, "Merchant Name and Location"),
        (0x9F53, "Transaction Category Code"),
        (0xBF0C, "File Control Information (FCI) Issuer Discretionary Data"),
    ])
    func name(tag: UInt32, expected: String) {
        #expect(TagDictionary.name(tag) == expected)
        #expect(TagDictionary.info(tag)?.name == expected)
        #expect(TagDictionary.info(tag)?.tag == tag)
    }

    @Test("formats, sources and lengths", arguments: [
        (UInt32(0x9F02), TagFormat.n, TagSource.terminal, 6, 6),
        (0x5A, .cn, .card, 0, 10),
        (0x50, .ans, .card, 1, 16),
        (0x5F2D, .an, .card, 2, 8),
        (0x5F55, .a, .card, 2, 2),
        (0x82, .b, .card, 2, 2),
        (0x4F, .b, .card, 5, 16),
        (0x8A, .an, .issuer, 2, 2),
        (0x91, .b, .issuer, 8, 16),
        (0x9F1C, .an, .terminal, 8, 8),
        (0x9F41, .n, .terminal, 2, 4),
        (0x9F10, .b, .card, 0, 32),
        (0x8E, .b, .card, 10, 252),
        (0x6F, .variable, .card, 0, 252),
        (0xBF0C, .variable, .card, 0, 222),
    ])
    func shape(tag: UInt32, format: TagFormat, source: TagSource, min: Int, max: Int) throws {
        let info = try #require(TagDictionary.info(tag))
        #expect(info.format == format)
        #expect(info.source == source)
        #expect(info.minLength == min)
        #expect(info.maxLength == max)
    }

    @Test("templates are constructed", arguments: [UInt32(0x61), 0x6F, 0x70, 0x71, 0x72, 0x73, 0x77, 0xA5, 0xBF0C])
    func constructed(tag: UInt32) throws {
        #expect(try #require(TagDictionary.info(tag)).isConstructed)
    }

    @Test("primitive elements are not constructed", arguments: [UInt32(0x9F02), 0x80, 0x83, 0x5A, 0x5F2A, 0x9F4E])
    func primitive(tag: UInt32) throws {
        #expect(try #require(TagDictionary.info(tag)).isConstructed == false)
    }

    @Test("the constructed flag agrees with bit 6 of the first tag byte for every entry")
    func constructedBitEverywhere() {
        for info in TagDictionary.all {
            var first = info.tag
            while first > 0xFF { first >>= 8 }
            #expect(info.isConstructed == (first & 0x20 != 0), "tag \(String(info.tag, radix: 16, uppercase: true))")
        }
    }

    @Test("unknown tags are nil", arguments: [UInt32(0), 0x01, 0x9F7F, 0xDF01, 0x5F99, 0x12_3456])
    func unknown(tag: UInt32) {
        #expect(TagDictionary.info(tag) == nil)
        #expect(TagDictionary.name(tag) == nil)
    }

    @Test("all is sorted by tag with no duplicates")
    func allSortedUnique() {
        let tags = TagDictionary.all.map(\.tag)
        #expect(tags == tags.sorted())
        #expect(Set(tags).count == tags.count)
    }

    @Test("all agrees with info for every entry")
    func allMatchesLookup() {
        for info in TagDictionary.all {
            #expect(TagDictionary.info(info.tag) == info)
        }
    }

    @Test("every entry has a name and a sane length range")
    func entriesWellFormed() {
        for info in TagDictionary.all {
            #expect(!info.name.isEmpty)
            #expect(info.minLength >= 0)
            #expect(info.minLength <= info.maxLength, "tag \(String(info.tag, radix: 16, uppercase: true))")
        }
    }

    @Test("covers the Annex A tags a contact transaction uses")
    func coverage() {
        let required: [UInt32] = [
            0x42, 0x4F, 0x50, 0x57, 0x5A, 0x5F20, 0x5F24, 0x5F25, 0x5F28, 0x5F2A, 0x5F2D, 0x5F30,
            0x5F34, 0x5F36, 0x5F50, 0x5F53, 0x5F54, 0x5F55, 0x5F56, 0x5F57, 0x61, 0x6F, 0x70, 0x71,
            0x72, 0x73, 0x77, 0x80, 0x81, 0x82, 0x83, 0x84, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C,
            0x8D, 0x8E, 0x8F, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x97, 0x98, 0x99, 0x9A, 0x9B,
            0x9C, 0x9D, 0x9F01, 0x9F02, 0x9F03, 0x9F04, 0x9F05, 0x9F06, 0x9F07, 0x9F08, 0x9F09,
            0x9F0B, 0x9F0D, 0x9F0E, 0x9F0F, 0x9F10, 0x9F11, 0x9F12, 0x9F13, 0x9F14, 0x9F15,
            0x9F16, 0x9F17, 0x9F18, 0x9F1A, 0x9F1B, 0x9F1C, 0x9F1D, 0x9F1E, 0x9F1F, 0x9F20,
            0x9F21, 0x9F22, 0x9F23, 0x9F26, 0x9F27, 0x9F2D, 0x9F2E, 0x9F2F, 0x9F32, 0x9F33,
            0x9F34, 0x9F35, 0x9F36, 0x9F37, 0x9F38, 0x9F39, 0x9F3A, 0x9F3B, 0x9F3C, 0x9F3D,
            0x9F40, 0x9F41, 0x9F42, 0x9F43, 0x9F44, 0x9F45, 0x9F46, 0x9F47, 0x9F48, 0x9F49,
            0x9F4A, 0x9F4B, 0x9F4C, 0x9F4D, 0x9F4E, 0x9F4F, 0x9F53, 0x9F6E, 0x9F7C, 0xA5, 0xBF0C,
        ]
        let missing = required.filter { TagDictionary.info($0) == nil }
        #expect(missing.isEmpty, "missing: \(missing.map { String($0, radix: 16, uppercase: true) })")
    }
}
