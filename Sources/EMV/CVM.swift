/// A cardholder verification method code (CVM code byte, bits 6–1; EMV Book 3 Annex C3).
public enum CVMethod: Hashable, Sendable, CustomStringConvertible {
    case failCVM
    case plaintextPINByICC
    case encipheredPINOnline
    case plaintextPINByICCAndSignature
    case encipheredPINByICC
    case encipheredPINByICCAndSignature
    case signature
    case noCVMRequired
    case notAvailable
    /// Consumer device CVM: the holder verified on the phone or watch (a contactless outcome's
    /// "confirmation code verified"); no CVM list names it.
    case consumerDevice
    /// Payment-system or issuer specific, or reserved.
    case other(UInt8)

    public init(code: UInt8) {
        switch code & 0x3F {
        case 0x00: self = .failCVM
        case 0x01: self = .plaintextPINByICC
        case 0x02: self = .encipheredPINOnline
        case 0x03: self = .plaintextPINByICCAndSignature
        case 0x04: self = .encipheredPINByICC
        case 0x05: self = .encipheredPINByICCAndSignature
        case 0x1E: self = .signature
        case 0x1F: self = .noCVMRequired
        case 0x3F: self = .notAvailable
        case let c: self = .other(c)
        }
    }

    /// The six-bit method code.
    public var code: UInt8 {
        switch self {
        case .failCVM: 0x00
        case .plaintextPINByICC: 0x01
        case .encipheredPINOnline: 0x02
        case .plaintextPINByICCAndSignature: 0x03
        case .encipheredPINByICC: 0x04
        case .encipheredPINByICCAndSignature: 0x05
        case .signature: 0x1E
        case .noCVMRequired: 0x1F
        case .notAvailable: 0x3F
        // Not a CVM list code: Mastercard reports on-device CVM in the CVM Results as 01 00 02.
        case .consumerDevice: 0x01
        case .other(let c): c & 0x3F
        }
    }

    public var description: String {
        switch self {
        case .failCVM: "Fail CVM processing"
        case .plaintextPINByICC: "Plaintext PIN verification performed by ICC"
        case .encipheredPINOnline: "Enciphered PIN verified online"
        case .plaintextPINByICCAndSignature: "Plaintext PIN verification performed by ICC and signature (paper)"
        case .encipheredPINByICC: "Enciphered PIN verification performed by ICC"
        case .encipheredPINByICCAndSignature: "Enciphered PIN verification performed by ICC and signature (paper)"
        case .signature: "Signature (paper)"
        case .noCVMRequired: "No CVM required"
        case .notAvailable: "Not available for use"
        case .consumerDevice: "Consumer device CVM"
        case .other(let c): c >= 0x20 && c <= 0x2F ? "Payment system specific (\(Hex.encode([c])))"
            : c >= 0x30 && c <= 0x3E ? "Issuer specific (\(Hex.encode([c])))" : "Reserved (\(Hex.encode([c])))"
        }
    }
}

/// When a CVM rule applies (CVM condition code; EMV Book 3 Annex C3).
public enum CVMCondition: Hashable, Sendable, CustomStringConvertible {
    case always
    case unattendedCash
    case notUnattendedCashNotManualCashNotCashback
    case terminalSupportsCVM
    case manualCash
    case purchaseWithCashback
    case underX
    case overX
    case underY
    case overY
    case other(UInt8)

    public init(code: UInt8) {
        switch code {
        case 0x00: self = .always
        case 0x01: self = .unattendedCash
        case 0x02: self = .notUnattendedCashNotManualCashNotCashback
        case 0x03: self = .terminalSupportsCVM
        case 0x04: self = .manualCash
        case 0x05: self = .purchaseWithCashback
        case 0x06: self = .underX
        case 0x07: self = .overX
        case 0x08: self = .underY
        case 0x09: self = .overY
        default: self = .other(code)
        }
    }

    public var code: UInt8 {
        switch self {
        case .always: 0x00
        case .unattendedCash: 0x01
        case .notUnattendedCashNotManualCashNotCashback: 0x02
        case .terminalSupportsCVM: 0x03
        case .manualCash: 0x04
        case .purchaseWithCashback: 0x05
        case .underX: 0x06
        case .overX: 0x07
        case .underY: 0x08
        case .overY: 0x09
        case .other(let c): c
        }
    }

    public var description: String {
        switch self {
        case .always: "Always"
        case .unattendedCash: "If unattended cash"
        case .notUnattendedCashNotManualCashNotCashback: "If not unattended cash and not manual cash and not purchase with cashback"
        case .terminalSupportsCVM: "If terminal supports the CVM"
        case .manualCash: "If manual cash"
        case .purchaseWithCashback: "If purchase with cashback"
        case .underX: "If transaction is in the application currency and is under X value"
        case .overX: "If transaction is in the application currency and is over X value"
        case .underY: "If transaction is in the application currency and is under Y value"
        case .overY: "If transaction is in the application currency and is over Y value"
        case .other(let c): "Reserved or proprietary condition \(Hex.encode([c]))"
        }
    }

    /// Conditions on amounts only mean something when the transaction currency is the card's.
    public var needsApplicationCurrency: Bool {
        switch self {
        case .underX, .overX, .underY, .overY: true
        default: false
        }
    }
}

/// One CVM rule: a method, a condition, and whether to try the next rule if the method fails.
public struct CVMRule: Hashable, Sendable, CustomStringConvertible {
    public let method: CVMethod
    public let condition: CVMCondition
    /// Bit 7 of the CVM code: "apply succeeding CV rule if this CVM is unsuccessful".
    public let applyNextIfUnsuccessful: Bool

    public init(method: CVMethod, condition: CVMCondition, applyNextIfUnsuccessful: Bool) {
        self.method = method
        self.condition = condition
        self.applyNextIfUnsuccessful = applyNextIfUnsuccessful
    }

    /// The rule's two bytes.
    public var bytes: [UInt8] { [method.code | (applyNextIfUnsuccessful ? 0x40 : 0), condition.code] }

    public var description: String {
        let condition = condition.description
        return "\(method), \(condition.prefix(1).lowercased() + condition.dropFirst())\(applyNextIfUnsuccessful ? ", else next rule" : ", else fail")"
    }
}

/// The CVM list (tag 8E): amounts X and Y in the application currency, then the rules in order.
public struct CVMList: Hashable, Sendable {
    public let amountX: UInt32
    public let amountY: UInt32
    public let rules: [CVMRule]

    public init(amountX: UInt32, amountY: UInt32, rules: [CVMRule]) {
        self.amountX = amountX
        self.amountY = amountY
        self.rules = rules
    }

    /// Parses tag 8E: at least 8 bytes of amounts, then an even number of rule bytes.
    public static func parse(_ bytes: [UInt8]) throws(EMVError) -> CVMList {
        guard bytes.count >= 8 else {
            throw EMVError(field: "CVM list", rule: "must hold amounts X and Y (8 bytes), got \(bytes.count) bytes")
        }
        guard (bytes.count - 8) % 2 == 0 else {
            throw EMVError(field: "CVM list", rule: "rules are 2 bytes each; \(bytes.count - 8) rule bytes is odd")
        }
        let x = bytes[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let y = bytes[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        var rules: [CVMRule] = []
        for i in stride(from: 8, to: bytes.count, by: 2) {
            rules.append(CVMRule(method: CVMethod(code: bytes[i]), condition: CVMCondition(code: bytes[i + 1]),
                                 applyNextIfUnsuccessful: bytes[i] & 0x40 != 0))
        }
        return CVMList(amountX: x, amountY: y, rules: rules)
    }

    /// The list's encoding as tag 8E's value.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        for v in [amountX, amountY] {
            out += [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
        }
        return out + rules.flatMap(\.bytes)
    }
}

/// CVM Results (tag 9F34): the method performed, its condition and the result.
public struct CVMResults: Hashable, Sendable {
    public enum Result: UInt8, Sendable {
        case unknown = 0x00
        case failed = 0x01
        case successful = 0x02
    }

    public let bytes: [UInt8]

    /// CVM Results as a contactless kernel reports them (e.g. on-device CVM: 01 00 02).
    public init(bytes: [UInt8]) { self.bytes = bytes }

    public init(rule: CVMRule?, result: Result) {
        // 3F0000-style "no CVM performed" when no rule applied (EMV Book 4 §6.3.4.5).
        bytes = rule.map { [$0.bytes[0], $0.bytes[1], result.rawValue] } ?? [0x3F, 0x00, result.rawValue]
    }
}
