import Testing
@testable import EMV

private func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }

@Suite("CVM list")
struct CVMTests {
    // A common Visa list: online PIN if supported (else next), signature if supported, then no CVM.
    @Test func parsesAVisaList() throws {
        let list = try CVMList.parse(bytes("000000000000000042031E031F00"))
        #expect(list.amountX == 0)
        #expect(list.amountY == 0)
        #expect(list.rules == [
            CVMRule(method: .encipheredPINOnline, condition: .terminalSupportsCVM, applyNextIfUnsuccessful: true),
            CVMRule(method: .signature, condition: .terminalSupportsCVM, applyNextIfUnsuccessful: false),
            CVMRule(method: .noCVMRequired, condition: .always, applyNextIfUnsuccessful: false),
        ])
        #expect(Hex.encode(list.bytes) == "000000000000000042031E031F00")
    }

    // Mastercard style with amounts: X = 5.00 and Y = 40.00 (in minor units of the application
    // currency), offline enciphered PIN under X, plaintext PIN over X, signature under Y,
    // online PIN over Y, no CVM for unattended cash, fail otherwise.
    @Test func parsesAListWithAmounts() throws {
        let hex = "000001F400000FA0" + "4406" + "4107" + "5E08" + "0209" + "1F01" + "0000"
        let list = try CVMList.parse(bytes(hex))
        #expect(list.amountX == 500)
        #expect(list.amountY == 4000)
        #expect(list.rules.map(\.method) == [.encipheredPINByICC, .plaintextPINByICC, .signature, .encipheredPINOnline, .noCVMRequired, .failCVM])
        #expect(list.rules.map(\.condition) == [.underX, .overX, .underY, .overY, .unattendedCash, .always])
        #expect(list.rules.map(\.applyNextIfUnsuccessful) == [true, true, true, false, false, false])
        #expect(list.rules.map(\.condition.needsApplicationCurrency) == [true, true, true, true, false, false])
        #expect(Hex.encode(list.bytes) == hex)
    }

    @Test func amountsUseAllFourBytesBigEndian() throws {
        let list = try CVMList.parse(bytes("FFFFFFFF01020304"))
        #expect(list.amountX == 0xFFFF_FFFF)
        #expect(list.amountY == 0x0102_0304)
        #expect(list.rules.isEmpty)
        #expect(Hex.encode(CVMList(amountX: 0x0102_0304, amountY: 1, rules: []).bytes) == "0102030400000001")
    }

    @Test(arguments: [
        ("", "must hold amounts X and Y (8 bytes), got 0 bytes"),
        ("00000000000000", "must hold amounts X and Y (8 bytes), got 7 bytes"),
        ("000000000000000042", "rules are 2 bytes each; 1 rule bytes is odd"),
        ("000000000000000042031E", "rules are 2 bytes each; 3 rule bytes is odd"),
    ])
    func errors(hex: String, rule: String) {
        #expect(throws: EMVError(field: "CVM list", rule: rule)) { try CVMList.parse(bytes(hex)) }
    }

    // EMV Book 3 Annex C3, table 39: CVM codes in bits 6–1.
    @Test(arguments: [
        (UInt8(0x00), CVMethod.failCVM, "Fail CVM processing"),
        (0x01, .plaintextPINByICC, "Plaintext PIN verification performed by ICC"),
        (0x02, .encipheredPINOnline, "Enciphered PIN verified online"),
        (0x03, .plaintextPINByICCAndSignature, "Plaintext PIN verification performed by ICC and signature (paper)"),
        (0x04, .encipheredPINByICC, "Enciphered PIN verification performed by ICC"),
        (0x05, .encipheredPINByICCAndSignature, "Enciphered PIN verification performed by ICC and signature (paper)"),
        (0x1E, .signature, "Signature (paper)"),
        (0x1F, .noCVMRequired, "No CVM required"),
        (0x3F, .notAvailable, "Not available for use"),
        (0x06, .other(0x06), "Reserved (06)"),
        (0x1D, .other(0x1D), "Reserved (1D)"),
        (0x20, .other(0x20), "Payment system specific (20)"),
        (0x2F, .other(0x2F), "Payment system specific (2F)"),
        (0x30, .other(0x30), "Issuer specific (30)"),
        (0x3E, .other(0x3E), "Issuer specific (3E)"),
    ])
    func methods(code: UInt8, method: CVMethod, description: String) {
        #expect(CVMethod(code: code) == method)
        #expect(method.code == code)
        #expect(method.description == description)
        // Bit 7 is "apply next" and bit 8 is RFU: neither changes the method.
        #expect(CVMethod(code: code | 0x40) == method)
        #expect(CVMethod(code: code | 0xC0) == method)
    }

    @Test(arguments: [
        (UInt8(0x00), CVMCondition.always, "Always"),
        (0x01, .unattendedCash, "If unattended cash"),
        (0x02, .notUnattendedCashNotManualCashNotCashback, "If not unattended cash and not manual cash and not purchase with cashback"),
        (0x03, .terminalSupportsCVM, "If terminal supports the CVM"),
        (0x04, .manualCash, "If manual cash"),
        (0x05, .purchaseWithCashback, "If purchase with cashback"),
        (0x06, .underX, "If transaction is in the application currency and is under X value"),
        (0x07, .overX, "If transaction is in the application currency and is over X value"),
        (0x08, .underY, "If transaction is in the application currency and is under Y value"),
        (0x09, .overY, "If transaction is in the application currency and is over Y value"),
        (0x0A, .other(0x0A), "Reserved or proprietary condition 0A"),
        (0x7F, .other(0x7F), "Reserved or proprietary condition 7F"),
        (0x80, .other(0x80), "Reserved or proprietary condition 80"),
        (0xFF, .other(0xFF), "Reserved or proprietary condition FF"),
    ])
    func conditions(code: UInt8, condition: CVMCondition, description: String) {
        #expect(CVMCondition(code: code) == condition)
        #expect(condition.code == code)
        #expect(condition.description == description)
        #expect(condition.needsApplicationCurrency == (0x06...0x09).contains(code))
    }

    @Test func applyNextBitIsBit7() throws {
        let list = try CVMList.parse(bytes("0000000000000000" + "0203" + "4203"))
        #expect(list.rules[0] == CVMRule(method: .encipheredPINOnline, condition: .terminalSupportsCVM, applyNextIfUnsuccessful: false))
        #expect(list.rules[1] == CVMRule(method: .encipheredPINOnline, condition: .terminalSupportsCVM, applyNextIfUnsuccessful: true))
        #expect(CVMRule(method: .signature, condition: .always, applyNextIfUnsuccessful: true).bytes == [0x5E, 0x00])
        #expect(CVMRule(method: .signature, condition: .always, applyNextIfUnsuccessful: false).bytes == [0x1E, 0x00])
        #expect(CVMRule(method: .other(0x25), condition: .other(0x90), applyNextIfUnsuccessful: true).bytes == [0x65, 0x90])
    }

    @Test(arguments: [
        (CVMRule(method: .encipheredPINOnline, condition: .always, applyNextIfUnsuccessful: true),
         "Enciphered PIN verified online, always, else next rule"),
        (CVMRule(method: .signature, condition: .unattendedCash, applyNextIfUnsuccessful: false),
         "Signature (paper), if unattended cash, else fail"),
        (CVMRule(method: .failCVM, condition: .purchaseWithCashback, applyNextIfUnsuccessful: false),
         "Fail CVM processing, if purchase with cashback, else fail"),
        (CVMRule(method: .other(0x21), condition: .manualCash, applyNextIfUnsuccessful: true),
         "Payment system specific (21), if manual cash, else next rule"),
        // Only the condition's first letter is lowered: acronyms and amount names keep their case.
        (CVMRule(method: .signature, condition: .terminalSupportsCVM, applyNextIfUnsuccessful: false),
         "Signature (paper), if terminal supports the CVM, else fail"),
        (CVMRule(method: .plaintextPINByICC, condition: .underX, applyNextIfUnsuccessful: true),
         "Plaintext PIN verification performed by ICC, if transaction is in the application currency and is under X value, else next rule"),
    ])
    func ruleDescriptions(rule: CVMRule, description: String) {
        #expect(rule.description == description)
    }
}

@Suite("CVM results")
struct CVMResultsTests {
    @Test func performedRuleIsCopiedWithItsResult() {
        let online = CVMRule(method: .encipheredPINOnline, condition: .terminalSupportsCVM, applyNextIfUnsuccessful: true)
        #expect(Hex.encode(CVMResults(rule: online, result: .unknown).bytes) == "420300")
        let signature = CVMRule(method: .signature, condition: .always, applyNextIfUnsuccessful: false)
        #expect(Hex.encode(CVMResults(rule: signature, result: .unknown).bytes) == "1E0000")
        let offlinePIN = CVMRule(method: .plaintextPINByICC, condition: .overX, applyNextIfUnsuccessful: true)
        #expect(Hex.encode(CVMResults(rule: offlinePIN, result: .successful).bytes) == "410702")
        #expect(Hex.encode(CVMResults(rule: offlinePIN, result: .failed).bytes) == "410701")
        let noCVM = CVMRule(method: .noCVMRequired, condition: .always, applyNextIfUnsuccessful: false)
        #expect(Hex.encode(CVMResults(rule: noCVM, result: .successful).bytes) == "1F0002")
    }

    @Test func noRuleIsCVMNotPerformed() {
        #expect(Hex.encode(CVMResults(rule: nil, result: .failed).bytes) == "3F0001")
        #expect(Hex.encode(CVMResults(rule: nil, result: .unknown).bytes) == "3F0000")
    }

    @Test func resultCodes() {
        #expect(CVMResults.Result.unknown.rawValue == 0x00)
        #expect(CVMResults.Result.failed.rawValue == 0x01)
        #expect(CVMResults.Result.successful.rawValue == 0x02)
    }
}
