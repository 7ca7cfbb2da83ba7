/// ISO 9564-1 PIN blocks: format 0 (TDES, the classic online PIN block) and format 4 (AES).
///
/// PINs are only ever held in these values for the duration of a call; nothing here stores
/// or prints one.
public enum PINBlock {
    /// Checks a PIN is 4–12 digits and returns its digit values.
    static func validatedDigits(_ pin: String) throws(EMVError) -> [UInt8] {
        guard pin.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { throw EMVError(field: "pin", rule: "must be digits only") }
        guard (4...12).contains(pin.utf8.count) else { throw EMVError(field: "pin", rule: "must be 4–12 digits, got \(pin.utf8.count)") }
        return pin.utf8.map { $0 - 0x30 }
    }

    static func panDigits(_ pan: String) throws(EMVError) -> [UInt8] {
        guard !pan.isEmpty, pan.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { throw EMVError(field: "pan", rule: "must be digits only") }
        guard (12...19).contains(pan.utf8.count) else { throw EMVError(field: "pan", rule: "must be 12–19 digits, got \(pan.utf8.count)") }
        return pan.utf8.map { $0 - 0x30 }
    }

    static func pack(_ nibbles: [UInt8]) -> [UInt8] {
        stride(from: 0, to: nibbles.count, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    static func unpack(_ bytes: [UInt8]) -> [UInt8] { bytes.flatMap { [$0 >> 4, $0 & 0x0F] } }

    // MARK: Format 0

    /// The format 0 PAN field: 0000 then the 12 rightmost PAN digits excluding the check digit.
    static func format0PANField(_ pan: String) throws(EMVError) -> [UInt8] {
        // ISO 9564-1: the 12 rightmost digits excluding the check digit, zero-filled on the left
        // when fewer remain (a 12-digit PAN leaves 11).
        let digits = Array(try panDigits(pan).dropLast().suffix(12))
        return pack([0, 0, 0, 0] + [UInt8](repeating: 0, count: 12 - digits.count) + digits)
    }

    /// The clear format 0 PIN block: (0‖N‖PIN‖F…) ⊕ (0000‖12 PAN digits).
    public static func format0(pin: String, pan: String) throws(EMVError) -> [UInt8] {
        let digits = try validatedDigits(pin)
        var nibbles: [UInt8] = [0, UInt8(digits.count)] + digits
        nibbles += [UInt8](repeating: 0xF, count: 16 - nibbles.count)
        return zip(pack(nibbles), try format0PANField(pan)).map { $0 ^ $1 }
    }

    /// A format 0 block encrypted under a TDES key (a PIN encryption key).
    public static func format0(pin: String, pan: String, key: TDESKey) throws(EMVError) -> [UInt8] {
        key.encryptBlock(try format0(pin: pin, pan: pan))
    }

    /// Recovers the PIN from a clear format 0 block; a block that does not decode to a
    /// well-formed PIN field for this PAN is an error.
    public static func decodeFormat0(_ block: [UInt8], pan: String) throws(EMVError) -> String {
        guard block.count == 8 else { throw EMVError(field: "pinblock", rule: "a format 0 PIN block is 8 bytes, got \(block.count)") }
        let nibbles = unpack(zip(block, try format0PANField(pan)).map { $0 ^ $1 })
        guard nibbles[0] == 0 else { throw EMVError(field: "pinblock", rule: "control nibble is \(nibbles[0]), format 0 needs 0") }
        let n = Int(nibbles[1])
        guard (4...12).contains(n), nibbles[2..<2 + n].allSatisfy({ $0 <= 9 }), nibbles[(2 + n)...].allSatisfy({ $0 == 0xF }) else {
            throw EMVError(field: "pinblock", rule: "does not hold a 4–12 digit PIN with F fill for this PAN")
        }
        return String(decoding: nibbles[2..<2 + n].map { $0 + 0x30 }, as: UTF8.self)
    }

    /// Decrypts and decodes an encrypted format 0 block.
    public static func decodeFormat0(_ block: [UInt8], pan: String, key: TDESKey) throws(EMVError) -> String {
        guard block.count == 8 else { throw EMVError(field: "pinblock", rule: "a format 0 PIN block is 8 bytes, got \(block.count)") }
        return try decodeFormat0(key.decryptBlock(block), pan: pan)
    }

    // MARK: Format 4

    /// The format 4 PAN field: M (PAN length − 12) then the PAN, left-justified, zero-filled to
    /// 32 nibbles.
    static func format4PANField(_ pan: String) throws(EMVError) -> [UInt8] {
        let digits = try panDigits(pan)
        let nibbles = [UInt8(digits.count - 12)] + digits
        return pack(nibbles + [UInt8](repeating: 0, count: 32 - nibbles.count))
    }

    /// The format 4 plain-text PIN field: 4‖N‖PIN‖A fill to 16 nibbles, then 8 random bytes.
    static func format4PINField(_ pin: String, random: [UInt8]) throws(EMVError) -> [UInt8] {
        let digits = try validatedDigits(pin)
        var nibbles: [UInt8] = [4, UInt8(digits.count)] + digits
        nibbles += [UInt8](repeating: 0xA, count: 16 - nibbles.count)
        return pack(nibbles) + random
    }

    /// An enciphered format 4 block: E(K, E(K, PIN field) ⊕ PAN field). `random` is the
    /// 8-byte fill; it comes from the system's CSPRNG unless a test fixes it.
    public static func format4(pin: String, pan: String, key: AESKey, random: [UInt8]? = nil) throws(EMVError) -> [UInt8] {
        let fill = random ?? SecureRandom.bytes(8)
        guard fill.count == 8 else { throw EMVError(field: "random", rule: "format 4 random fill is 8 bytes, got \(fill.count)") }
        let intermediate = key.encryptBlock(try format4PINField(pin, random: fill))
        return key.encryptBlock(zip(intermediate, try format4PANField(pan)).map { $0 ^ $1 })
    }

    /// Deciphers a format 4 block and returns the PIN.
    public static func decodeFormat4(_ block: [UInt8], pan: String, key: AESKey) throws(EMVError) -> String {
        guard block.count == 16 else { throw EMVError(field: "pinblock", rule: "a format 4 PIN block is 16 bytes, got \(block.count)") }
        let intermediate = zip(key.decryptBlock(block), try format4PANField(pan)).map { $0 ^ $1 }
        let nibbles = unpack(Array(key.decryptBlock(intermediate).prefix(8)))
        guard nibbles[0] == 4 else { throw EMVError(field: "pinblock", rule: "control nibble is \(nibbles[0]), format 4 needs 4 (wrong key or PAN?)") }
        let n = Int(nibbles[1])
        guard (4...12).contains(n), nibbles[2..<2 + n].allSatisfy({ $0 <= 9 }), nibbles[(2 + n)...].allSatisfy({ $0 == 0xA }) else {
            throw EMVError(field: "pinblock", rule: "does not hold a 4–12 digit PIN with A fill (wrong key or PAN?)")
        }
        return String(decoding: nibbles[2..<2 + n].map { $0 + 0x30 }, as: UTF8.self)
    }
}
