/// One named bit of an EMV bit string: byte 1 is the leftmost, bit 8 the most significant,
/// as the EMV books number them.
public struct EMVBit: Hashable, Sendable, CustomStringConvertible {
    public let byte: Int
    public let bit: Int
    public let name: String

    public init(byte: Int, bit: Int, _ name: String) {
        precondition((1...8).contains(bit), "EMV bits are numbered 8 (high) to 1 (low)")
        self.byte = byte
        self.bit = bit
        self.name = name
    }

    /// The bit's mask within its byte.
    public var mask: UInt8 { UInt8(1) << UInt8(bit - 1) }

    public var description: String { "byte \(byte) bit \(bit): \(name)" }
}

/// A fixed-length EMV bit string with named bits (TVR, TSI, AIP, CVR).
public protocol EMVBitString: Hashable, Sendable, CustomStringConvertible {
    /// The field's name in errors and traces, e.g. "TVR".
    static var fieldName: String { get }
    static var byteCount: Int { get }
    /// Every named bit, in byte then bit order.
    static var namedBits: [EMVBit] { get }
    var bytes: [UInt8] { get set }
    init(uncheckedBytes: [UInt8])
}

extension EMVBitString {
    /// All bits clear.
    public init() { self.init(uncheckedBytes: [UInt8](repeating: 0, count: Self.byteCount)) }

    /// Wraps bytes of exactly the field's length.
    public init(bytes: [UInt8]) throws(EMVError) {
        guard bytes.count == Self.byteCount else {
            throw EMVError(field: Self.fieldName, rule: "must be \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.init(uncheckedBytes: bytes)
    }

    /// Parses hex of exactly the field's length.
    public init(hex: String) throws(EMVError) {
        try self.init(bytes: Hex.decode(hex, field: Self.fieldName))
    }

    public func contains(_ bit: EMVBit) -> Bool { bytes[bit.byte - 1] & bit.mask != 0 }

    public mutating func set(_ bit: EMVBit) { bytes[bit.byte - 1] |= bit.mask }

    public mutating func clear(_ bit: EMVBit) { bytes[bit.byte - 1] &= ~bit.mask }

    /// Names of the named bits that are set.
    public var setBitNames: [String] { Self.namedBits.filter(contains).map(\.name) }

    public var hex: String { Hex.encode(bytes) }

    public var description: String {
        let names = setBitNames
        return names.isEmpty ? hex : "\(hex) (\(names.joined(separator: "; ")))"
    }
}

/// Terminal Verification Results (tag 95), EMV Book 3 Annex C5.
public struct TVR: EMVBitString {
    public static let fieldName = "TVR"
    public static let byteCount = 5
    public var bytes: [UInt8]
    public init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    public static let offlineDataAuthenticationNotPerformed = EMVBit(byte: 1, bit: 8, "Offline data authentication was not performed")
    public static let sdaFailed = EMVBit(byte: 1, bit: 7, "SDA failed")
    public static let iccDataMissing = EMVBit(byte: 1, bit: 6, "ICC data missing")
    public static let cardOnExceptionFile = EMVBit(byte: 1, bit: 5, "Card appears on terminal exception file")
    public static let ddaFailed = EMVBit(byte: 1, bit: 4, "DDA failed")
    public static let cdaFailed = EMVBit(byte: 1, bit: 3, "CDA failed")
    public static let sdaSelected = EMVBit(byte: 1, bit: 2, "SDA selected")
    public static let differentApplicationVersions = EMVBit(byte: 2, bit: 8, "ICC and terminal have different application versions")
    public static let expiredApplication = EMVBit(byte: 2, bit: 7, "Expired application")
    public static let applicationNotYetEffective = EMVBit(byte: 2, bit: 6, "Application not yet effective")
    public static let serviceNotAllowed = EMVBit(byte: 2, bit: 5, "Requested service not allowed for card product")
    public static let newCard = EMVBit(byte: 2, bit: 4, "New card")
    public static let cardholderVerificationNotSuccessful = EMVBit(byte: 3, bit: 8, "Cardholder verification was not successful")
    public static let unrecognisedCVM = EMVBit(byte: 3, bit: 7, "Unrecognised CVM")
    public static let pinTryLimitExceeded = EMVBit(byte: 3, bit: 6, "PIN Try Limit exceeded")
    public static let pinPadNotPresent = EMVBit(byte: 3, bit: 5, "PIN entry required and PIN pad not present or not working")
    public static let pinNotEntered = EMVBit(byte: 3, bit: 4, "PIN entry required, PIN pad present, but PIN was not entered")
    public static let onlinePINEntered = EMVBit(byte: 3, bit: 3, "Online PIN entered")
    public static let exceedsFloorLimit = EMVBit(byte: 4, bit: 8, "Transaction exceeds floor limit")
    public static let lowerOfflineLimitExceeded = EMVBit(byte: 4, bit: 7, "Lower consecutive offline limit exceeded")
    public static let upperOfflineLimitExceeded = EMVBit(byte: 4, bit: 6, "Upper consecutive offline limit exceeded")
    public static let randomlySelectedOnline = EMVBit(byte: 4, bit: 5, "Transaction selected randomly for online processing")
    public static let merchantForcedOnline = EMVBit(byte: 4, bit: 4, "Merchant forced transaction online")
    public static let defaultTDOLUsed = EMVBit(byte: 5, bit: 8, "Default TDOL used")
    public static let issuerAuthenticationFailed = EMVBit(byte: 5, bit: 7, "Issuer authentication failed")
    public static let scriptFailedBeforeFinalGenerateAC = EMVBit(byte: 5, bit: 6, "Script processing failed before final GENERATE AC")
    public static let scriptFailedAfterFinalGenerateAC = EMVBit(byte: 5, bit: 5, "Script processing failed after final GENERATE AC")

    public static let namedBits: [EMVBit] = [
        offlineDataAuthenticationNotPerformed, sdaFailed, iccDataMissing, cardOnExceptionFile, ddaFailed, cdaFailed, sdaSelected,
        differentApplicationVersions, expiredApplication, applicationNotYetEffective, serviceNotAllowed, newCard,
        cardholderVerificationNotSuccessful, unrecognisedCVM, pinTryLimitExceeded, pinPadNotPresent, pinNotEntered, onlinePINEntered,
        exceedsFloorLimit, lowerOfflineLimitExceeded, upperOfflineLimitExceeded, randomlySelectedOnline, merchantForcedOnline,
        defaultTDOLUsed, issuerAuthenticationFailed, scriptFailedBeforeFinalGenerateAC, scriptFailedAfterFinalGenerateAC,
    ]
}

/// Transaction Status Information (tag 9B), EMV Book 3 Annex C6.
public struct TSI: EMVBitString {
    public static let fieldName = "TSI"
    public static let byteCount = 2
    public var bytes: [UInt8]
    public init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    public static let offlineDataAuthenticationPerformed = EMVBit(byte: 1, bit: 8, "Offline data authentication was performed")
    public static let cardholderVerificationPerformed = EMVBit(byte: 1, bit: 7, "Cardholder verification was performed")
    public static let cardRiskManagementPerformed = EMVBit(byte: 1, bit: 6, "Card risk management was performed")
    public static let issuerAuthenticationPerformed = EMVBit(byte: 1, bit: 5, "Issuer authentication was performed")
    public static let terminalRiskManagementPerformed = EMVBit(byte: 1, bit: 4, "Terminal risk management was performed")
    public static let scriptProcessingPerformed = EMVBit(byte: 1, bit: 3, "Script processing was performed")

    public static let namedBits: [EMVBit] = [
        offlineDataAuthenticationPerformed, cardholderVerificationPerformed, cardRiskManagementPerformed,
        issuerAuthenticationPerformed, terminalRiskManagementPerformed, scriptProcessingPerformed,
    ]
}

/// Application Interchange Profile (tag 82), EMV Book 3 Annex C1.
public struct AIP: EMVBitString {
    public static let fieldName = "AIP"
    public static let byteCount = 2
    public var bytes: [UInt8]
    public init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    public static let sdaSupported = EMVBit(byte: 1, bit: 7, "SDA supported")
    public static let ddaSupported = EMVBit(byte: 1, bit: 6, "DDA supported")
    public static let cardholderVerificationSupported = EMVBit(byte: 1, bit: 5, "Cardholder verification is supported")
    public static let terminalRiskManagementRequired = EMVBit(byte: 1, bit: 4, "Terminal risk management is to be performed")
    public static let issuerAuthenticationSupported = EMVBit(byte: 1, bit: 3, "Issuer authentication is supported")
    public static let cdaSupported = EMVBit(byte: 1, bit: 1, "CDA supported")

    public static let namedBits: [EMVBit] = [
        sdaSupported, ddaSupported, cardholderVerificationSupported, terminalRiskManagementRequired,
        issuerAuthenticationSupported, cdaSupported,
    ]
}

/// The cryptogram type a card returned, as the CVRs record it in two bits.
public enum CryptogramType: UInt8, Sendable, CustomStringConvertible {
    case aac = 0b00
    case tc = 0b01
    case arqc = 0b10
    /// In the "second GENERATE AC" field: not requested yet. In 9F27 this value is RFU.
    case notRequested = 0b11

    public var description: String {
        switch self {
        case .aac: "AAC"
        case .tc: "TC"
        case .arqc: "ARQC"
        case .notRequested: "not requested"
        }
    }
}

/// The two 2-bit "cryptogram returned" fields both schemes' CVRs keep in one byte: the first
/// GENERATE AC in bits 6–5 (00 AAC, 01 TC, 10 ARQC), the second in bits 8–7 (00 AAC, 01 TC,
/// 10 not requested; 11 is reserved and read as ARQC rather than trapped).
extension EMVBitString {
    func firstACField(byte i: Int) -> CryptogramType {
        CryptogramType(rawValue: (bytes[i] >> 4) & 0b11)!
    }

    mutating func setFirstACField(byte i: Int, _ value: CryptogramType) {
        bytes[i] = bytes[i] & 0b1100_1111 | value.rawValue << 4
    }

    func secondACField(byte i: Int) -> CryptogramType {
        switch (bytes[i] >> 6) & 0b11 {
        case 0b00: .aac
        case 0b01: .tc
        case 0b10: .notRequested
        default: .arqc
        }
    }

    mutating func setSecondACField(byte i: Int, _ value: CryptogramType) {
        let code: UInt8 = switch value {
        case .aac: 0b00
        case .tc: 0b01
        case .notRequested: 0b10
        case .arqc: 0b11
        }
        bytes[i] = bytes[i] & 0b0011_1111 | code << 6
    }
}

/// Visa Card Verification Results (4 bytes inside 9F10 for CVN 10/18/22: a length byte 03, then
/// three bytes of flags), after the Visa Integrated Circuit Card Specification.
public struct VisaCVR: EMVBitString {
    public static let fieldName = "CVR"
    public static let byteCount = 4
    public var bytes: [UInt8]
    public init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    public static let issuerAuthenticationFailed = EMVBit(byte: 2, bit: 4, "Issuer authentication performed and failed")
    public static let offlinePINPerformed = EMVBit(byte: 2, bit: 3, "Offline PIN verification performed")
    public static let offlinePINFailed = EMVBit(byte: 2, bit: 2, "Offline PIN verification failed")
    public static let unableToGoOnline = EMVBit(byte: 2, bit: 1, "Unable to go online")
    public static let lastOnlineNotCompleted = EMVBit(byte: 3, bit: 8, "Last online transaction not completed")
    public static let pinTryLimitExceeded = EMVBit(byte: 3, bit: 7, "PIN try limit exceeded")
    public static let velocityExceeded = EMVBit(byte: 3, bit: 6, "Exceeded velocity checking counters")
    public static let newCard = EMVBit(byte: 3, bit: 5, "New card")
    public static let issuerAuthenticationFailedLastOnline = EMVBit(byte: 3, bit: 4, "Issuer authentication failure on last online transaction")
    public static let issuerAuthenticationNotPerformed = EMVBit(byte: 3, bit: 3, "Issuer authentication not performed after online authorisation")
    public static let applicationBlockedByPIN = EMVBit(byte: 3, bit: 2, "Application blocked by card because PIN try limit exceeded")
    public static let sdaFailedLastTransaction = EMVBit(byte: 3, bit: 1, "Offline static data authentication failed on last transaction")
    public static let scriptProcessingFailed = EMVBit(byte: 4, bit: 4, "Issuer script processing failed")
    public static let ddaFailedLastTransaction = EMVBit(byte: 4, bit: 3, "Offline dynamic data authentication failed on last transaction")
    public static let ddaPerformed = EMVBit(byte: 4, bit: 2, "Offline dynamic data authentication performed")

    public static let namedBits: [EMVBit] = [
        issuerAuthenticationFailed, offlinePINPerformed, offlinePINFailed, unableToGoOnline,
        lastOnlineNotCompleted, pinTryLimitExceeded, velocityExceeded, newCard, issuerAuthenticationFailedLastOnline,
        issuerAuthenticationNotPerformed, applicationBlockedByPIN, sdaFailedLastTransaction,
        scriptProcessingFailed, ddaFailedLastTransaction, ddaPerformed,
    ]

    /// A fresh CVR: length byte 03, both cryptogram fields "AAC".
    public static func empty() -> VisaCVR { VisaCVR(uncheckedBytes: [0x03, 0, 0, 0]) }

    /// Cryptogram returned by the first GENERATE AC (byte 2, bits 6–5).
    public var firstGenerateAC: CryptogramType {
        get { firstACField(byte: 1) }
        set { setFirstACField(byte: 1, newValue) }
    }

    /// Cryptogram returned by the second GENERATE AC (byte 2, bits 8–7; 10 = not requested).
    public var secondGenerateAC: CryptogramType {
        get { secondACField(byte: 1) }
        set { setSecondACField(byte: 1, newValue) }
    }
}

/// Mastercard M/Chip Card Verification Results (6 bytes inside 9F10 for CVN 16/17/20/21).
public struct MastercardCVR: EMVBitString {
    public static let fieldName = "CVR"
    public static let byteCount = 6
    public var bytes: [UInt8]
    public init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    public static let offlinePINPerformed = EMVBit(byte: 1, bit: 3, "Offline PIN verification performed")
    public static let offlineEncipheredPINPerformed = EMVBit(byte: 1, bit: 2, "Offline encrypted PIN verification performed")
    public static let offlinePINSuccessful = EMVBit(byte: 1, bit: 1, "Offline PIN verification successful")
    public static let ddaReturned = EMVBit(byte: 2, bit: 8, "DDA returned")
    public static let cdaFirstGenerateAC = EMVBit(byte: 2, bit: 7, "Combined DDA/AC generation returned in first GENERATE AC")
    public static let cdaSecondGenerateAC = EMVBit(byte: 2, bit: 6, "Combined DDA/AC generation returned in second GENERATE AC")
    public static let issuerAuthenticationPerformed = EMVBit(byte: 2, bit: 5, "Issuer authentication performed")
    public static let lastOnlineNotCompleted = EMVBit(byte: 4, bit: 8, "Last online transaction not completed")
    public static let unableToGoOnline = EMVBit(byte: 4, bit: 7, "Unable to go online")
    public static let offlinePINNotPerformed = EMVBit(byte: 4, bit: 6, "Offline PIN verification not performed")
    public static let offlinePINFailed = EMVBit(byte: 4, bit: 5, "Offline PIN verification failed")
    public static let pinTryLimitExceeded = EMVBit(byte: 4, bit: 4, "PTL exceeded")
    public static let internationalTransaction = EMVBit(byte: 4, bit: 3, "International transaction")
    public static let domesticTransaction = EMVBit(byte: 4, bit: 2, "Domestic transaction")
    public static let terminalErroneouslyConsidersPINOK = EMVBit(byte: 4, bit: 1, "Terminal erroneously considers offline PIN OK")
    public static let lowerConsecutiveLimitExceeded = EMVBit(byte: 5, bit: 8, "Lower consecutive offline limit exceeded")
    public static let upperConsecutiveLimitExceeded = EMVBit(byte: 5, bit: 7, "Upper consecutive offline limit exceeded")
    public static let lowerCumulativeLimitExceeded = EMVBit(byte: 5, bit: 6, "Lower cumulative offline limit exceeded")
    public static let upperCumulativeLimitExceeded = EMVBit(byte: 5, bit: 5, "Upper cumulative offline limit exceeded")
    public static let goOnlineNextTransaction = EMVBit(byte: 5, bit: 4, "Go online on next transaction was set")
    public static let issuerAuthenticationFailed = EMVBit(byte: 5, bit: 3, "Issuer authentication failed")
    public static let scriptReceived = EMVBit(byte: 5, bit: 2, "Script received")
    public static let scriptFailed = EMVBit(byte: 5, bit: 1, "Script failed")

    public static let namedBits: [EMVBit] = [
        offlinePINPerformed, offlineEncipheredPINPerformed, offlinePINSuccessful,
        ddaReturned, cdaFirstGenerateAC, cdaSecondGenerateAC, issuerAuthenticationPerformed,
        lastOnlineNotCompleted, unableToGoOnline, offlinePINNotPerformed, offlinePINFailed, pinTryLimitExceeded,
        internationalTransaction, domesticTransaction, terminalErroneouslyConsidersPINOK,
        lowerConsecutiveLimitExceeded, upperConsecutiveLimitExceeded, lowerCumulativeLimitExceeded, upperCumulativeLimitExceeded,
        goOnlineNextTransaction, issuerAuthenticationFailed, scriptReceived, scriptFailed,
    ]

    /// Cryptogram returned by the first GENERATE AC (byte 1, bits 6–5).
    public var firstGenerateAC: CryptogramType {
        get { firstACField(byte: 0) }
        set { setFirstACField(byte: 0, newValue) }
    }

    /// Cryptogram returned by the second GENERATE AC (byte 1, bits 8–7; 10 = not requested).
    public var secondGenerateAC: CryptogramType {
        get { secondACField(byte: 0) }
        set { setSecondACField(byte: 0, newValue) }
    }

    /// PIN try counter's low nibble (byte 3, bits 4–1).
    public var pinTryCounter: Int {
        get { Int(bytes[2] & 0x0F) }
        set { bytes[2] = bytes[2] & 0xF0 | UInt8(newValue & 0x0F) }
    }
}
