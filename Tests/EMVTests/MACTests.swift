import Testing
@testable import EMV

private func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }
private func key(_ hex: String) -> TDESKey { try! TDESKey(hex: hex) }

private let singleKey = key("0123456789ABCDEF")
// K ‖ K' of ISO/IEC 9797-1 Annex B.
private let doubleKey = key("0123456789ABCDEFFEDCBA9876543210")
// "Now is the time for all ", the message of ISO/IEC 9797-1 Annex B and ANSI X9.9/X9.19.
private let nowIsTheTime = Array("Now is the time for all ".utf8)
// jPOS's 39-byte cryptogram input (VectorTests set B), three blocks after padding.
private let cryptogramData = bytes("000000010000000000001000084000000010800840980704001111111158003456A08003242000")

@Suite("ISO 9797-1 padding")
struct ISO9797PaddingTests {
    // Inputs are 01 02 03 ... of the given length; expected values from pyemv 1.5.0's
    // pad_iso9797_1 and pad_iso9797_2.
    @Test(arguments: [
        (0, "0000000000000000", "8000000000000000"),
        (1, "0100000000000000", "0180000000000000"),
        (7, "0102030405060700", "0102030405060780"),
        (8, "0102030405060708", "01020304050607088000000000000000"),
        (9, "01020304050607080900000000000000", "01020304050607080980000000000000"),
        (15, "0102030405060708090A0B0C0D0E0F00", "0102030405060708090A0B0C0D0E0F80"),
        (16, "0102030405060708090A0B0C0D0E0F10", "0102030405060708090A0B0C0D0E0F108000000000000000"),
    ])
    func pad(length: Int, method1: String, method2: String) {
        let data = (0..<length).map { UInt8($0 + 1) }
        #expect(Hex.encode(ISO9797.pad(data, .method1)) == method1)
        #expect(Hex.encode(ISO9797.pad(data, .method2)) == method2)
    }

    @Test func methodNumbers() {
        #expect(ISO9797.Padding.method1.rawValue == 1)
        #expect(ISO9797.Padding.method2.rawValue == 2)
        #expect(ISO9797.Padding.allCases == [.method1, .method2])
    }
}

@Suite("ISO 9797-1 MAC algorithms")
struct ISO9797MACTests {
    // MAC algorithm 1 (CBC-MAC, zero IV, last block), computed independently with Python's
    // cryptography TripleDES-CBC over pyemv's padding. The single-key empty-message MAC is
    // DES(K, 0) and the double-key one is the key's check value 08D7B4FB...
    @Test(arguments: [
        ("", "D5D44FF720683D0D", "CAEE534C523E1E79", "08D7B4FB629D0885", "F1FBCF2A56D19BA7"),
        ("1234567890ABCDEF", "BD661569AE874E25", "8E3F97F837235BFB", "479EF7C1ECFE64AC", "925B1737EF681AD3"),
        // 70A30640CC76DD8B is the published ANSI X9.9 / ISO 9797-1 single-DES MAC of this message.
        ("4E6F77206973207468652074696D6520666F7220616C6C20", "70A30640CC76DD8B", "10E1F0F108341B6D", "93462A6DB9B4A4D1", "805036D50BB76107"),
        ("000000010000000000001000084000000010800840980704001111111158003456A08003242000",
         "C3B282D7B3242628", "43F659C91F99656A", "E44B0A28C2BC79F6", "8C46ED66C8FCF4E6"),
    ])
    func algorithm1(data: String, single1: String, single2: String, double1: String, double2: String) {
        let d = bytes(data)
        #expect(Hex.encode(ISO9797.algorithm1(key: singleKey, data: d, padding: .method1)) == single1)
        #expect(Hex.encode(ISO9797.algorithm1(key: singleKey, data: d, padding: .method2)) == single2)
        #expect(Hex.encode(ISO9797.algorithm1(key: doubleKey, data: d, padding: .method1)) == double1)
        #expect(Hex.encode(ISO9797.algorithm1(key: doubleKey, data: d, padding: .method2)) == double2)
    }

    // MAC algorithm 3 against pyemv 1.5.0's mac_iso9797_3(K, K', data, padding).
    // A1C72E74EA3FA9B6 and E9086230CA3BE796 are ISO/IEC 9797-1:2011 B.4's published values.
    @Test(arguments: [
        ("", "08D7B4FB629D0885", "F1FBCF2A56D19BA7"),
        ("1234567890ABCDEF", "479EF7C1ECFE64AC", "912476C111DB4238"),
        ("4E6F77206973207468652074696D6520666F7220616C6C20", "A1C72E74EA3FA9B6", "E9086230CA3BE796"),
        ("4E6F77206973207468652074696D6520666F72206974", "2E2B1428CC78254F", "5A692CE64F404145"),
        ("000000010000000000001000084000000010800840980704001111111158003456A08003242000", "52C14DCCD9CDBEF7", "9D149A5A0501CC04"),
    ])
    func algorithm3(data: String, method1: String, method2: String) {
        #expect(Hex.encode(ISO9797.algorithm3(key: doubleKey, data: bytes(data), padding: .method1)) == method1)
        #expect(Hex.encode(ISO9797.algorithm3(key: doubleKey, data: bytes(data), padding: .method2)) == method2)
    }

    @Test func publishedMessageIsTheOneEncoded() {
        #expect(Hex.encode(nowIsTheTime) == "4E6F77206973207468652074696D6520666F7220616C6C20")
        #expect(cryptogramData.count == 39)
    }

    @Test func truncatedLengths() {
        #expect(Hex.encode(ISO9797.algorithm1(key: singleKey, data: nowIsTheTime, padding: .method1, length: 4)) == "70A30640")
        #expect(Hex.encode(ISO9797.algorithm3(key: doubleKey, data: nowIsTheTime, padding: .method1, length: 4)) == "A1C72E74")
        #expect(ISO9797.algorithm3(key: doubleKey, data: nowIsTheTime, padding: .method2, length: 0).isEmpty)
    }

    // Two properties that tie the algorithms together, checked on several messages:
    // with K = K' algorithm 3 collapses to single-DES algorithm 1, and for a one-block message
    // algorithm 3 is one TDES encryption, the same as double-key algorithm 1.
    @Test func algorithmsAgreeWhereTheyMust() {
        let sameHalves = key("0123456789ABCDEF0123456789ABCDEF")
        for data in [[], bytes("01"), nowIsTheTime, cryptogramData] {
            for padding in ISO9797.Padding.allCases {
                #expect(ISO9797.algorithm3(key: sameHalves, data: data, padding: padding)
                    == ISO9797.algorithm1(key: singleKey, data: data, padding: padding))
            }
        }
        for data in [[], bytes("01020304050607"), bytes("0102030405060708")] {
            #expect(ISO9797.algorithm3(key: doubleKey, data: data, padding: .method1)
                == ISO9797.algorithm1(key: doubleKey, data: data, padding: .method1))
        }
    }

    @Test func everyBitOfTheMessageMatters() {
        let mac = ISO9797.algorithm3(key: doubleKey, data: cryptogramData, padding: .method2)
        for i in cryptogramData.indices {
            var changed = cryptogramData
            changed[i] ^= 0x01
            #expect(ISO9797.algorithm3(key: doubleKey, data: changed, padding: .method2) != mac, "byte \(i)")
        }
        // Method 1 cannot tell trailing zeros from padding; method 2 can.
        #expect(ISO9797.algorithm1(key: doubleKey, data: bytes("0102"), padding: .method1)
            == ISO9797.algorithm1(key: doubleKey, data: bytes("010200"), padding: .method1))
        #expect(ISO9797.algorithm1(key: doubleKey, data: bytes("0102"), padding: .method2)
            != ISO9797.algorithm1(key: doubleKey, data: bytes("010200"), padding: .method2))
    }
}

@Suite("EMV key derivation")
struct KeyDerivationTests {
    private static let imk = key("0123456789ABCDEFFEDCBA9876543210")

    private enum Option: CaseIterable { case a, b }

    private static func derive(_ option: Option, pan: String, psn: String, imk: TDESKey = imk) throws(EMVError) -> TDESKey {
        switch option {
        case .a: try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: imk, pan: pan, psn: psn)
        case .b: try KeyDerivation.iccMasterKeyOptionB(issuerMasterKey: imk, pan: pan, psn: psn)
        }
    }

    @Test(arguments: [
        ("41111111111111A1", "must be digits only"),
        ("4111-1111-1111-1111", "must be digits only"),
        ("", "must be digits only"),
        ("41111111111", "must be 12–19 digits, got 11"),
        ("41111111111111111111", "must be 12–19 digits, got 20"),
    ])
    func badPANs(pan: String, rule: String) {
        for option in Option.allCases {
            #expect(throws: EMVError(field: "pan", rule: rule)) { try Self.derive(option, pan: pan, psn: "00") }
        }
    }

    @Test(arguments: ["1", "AB", "001", "", " 1", "0x"])
    func badPSNs(psn: String) {
        for option in Option.allCases {
            #expect(throws: EMVError(field: "psn", rule: "the PAN sequence number is 2 digits (00–99)")) {
                try Self.derive(option, pan: "4111111111111111", psn: psn)
            }
        }
    }

    @Test(arguments: ["0123456789ABCDEF", "0123456789ABCDEFFEDCBA987654321089ABCDEF01234567"])
    func issuerMasterKeyMustBeDoubleLength(hex: String) {
        let imk = key(hex)
        let rule = "an issuer master key is a double-length key (16 bytes, 32 hex digits), got \(hex.count / 2) bytes"
        // 16 and 17 digits: option B falls back to A for the first and hashes for the second.
        for pan in ["4111111111111111", "41111111111111111"] {
            for option in Option.allCases {
                #expect(throws: EMVError(field: "imk", rule: rule)) { try Self.derive(option, pan: pan, psn: "00", imk: imk) }
            }
        }
    }

    // EMV Book 2 A1.4.2: option B applies only to PANs longer than 16 digits.
    @Test(arguments: ["1234567890123456", "411111111111111", "123456789012"])
    func optionBFallsBackToOptionAUpTo16Digits(pan: String) throws {
        let a = try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: Self.imk, pan: pan, psn: "00")
        let b = try KeyDerivation.iccMasterKeyOptionB(issuerMasterKey: Self.imk, pan: pan, psn: "00")
        #expect(a == b)
    }

    // Values from pyemv 1.5.0's derive_icc_mk_a / derive_icc_mk_b.
    @Test(arguments: [
        ("A", "1234567890123456", "00", "154F349D8585CB7F6B0798E9839B10C1"),
        ("B", "1234567890123456", "00", "154F349D8585CB7F6B0798E9839B10C1"),
        // 12-digit PAN: PAN ‖ PSN is 14 digits, zero-filled on the left to 16.
        ("A", "123456789012", "01", "7C2CF1495458DC3B62913BA87AF7F44A"),
        ("B", "1234567890123456789", "01", "BA382F7FDA3D38FD1CE531348C9EEC25"),
    ])
    func derivedKeys(option: String, pan: String, psn: String, expected: String) throws {
        let mk = option == "A"
            ? try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: Self.imk, pan: pan, psn: psn)
            : try KeyDerivation.iccMasterKeyOptionB(issuerMasterKey: Self.imk, pan: pan, psn: psn)
        #expect(Hex.encode(mk.clearBytes) == expected)
    }

    @Test func sessionKeyDiversificationValueLength() {
        #expect(throws: EMVError(field: "R", rule: "the diversification value is 8 bytes, got 7")) {
            try KeyDerivation.commonSessionKey(iccMasterKey: Self.imk, r: [0, 0, 0, 0, 0, 0, 0])
        }
        #expect(throws: EMVError(field: "R", rule: "the diversification value is 8 bytes, got 9")) {
            try KeyDerivation.commonSessionKey(iccMasterKey: Self.imk, r: [UInt8](repeating: 0, count: 9))
        }
        #expect(throws: EMVError(field: "tag 9F36", rule: "the ATC is 2 bytes, got 3")) {
            try KeyDerivation.commonSessionKey(iccMasterKey: Self.imk, atc: [0, 0, 1])
        }
        #expect(throws: EMVError(field: "tag 9F37", rule: "ATC is 2 bytes and UN 4 bytes, got 2 and 3")) {
            try KeyDerivation.mastercardSessionKey(iccMasterKey: Self.imk, atc: [0, 1], unpredictableNumber: [1, 2, 3])
        }
        #expect(throws: EMVError(field: "tag 9F36", rule: "ATC is 2 bytes and UN 4 bytes, got 1 and 4")) {
            try KeyDerivation.mastercardSessionKey(iccMasterKey: Self.imk, atc: [1], unpredictableNumber: [1, 2, 3, 4])
        }
    }
}
