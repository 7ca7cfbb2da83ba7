/// A short command APDU (ISO 7816-4 cases 1–4; EMV uses no extended lengths).
public struct CommandAPDU: Hashable, Sendable, CustomStringConvertible {
    public let cla: UInt8
    public let ins: UInt8
    public let p1: UInt8
    public let p2: UInt8
    public let data: [UInt8]
    /// Expected response length; 256 is encoded as Le = 00. Nil means no Le (case 1 or 3).
    public let le: Int?

    public init(cla: UInt8, ins: UInt8, p1: UInt8, p2: UInt8, data: [UInt8] = [], le: Int? = nil) {
        precondition(data.count <= 255, "short APDU data is at most 255 bytes")
        precondition(le.map { (1...256).contains($0) } ?? true, "Le is 1–256")
        self.cla = cla
        self.ins = ins
        self.p1 = p1
        self.p2 = p2
        self.data = data
        self.le = le
    }

    /// Parses a command APDU's bytes (cases 1, 2, 3, 4 short).
    public init(bytes: [UInt8]) throws(EMVError) {
        guard bytes.count >= 4 else {
            throw EMVError(field: "C-APDU", rule: "needs at least CLA INS P1 P2 (4 bytes), got \(bytes.count)")
        }
        let body = bytes.count - 4
        var data: [UInt8] = []
        var le: Int? = nil
        if body == 0 {
            // Case 1.
        } else if body == 1 {
            le = bytes[4] == 0 ? 256 : Int(bytes[4])
        } else {
            let lc = Int(bytes[4])
            guard lc != 0 else {
                throw EMVError(field: "C-APDU", rule: "Lc of 00 marks an extended APDU, which EMV does not use")
            }
            if body == 1 + lc {
                data = Array(bytes[5..<5 + lc])
            } else if body == 2 + lc {
                data = Array(bytes[5..<5 + lc])
                le = bytes[5 + lc] == 0 ? 256 : Int(bytes[5 + lc])
            } else {
                throw EMVError(field: "C-APDU", rule: "Lc says \(lc) data bytes but \(body - 1) bytes follow it")
            }
        }
        self.init(cla: bytes[0], ins: bytes[1], p1: bytes[2], p2: bytes[3], data: data, le: le)
    }

    /// The APDU's encoding.
    public var bytes: [UInt8] {
        var out = [cla, ins, p1, p2]
        if !data.isEmpty { out += [UInt8(data.count)] + data }
        if let le { out.append(le == 256 ? 0 : UInt8(le)) }
        return out
    }

    /// A readable name for the instruction, for traces.
    public var instructionName: String {
        switch ins {
        case 0xA4: "SELECT"
        case 0xA8: "GET PROCESSING OPTIONS"
        case 0xB2: "READ RECORD"
        case 0xAE: "GENERATE AC"
        case 0x20: "VERIFY"
        case 0x84: "GET CHALLENGE"
        case 0xCA: "GET DATA"
        case 0x82: "EXTERNAL AUTHENTICATE"
        case 0x88: "INTERNAL AUTHENTICATE"
        case 0xC0: "GET RESPONSE"
        case 0x1E: "APPLICATION BLOCK"
        case 0x18: "APPLICATION UNBLOCK"
        case 0x16: "CARD BLOCK"
        case 0x24: "PIN CHANGE/UNBLOCK"
        default: "INS \(Hex.encode([ins]))"
        }
    }

    public var description: String { "\(instructionName): \(Hex.encode(bytes))" }

    // EMV Book 3 §6.5 commands, as a terminal sends them.

    /// SELECT by name (P1 04); `next` asks for the next occurrence of a partial name (P2 02).
    public static func select(name: [UInt8], next: Bool = false) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0xA4, p1: 0x04, p2: next ? 0x02 : 0x00, data: name, le: 256)
    }

    /// SELECT of the payment system environment `1PAY.SYS.DDF01`.
    public static let selectPSE = select(name: Array("1PAY.SYS.DDF01".utf8))

    /// GET PROCESSING OPTIONS with the PDOL data wrapped in tag 83.
    public static func getProcessingOptions(pdolData: [UInt8]) -> CommandAPDU {
        CommandAPDU(cla: 0x80, ins: 0xA8, p1: 0x00, p2: 0x00, data: TLV(0x83, pdolData).encoded(), le: 256)
    }

    /// READ RECORD `record` of short file `sfi`.
    public static func readRecord(sfi: Int, record: Int) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0xB2, p1: UInt8(record), p2: UInt8(sfi << 3 | 0x04), le: 256)
    }

    /// GENERATE AC asking for `type` (AAC, TC or ARQC) with the CDOL data; `cda` requests a
    /// combined signature.
    public static func generateAC(_ type: CryptogramType, cdolData: [UInt8], cda: Bool = false) -> CommandAPDU {
        precondition(type != .notRequested, "GENERATE AC asks for an AAC, a TC or an ARQC")
        let p1: UInt8 = (type == .aac ? 0x00 : type == .tc ? 0x40 : 0x80) | (cda ? 0x10 : 0)
        return CommandAPDU(cla: 0x80, ins: 0xAE, p1: p1, p2: 0x00, data: cdolData, le: 256)
    }

    /// GET DATA for a primitive tag such as 9F36 (ATC), 9F17 (PIN try counter), 9F13.
    public static func getData(_ tag: EMVTag) -> CommandAPDU {
        CommandAPDU(cla: 0x80, ins: 0xCA, p1: UInt8(tag.value >> 8 & 0xFF), p2: UInt8(tag.value & 0xFF), le: 256)
    }

    /// GET CHALLENGE (8 random bytes from the card).
    public static let getChallenge = CommandAPDU(cla: 0x00, ins: 0x84, p1: 0x00, p2: 0x00, le: 256)

    /// VERIFY with an offline PIN block; P2 80 is the plaintext PIN.
    public static func verify(pinBlock: [UInt8], qualifier: UInt8 = 0x80) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0x20, p1: 0x00, p2: qualifier, data: pinBlock)
    }

    /// INTERNAL AUTHENTICATE with the DDOL data, for DDA (EMV Book 3 §6.5.9).
    public static func internalAuthenticate(ddolData: [UInt8]) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0x88, p1: 0x00, p2: 0x00, data: ddolData, le: 256)
    }

    /// EXTERNAL AUTHENTICATE with the issuer authentication data (tag 91's value).
    public static func externalAuthenticate(_ issuerAuthenticationData: [UInt8]) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0x82, p1: 0x00, p2: 0x00, data: issuerAuthenticationData)
    }

    /// GET RESPONSE for `length` bytes a card announced with 61xx.
    public static func getResponse(_ length: Int) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0xC0, p1: 0x00, p2: 0x00, le: length)
    }
}

/// A response APDU: data then SW1 SW2.
public struct ResponseAPDU: Hashable, Sendable, CustomStringConvertible {
    public let data: [UInt8]
    public let status: StatusWord

    public init(data: [UInt8] = [], status: StatusWord) {
        self.data = data
        self.status = status
    }

    /// Parses a response; it needs at least the two status bytes.
    public init(bytes: [UInt8]) throws(EMVError) {
        guard bytes.count >= 2 else {
            throw EMVError(field: "R-APDU", rule: "needs at least SW1 SW2 (2 bytes), got \(bytes.count)")
        }
        self.init(data: Array(bytes.dropLast(2)), status: StatusWord(bytes[bytes.count - 2], bytes[bytes.count - 1]))
    }

    public var bytes: [UInt8] { data + [status.sw1, status.sw2] }

    public var description: String { data.isEmpty ? status.description : "\(Hex.encode(data)) \(status)" }
}

/// The offline plaintext PIN block VERIFY sends (EMV Book 3 §6.5.12: control 2, length, digits,
/// F fill) — the ISO 9564 format 2 layout.
public enum PlaintextPINBlock {
    public static func encode(pin: String) throws(EMVError) -> [UInt8] {
        let digits = try PINBlock.validatedDigits(pin)
        var nibbles: [UInt8] = [0x2, UInt8(digits.count)] + digits
        nibbles += [UInt8](repeating: 0xF, count: 16 - nibbles.count)
        return stride(from: 0, to: 16, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    /// Extracts the PIN digits; the card side of VERIFY.
    public static func decode(_ block: [UInt8]) throws(EMVError) -> String {
        guard block.count == 8, block[0] >> 4 == 0x2 else {
            throw EMVError(field: "PIN block", rule: "a plaintext offline PIN block is 8 bytes starting with control nibble 2")
        }
        let nibbles = block.flatMap { [$0 >> 4, $0 & 0x0F] }
        let n = Int(nibbles[1])
        guard (4...12).contains(n), nibbles[2..<2 + n].allSatisfy({ $0 <= 9 }), nibbles[(2 + n)...].allSatisfy({ $0 == 0xF }) else {
            throw EMVError(field: "PIN block", rule: "PIN length must be 4–12 digits followed by F fill")
        }
        return String(nibbles[2..<2 + n].map { Character(String($0)) })
    }
}
