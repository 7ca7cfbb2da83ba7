/// The two status bytes (SW1 SW2) that end every card response, with their ISO/IEC 7816-4
/// and EMV Book 1/3 meanings.
public struct StatusWord: Hashable, Sendable, CustomStringConvertible {
    /// The first status byte: the category (normal, warning, execution or checking error).
    public let sw1: UInt8
    /// The second status byte: the detail, or a count for 61xx, 6Cxx and 63Cx.
    public let sw2: UInt8

    /// Makes a status word from its two bytes, in the order the card sends them.
    public init(_ sw1: UInt8, _ sw2: UInt8) {
        self.sw1 = sw1
        self.sw2 = sw2
    }

    /// Makes a status word from its 16-bit value, SW1 in the high byte (`0x6A82`).
    public init(_ value: UInt16) {
        self.init(UInt8(value >> 8), UInt8(value & 0xFF))
    }

    /// SW1 in the high byte, SW2 in the low byte.
    public var value: UInt16 { UInt16(sw1) << 8 | UInt16(sw2) }

    /// 9000: the command completed normally.
    public static let success = StatusWord(0x90, 0x00)

    /// True for 9000 only. 61xx also means the command worked, but the caller still has to
    /// fetch the data with GET RESPONSE, so it is not treated as finished.
    public var isSuccess: Bool { sw1 == 0x90 && sw2 == 0x00 }

    /// True for 62xx and 63xx: the command was processed but something deserves attention
    /// (EMV treats 6283 on SELECT as a blocked application, 63Cx as a failed PIN).
    public var isWarning: Bool { sw1 == 0x62 || sw1 == 0x63 }

    /// 61xx: how many response bytes GET RESPONSE can fetch. SW2 00 stands for 256,
    /// because a one-byte Le of 00 means the maximum.
    public var bytesAvailable: Int? {
        sw1 == 0x61 ? StatusWord.count(sw2) : nil
    }

    /// 6Cxx: the Le the command must be resent with. SW2 00 stands for 256, as for 61xx.
    public var correctLength: Int? {
        sw1 == 0x6C ? StatusWord.count(sw2) : nil
    }

    /// 63Cx: the counter in the low nibble, which for VERIFY is the PIN tries left.
    public var retriesLeft: Int? {
        sw1 == 0x63 && sw2 & 0xF0 == 0xC0 ? Int(sw2 & 0x0F) : nil
    }

    /// The meaning in words, with the count filled in for 61xx, 6Cxx and 63Cx.
    public var meaning: String {
        if let n = bytesAvailable {
            return "Normal processing, \(n) response bytes still available"
        }
        if let n = correctLength {
            return "Wrong length Le, exact length is \(n)"
        }
        if let n = retriesLeft {
            return "Verification failed, \(n) \(n == 1 ? "try" : "tries") left"
        }
        if let known = StatusWord.meanings[value] {
            return known
        }
        return StatusWord.groupMeaning(sw1)
    }

    /// The status word in hex followed by its meaning: `63C2 (Verification failed, 2 tries left)`.
    public var description: String {
        "\(Hex.encode([sw1, sw2])) (\(meaning))"
    }

    private static func count(_ byte: UInt8) -> Int {
        byte == 0 ? 256 : Int(byte)
    }

    // ISO/IEC 7816-4 wording, with EMV's reading added where EMV gives the code a
    // narrower sense a terminal acts on (6283, 6300, 6983, 6984, 6985).
    private static let meanings: [UInt16: String] = [
        0x9000: "Normal processing",
        0x6200: "Warning, state of non-volatile memory unchanged, no information given",
        0x6281: "Warning, part of returned data may be corrupted",
        0x6282: "Warning, end of file or record reached before reading Le bytes",
        0x6283: "Warning, selected file invalidated (application blocked)",
        0x6284: "Warning, file control information not formatted according to ISO 7816-4",
        0x6285: "Warning, selected file in termination state",
        0x6300: "Warning, state of non-volatile memory changed, authentication failed",
        0x6381: "Warning, file filled up by the last write",
        0x6400: "Execution error, state of non-volatile memory unchanged",
        0x6500: "Execution error, state of non-volatile memory changed",
        0x6581: "Execution error, memory failure",
        0x6700: "Wrong length",
        0x6800: "Functions in CLA not supported",
        0x6881: "Logical channel not supported",
        0x6882: "Secure messaging not supported",
        0x6883: "Last command of the chain expected",
        0x6884: "Command chaining not supported",
        0x6900: "Command not allowed",
        0x6981: "Command incompatible with file structure",
        0x6982: "Security status not satisfied",
        0x6983: "Authentication method blocked",
        0x6984: "Referenced data invalidated",
        0x6985: "Conditions of use not satisfied",
        0x6986: "Command not allowed, no current EF",
        0x6987: "Expected secure messaging data objects missing",
        0x6988: "Incorrect secure messaging data objects",
        0x6A80: "Incorrect parameters in the data field",
        0x6A81: "Function not supported",
        0x6A82: "File or application not found",
        0x6A83: "Record not found",
        0x6A84: "Not enough memory space in the file",
        0x6A85: "Lc inconsistent with TLV structure",
        0x6A86: "Incorrect parameters P1-P2",
        0x6A87: "Lc inconsistent with P1-P2",
        0x6A88: "Referenced data not found",
        0x6B00: "Wrong parameters P1-P2",
        0x6D00: "Instruction code not supported or invalid",
        0x6E00: "Class not supported",
        0x6F00: "No precise diagnosis",
    ]

    // ISO/IEC 7816-4 section 5.1.3 groups SW1 values; anything outside the groups
    // (including 9xxx other than 9000, which ISO leaves proprietary) is unknown.
    private static func groupMeaning(_ sw1: UInt8) -> String {
        switch sw1 {
        case 0x62: return "Warning, state of non-volatile memory unchanged"
        case 0x63: return "Warning, state of non-volatile memory changed"
        case 0x64...0x66: return "Execution error"
        case 0x67...0x6F: return "Checking error"
        default: return "Unknown status"
        }
    }
}
