import Testing
@testable import EMV

private func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }


@Suite("Command APDU")
struct CommandAPDUTests {
    // ISO 7816-4 short cases: 1 header only, 2 header + Le, 3 header + Lc + data,
    // 4 header + Lc + data + Le; an Le byte of 00 asks for 256 bytes.
    @Test(arguments: [
        ("00A40400", [UInt8](), Int?.none),
        ("00B2010C00", [], 256),
        ("00C000001C", [], 0x1C),
        ("00B2010C01", [], 1),
        ("0020008008241234FFFFFFFFFF", bytes("241234FFFFFFFFFF"), nil),
        ("00A4040007A000000003101000", bytes("A0000000031010"), 256),
        ("80A8000002830010", bytes("8300"), 0x10),
        ("00820000" + "FF" + String(repeating: "AB", count: 255) + "FF", [UInt8](repeating: 0xAB, count: 255), 255),
    ])
    func cases(hex: String, data: [UInt8], le: Int?) throws {
        let apdu = try CommandAPDU(bytes: bytes(hex))
        let header = bytes(String(hex.prefix(8)))
        #expect([apdu.cla, apdu.ins, apdu.p1, apdu.p2] == header)
        #expect(apdu.data == data)
        #expect(apdu.le == le)
        #expect(Hex.encode(apdu.bytes) == hex)
        #expect(apdu == CommandAPDU(cla: header[0], ins: header[1], p1: header[2], p2: header[3], data: data, le: le))
    }

    @Test(arguments: [
        ("", "needs at least CLA INS P1 P2 (4 bytes), got 0"),
        ("00A404", "needs at least CLA INS P1 P2 (4 bytes), got 3"),
        ("00A4040005A000", "Lc says 5 data bytes but 2 bytes follow it"),
        ("00B2010C01AABBCC", "Lc says 1 data bytes but 3 bytes follow it"),
        ("00A4040002A0000000", "Lc says 2 data bytes but 4 bytes follow it"),
        ("00A404000000", "Lc of 00 marks an extended APDU, which EMV does not use"),
        ("00A40400000007A0000000031010", "Lc of 00 marks an extended APDU, which EMV does not use"),
    ])
    func parseErrors(hex: String, rule: String) {
        #expect(throws: EMVError(field: "C-APDU", rule: rule)) { try CommandAPDU(bytes: bytes(hex)) }
    }

    @Test func selectPSE() {
        #expect(Hex.encode(CommandAPDU.selectPSE.bytes) == "00A404000E315041592E5359532E444446303100")
        #expect(CommandAPDU.selectPSE.description == "SELECT: 00A404000E315041592E5359532E444446303100")
    }

    @Test func selectByAID() {
        #expect(Hex.encode(CommandAPDU.select(name: bytes("A0000000031010")).bytes) == "00A4040007A000000003101000")
        // Next occurrence of a partial AID: P2 02.
        #expect(Hex.encode(CommandAPDU.select(name: bytes("A000000003"), next: true).bytes) == "00A4040205A00000000300")
    }

    @Test func getProcessingOptions() {
        // No PDOL: tag 83 with length 0.
        #expect(Hex.encode(CommandAPDU.getProcessingOptions(pdolData: []).bytes) == "80A8000002830000")
        // The PDOL 9F66 04 9F02 06 9F37 04 5F2A 02 filled: 16 bytes inside 83 10.
        let pdolData = bytes("36004000" + "000000001000" + "52BF4585" + "0978")
        #expect(Hex.encode(CommandAPDU.getProcessingOptions(pdolData: pdolData).bytes)
            == "80A8000012" + "8310" + "36004000000000001000" + "52BF45850978" + "00")
        #expect(CommandAPDU.getProcessingOptions(pdolData: []).instructionName == "GET PROCESSING OPTIONS")
    }

    @Test(arguments: [
        (1, 1, "00B2010C00"),
        (2, 3, "00B2031400"),
        (3, 2, "00B2021C00"),
        (30, 255, "00B2FFF400"),
    ])
    func readRecord(sfi: Int, record: Int, hex: String) {
        // P2 is the SFI in bits 8-4 and 100 ("P1 is a record number") in bits 3-1.
        #expect(Hex.encode(CommandAPDU.readRecord(sfi: sfi, record: record).bytes) == hex)
    }

    @Test(arguments: [
        (CryptogramType.aac, false, UInt8(0x00)),
        (.tc, false, 0x40),
        (.arqc, false, 0x80),
        (.aac, true, 0x10),
        (.tc, true, 0x50),
        (.arqc, true, 0x90),
    ])
    func generateAC(type: CryptogramType, cda: Bool, p1: UInt8) {
        let cdol = bytes("000000004000000000000000012480000480000124191105" + "0152BF4585")
        let apdu = CommandAPDU.generateAC(type, cdolData: cdol, cda: cda)
        #expect(Hex.encode(apdu.bytes) == "80AE" + Hex.encode([p1]) + "00" + "1D" + Hex.encode(cdol) + "00")
        #expect(apdu.instructionName == "GENERATE AC")
    }

    @Test func getData() {
        #expect(Hex.encode(CommandAPDU.getData(0x9F36).bytes) == "80CA9F3600")
        #expect(Hex.encode(CommandAPDU.getData(0x9F17).bytes) == "80CA9F1700")
        #expect(Hex.encode(CommandAPDU.getData(0x9F13).bytes) == "80CA9F1300")
        #expect(CommandAPDU.getData(0x9F36).description == "GET DATA: 80CA9F3600")
    }

    @Test func verify() throws {
        let block = try PlaintextPINBlock.encode(pin: "1234")
        #expect(Hex.encode(CommandAPDU.verify(pinBlock: block).bytes) == "0020008008241234FFFFFFFFFF")
        // P2 88: enciphered PIN.
        #expect(Hex.encode(CommandAPDU.verify(pinBlock: [0x01, 0x02], qualifier: 0x88).bytes) == "00200088020102")
    }

    @Test func externalAuthenticateGetResponseGetChallenge() {
        let iad = bytes("1A2B3C4D5E6F70803030")
        #expect(Hex.encode(CommandAPDU.externalAuthenticate(iad).bytes) == "008200000A1A2B3C4D5E6F70803030")
        #expect(Hex.encode(CommandAPDU.getResponse(0x1C).bytes) == "00C000001C")
        #expect(Hex.encode(CommandAPDU.getResponse(256).bytes) == "00C0000000")
        #expect(Hex.encode(CommandAPDU.getChallenge.bytes) == "0084000000")
    }

    @Test(arguments: [
        (UInt8(0xA4), "SELECT"), (0xA8, "GET PROCESSING OPTIONS"), (0xB2, "READ RECORD"), (0xAE, "GENERATE AC"),
        (0x20, "VERIFY"), (0x84, "GET CHALLENGE"), (0xCA, "GET DATA"), (0x82, "EXTERNAL AUTHENTICATE"),
        (0x88, "INTERNAL AUTHENTICATE"), (0xC0, "GET RESPONSE"), (0x1E, "APPLICATION BLOCK"),
        (0x18, "APPLICATION UNBLOCK"), (0x16, "CARD BLOCK"), (0x24, "PIN CHANGE/UNBLOCK"), (0x12, "INS 12"),
    ])
    func instructionNames(ins: UInt8, name: String) {
        #expect(CommandAPDU(cla: 0x00, ins: ins, p1: 0, p2: 0).instructionName == name)
    }

    // Whatever parses encodes back to the same bytes; nothing crashes.
    @Test func fuzzRoundTrip() {
        var rng = SplitMix64(state: 0x7816_4)
        var accepted = 0
        for _ in 0..<5000 {
            var data = (0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Make a consistent Lc likely, so cases 3 and 4 are reached often.
            if data.count > 5, Bool.random(using: &rng) { data[4] = UInt8(data.count - 5 - Int.random(in: 0...1, using: &rng)) }
            do {
                let apdu = try CommandAPDU(bytes: data)
                accepted += 1
                #expect(apdu.bytes == data)
            } catch {
                #expect(error.field == "C-APDU")
            }
        }
        #expect(accepted > 1000)
    }
}

@Suite("Response APDU")
struct ResponseAPDUTests {
    @Test func parsesDataAndStatus() throws {
        let r = try ResponseAPDU(bytes: bytes("771282021980940C0801010010010301180102009000"))
        #expect(r.data == bytes("771282021980940C080101001001030118010200"))
        #expect(r.status == StatusWord(0x90, 0x00))
        #expect(r.status.isSuccess)
        #expect(Hex.encode(r.bytes) == "771282021980940C0801010010010301180102009000")
        #expect(try ResponseAPDU(bytes: bytes("6F009000")).description == "6F00 9000 (Normal processing)")
    }

    @Test func statusOnly() throws {
        let r = try ResponseAPDU(bytes: [0x6A, 0x82])
        #expect(r.data.isEmpty)
        #expect(r.description == r.status.description)
        #expect(r.status == StatusWord(0x6A82))
        #expect(r.bytes == [0x6A, 0x82])
        #expect(try ResponseAPDU(bytes: [0x61, 0x1C]).status.bytesAvailable == 0x1C)
    }

    @Test(arguments: [[UInt8](), [0x90]])
    func tooShort(data: [UInt8]) {
        #expect(throws: EMVError(field: "R-APDU", rule: "needs at least SW1 SW2 (2 bytes), got \(data.count)")) {
            try ResponseAPDU(bytes: data)
        }
    }

    @Test func builtResponseEncodes() {
        #expect(ResponseAPDU(data: [0x01, 0x02], status: .success).bytes == [0x01, 0x02, 0x90, 0x00])
        #expect(ResponseAPDU(status: StatusWord(0x63C2)).bytes == [0x63, 0xC2])
    }
}

@Suite("Plaintext offline PIN block")
struct PlaintextPINBlockTests {
    // EMV Book 3 §6.5.12: control 2, PIN length, PIN digits, F fill.
    @Test(arguments: [
        ("1234", "241234FFFFFFFFFF"),
        ("12345", "2512345FFFFFFFFF"),
        ("123456789", "29123456789FFFFF"),
        ("1234567890", "2A1234567890FFFF"),
        ("123456789012", "2C123456789012FF"),
        ("0000", "240000FFFFFFFFFF"),
    ])
    func encodeAndDecode(pin: String, hex: String) throws {
        #expect(Hex.encode(try PlaintextPINBlock.encode(pin: pin)) == hex)
        #expect(try PlaintextPINBlock.decode(bytes(hex)) == pin)
    }

    @Test(arguments: [
        ("12a4", "must be digits only"),
        ("12 4", "must be digits only"),
        ("", "must be 4–12 digits, got 0"),
        ("123", "must be 4–12 digits, got 3"),
        ("1234567890123", "must be 4–12 digits, got 13"),
    ])
    func encodeRejectsBadPINs(pin: String, rule: String) {
        #expect(throws: EMVError(field: "pin", rule: rule)) { try PlaintextPINBlock.encode(pin: pin) }
    }

    @Test(arguments: [
        "041234FFFFFFFFFF",  // control nibble 0 (an online format 0 block)
        "241234FFFFFFFF",  // 7 bytes
        "241234FFFFFFFFFFFF",  // 9 bytes
        "",
    ])
    func decodeRejectsTheWrongShape(hex: String) {
        #expect(throws: EMVError(field: "PIN block", rule: "a plaintext offline PIN block is 8 bytes starting with control nibble 2")) {
            try PlaintextPINBlock.decode(bytes(hex))
        }
    }

    @Test(arguments: [
        "2F123456789012FF",  // length 15
        "2D123456789012FF",  // length 13
        "22123456789012FF",  // length 2
        "23123FFFFFFFFFFF",  // length 3
        "2C123456789012CF",  // fill not F
        "241234FFFFFFFFFE",  // last fill nibble not F
        "2C12345678901FFF",  // F where a digit belongs
        "24123AFFFFFFFFFF",  // A where a digit belongs
    ])
    func decodeRejectsBadContents(hex: String) {
        #expect(throws: EMVError(field: "PIN block", rule: "PIN length must be 4–12 digits followed by F fill")) {
            try PlaintextPINBlock.decode(bytes(hex))
        }
    }
}
