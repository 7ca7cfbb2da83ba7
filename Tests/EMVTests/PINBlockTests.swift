import Testing
@testable import EMV

private func bytes(_ hex: String) -> [UInt8] { try! Hex.decode(hex) }

// The double-length TDES test key every EMV tool uses; its KCV 08D7B4 is widely published.
private let tdesKey = try! TDESKey(hex: "0123456789ABCDEFFEDCBA9876543210")
// The format 4 test key of psec (knovichikhin/psec, tests/test_pinblock.py) and paysec.
private let aesKey = try! AESKey(hex: "00112233445566778899AABBCCDDEEFF")

@Suite("ISO 9564 format 0")
struct PINBlockFormat0Tests {
    // Format 0 = (0 ‖ N ‖ PIN ‖ F fill) ⊕ (0000 ‖ 12 rightmost PAN digits without the check digit).
    //
    // PIN 1234, PAN 4111111111111111, worked by hand:
    //   PIN field  04 12 34 FF FF FF FF FF
    //   PAN field  00 00 11 11 11 11 11 11   (411111111111111 without the check digit; rightmost 12)
    //   XOR        04 12 25 EE EE EE EE EE
    @Test(arguments: [
        ("1234", "4111111111111111", "041225EEEEEEEEEE"),
        // Published example (EFTlab BP-Tools output in ID TECH's documentation): PAN field 0000987654321098.
        ("1234", "43219876543210987", "0412AC89ABCDEF67"),
        // IBM's ANSI X9.8 (format 0) example: 5-digit PIN 92389, 13-digit PAN 4000001234562.
        ("92389", "4000001234562", "0592789FFFEDCBA9"),
        // psec's decode tests (knovichikhin/psec, tests/test_pinblock.py).
        ("1234", "5555555551234567", "041261AAAAEDCBA9"),
        ("123456789", "5555555551234567", "091261032D8DCBA9"),
        ("1234567890", "5555555551234567", "0A1261032D82CBA9"),
        ("123456789012", "5555555551234567", "0C1261032D8226A9"),
        // 19-digit PAN: PAN field 0000 7890 1234 5678 (the 12 digits before check digit 9).
        ("0000", "1234567890123456789", "0400786FEDCBA987"),
    ])
    func clearBlocks(pin: String, pan: String, hex: String) throws {
        #expect(Hex.encode(try PINBlock.format0(pin: pin, pan: pan)) == hex)
        #expect(try PINBlock.decodeFormat0(bytes(hex), pan: pan) == pin)
    }

    // ISO 9564-1: "If the PAN excluding the check digit is less than 12 digits, the digits are
    // right justified and padded to the left with zeros." A 12-digit PAN passes validation
    // (12–19 digits) but leaves 11 digits, so the PAN field must be 0000 0123 4567 8901 and
    // the block 041234FFFFFFFFFF ⊕ 0000012345678901 = 041235DCBA9876FE.
    @Test func twelveDigitPANIsZeroFilledOnTheLeft() throws {
        let block = try PINBlock.format0(pin: "1234", pan: "123456789012")
        #expect(Hex.encode(block) == "041235DCBA9876FE")
        #expect(try PINBlock.decodeFormat0(block, pan: "123456789012") == "1234")
    }

    @Test func encryptedUnderATDESKey() throws {
        // E(K, 041225EEEEEEEEEE) with K = 0123456789ABCDEF FEDCBA9876543210, computed with
        // Python's cryptography TripleDES-ECB.
        let block = try PINBlock.format0(pin: "1234", pan: "4111111111111111", key: tdesKey)
        #expect(Hex.encode(block) == "2A3D408A1977DDE9")
        #expect(tdesKey.decryptBlock(block) == bytes("041225EEEEEEEEEE"))
        #expect(try PINBlock.decodeFormat0(block, pan: "4111111111111111", key: tdesKey) == "1234")
    }

    @Test func encryptedBlockDecodesOnlyWithItsKey() throws {
        let block = try PINBlock.format0(pin: "1234", pan: "4111111111111111", key: tdesKey)
        // Not ...3211: the low bit of each DES key byte is parity, which the cipher ignores.
        let other = try TDESKey(hex: "0123456789ABCDEFFEDCBA9876543212")
        #expect(throws: EMVError.self) { try PINBlock.decodeFormat0(block, pan: "4111111111111111", key: other) }
    }

    @Test func wrongPANDoesNotDecode() {
        // 041225EEEEEEEEEE ⊕ 0000555555123456 = 04 12 70 BB BB FC DA B8: digits survive, fill does not.
        #expect(throws: EMVError(field: "pinblock", rule: "does not hold a 4–12 digit PIN with F fill for this PAN")) {
            try PINBlock.decodeFormat0(bytes("041225EEEEEEEEEE"), pan: "5555555551234567")
        }
    }

    @Test(arguments: [
        // Control nibble 1 and 3 (formats 1 and 3) are refused.
        ("141225EEEEEEEEEE", "control nibble is 1, format 0 needs 0"),
        ("341225EEEEEEEEEE", "control nibble is 3, format 0 needs 0"),
        // PIN length 3 or 13.
        ("031225EEEEEEEEEE", "does not hold a 4–12 digit PIN with F fill for this PAN"),
        ("0D1225EEEEEEEEEE", "does not hold a 4–12 digit PIN with F fill for this PAN"),
        // A non-digit in the PIN: 1 2 A 4 once the PAN field is removed.
        ("0412B5EEEEEEEEEE", "does not hold a 4–12 digit PIN with F fill for this PAN"),
        // Fill E instead of F in the last nibble.
        ("041225EEEEEEEEEF", "does not hold a 4–12 digit PIN with F fill for this PAN"),
        ("041225EEEEEEEE", "a format 0 PIN block is 8 bytes, got 7"),
        ("041225EEEEEEEEEEEE", "a format 0 PIN block is 8 bytes, got 9"),
    ])
    func decodeErrors(hex: String, rule: String) {
        #expect(throws: EMVError(field: "pinblock", rule: rule)) {
            try PINBlock.decodeFormat0(bytes(hex), pan: "4111111111111111")
        }
    }

    @Test func encryptedDecodeChecksTheLengthFirst() {
        #expect(throws: EMVError(field: "pinblock", rule: "a format 0 PIN block is 8 bytes, got 16")) {
            try PINBlock.decodeFormat0([UInt8](repeating: 0, count: 16), pan: "4111111111111111", key: tdesKey)
        }
    }
}

@Suite("ISO 9564 format 4")
struct PINBlockFormat4Tests {
    // psec's deterministic vector (knovichikhin/psec tests/test_pinblock.py, also paysec):
    // PIN 1234, PAN 1234567890123456789, random fill FF×8.
    @Test func publishedVector() throws {
        let block = try PINBlock.format4(pin: "1234", pan: "1234567890123456789", key: aesKey, random: [UInt8](repeating: 0xFF, count: 8))
        #expect(Hex.encode(block) == "28B41FDDD29B743E93124BD8E32D921E")
        #expect(try PINBlock.decodeFormat4(block, pan: "1234567890123456789", key: aesKey) == "1234")
    }

    // ep2 (eft/pos 2000) Security Specification 8.0.0 §8.4, as psec's tests quote it.
    @Test func ep2Vector() throws {
        let key = try AESKey(hex: "C1D0F8FB4958670DBA40AB1F3752EF0D")
        #expect(try PINBlock.decodeFormat4(bytes("CC17F65586BFD0953010226C4FC5B3CA"), pan: "432198765432109870", key: key) == "1234")
    }

    // paysec's decipher vectors (random fill unknown, so decode only).
    @Test(arguments: [
        ("1234", "1234567890123456", "52DB178C6EDCE52E3A70F7FBC8E9C758"),
        ("123456", "123456789012345678", "847A0209C659E4C4A79CA6A2A2217D31"),
        ("12345678", "1234567890123456789", "018BFEC8B5EF60181A327AD8325A2BA4"),
    ])
    func publishedBlocksDecode(pin: String, pan: String, block: String) throws {
        #expect(try PINBlock.decodeFormat4(bytes(block), pan: pan, key: aesKey) == pin)
    }

    // psec's decipher-failure vectors: each breaks a different rule inside the PIN field.
    @Test(arguments: [
        // Control field 3.
        ("E60B15B90ABDF14CEE337C97440F0D6E", "7D5AF4C33667A2098626027FB7A9A1B7", "4266229809609384667",
         "control nibble is 3, format 4 needs 4 (wrong key or PAN?)"),
        // PIN 1AB2 is not numeric.
        ("C7BBEBA16C5AD97D5866450718C03750", "2F9C910447F17293EC95DEDE1E3CA201", "8220499325458689523",
         "does not hold a 4–12 digit PIN with A fill (wrong key or PAN?)"),
        // Fill BBBBBBBBBB instead of A.
        ("820F6C7C12355BDFF1AB6CE12E8EED89", "CCF310A8300B46C925A86B1098089301", "939589847393485609",
         "does not hold a 4–12 digit PIN with A fill (wrong key or PAN?)"),
        // PIN length 3, under an AES-192 key.
        ("4FE3F0311936FBCE44F17159F1659CF09B2BF8913BB514A1", "51334B00A6CBA3EC7B1C6F871F060AFC", "2129100799029059903",
         "does not hold a 4–12 digit PIN with A fill (wrong key or PAN?)"),
    ])
    func publishedBadBlocks(key: String, block: String, pan: String, rule: String) throws {
        let key = try AESKey(hex: key)
        #expect(throws: EMVError(field: "pinblock", rule: rule)) { try PINBlock.decodeFormat4(bytes(block), pan: pan, key: key) }
    }

    @Test func fields() throws {
        // psec: PIN field 441234AAAAAAAAAA then the random half; PAN field M=6 for 18 digits.
        #expect(Hex.encode(try PINBlock.format4PINField("1234", random: [UInt8](repeating: 0xFF, count: 8))) == "441234AAAAAAAAAAFFFFFFFFFFFFFFFF")
        #expect(Hex.encode(try PINBlock.format4PINField("123456789012", random: bytes("0102030405060708"))) == "4C123456789012AA0102030405060708")
        #expect(Hex.encode(try PINBlock.format4PANField("112233445566778899")) == "61122334455667788990000000000000")
        #expect(Hex.encode(try PINBlock.format4PANField("1234567890123456789")) == "71234567890123456789000000000000")
        #expect(Hex.encode(try PINBlock.format4PANField("123456789012")) == "01234567890120000000000000000000")
    }

    // Values computed independently with Python's cryptography AES-ECB:
    // E(K, E(K, PIN field) ⊕ PAN field).
    @Test(arguments: [
        ("1234", "4111111111111111", "00112233445566778899AABBCCDDEEFF", "0011223344556677", "4E39A5744B2A7C885F921EF663A87C39"),
        ("1234", "4111111111111111", "00112233445566778899AABBCCDDEEFF", "0011223344556678", "102E2E35FE5BC747A986B7C5FE326165"),
        ("1234", "123456789012", "00112233445566778899AABBCCDDEEFF", "0000000000000000", "8B9C0018492CF586A81442CC5FEB34C9"),
        ("987654321098", "5413330089020011", "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F", "A1A2A3A4A5A6A7A8",
         "963E4AD15C4BF92A8E47E47EB4CC1208"),
    ])
    func fixedRandomRoundTrip(pin: String, pan: String, key: String, random: String, expected: String) throws {
        let key = try AESKey(hex: key)
        let block = try PINBlock.format4(pin: pin, pan: pan, key: key, random: bytes(random))
        #expect(Hex.encode(block) == expected)
        #expect(try PINBlock.decodeFormat4(block, pan: pan, key: key) == pin)
    }

    @Test func differentRandomGivesADifferentBlockForTheSamePIN() throws {
        let a = try PINBlock.format4(pin: "1234", pan: "4111111111111111", key: aesKey, random: bytes("0011223344556677"))
        let b = try PINBlock.format4(pin: "1234", pan: "4111111111111111", key: aesKey, random: bytes("0011223344556678"))
        #expect(a != b)
        #expect(try PINBlock.decodeFormat4(a, pan: "4111111111111111", key: aesKey) == "1234")
        #expect(try PINBlock.decodeFormat4(b, pan: "4111111111111111", key: aesKey) == "1234")
    }

    @Test func systemRandomFill() throws {
        let a = try PINBlock.format4(pin: "2580", pan: "4111111111111111", key: aesKey)
        let b = try PINBlock.format4(pin: "2580", pan: "4111111111111111", key: aesKey)
        #expect(a.count == 16)
        #expect(a != b)
        #expect(try PINBlock.decodeFormat4(a, pan: "4111111111111111", key: aesKey) == "2580")
        #expect(try PINBlock.decodeFormat4(b, pan: "4111111111111111", key: aesKey) == "2580")
        // The second half of the plain PIN field is the random fill.
        let intermediate = zip(aesKey.decryptBlock(a), try PINBlock.format4PANField("4111111111111111")).map { $0 ^ $1 }
        #expect(Hex.encode(aesKey.decryptBlock(intermediate).prefix(8)) == "442580AAAAAAAAAA")
    }

    @Test func wrongKeyOrPANDoesNotDecode() throws {
        let block = try PINBlock.format4(pin: "1234", pan: "4111111111111111", key: aesKey, random: bytes("0011223344556677"))
        let otherKey = try AESKey(hex: "00112233445566778899AABBCCDDEEFE")
        for (pan, key) in [("4111111111111111", otherKey), ("4111111111111112", aesKey), ("41111111111111111", aesKey)] {
            let error = try #require(throws: EMVError.self) { try PINBlock.decodeFormat4(block, pan: pan, key: key) }
            #expect(error.field == "pinblock")
            #expect(error.rule.hasSuffix("(wrong key or PAN?)"))
        }
    }

    @Test func lengthErrors() {
        #expect(throws: EMVError(field: "pinblock", rule: "a format 4 PIN block is 16 bytes, got 8")) {
            try PINBlock.decodeFormat4([UInt8](repeating: 0, count: 8), pan: "4111111111111111", key: aesKey)
        }
        #expect(throws: EMVError(field: "random", rule: "format 4 random fill is 8 bytes, got 7")) {
            try PINBlock.format4(pin: "1234", pan: "4111111111111111", key: aesKey, random: [1, 2, 3, 4, 5, 6, 7])
        }
        #expect(throws: EMVError(field: "random", rule: "format 4 random fill is 8 bytes, got 16")) {
            try PINBlock.format4(pin: "1234", pan: "4111111111111111", key: aesKey, random: [UInt8](repeating: 0, count: 16))
        }
    }
}

@Suite("PIN and PAN validation")
struct PINValidationTests {
    @Test(arguments: [
        ("12a4", "must be digits only"),
        ("1234 ", "must be digits only"),
        ("١٢٣٤", "must be digits only"),
        ("", "must be 4–12 digits, got 0"),
        ("123", "must be 4–12 digits, got 3"),
        ("1234567890123", "must be 4–12 digits, got 13"),
    ])
    func badPINs(pin: String, rule: String) {
        let error = EMVError(field: "pin", rule: rule)
        #expect(throws: error) { try PINBlock.format0(pin: pin, pan: "4111111111111111") }
        #expect(throws: error) { try PINBlock.format0(pin: pin, pan: "4111111111111111", key: tdesKey) }
        #expect(throws: error) { try PINBlock.format4(pin: pin, pan: "4111111111111111", key: aesKey, random: [0, 0, 0, 0, 0, 0, 0, 0]) }
    }

    @Test(arguments: [
        ("41111111111111A1", "must be digits only"),
        ("4111 1111 1111 1111", "must be digits only"),
        ("", "must be digits only"),
        ("41111111111", "must be 12–19 digits, got 11"),
        ("41111111111111111111", "must be 12–19 digits, got 20"),
    ])
    func badPANs(pan: String, rule: String) {
        let error = EMVError(field: "pan", rule: rule)
        #expect(throws: error) { try PINBlock.format0(pin: "1234", pan: pan) }
        #expect(throws: error) { try PINBlock.decodeFormat0(bytes("041225EEEEEEEEEE"), pan: pan) }
        #expect(throws: error) { try PINBlock.format4(pin: "1234", pan: pan, key: aesKey, random: [0, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: error) { try PINBlock.decodeFormat4([UInt8](repeating: 0, count: 16), pan: pan, key: aesKey) }
    }
}

@Suite("Keys")
struct KeyTests {
    // KCVs computed with Python's cryptography (TDES-ECB of a zero block; AES-CMAC of a zero
    // block, the X9.24-1:2017 AES KCV).
    @Test(arguments: [
        ("0123456789ABCDEF", 64, "D5D44F"),
        ("0123456789ABCDEFFEDCBA9876543210", 128, "08D7B4"),
        ("0123456789ABCDEFFEDCBA987654321089ABCDEF01234567", 192, "3FD539"),
    ])
    func tdesDescriptionShowsOnlyTheKCV(hex: String, bits: Int, kcv: String) throws {
        let key = try TDESKey(hex: hex)
        #expect(Hex.encode(key.checkValue) == kcv)
        #expect(key.length == bits / 8)
        let expected = "TDESKey(\(bits) bits, KCV \(kcv))"
        for text in [key.description, key.debugDescription, "\(key)", String(reflecting: key), String(describing: [key])] {
            #expect(text.contains(expected))
            for i in stride(from: 0, through: hex.count - 8, by: 8) {
                let chunk = String(hex.dropFirst(i).prefix(8))
                #expect(!text.contains(chunk), "key bytes \(chunk) leaked")
            }
        }
    }

    @Test(arguments: [
        ("00112233445566778899AABBCCDDEEFF", 128, "53E107B36E"),
        ("000102030405060708090A0B0C0D0E0F1011121314151617", 192, "D4FFB80EBF"),
        ("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F", 256, "377822C093"),
    ])
    func aesDescriptionShowsOnlyTheKCV(hex: String, bits: Int, kcv: String) throws {
        let key = try AESKey(hex: hex)
        #expect(Hex.encode(key.checkValue) == kcv)
        let expected = "AESKey(\(bits) bits, KCV \(kcv))"
        for text in [key.description, key.debugDescription, "\(key)", String(reflecting: key), String(describing: [key])] {
            #expect(text.contains(expected))
            for i in stride(from: 0, through: hex.count - 8, by: 8) {
                let chunk = String(hex.dropFirst(i).prefix(8))
                #expect(!text.contains(chunk), "key bytes \(chunk) leaked")
            }
        }
    }

    @Test func keyLengthErrors() {
        #expect(throws: EMVError(field: "key", rule: "a DES key is 8, 16 or 24 bytes (16, 32 or 48 hex digits), got 15 bytes")) {
            try TDESKey([UInt8](repeating: 0, count: 15))
        }
        #expect(throws: EMVError(field: "imk", rule: "a DES key is 8, 16 or 24 bytes (16, 32 or 48 hex digits), got 0 bytes")) {
            try TDESKey(hex: "", field: "imk")
        }
        #expect(throws: EMVError(field: "pek", rule: "must have an even number of hex digits, got 3")) { try TDESKey(hex: "012", field: "pek") }
        #expect(throws: EMVError(field: "key", rule: "an AES key is 16, 24 or 32 bytes (32, 48 or 64 hex digits), got 8 bytes")) {
            try AESKey(hex: "0123456789ABCDEF")
        }
        #expect(throws: EMVError(field: "pek", rule: "an AES key is 16, 24 or 32 bytes (32, 48 or 64 hex digits), got 17 bytes")) {
            try AESKey([UInt8](repeating: 0, count: 17), field: "pek")
        }
    }

    @Test func blockCipherRoundTrips() throws {
        let plain = bytes("041225EEEEEEEEEE")
        #expect(tdesKey.decryptBlock(tdesKey.encryptBlock(plain)) == plain)
        #expect(tdesKey.decryptECB(tdesKey.encryptECB(plain + plain)) == plain + plain)
        // ECB encrypts each block alone; CBC chains them.
        #expect(Array(tdesKey.encryptECB(plain + plain).suffix(8)) == tdesKey.encryptBlock(plain))
        #expect(Array(tdesKey.encryptCBC(plain + plain).suffix(8)) != tdesKey.encryptBlock(plain))
        let block16 = bytes("441234AAAAAAAAAAFFFFFFFFFFFFFFFF")
        #expect(aesKey.decryptBlock(aesKey.encryptBlock(block16)) == block16)
    }

    @Test func equalityIsByKeyBytes() throws {
        #expect(try TDESKey(hex: "0123456789ABCDEFFEDCBA9876543210") == tdesKey)
        #expect(try TDESKey(hex: "0123456789ABCDEFFEDCBA9876543211") != tdesKey)
        #expect(Set([tdesKey, try TDESKey(hex: "0123456789abcdeffedcba9876543210")]).count == 1)
    }

    @Test func oddParity() throws {
        let key = try TDESKey(hex: "0000000000000000FFFFFFFFFFFFFFFF").withOddParity()
        #expect(Hex.encode(key.clearBytes) == "0101010101010101FEFEFEFEFEFEFEFE")
        // The test key already has odd parity in every byte.
        #expect(tdesKey.withOddParity() == tdesKey)
    }
}
