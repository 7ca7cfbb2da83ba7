import Testing
@testable import EMV

/// Every vector of ../shared/vectors/emv-crypto.md (pyemv and jPOS agree on each).
@Suite("Published EMV cryptogram vectors")
struct VectorTests {
    static func key(_ hex: String) -> TDESKey { try! TDESKey(hex: hex) }
    static func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }

    // Set A: pyemv's own test inputs.
    static let imkAC = key("0123456789ABCDEFFEDCBA9876543210")
    static let visaTags: [EMVTag: [UInt8]] = [
        0x9F02: bytes("000000004000"), 0x9F03: bytes("000000000000"), 0x9F1A: bytes("0124"), 0x95: bytes("8000048000"),
        0x5F2A: bytes("0124"), 0x9A: bytes("191105"), 0x9C: bytes("01"), 0x9F37: bytes("52BF4585"), 0x82: bytes("1800"),
        0x9F36: bytes("001C"),
    ]
    static let mcTags: [EMVTag: [UInt8]] = [
        0x9F02: bytes("000000009999"), 0x9F03: bytes("000000000000"), 0x9F1A: bytes("0124"), 0x95: bytes("8000000000"),
        0x5F2A: bytes("0124"), 0x9A: bytes("209906"), 0x9C: bytes("00"), 0x9F37: bytes("ABCDEF12"), 0x82: bytes("1800"),
        0x9F36: bytes("001C"),
    ]

    @Test func optionAICCMasterKeyOfSetA() throws {
        let mk = try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: Self.imkAC, pan: "1234567890123456", psn: "00")
        #expect(Hex.encode(mk.clearBytes) == "154F349D8585CB7F6B0798E9839B10C1")
        #expect(Hex.encode(mk.checkValue).hasPrefix("BAB0"))
    }

    @Test func visaCVN10() throws {
        let keys = try CryptogramKeys(cvn: .visa10, issuerMasterKey: Self.imkAC, pan: "1234567890123456", psn: "00")
        let data = CryptogramData(tags: Self.visaTags, cvr: Self.bytes("03A06010"))
        let (arqc, sk) = try keys.generate(data)
        #expect(Hex.encode(arqc) == "29CCA15AE665FA2E")
        #expect(sk == keys.iccMasterKey)
        #expect(try keys.verify(arqc, data))
        #expect(Hex.encode(try keys.arpc(arqc: arqc, .responseCode(Self.bytes("3030")), atc: nil)) == "28993816AFAE4AEB")
    }

    @Test(arguments: [CVN.visa18, .visa22])
    func visaCVN18And22(cvn: CVN) throws {
        let keys = try CryptogramKeys(cvn: cvn, issuerMasterKey: Self.imkAC, pan: "1234567890123456", psn: "00")
        let data = CryptogramData(tags: Self.visaTags, issuerApplicationData: Self.bytes("06011203A0B800"))
        let (arqc, sk) = try keys.generate(data)
        #expect(Hex.encode(sk.clearBytes) == "436B942AD637E08564B532B0EC97CB26")
        #expect(Hex.encode(arqc) == "7A788EA6B8A3E733")
        let arpc = try keys.arpc(arqc: arqc, .cardStatusUpdate(Self.bytes("00000000")), atc: Self.bytes("001C"))
        #expect(Hex.encode(arpc) == "9AF514C1")
    }

    @Test(arguments: [
        (CVN.mastercard16, "5D8F37BCD9E5DA68048CDFA2EA255D9E", "24CCF3DEE3158C70", "73F6BBF389A6586C"),
        (CVN.mastercard17, "5D8F37BCD9E5DA68048CDFA2EA255D9E", "EAE8A620A75648D8", "29CF11FBDB9CA650"),
        (CVN.mastercard20, "436B942AD637E08564B532B0EC97CB26", "CD29615D6452E70E", "DFD0956606B68D64"),
        (CVN.mastercard21, "436B942AD637E08564B532B0EC97CB26", "C30E54BE496CF5E5", "4F51F9CC63CE8B3C"),
    ])
    func mastercard(cvn: CVN, sessionKey: String, expectedARQC: String, expectedARPC: String) throws {
        let keys = try CryptogramKeys(cvn: cvn, issuerMasterKey: Self.imkAC, pan: "1234567890123456", psn: "00")
        let data = CryptogramData(tags: Self.mcTags, cvr: Self.bytes("A00003220000"),
                                  counters: cvn == .mastercard17 || cvn == .mastercard21 ? Self.bytes("00000000000322FF") : nil)
        let (arqc, sk) = try keys.generate(data)
        #expect(Hex.encode(sk.clearBytes) == sessionKey)
        #expect(Hex.encode(arqc) == expectedARQC)
        #expect(try keys.verify(arqc, data))
        let arpc = try keys.arpc(arqc: arqc, .responseCode(Self.bytes("0010")), atc: Self.bytes("001C"))
        #expect(Hex.encode(arpc) == expectedARPC)
    }

    @Test func mastercardSessionKeyCheckValue() throws {
        let mk = try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: Self.imkAC, pan: "1234567890123456", psn: "00")
        let sk = try KeyDerivation.mastercardSessionKey(iccMasterKey: mk, atc: Self.bytes("001C"), unpredictableNumber: Self.bytes("ABCDEF12"))
        #expect(Hex.encode(sk.checkValue).hasPrefix("2FD5"))
    }

    @Test func primitivesOfSetA() throws {
        let a = try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: Self.imkAC, pan: "99012345678901234", psn: "45")
        #expect(Hex.encode(a.clearBytes) == "67F8292358083E5EA7AB7FDA58D53B6B")
        let b = try KeyDerivation.iccMasterKeyOptionB(issuerMasterKey: Self.imkAC, pan: "12345678901234567", psn: "01")
        #expect(Hex.encode(b.clearBytes) == "AD406D7F6D7570916D75E5DCAB8CF737")
        let csk = try KeyDerivation.commonSessionKey(iccMasterKey: Self.imkAC, r: Self.bytes("001C000000000000"))
        #expect(Hex.encode(csk.clearBytes) == "E9FB384AF807B940FEDCEA613461B0C4")
        let mac = ISO9797.algorithm3(key: Self.key("AAAAAAAAAAAAAAAABBBBBBBBBBBBBBBB"),
                                     data: Self.bytes("000000002000 000000000000 0124 0000008000 0124 110309 00 3804823E 5800 0001"),
                                     padding: .method2)
        #expect(Hex.encode(mac) == "3B76CF10FECD8789")
    }

    // Set B: jPOS JCESecurityModuleTest.
    static let setBData = bytes("000000010000 000000001000 0840 0000001080 0840 980704 00 11111111 5800 3456 A08003242000")
    static let setBIMK = key("12345678123456781234567812345678")

    static func setBICCMasterKey() throws -> TDESKey {
        try KeyDerivation.iccMasterKeyOptionA(issuerMasterKey: setBIMK, pan: "1234567890123456", psn: "00")
    }

    @Test func setBKeysAndCryptograms() throws {
        #expect(Self.setBData.count == 39)
        let mk = try Self.setBICCMasterKey()
        #expect(Hex.encode(mk.clearBytes) == "DCE992BCE398C264F7858AFD4C4A324A")
        #expect(Hex.encode(ISO9797.algorithm3(key: mk, data: Self.setBData, padding: .method1)) == "26C8A1042D1CAF3E")
        #expect(Hex.encode(ISO9797.algorithm3(key: mk, data: Self.setBData, padding: .method2)) == "2263CD868F3E0234")

        let mchip = try KeyDerivation.mastercardSessionKey(iccMasterKey: mk, atc: Self.bytes("3456"), unpredictableNumber: Self.bytes("11111111"))
        #expect(Hex.encode(mchip.clearBytes) == "68E9A15BBCF283EF0164F7E6C44C4325")
        #expect(Hex.encode(ISO9797.algorithm3(key: mchip, data: Self.setBData, padding: .method1)) == "9FFD1D52AE0EC0F3")
        #expect(Hex.encode(ISO9797.algorithm3(key: mchip, data: Self.setBData, padding: .method2)) == "AC8074C9E62EE6EF")

        let common = try KeyDerivation.commonSessionKey(iccMasterKey: mk, atc: Self.bytes("3456"))
        #expect(Hex.encode(common.clearBytes) == "F2A75194C2B954A4163E9886BCA45473")
        #expect(Hex.encode(ISO9797.algorithm3(key: common, data: Self.setBData, padding: .method1)) == "36DBEE15F36B1E7F")
        #expect(Hex.encode(ISO9797.algorithm3(key: common, data: Self.setBData, padding: .method2)) == "55BE45DD2C9E0CBF")
    }

    @Test func setBARPCs() throws {
        let mk = try Self.setBICCMasterKey()
        // VSDC, method 1 keyed with the ICC master key (as Visa CVN 10).
        let vsdc = CryptogramKeys(cvn: .visa10, iccMasterKey: mk)
        #expect(Hex.encode(try vsdc.arpc(arqc: Self.bytes("26C8A1042D1CAF3E"), .responseCode(Self.bytes("3030")), atc: nil)) == "98DE7C7B3D80A831")
        // M/Chip, method 1 keyed with the ICC master key (as CVN 16), over the 80-padded M/Chip ARQC.
        let mchip = CryptogramKeys(cvn: .mastercard16, iccMasterKey: mk)
        #expect(Hex.encode(try mchip.arpc(arqc: Self.bytes("AC8074C9E62EE6EF"), .responseCode(Self.bytes("0012")), atc: nil)) == "5B5B712F9A644774")
        // Common session key, method 1 (as CVN 20) and method 2 (as CVN 18), over the 80-padded common-key ARQC.
        let cvn20 = CryptogramKeys(cvn: .mastercard20, iccMasterKey: mk)
        #expect(Hex.encode(try cvn20.arpc(arqc: Self.bytes("55BE45DD2C9E0CBF"), .responseCode(Self.bytes("0012")), atc: Self.bytes("3456"))) == "01BAE8DE6A0DE9E0")
        let cvn18 = CryptogramKeys(cvn: .visa18, iccMasterKey: mk)
        #expect(Hex.encode(try cvn18.arpc(arqc: Self.bytes("55BE45DD2C9E0CBF"), .cardStatusUpdate(Self.bytes("00120000")), atc: Self.bytes("3456"))) == "B4C698B6")
    }
}
