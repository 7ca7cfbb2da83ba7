/// How a card met the terminal: inserted in the contact slot, tapped on the contactless field, or
/// swiped through the magnetic-stripe reader.
public enum CardInterface: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case contact, contactless, magstripe

    /// The word a bench user types: insert, tap, swipe.
    public var verb: String {
        switch self {
        case .contact: "insert"
        case .contactless: "tap"
        case .magstripe: "swipe"
        }
    }

    /// The interface a verb names (`insert`, `tap`, `swipe`), or nil.
    public init?(verb: String) {
        guard let found = Self.allCases.first(where: { $0.verb == verb }) else { return nil }
        self = found
    }

    public var description: String { rawValue }
}

extension ATR {
    /// Whether `bytes` has the shape PC/SC part 3 (§3.1.3.2.3) gives the ATR a contactless reader
    /// synthesises for an ISO 14443-4 card: `3B 8n 80 01 <n historical bytes> TCK` — no TA1, TB1 or
    /// TC1, TD1 = 80, TD2 = 01 and nothing after it. A contact EMV card's ATR carries TB1/TC1 and
    /// never this chain, so the shape tells a tap from an insert on any PC/SC reader.
    public static func isContactless(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 5, bytes[0] == 0x3B, bytes[1] & 0xF0 == 0x80, bytes[2] == 0x80, bytes[3] == 0x01 else { return false }
        let historical = Int(bytes[1] & 0x0F)
        guard bytes.count == 4 + historical + 1 else { return false }
        return bytes[1...].reduce(0, ^) == 0
    }

    /// The PC/SC part 3 ATR for an ISO 14443-4 card whose ATS carries `historical` bytes (at most 15).
    public static func contactless(historical: [UInt8]) -> [UInt8] {
        let body: [UInt8] = [0x80 | UInt8(historical.count & 0x0F), 0x80, 0x01] + historical.prefix(15)
        return [0x3B] + body + [body.reduce(0, ^)]
    }
}

/// Terminal Transaction Qualifiers (9F66), EMV Contactless Book A §5.7 and Book C-3 Annex A.2.
public enum TTQ {
    public static let magStripeModeSupported = EMVBit(byte: 1, bit: 8, "Mag-stripe mode supported")
    public static let emvModeSupported = EMVBit(byte: 1, bit: 6, "EMV mode supported")
    public static let contactChipSupported = EMVBit(byte: 1, bit: 5, "EMV contact chip supported")
    public static let offlineOnlyReader = EMVBit(byte: 1, bit: 4, "Offline-only reader")
    public static let onlinePINSupported = EMVBit(byte: 1, bit: 3, "Online PIN supported")
    public static let signatureSupported = EMVBit(byte: 1, bit: 2, "Signature supported")
    public static let odaForOnlineSupported = EMVBit(byte: 1, bit: 1, "ODA for online authorisations supported")
    public static let onlineCryptogramRequired = EMVBit(byte: 2, bit: 8, "Online cryptogram required")
    public static let cvmRequired = EMVBit(byte: 2, bit: 7, "CVM required")
    public static let consumerDeviceCVMSupported = EMVBit(byte: 3, bit: 7, "Consumer device CVM supported")
    public static let fDDAVersion01Supported = EMVBit(byte: 4, bit: 8, "fDDA version 01 supported")

    /// Whether `bit` is set in the 4-byte value.
    public static func has(_ ttq: [UInt8], _ bit: EMVBit) -> Bool { bit.isSet(in: ttq) }
}

/// Card Transaction Qualifiers (9F6C), Book C-3 Annex A.2.
public enum CTQ {
    public static let onlinePINRequired = EMVBit(byte: 1, bit: 8, "Online PIN required")
    public static let signatureRequired = EMVBit(byte: 1, bit: 7, "Signature required")
    public static let goOnlineIfODAFails = EMVBit(byte: 1, bit: 6, "Go online if offline data authentication fails")
    public static let switchInterfaceIfODAFails = EMVBit(byte: 1, bit: 5, "Switch interface if offline data authentication fails")
    public static let goOnlineIfExpired = EMVBit(byte: 1, bit: 4, "Go online if application expired")
    public static let switchInterfaceForCash = EMVBit(byte: 1, bit: 3, "Switch interface for cash transactions")
    public static let consumerDeviceCVMPerformed = EMVBit(byte: 2, bit: 8, "Consumer device CVM performed")

    /// Whether `bit` is set in the 2-byte value.
    public static func has(_ ctq: [UInt8], _ bit: EMVBit) -> Bool { bit.isSet(in: ctq) }
}

extension EMVBit {
    /// Whether the bit is set in `bytes` (false when they are too short to hold it).
    public func isSet(in bytes: [UInt8]) -> Bool { bytes.count >= byte && bytes[byte - 1] & mask != 0 }
}

/// The two tracks a magnetic-stripe reader returns (ISO/IEC 7813), without sentinels or LRC:
/// track 1 `B<PAN>^<NAME>^<YYMM><service code><discretionary>`, track 2
/// `<PAN>=<YYMM><service code><discretionary>`.
public struct MagneticStripe: Sendable, Equatable {
    public let track1: String?
    public let track2: String
    public let pan: String
    /// YYMM.
    public let expiry: String
    public let serviceCode: String
    public let cardholderName: String?

    /// Parses the tracks as a reader hands them over; sentinels (`%`, `;`, `?`) are accepted and
    /// dropped. Track 2 is required: it is what authorisations carry.
    public init(track1: String?, track2: String) throws(EMVError) {
        func strip(_ s: String, start: Character) -> String {
            var t = Substring(s)
            if t.first == start { t = t.dropFirst() }
            if t.last == "?" { t = t.dropLast() }
            return String(t)
        }
        let t2 = strip(track2, start: ";")
        let parts = t2.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw EMVError(field: "track2", rule: "must be PAN=YYMM+service code+discretionary data (no '=' found)") }
        let pan = String(parts[0])
        guard (12...19).contains(pan.count), pan.allSatisfy(\.isASCIIDigit) else {
            throw EMVError(field: "track2", rule: "the PAN before '=' must be 12–19 digits")
        }
        let rest = Array(parts[1])
        guard rest.count >= 7, rest.allSatisfy(\.isASCIIDigit) else {
            throw EMVError(field: "track2", rule: "after '=' come YYMM and a 3-digit service code, digits only")
        }
        guard t2.count <= 37 else { throw EMVError(field: "track2", rule: "is at most 37 characters (40 with sentinels and LRC), got \(t2.count)") }
        let month = Int(String(rest[2...3]))!
        guard (1...12).contains(month) else { throw EMVError(field: "track2", rule: "expiry month \(String(rest[2...3])) is not 01–12") }
        var name: String? = nil
        var t1: String? = nil
        if let track1 {
            let text = strip(track1, start: "%")
            let fields = text.split(separator: "^", omittingEmptySubsequences: false)
            guard text.first == "B", fields.count == 3 else {
                throw EMVError(field: "track1", rule: "must be B<PAN>^<NAME>^<YYMM><service code>… (format code B, two '^')")
            }
            guard fields[0].dropFirst() == Substring(pan) else { throw EMVError(field: "track1", rule: "its PAN differs from track 2's") }
            guard text.count <= 76 else { throw EMVError(field: "track1", rule: "is at most 76 characters (79 with sentinels and LRC), got \(text.count)") }
            guard fields[2].prefix(7) == Substring(String(rest.prefix(7))) else {
                throw EMVError(field: "track1", rule: "its expiry and service code differ from track 2's")
            }
            name = fields[1].trimmingCharacters(in: " ")
            t1 = text
        }
        self.track1 = t1
        self.track2 = t2
        self.pan = pan
        self.expiry = String(rest[0...3])
        self.serviceCode = String(rest[4...6])
        self.cardholderName = name
    }

    /// Service code digit 1 is 2 or 6: "IC to be used where feasible" — a chip card, to be inserted.
    public var chipCard: Bool { serviceCode.first == "2" || serviceCode.first == "6" }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isWholeNumber }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var s = self
        while s.last == set { s = s.dropLast() }
        while s.first == set { s = s.dropFirst() }
        return String(s)
    }
}
