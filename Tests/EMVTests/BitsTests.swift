import Testing
@testable import EMV

// Each named bit with the field it must set on its own, as the EMV books and scheme
// specifications place it (byte 1 leftmost, bit 8 the most significant).
private let tvrBits: [(EMVBit, String)] = [
    (TVR.offlineDataAuthenticationNotPerformed, "8000000000"),
    (TVR.sdaFailed, "4000000000"),
    (TVR.iccDataMissing, "2000000000"),
    (TVR.cardOnExceptionFile, "1000000000"),
    (TVR.ddaFailed, "0800000000"),
    (TVR.cdaFailed, "0400000000"),
    (TVR.sdaSelected, "0200000000"),
    (TVR.differentApplicationVersions, "0080000000"),
    (TVR.expiredApplication, "0040000000"),
    (TVR.applicationNotYetEffective, "0020000000"),
    (TVR.serviceNotAllowed, "0010000000"),
    (TVR.newCard, "0008000000"),
    (TVR.cardholderVerificationNotSuccessful, "0000800000"),
    (TVR.unrecognisedCVM, "0000400000"),
    (TVR.pinTryLimitExceeded, "0000200000"),
    (TVR.pinPadNotPresent, "0000100000"),
    (TVR.pinNotEntered, "0000080000"),
    (TVR.onlinePINEntered, "0000040000"),
    (TVR.exceedsFloorLimit, "0000008000"),
    (TVR.lowerOfflineLimitExceeded, "0000004000"),
    (TVR.upperOfflineLimitExceeded, "0000002000"),
    (TVR.randomlySelectedOnline, "0000001000"),
    (TVR.merchantForcedOnline, "0000000800"),
    (TVR.defaultTDOLUsed, "0000000080"),
    (TVR.issuerAuthenticationFailed, "0000000040"),
    (TVR.scriptFailedBeforeFinalGenerateAC, "0000000020"),
    (TVR.scriptFailedAfterFinalGenerateAC, "0000000010"),
]

private let tsiBits: [(EMVBit, String)] = [
    (TSI.offlineDataAuthenticationPerformed, "8000"),
    (TSI.cardholderVerificationPerformed, "4000"),
    (TSI.cardRiskManagementPerformed, "2000"),
    (TSI.issuerAuthenticationPerformed, "1000"),
    (TSI.terminalRiskManagementPerformed, "0800"),
    (TSI.scriptProcessingPerformed, "0400"),
]

private let aipBits: [(EMVBit, String)] = [
    (AIP.sdaSupported, "4000"),
    (AIP.ddaSupported, "2000"),
    (AIP.cardholderVerificationSupported, "1000"),
    (AIP.terminalRiskManagementRequired, "0800"),
    (AIP.issuerAuthenticationSupported, "0400"),
    (AIP.cdaSupported, "0100"),
]

private let visaCVRBits: [(EMVBit, String)] = [
    (VisaCVR.issuerAuthenticationFailed, "00080000"),
    (VisaCVR.offlinePINPerformed, "00040000"),
    (VisaCVR.offlinePINFailed, "00020000"),
    (VisaCVR.unableToGoOnline, "00010000"),
    (VisaCVR.lastOnlineNotCompleted, "00008000"),
    (VisaCVR.pinTryLimitExceeded, "00004000"),
    (VisaCVR.velocityExceeded, "00002000"),
    (VisaCVR.newCard, "00001000"),
    (VisaCVR.issuerAuthenticationFailedLastOnline, "00000800"),
    (VisaCVR.issuerAuthenticationNotPerformed, "00000400"),
    (VisaCVR.applicationBlockedByPIN, "00000200"),
    (VisaCVR.sdaFailedLastTransaction, "00000100"),
    (VisaCVR.scriptProcessingFailed, "00000008"),
    (VisaCVR.ddaFailedLastTransaction, "00000004"),
    (VisaCVR.ddaPerformed, "00000002"),
]

private let mastercardCVRBits: [(EMVBit, String)] = [
    (MastercardCVR.offlinePINPerformed, "040000000000"),
    (MastercardCVR.offlineEncipheredPINPerformed, "020000000000"),
    (MastercardCVR.offlinePINSuccessful, "010000000000"),
    (MastercardCVR.ddaReturned, "008000000000"),
    (MastercardCVR.cdaFirstGenerateAC, "004000000000"),
    (MastercardCVR.cdaSecondGenerateAC, "002000000000"),
    (MastercardCVR.issuerAuthenticationPerformed, "001000000000"),
    (MastercardCVR.lastOnlineNotCompleted, "000000800000"),
    (MastercardCVR.unableToGoOnline, "000000400000"),
    (MastercardCVR.offlinePINNotPerformed, "000000200000"),
    (MastercardCVR.offlinePINFailed, "000000100000"),
    (MastercardCVR.pinTryLimitExceeded, "000000080000"),
    (MastercardCVR.internationalTransaction, "000000040000"),
    (MastercardCVR.domesticTransaction, "000000020000"),
    (MastercardCVR.terminalErroneouslyConsidersPINOK, "000000010000"),
    (MastercardCVR.lowerConsecutiveLimitExceeded, "000000008000"),
    (MastercardCVR.upperConsecutiveLimitExceeded, "000000004000"),
    (MastercardCVR.lowerCumulativeLimitExceeded, "000000002000"),
    (MastercardCVR.upperCumulativeLimitExceeded, "000000001000"),
    (MastercardCVR.goOnlineNextTransaction, "000000000800"),
    (MastercardCVR.issuerAuthenticationFailed, "000000000400"),
    (MastercardCVR.scriptReceived, "000000000200"),
    (MastercardCVR.scriptFailed, "000000000100"),
]

/// Sets each bit alone on an empty field and checks the bytes, the name list and the
/// round trip back to empty; then checks the table covers `namedBits` exactly, in order.
private func checkBits<F: EMVBitString>(_ type: F.Type, _ table: [(EMVBit, String)]) {
    for (bit, hex) in table {
        var field = F()
        field.set(bit)
        #expect(field.hex == hex, "\(bit)")
        #expect(field.contains(bit))
        #expect(field.setBitNames == [bit.name])
        #expect(field.description == "\(hex) (\(bit.name))")
        field.set(bit)
        #expect(field.hex == hex, "setting twice changes nothing")
        field.clear(bit)
        #expect(field == F())
        #expect(!field.contains(bit))
    }
    #expect(F.namedBits == table.map(\.0))
    #expect(Set(F.namedBits.map(\.name)).count == F.namedBits.count, "names are unique")
}

@Suite("EMV bit strings")
struct BitsTests {
    @Test func tvrBitPositions() { checkBits(TVR.self, tvrBits) }
    @Test func tsiBitPositions() { checkBits(TSI.self, tsiBits) }
    @Test func aipBitPositions() { checkBits(AIP.self, aipBits) }
    @Test func visaCVRBitPositions() { checkBits(VisaCVR.self, visaCVRBits) }
    @Test func mastercardCVRBitPositions() { checkBits(MastercardCVR.self, mastercardCVRBits) }

    @Test func sizesAndNames() {
        #expect(TVR().hex == "0000000000")
        #expect(TSI().hex == "0000")
        #expect(AIP().hex == "0000")
        #expect(VisaCVR().hex == "00000000")
        #expect(MastercardCVR().hex == "000000000000")
        #expect([TVR.fieldName, TSI.fieldName, AIP.fieldName, VisaCVR.fieldName, MastercardCVR.fieldName] == ["TVR", "TSI", "AIP", "CVR", "CVR"])
    }

    @Test func tvrSeveralBits() throws {
        var tvr = TVR()
        tvr.set(TVR.offlineDataAuthenticationNotPerformed)
        tvr.set(TVR.exceedsFloorLimit)
        tvr.set(TVR.scriptFailedAfterFinalGenerateAC)
        #expect(tvr.hex == "8000008010")
        #expect(tvr.setBitNames == [
            "Offline data authentication was not performed", "Transaction exceeds floor limit",
            "Script processing failed after final GENERATE AC",
        ])
        #expect(tvr.description
            == "8000008010 (Offline data authentication was not performed; Transaction exceeds floor limit; Script processing failed after final GENERATE AC)")
        tvr.clear(TVR.exceedsFloorLimit)
        #expect(tvr.hex == "8000000010")
        // Clearing a bit that is not set changes nothing.
        tvr.clear(TVR.newCard)
        #expect(tvr.hex == "8000000010")
        #expect(try TVR(hex: "8000000010") == tvr)
    }

    @Test func unnamedBitsShowOnlyInHex() throws {
        // TVR byte 1 bit 1 and byte 2 bits 3-1 are RFU.
        let tvr = try TVR(hex: "0107000000")
        #expect(tvr.setBitNames.isEmpty)
        #expect(tvr.description == "0107000000")
        #expect(TVR().description == "0000000000")
    }

    @Test func realAIPs() throws {
        // 1980: cardholder verification, terminal risk management, CDA; byte 2 bit 8 is the
        // contactless "EMV mode" bit, which has no contact meaning here.
        let cda = try AIP(hex: "1980")
        #expect(cda.setBitNames == ["Cardholder verification is supported", "Terminal risk management is to be performed", "CDA supported"])
        #expect(cda.contains(AIP.cdaSupported))
        #expect(!cda.contains(AIP.ddaSupported))
        let dda = try AIP(hex: "5C00")
        #expect(dda.setBitNames == [
            "SDA supported", "Cardholder verification is supported", "Terminal risk management is to be performed",
            "Issuer authentication is supported",
        ])
        #expect(try AIP(hex: "3c00").hex == "3C00")
    }

    @Test func tsiDescription() throws {
        let tsi = try TSI(hex: "E800")
        #expect(tsi.description
            == "E800 (Offline data authentication was performed; Cardholder verification was performed; Card risk management was performed; Terminal risk management was performed)")
    }

    @Test(arguments: [
        ("TVR", "00", "must be 5 bytes, got 1"),
        ("TVR", "000000000000", "must be 5 bytes, got 6"),
        ("TSI", "000000", "must be 2 bytes, got 3"),
        ("AIP", "", "must be 2 bytes, got 0"),
        ("AIP", "19", "must be 2 bytes, got 1"),
        ("VisaCVR", "03A0", "must be 4 bytes, got 2"),
        ("MastercardCVR", "A000032200", "must be 6 bytes, got 5"),
    ])
    func wrongLengthsNameTheField(type: String, hex: String, rule: String) {
        switch type {
        case "TVR": #expect(throws: EMVError(field: "TVR", rule: rule)) { try TVR(hex: hex) }
        case "TSI": #expect(throws: EMVError(field: "TSI", rule: rule)) { try TSI(hex: hex) }
        case "AIP": #expect(throws: EMVError(field: "AIP", rule: rule)) { try AIP(hex: hex) }
        case "VisaCVR": #expect(throws: EMVError(field: "CVR", rule: rule)) { try VisaCVR(hex: hex) }
        default: #expect(throws: EMVError(field: "CVR", rule: rule)) { try MastercardCVR(hex: hex) }
        }
    }

    @Test func badHexAndByteInitNameTheField() {
        #expect(throws: EMVError(field: "TVR", rule: "must be hexadecimal; character 1 is 'X'")) { try TVR(hex: "X000000000") }
        #expect(throws: EMVError(field: "AIP", rule: "must have an even number of hex digits, got 3")) { try AIP(hex: "198") }
        #expect(throws: EMVError(field: "TSI", rule: "must be 2 bytes, got 1")) { try TSI(bytes: [0x80]) }
        #expect(throws: EMVError(field: "CVR", rule: "must be 4 bytes, got 6")) { try VisaCVR(bytes: [0, 0, 0, 0, 0, 0]) }
    }

    @Test func bitDescription() {
        #expect(TVR.offlineDataAuthenticationNotPerformed.description == "byte 1 bit 8: Offline data authentication was not performed")
        #expect(AIP.cdaSupported.description == "byte 1 bit 1: CDA supported")
        #expect(EMVBit(byte: 3, bit: 5, "x").mask == 0x10)
    }
}

@Suite("Card verification results")
struct CVRTests {
    @Test func cryptogramTypeNames() {
        #expect(CryptogramType.allCasesForTest.map(\.description) == ["AAC", "TC", "ARQC", "not requested"])
    }

    // Visa CVR byte 2: bits 8-7 second GENERATE AC (00 AAC, 01 TC, 10 not requested),
    // bits 6-5 first GENERATE AC (00 AAC, 01 TC, 10 ARQC).
    @Test(arguments: [
        (CryptogramType.aac, "03000000", "03000000"),
        (.tc, "03100000", "03400000"),
        (.arqc, "03200000", "03C00000"),
        (.notRequested, "03300000", "03800000"),
    ])
    func visaCryptogramFields(type: CryptogramType, firstHex: String, secondHex: String) throws {
        var first = VisaCVR.empty()
        first.firstGenerateAC = type
        #expect(first.hex == firstHex)
        #expect(first.firstGenerateAC == type)
        #expect(first.secondGenerateAC == .aac)

        var second = VisaCVR.empty()
        second.secondGenerateAC = type
        #expect(second.hex == secondHex)
        #expect(second.secondGenerateAC == type)
        #expect(second.firstGenerateAC == .aac)

        // Setting a cryptogram field leaves every other bit alone.
        var full = try VisaCVR(hex: "03FFFFFF")
        full.firstGenerateAC = type
        full.secondGenerateAC = type
        #expect(full.firstGenerateAC == type)
        #expect(full.secondGenerateAC == type)
        #expect(full.bytes[1] & 0x0F == 0x0F)
        #expect(full.bytes[0] == 0x03 && full.bytes[2] == 0xFF && full.bytes[3] == 0xFF)
    }

    // Mastercard CVR byte 1 holds the same two fields in the same bit positions.
    @Test(arguments: [
        (CryptogramType.aac, "000000000000", "000000000000"),
        (.tc, "100000000000", "400000000000"),
        (.arqc, "200000000000", "C00000000000"),
        (.notRequested, "300000000000", "800000000000"),
    ])
    func mastercardCryptogramFields(type: CryptogramType, firstHex: String, secondHex: String) throws {
        var first = MastercardCVR()
        first.firstGenerateAC = type
        #expect(first.hex == firstHex)
        #expect(first.firstGenerateAC == type)
        #expect(first.secondGenerateAC == .aac)

        var second = MastercardCVR()
        second.secondGenerateAC = type
        #expect(second.hex == secondHex)
        #expect(second.secondGenerateAC == type)

        var full = try MastercardCVR(hex: "FFFFFFFFFFFF")
        full.firstGenerateAC = type
        full.secondGenerateAC = type
        #expect(full.firstGenerateAC == type)
        #expect(full.secondGenerateAC == type)
        #expect(full.bytes[0] & 0x0F == 0x0F)
        #expect(Array(full.bytes[1...]) == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
    }

    @Test func emptyVisaCVR() {
        let cvr = VisaCVR.empty()
        #expect(cvr.hex == "03000000")
        #expect(cvr.firstGenerateAC == .aac)
        #expect(cvr.secondGenerateAC == .aac)
        #expect(cvr.setBitNames.isEmpty)
    }

    @Test func realVisaCVR() throws {
        // 03A06010 (pyemv's CVN 10 sample): ARQC in the first GENERATE AC, second not
        // requested, PIN try limit and velocity counters exceeded, one script command.
        let cvr = try VisaCVR(hex: "03A06010")
        #expect(cvr.firstGenerateAC == .arqc)
        #expect(cvr.secondGenerateAC == .notRequested)
        #expect(cvr.setBitNames == ["PIN try limit exceeded", "Exceeded velocity checking counters"])
    }

    @Test func realMastercardCVR() throws {
        // A00003220000 (pyemv's M/Chip sample): ARQC first, second not requested, PIN try
        // counter 3, offline PIN not performed, domestic transaction.
        let cvr = try MastercardCVR(hex: "A00003220000")
        #expect(cvr.firstGenerateAC == .arqc)
        #expect(cvr.secondGenerateAC == .notRequested)
        #expect(cvr.pinTryCounter == 3)
        #expect(cvr.setBitNames == ["Offline PIN verification not performed", "Domestic transaction"])
    }

    @Test func mastercardPINTryCounter() throws {
        var cvr = try MastercardCVR(hex: "0000A0000000")
        #expect(cvr.pinTryCounter == 0)
        for n in 0...15 {
            cvr.pinTryCounter = n
            #expect(cvr.pinTryCounter == n)
            // The high nibble of byte 3 (the script counter) is untouched.
            #expect(cvr.bytes[2] == 0xA0 | UInt8(n))
        }
        cvr.pinTryCounter = 3
        #expect(cvr.hex == "0000A3000000")
        // Only the low nibble is stored.
        cvr.pinTryCounter = 0x12
        #expect(cvr.pinTryCounter == 2)
        #expect(cvr.hex == "0000A2000000")
    }
}

extension CryptogramType {
    fileprivate static var allCasesForTest: [CryptogramType] { [.aac, .tc, .arqc, .notRequested] }
}
