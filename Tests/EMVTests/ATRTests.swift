import Foundation
import Testing
@testable import EMV

// Real ATRs come from Ludovic Rousseau's smartcard_list.txt (pcsc-tools), the parse pages at
// smartcard-atr.apdu.fr, and public compatibility lists; each TCK was checked independently.
// Synthetic ATRs are marked as such and exist only where no real card shows the feature.

private func parseHex(_ hex: String) throws(EMVError) -> ATR {
    try ATR.parse(Hex.decode(hex))
}

private func hexBytes(_ hex: String) throws(EMVError) -> [UInt8] {
    try Hex.decode(hex)
}


// MARK: - Test data

struct ATRCase: Sendable, CustomTestStringConvertible {
    let name: String
    let hex: String
    let convention: ATR.Convention
    let t0: UInt8
    let fi: Int?
    let di: Int?
    let fMax: Double?
    let protocols: [Int]
    let historical: String
    let tck: UInt8?

    var testDescription: String { name }
}

struct ATRGlobalCase: Sendable, CustomTestStringConvertible {
    let hex: String
    let extraGuardTime: Int
    let wi: Int
    let specificMode: ATR.SpecificMode?
    var testDescription: String { hex }
}

struct ATRT1Case: Sendable, CustomTestStringConvertible {
    let hex: String
    let ifsc: Int
    let bwi: Int
    let cwi: Int
    let checksum: String
    var testDescription: String { hex }
}

private let fiTable: [Int?] = [372, 372, 558, 744, 1116, 1488, 1860, nil, nil, 512, 768, 1024, 1536, 2048, nil, nil]
private let fMaxTable: [Double?] = [4, 5, 6, 8, 12, 16, 20, nil, nil, 5, 7.5, 10, 15, 20, nil, nil]
private let diTable: [Int?] = [nil, 1, 2, 4, 8, 16, 32, 64, 12, 20, nil, nil, nil, nil, nil, nil]

/// Builds a well-formed ATR from random choices; returns it with the facts the parser must find.
private func randomValidATR(_ rng: inout SplitMix64) -> (bytes: [UInt8], k: Int, groups: Int, tck: Bool) {
    let k = Int.random(in: 0...15, using: &rng)
    var y = UInt8.random(in: 0...15, using: &rng)
    var out: [UInt8] = [Bool.random(using: &rng) ? 0x3B : 0x3F, y << 4 | UInt8(k)]
    var groups = 1
    var needsTCK = false
    while true {
        for bit: UInt8 in [0x1, 0x2, 0x4] where y & bit != 0 {
            out.append(UInt8.random(in: 0...255, using: &rng))
        }
        guard y & 0x8 != 0 else { break }
        groups += 1
        // Four groups at most keeps the worst case at exactly 33 bytes.
        var next = UInt8.random(in: 0...15, using: &rng)
        if groups == 4 { next &= 0x7 }
        let t: UInt8 = [0, 1, 15, UInt8.random(in: 2...14, using: &rng)].randomElement(using: &rng)!
        if t != 0 { needsTCK = true }
        out.append(next << 4 | t)
        y = next
    }
    for _ in 0..<k { out.append(UInt8.random(in: 0...255, using: &rng)) }
    if needsTCK { out.append(out.dropFirst().reduce(0, ^)) }
    return (out, k, groups, needsTCK)
}

/// Real cards; the expected values were read off each ATR by hand.
private let realATRs: [ATRCase] = [
    ATRCase(name: "Brazilian e-CPF (T=0, no TA1)", hex: "3B 68 00 00 00 73 C8 40 12 00 90 00",
            convention: .direct, t0: 0x68, fi: 372, di: 1, fMax: 5, protocols: [0],
            historical: "00 73 C8 40 12 00 90 00", tck: nil),
    ATRCase(name: "ING Direct VISA Gold", hex: "3B 6E 00 00 00 31 C0 71 D6 65 12 0D 01 81 00 83 90 00",
            convention: .direct, t0: 0x6E, fi: 372, di: 1, fMax: 5, protocols: [0],
            historical: "00 31 C0 71 D6 65 12 0D 01 81 00 83 90 00", tck: nil),
    ATRCase(name: "Credit Agricole MasterCard (CB)", hex: "3B 65 00 00 20 63 CB BC 00",
            convention: .direct, t0: 0x65, fi: 372, di: 1, fMax: 5, protocols: [0],
            historical: "20 63 CB BC 00", tck: nil),
    ATRCase(name: "Calypso via PC/SC (TD1 T=0, TD2 T=1)", hex: "3B 8E 80 01 80 31 80 66 40 90 89 12 08 02 83 01 90 00 0B",
            convention: .direct, t0: 0x8E, fi: 372, di: 1, fMax: 5, protocols: [0, 1],
            historical: "80 31 80 66 40 90 89 12 08 02 83 01 90 00", tck: 0x0B),
    ATRCase(name: "NXP JCOP10 (T=1)", hex: "3B E9 00 00 81 31 FE 45 4A 43 4F 50 31 30 56 32 32 A3",
            convention: .direct, t0: 0xE9, fi: 372, di: 1, fMax: 5, protocols: [1],
            historical: "4A 43 4F 50 31 30 56 32 32", tck: 0xA3),
    ATRCase(name: "BZ WBK Mastercard (TC1=FF)", hex: "3B E9 00 FF 81 31 FE 45 43 4C 61 69 72 65 33 20 36 28",
            convention: .direct, t0: 0xE9, fi: 372, di: 1, fMax: 5, protocols: [1],
            historical: "43 4C 61 69 72 65 33 20 36", tck: 0x28),
    ATRCase(name: "Estonian EstEID 3.0 (TA1=18)", hex: "3B FE 18 00 00 80 31 FE 45 80 31 80 66 40 90 A4 16 2A 00 83 0F 90 00 EF",
            convention: .direct, t0: 0xFE, fi: 372, di: 12, fMax: 5, protocols: [0, 1],
            historical: "80 31 80 66 40 90 A4 16 2A 00 83 0F 90 00", tck: 0xEF),
    ATRCase(name: "T=0 with T=15 global bytes (TA1=96)", hex: "3B 9E 96 80 1F C7 80 31 E0 73 FE 21 1B 66 D0 01 A1 B8 10 00 08",
            convention: .direct, t0: 0x9E, fi: 512, di: 32, fMax: 5, protocols: [0],
            historical: "80 31 E0 73 FE 21 1B 66 D0 01 A1 B8 10 00", tck: 0x08),
    ATRCase(name: "Dual T=0/T=1 with TA4 for T=15", hex: "3B DF 18 FF 80 91 FE 1F C3 00 31 38 64 47 90 EC C2 73 14 01 50 82 90 00 BB",
            convention: .direct, t0: 0xDF, fi: 372, di: 12, fMax: 5, protocols: [0, 1],
            historical: "00 31 38 64 47 90 EC C2 73 14 01 50 82 90 00", tck: 0xBB),
    ATRCase(name: "G&D UniverSIM Pegasus (TC2)", hex: "3B FF 96 00 FF C0 0A 1F 43 80 31 E0 73 36 21 13 57 4A 43 49 1C 31 30 32 1E",
            convention: .direct, t0: 0xFF, fi: 512, di: 32, fMax: 5, protocols: [0],
            historical: "80 31 E0 73 36 21 13 57 4A 43 49 1C 31 30 32", tck: 0x1E),
    ATRCase(name: "Feitian BioPass FIDO2 (TA1=95)", hex: "3B 9C 95 81 31 FE 9F 90 67 46 4A 01 02 53 05 01 72 FE 00 FB",
            convention: .direct, t0: 0x9C, fi: 512, di: 16, fMax: 5, protocols: [1],
            historical: "90 67 46 4A 01 02 53 05 01 72 FE 00", tck: 0xFB),
    ATRCase(name: "Yubikey 5 (TA1=13)", hex: "3B FD 13 00 00 81 31 FE 15 80 73 C0 21 C0 57 59 75 62 69 4B 65 79 40",
            convention: .direct, t0: 0xFD, fi: 372, di: 4, fMax: 5, protocols: [1],
            historical: "80 73 C0 21 C0 57 59 75 62 69 4B 65 79", tck: 0x40),
    ATRCase(name: "CB Visa La Poste (inverse)", hex: "3F 65 25 08 43 04 6C 90 00",
            convention: .inverse, t0: 0x65, fi: 372, di: 1, fMax: 5, protocols: [0],
            historical: "43 04 6C 90 00", tck: nil),
    ATRCase(name: "Radiolinja GSM SIM (inverse, TA1=94)", hex: "3F 3F 94 00 80 69 AF 03 07 01 59 00 00 0A 0E 83 3E 9F 16",
            convention: .inverse, t0: 0x3F, fi: 512, di: 8, fMax: 5, protocols: [0],
            historical: "80 69 AF 03 07 01 59 00 00 0A 0E 83 3E 9F 16", tck: nil),
    ATRCase(name: "Atmel/Athena inverse test card (TCK)", hex: "3F 96 18 80 01 80 51 00 61 10 30 9F",
            convention: .inverse, t0: 0x96, fi: 372, di: 12, fMax: 5, protocols: [0, 1],
            historical: "80 51 00 61 10 30", tck: 0x9F),
]

/// The same inverse-convention cards as read through a UART left in direct convention.
private let rawInverseForms: [(raw: String, decoded: String)] = [
    ("03 59 5B EF 3D DF C9 F6 FF", "3F 65 25 08 43 04 6C 90 00"),
    ("03 96 E7 FE 7F FE 75 FF 79 F7 F3 06", "3F 96 18 80 01 80 51 00 61 10 30 9F"),
]

@Suite("ATR parsing")
struct ATRTests {
    @Test("Real ATRs: convention, T0, Fi/Di, protocols, historical bytes, TCK", arguments: realATRs)
    func parsesATRCase(_ c: ATRCase) throws {
        let raw = try hexBytes(c.hex)
        let atr = try ATR.parse(raw)
        #expect(atr.bytes == raw)
        #expect(atr.convention == c.convention)
        #expect(atr.t0 == c.t0)
        #expect(atr.fi == c.fi)
        #expect(atr.di == c.di)
        #expect(atr.fMax == c.fMax)
        #expect(atr.protocols == c.protocols)
        #expect(atr.historicalBytes == (try hexBytes(c.historical)))
        #expect(atr.historicalBytes.count == Int(c.t0 & 0x0F))
        #expect(atr.tck == c.tck)
        if atr.tck != nil {
            #expect(raw.dropFirst().reduce(0, ^) == 0, "XOR of T0...TCK must be zero")
            #expect(atr.summary.contains("TCK = \(Hex.encode([c.tck!])): correct"))
        } else {
            #expect(atr.summary.contains("TCK: absent (only T=0 is indicated)"))
        }
        #expect(atr.summary.contains("Protocols: " + c.protocols.map { "T=\($0)" }.joined(separator: ", ")))
    }

    @Test("Interface groups follow the Y-bit chain")
    func interfaceGroupsOfEstEID() throws {
        let atr = try parseHex("3B FE 18 00 00 80 31 FE 45 80 31 80 66 40 90 A4 16 2A 00 83 0F 90 00 EF")
        #expect(atr.interfaceGroups == [
            ATR.InterfaceBytes(ta: 0x18, tb: 0x00, tc: 0x00, td: 0x80),
            ATR.InterfaceBytes(td: 0x31),
            ATR.InterfaceBytes(ta: 0xFE, tb: 0x45),
        ])
    }

    @Test("A TD with Y=0 still opens an (empty) group; no TD1 means a single group")
    func groupCounting() throws {
        let calypso = try parseHex("3B 8E 80 01 80 31 80 66 40 90 89 12 08 02 83 01 90 00 0B")
        #expect(calypso.interfaceGroups == [ATR.InterfaceBytes(td: 0x80), ATR.InterfaceBytes(td: 0x01), ATR.InterfaceBytes()])
        let ecpf = try parseHex("3B 68 00 00 00 73 C8 40 12 00 90 00")
        #expect(ecpf.interfaceGroups == [ATR.InterfaceBytes(tb: 0x00, tc: 0x00)])
    }

    // MARK: - Global and T=0 parameters

    @Test("TC1, TC2 and TA2", arguments: [
        ATRGlobalCase(hex: "3B 68 00 00 00 73 C8 40 12 00 90 00", extraGuardTime: 0, wi: 10, specificMode: nil),
        ATRGlobalCase(hex: "3F 65 25 08 43 04 6C 90 00", extraGuardTime: 8, wi: 10, specificMode: nil),
        ATRGlobalCase(hex: "3B E9 00 FF 81 31 FE 45 43 4C 61 69 72 65 33 20 36 28", extraGuardTime: 255, wi: 10, specificMode: nil),
        ATRGlobalCase(hex: "3B FF 96 00 FF C0 0A 1F 43 80 31 E0 73 36 21 13 57 4A 43 49 1C 31 30 32 1E",
                   extraGuardTime: 255, wi: 10, specificMode: nil),
        // Synthetic: TD1=40 announces TC2=14 (WI=20), T=0 only so no TCK.
        ATRGlobalCase(hex: "3B 80 40 14", extraGuardTime: 0, wi: 20, specificMode: nil),
        // Synthetic: TA2=81 is specific mode T=1, unable to change; TCK=10.
        ATRGlobalCase(hex: "3B 80 11 81 10", extraGuardTime: 0, wi: 10,
                   specificMode: ATR.SpecificMode(protocol: 1, canChange: false, implicitParameters: false)),
        // Synthetic: TA2=11 is specific mode T=1, can change, implicit Fi/Di; TCK=80.
        ATRGlobalCase(hex: "3B 80 11 11 80", extraGuardTime: 0, wi: 10,
                   specificMode: ATR.SpecificMode(protocol: 1, canChange: true, implicitParameters: true)),
    ])
    func globalParameters(_ c: ATRGlobalCase) throws {
        let atr = try parseHex(c.hex)
        #expect(atr.extraGuardTime == c.extraGuardTime)
        #expect(atr.waitingIntegerWI == c.wi)
        #expect(atr.specificMode == c.specificMode)
    }

    @Test("specificMode reads like the tuple it replaces")
    func specificModeFields() throws {
        let mode = try #require(try parseHex("3B 80 11 81 10").specificMode)
        #expect(mode.protocol == 1)
        #expect(mode.canChange == false)
    }

    // MARK: - T=1 parameters

    @Test("IFSC, BWI, CWI and error detection come from the first bytes for T=1", arguments: [
        ATRT1Case(hex: "3B E9 00 00 81 31 FE 45 4A 43 4F 50 31 30 56 32 32 A3", ifsc: 254, bwi: 4, cwi: 5, checksum: "LRC"),
        ATRT1Case(hex: "3B 9C 95 81 31 FE 9F 90 67 46 4A 01 02 53 05 01 72 FE 00 FB", ifsc: 254, bwi: 9, cwi: 15, checksum: "LRC"),
        ATRT1Case(hex: "3B FD 13 00 00 81 31 FE 15 80 73 C0 21 C0 57 59 75 62 69 4B 65 79 40", ifsc: 254, bwi: 1, cwi: 5, checksum: "LRC"),
        // TA3 follows TD2 (T=1) even though TD1 names T=0; TA4 follows TD3 (T=15) and is not IFSC.
        ATRT1Case(hex: "3B DF 18 FF 80 91 FE 1F C3 00 31 38 64 47 90 EC C2 73 14 01 50 82 90 00 BB", ifsc: 254, bwi: 4, cwi: 13, checksum: "LRC"),
        // No T=1 group i>2 at all: defaults.
        ATRT1Case(hex: "3B 8E 80 01 80 31 80 66 40 90 89 12 08 02 83 01 90 00 0B", ifsc: 32, bwi: 4, cwi: 13, checksum: "LRC"),
        // Synthetic: TD2=41 announces TC3=01, CRC; TCK=41.
        ATRT1Case(hex: "3B 80 81 41 01 41", ifsc: 32, bwi: 4, cwi: 13, checksum: "CRC"),
    ])
    func t1Parameters(_ c: ATRT1Case) throws {
        let atr = try parseHex(c.hex)
        #expect(atr.ifsc == c.ifsc)
        #expect(atr.bwi == c.bwi)
        #expect(atr.cwi == c.cwi)
        #expect(atr.checksumMode == c.checksum)
    }

    // MARK: - Fi / Di tables

    @Test("Fi and f max for every TA1 high nibble (table 7)", arguments: UInt8(0)...15)
    func fiTableEntry(_ nibble: UInt8) throws {
        let atr = try ATR.parse([0x3B, 0x10, nibble << 4 | 0x1])
        #expect(atr.fi == fiTable[Int(nibble)])
        #expect(atr.fMax == fMaxTable[Int(nibble)])
        let line = try #require(atr.summary.first { $0.hasPrefix("TA1 = ") })
        if fiTable[Int(nibble)] == nil {
            #expect(line.contains("Fi=RFU") && line.contains("f max RFU"))
        }
    }

    @Test("Di for every TA1 low nibble (table 8)", arguments: UInt8(0)...15)
    func diTableEntry(_ nibble: UInt8) throws {
        let atr = try ATR.parse([0x3B, 0x10, 0x10 | nibble])
        #expect(atr.di == diTable[Int(nibble)])
        let line = try #require(atr.summary.first { $0.hasPrefix("TA1 = ") })
        #expect(line.contains(diTable[Int(nibble)].map { "Di=\($0)" } ?? "Di=RFU"))
    }

    @Test("Without TA1 the defaults are Fi=372, Di=1, f max 5 MHz")
    func defaultsWithoutTA1() throws {
        let atr = try parseHex("3B 65 00 00 20 63 CB BC 00")
        #expect(atr.ta1 == nil)
        #expect(atr.fi == 372 && atr.di == 1 && atr.fMax == 5)
    }

    // MARK: - Inverse convention

    @Test("A 03-form ATR is converted to the 3F form", arguments: rawInverseForms.map { [$0.raw, $0.decoded] })
    func rawInverseConvention(_ pair: [String]) throws {
        let converted = try parseHex(pair[0])
        let decoded = try parseHex(pair[1])
        #expect(converted == decoded)
        #expect(converted.convention == .inverse)
        #expect(converted.bytes.first == 0x3F)
    }

    @Test("Inverse-line decoding is bit reversal plus complement, and its own inverse")
    func inverseLineDecoding() {
        #expect(ATR.fromInverseLine(0x03) == 0x3F)
        #expect(ATR.fromInverseLine(0x59) == 0x65)
        for b in UInt8.min...UInt8.max {
            let d = ATR.fromInverseLine(b)
            #expect(ATR.fromInverseLine(d) == b)
            var reversed: UInt8 = 0
            for bit in 0..<8 where b & (1 << bit) != 0 { reversed |= 0x80 >> bit }
            #expect(d == ~reversed)
        }
    }

    // MARK: - Summary and JSON

    @Test("Summary of a T=0 payment card")
    func summaryT0() throws {
        let atr = try parseHex("3B 68 00 00 00 73 C8 40 12 00 90 00")
        #expect(Array(atr.summary.prefix(5)) == [
            "TS = 3B: direct convention",
            "T0 = 68: Y1=6 (TB1, TC1 present), K=8 historical bytes",
            "TB1 = 00: VPP not connected",
            "TC1 = 00: extra guard time N=0 etu",
            "Historical bytes: 00 73 C8 40 12 00 90 00",
        ])
        #expect(atr.summary.last == "Protocols: T=0")
    }

    @Test("Summary of a T=1 card with TA1")
    func summaryT1() throws {
        let lines = try parseHex("3B 9C 95 81 31 FE 9F 90 67 46 4A 01 02 53 05 01 72 FE 00 FB").summary
        for expected in [
            "T0 = 9C: Y1=9 (TA1, TD1 present), K=12 historical bytes",
            "TA1 = 95: Fi=512 Di=16 (f max 5 MHz)",
            "TD1 = 81: Y2=8 (TD2 present), protocol T=1",
            "TD2 = 31: Y3=3 (TA3, TB3 present), protocol T=1",
            "TA3 = FE: T=1 IFSC=254",
            "TB3 = 9F: T=1 BWI=9 CWI=15",
            "TCK = FB: correct",
            "Protocols: T=1",
        ] {
            #expect(lines.contains(expected), "missing line: \(expected)")
        }
        let inverse = try parseHex("3F 65 25 08 43 04 6C 90 00").summary
        #expect(inverse.first == "TS = 3F: inverse convention")
    }

    @Test("Summary of T=15 global bytes and f max 7.5")
    func summaryT15() throws {
        let lines = try parseHex("3B 9E 96 80 1F C7 80 31 E0 73 FE 21 1B 66 D0 01 A1 B8 10 00 08").summary
        #expect(lines.contains("TD2 = 1F: Y3=1 (TA3 present), T=15 (global interface bytes follow)"))
        #expect(lines.contains("TA3 = C7: clock stop: no preference, classes A (5 V), B (3 V), C (1.8 V)"))
        let fast = try ATR.parse([0x3B, 0x10, 0xA1]).summary
        #expect(fast.contains("TA1 = A1: Fi=768 Di=1 (f max 7.5 MHz)"))
    }

    @Test("JSON form uses hex strings for bytes")
    func jsonEncoding() throws {
        let atr = try parseHex("3B FE 18 00 00 80 31 FE 45 80 31 80 66 40 90 A4 16 2A 00 83 0F 90 00 EF")
        let data = try JSONEncoder().encode(atr)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["bytes"] as? String == "3BFE1800008031FE45803180664090A4162A00830F9000EF")
        #expect(object["historicalBytes"] as? String == "803180664090A4162A00830F9000")
        #expect(object["convention"] as? String == "direct")
        #expect(object["t0"] as? String == "FE")
        #expect(object["tck"] as? String == "EF")
        #expect(object["protocols"] as? [Int] == [0, 1])
        #expect(object["fi"] as? Int == 372)
        #expect(object["di"] as? Int == 12)
        let groups = try #require(object["interfaceGroups"] as? [[String: String]])
        #expect(groups.first == ["ta": "18", "tb": "00", "tc": "00", "td": "80"])
        let t1 = try #require(object["t1"] as? [String: Any])
        #expect(t1["ifsc"] as? Int == 254)
        #expect(t1["checksumMode"] as? String == "LRC")

        let t0Only = try JSONSerialization.jsonObject(with: JSONEncoder().encode(parseHex("3B 65 00 00 20 63 CB BC 00"))) as? [String: Any]
        #expect(t0Only?["tck"] == nil)
        #expect(t0Only?["t1"] == nil)
    }

    // MARK: - Errors

    @Test("TS other than 3B, 3F or 03 is rejected", arguments: [UInt8(0x00), 0x3A, 0x3C, 0x23, 0xFF])
    func badTS(_ ts: UInt8) {
        let hex = Hex.encode([ts])
        #expect(throws: EMVError(field: "ATR", rule: "TS must be 3B (direct) or 3F (inverse), got \(hex)")) {
            try ATR.parse([ts, 0x00])
        }
    }

    @Test("Wrong TCK is rejected with expected and received values")
    func wrongTCK() {
        #expect(throws: EMVError(field: "ATR", rule: "TCK mismatch: expected EF, got EE")) {
            try parseHex("3B FE 18 00 00 80 31 FE 45 80 31 80 66 40 90 A4 16 2A 00 83 0F 90 00 EE")
        }
        // A corrupted historical byte is caught by the checksum as well.
        #expect(throws: EMVError(field: "ATR", rule: "TCK mismatch: expected A2, got A3")) {
            try parseHex("3B E9 00 00 81 31 FE 45 4A 43 4F 50 31 30 56 32 33 A3")
        }
    }

    @Test("Missing TCK is rejected when a protocol other than T=0 is indicated")
    func missingTCK() {
        #expect(throws: EMVError(field: "ATR", rule: "TCK missing: it is required because T=1 is indicated")) {
            try parseHex("3B E9 00 00 81 31 FE 45 4A 43 4F 50 31 30 56 32 32")
        }
        // T=15 alone also makes TCK mandatory.
        #expect(throws: EMVError(field: "ATR", rule: "TCK missing: it is required because T=15 is indicated")) {
            try parseHex("3B 9E 96 80 1F C7 80 31 E0 73 FE 21 1B 66 D0 01 A1 B8 10 00")
        }
    }

    @Test("Bytes after the end of the ATR are rejected")
    func trailingGarbage() throws {
        let afterHistorical = #expect(throws: EMVError.self) { try parseHex("3B 68 00 00 00 73 C8 40 12 00 90 00 11") }
        #expect(afterHistorical?.rule.contains("1 unexpected byte after the 8 historical bytes: 11") == true)
        let afterTCK = #expect(throws: EMVError.self) { try parseHex("3B E9 00 00 81 31 FE 45 4A 43 4F 50 31 30 56 32 32 A3 90 00") }
        #expect(afterTCK?.rule == "2 unexpected bytes after TCK: 90 00")
    }

    @Test("More than 33 bytes is rejected, 33 is accepted")
    func tooLong() throws {
        // Longest legal shape: Y1=F, three full groups, a fourth without TD, K=15, TCK.
        var longest: [UInt8] = [0x3B, 0xFF, 0x11, 0x00, 0x00, 0xF1, 0xFE, 0x45, 0x00, 0xF1, 0xFE, 0x45, 0x00, 0x71, 0xFE, 0x45, 0x00]
        longest += Array(repeating: 0x20, count: 15)
        longest.append(longest.dropFirst().reduce(0, ^))
        #expect(longest.count == 33)
        let atr = try ATR.parse(longest)
        #expect(atr.interfaceGroups.count == 4)
        #expect(atr.protocols == [1])

        let error = #expect(throws: EMVError.self) { try ATR.parse(longest + [0x00]) }
        #expect(error?.rule == "must be at most 33 bytes (TS + 32), got 34")
    }

    @Test("Empty input and a lone TS are truncated ATRs")
    func tooShort() {
        #expect(throws: EMVError(field: "ATR", rule: "must not be empty: at least TS and T0 are required")) {
            try ATR.parse([])
        }
        #expect(throws: EMVError(field: "ATR", rule: "truncated: T0 missing after TS")) {
            try ATR.parse([0x3B])
        }
        #expect(throws: EMVError(field: "ATR", rule: "truncated: TC1 is announced by Y1=6 but the ATR ends after 3 bytes")) {
            try parseHex("3B 68 00")
        }
    }

    @Test("Every strict prefix of a real ATR is rejected as incomplete", arguments: realATRs.map(\.hex) + rawInverseForms.map(\.raw))
    func everyPrefixFails(_ hex: String) throws {
        let full = try hexBytes(hex)
        for n in 0..<full.count {
            // A strict prefix can never be well formed: T0 fixes K and the Y/TD chain fixes the
            // interface bytes, so the only legal ending is the full length.
            let error = #expect(throws: EMVError.self, "prefix of \(n) bytes") { try ATR.parse(Array(full.prefix(n))) }
            guard let error else { continue }
            #expect(error.field == "ATR")
            #expect(["truncated", "TCK missing", "must not be empty"].contains { error.rule.hasPrefix($0) },
                    "prefix of \(n) bytes: \(error.rule)")
        }
    }

    // MARK: - Fuzzing

    @Test("Generated well-formed ATRs parse; their prefixes and mutations never crash")
    func fuzzWellFormed() throws {
        var rng = SplitMix64(state: 0xA7B_7816)
        for iteration in 0..<3_000 {
            let (raw, k, groups, hasTCK) = randomValidATR(&rng)
            #expect(raw.count <= ATR.maximumLength)
            let atr: ATR
            do {
                atr = try ATR.parse(raw)
            } catch {
                Issue.record("iteration \(iteration): \(Hex.encode(raw)) rejected: \(error)")
                continue
            }
            if atr.bytes != raw || atr.historicalBytes.count != k || atr.interfaceGroups.count != groups
                || (atr.tck != nil) != hasTCK || atr.protocols.isEmpty || atr.protocols.contains(15) {
                Issue.record("iteration \(iteration): \(Hex.encode(raw)) parsed inconsistently")
            }
            _ = atr.summary
            _ = try JSONEncoder().encode(atr)
            for n in 0..<raw.count where (try? ATR.parse(Array(raw.prefix(n)))) != nil {
                Issue.record("iteration \(iteration): strict prefix of \(n) bytes of \(Hex.encode(raw)) accepted")
            }
            // Flip one byte after TS: the result may parse or throw, but must be self-consistent.
            var mutated = raw
            let position = Int.random(in: 1..<raw.count, using: &rng)
            mutated[position] ^= UInt8.random(in: 1...255, using: &rng)
            if let m = try? ATR.parse(mutated) {
                _ = m.summary
                if m.tck != nil && mutated.dropFirst().reduce(0, ^) != 0 {
                    Issue.record("iteration \(iteration): bad checksum accepted in \(Hex.encode(mutated))")
                }
            }
        }
    }

    @Test("Random bytes never crash the parser, and whatever parses is consistent")
    func fuzzRandomBytes() {
        var rng = SplitMix64(state: 7816_3)
        var accepted = 0
        for iteration in 0..<50_000 {
            var raw = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Without a valid TS almost nothing gets past the first byte.
            if !raw.isEmpty && iteration % 4 != 0 { raw[0] = [0x3B, 0x3F, 0x03][iteration % 3] }
            guard let atr = try? ATR.parse(raw) else { continue }
            accepted += 1
            let consistent = atr.bytes.count == raw.count
                && atr.bytes.count <= ATR.maximumLength
                && (atr.bytes[0] == 0x3B || atr.bytes[0] == 0x3F)
                && atr.historicalBytes.count == Int(atr.t0 & 0x0F)
                && (atr.tck == nil || atr.bytes.dropFirst().reduce(0, ^) == 0)
                && (try? ATR.parse(atr.bytes)) == atr
            if !consistent { Issue.record("inconsistent parse of \(Hex.encode(raw))") }
            _ = atr.summary
        }
        #expect(accepted > 0, "the fuzz loop should reach the accepting paths too")
    }
}
