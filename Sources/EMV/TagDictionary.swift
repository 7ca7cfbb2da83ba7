/// Data element formats of EMV Book 3, section 4.3. The format says how a value's bytes
/// are to be read; it does not by itself say how long the value is.
public enum TagFormat: String, Sendable, Codable {
    /// Numeric: BCD digits, right-justified and padded with leading zeros.
    case n
    /// Compressed numeric: BCD digits, left-justified and padded with trailing 'F'.
    case cn
    /// Alphanumeric: one character per byte, letters and digits only.
    case an
    /// Alphanumeric special: one character per byte, from the common character set.
    case ans
    /// Binary: bits whose meaning the element's own definition gives.
    case b
    /// Alphabetic: one letter per byte.
    case a
    /// Book 3 gives "var." or no format: templates and objects whose content is itself TLV.
    case variable
}

/// Where a data element comes from in a transaction. The terminal relies on this to refuse
/// a card that sends a terminal- or issuer-sourced tag (Book 3, 7.5).
public enum TagSource: String, Sendable, Codable {
    /// The ICC: returned in a record, an FCI or a command response.
    case card
    /// The terminal: configuration or a value it produces during the transaction.
    case terminal
    /// The issuer: received in the authorisation response.
    case issuer
}

/// One entry of the EMV data element dictionary.
public struct TagInfo: Sendable, Hashable {
    /// The BER-TLV tag, its bytes read big-endian (`0x9F02`, `0x5F2A`, `0xBF0C`, `0x84`).
    public let tag: UInt32
    /// The name used by EMV Book 3 Annex A (or the payment system for scheme tags).
    public let name: String
    /// How the value's bytes are coded.
    public let format: TagFormat
    /// Who supplies the value.
    public let source: TagSource
    /// The shortest value in bytes. Book 3 gives no lower bound for "var." elements and for
    /// lengths defined by a key size, so those are 0: a zero-length object counts as absent,
    /// not as malformed.
    public let minLength: Int
    /// The longest value in bytes. Where Book 3 gives no upper bound, this is 65535, the
    /// largest length EMV's BER-TLV length field (at most three bytes) can express.
    public let maxLength: Int
    /// Whether the value is itself a sequence of TLV objects (a template).
    public let isConstructed: Bool

    /// Makes an entry; `isConstructed` follows from bit 6 of the tag's first byte.
    public init(tag: UInt32, name: String, format: TagFormat, source: TagSource, minLength: Int, maxLength: Int) {
        self.tag = tag
        self.name = name
        self.format = format
        self.source = source
        self.minLength = minLength
        self.maxLength = maxLength
        self.isConstructed = TagInfo.firstByte(of: tag) & 0x20 != 0
    }

    /// The leading byte of a tag held right-aligned in a `UInt32`, which is where
    /// BER-TLV keeps the class and constructed bits.
    static func firstByte(of tag: UInt32) -> UInt8 {
        var t = tag
        while t > 0xFF { t >>= 8 }
        return UInt8(t)
    }
}

/// The EMV data element dictionary: every tag a contact transaction uses, from EMV 4.3/4.4
/// Book 3 Annex A, plus the few scheme tags a contact terminal meets in practice.
public enum TagDictionary {
    /// The entry for `tag`, or nil if the dictionary does not know it.
    public static func info(_ tag: UInt32) -> TagInfo? {
        byTag[tag]
    }

    /// The EMV name of `tag`, or nil if the dictionary does not know it.
    public static func name(_ tag: UInt32) -> String? {
        byTag[tag]?.name
    }

    /// Every entry, in ascending tag order.
    public static var all: [TagInfo] { sorted }

    // The raw table stays the source of `all`, so a duplicated tag shows up there
    // (and in the tests) instead of being silently folded away by the dictionary.
    private static let sorted: [TagInfo] = table.sorted { $0.tag < $1.tag }

    private static let byTag: [UInt32: TagInfo] = Dictionary(
        table.map { ($0.tag, $0) },
        uniquingKeysWith: { first, _ in first }
    )

    /// Book 3 writes "var." with no maximum for these; see `TagInfo.maxLength`.
    private static let unbounded = 65_535
    /// The largest RSA modulus EMV allows (1984 bits). Certificates and signatures are as
    /// long as the signing key's modulus (N_CA, N_I, N_IC), so this bounds them.
    private static let modulusMax = 248

    private static func entry(
        _ tag: UInt32, _ name: String, _ format: TagFormat, _ source: TagSource, _ min: Int, _ max: Int
    ) -> TagInfo {
        TagInfo(tag: tag, name: name, format: format, source: source, minLength: min, maxLength: max)
    }

    // Lengths are in bytes, as Annex A's "Length" column gives them, not in digits.
    private static let table: [TagInfo] = [
        // One-byte tags.
        entry(0x42, "Issuer Identification Number (IIN)", .n, .card, 3, 3),
        entry(0x4F, "Application Dedicated File (ADF) Name", .b, .card, 5, 16),
        entry(0x50, "Application Label", .ans, .card, 1, 16),
        entry(0x57, "Track 2 Equivalent Data", .b, .card, 0, 19),
        entry(0x5A, "Application Primary Account Number (PAN)", .cn, .card, 0, 10),
        entry(0x61, "Application Template", .b, .card, 0, 252),
        entry(0x6F, "File Control Information (FCI) Template", .variable, .card, 0, 252),
        entry(0x70, "READ RECORD Response Message Template", .variable, .card, 0, 252),
        entry(0x71, "Issuer Script Template 1", .b, .issuer, 0, unbounded),
        entry(0x72, "Issuer Script Template 2", .b, .issuer, 0, unbounded),
        entry(0x73, "Directory Discretionary Template", .variable, .card, 0, 252),
        entry(0x77, "Response Message Template Format 2", .variable, .card, 0, unbounded),
        entry(0x80, "Response Message Template Format 1", .variable, .card, 0, unbounded),
        entry(0x81, "Amount, Authorised (Binary)", .b, .terminal, 4, 4),
        entry(0x82, "Application Interchange Profile", .b, .card, 2, 2),
        entry(0x83, "Command Template", .b, .terminal, 0, unbounded),
        entry(0x84, "Dedicated File (DF) Name", .b, .card, 5, 16),
        entry(0x86, "Issuer Script Command", .b, .issuer, 0, 261),
        entry(0x87, "Application Priority Indicator", .b, .card, 1, 1),
        entry(0x88, "Short File Identifier (SFI)", .b, .card, 1, 1),
        // Annex A leaves the format to the payment system; all of them use 6 characters.
        entry(0x89, "Authorisation Code", .an, .issuer, 6, 6),
        entry(0x8A, "Authorisation Response Code", .an, .issuer, 2, 2),
        entry(0x8C, "Card Risk Management Data Object List 1 (CDOL1)", .b, .card, 0, 252),
        entry(0x8D, "Card Risk Management Data Object List 2 (CDOL2)", .b, .card, 0, 252),
        entry(0x8E, "Cardholder Verification Method (CVM) List", .b, .card, 10, 252),
        entry(0x8F, "Certification Authority Public Key Index", .b, .card, 1, 1),
        entry(0x90, "Issuer Public Key Certificate", .b, .card, 0, modulusMax),
        entry(0x91, "Issuer Authentication Data", .b, .issuer, 8, 16),
        // N_I - N_CA + 36, and N_I never exceeds N_CA.
        entry(0x92, "Issuer Public Key Remainder", .b, .card, 0, 36),
        entry(0x93, "Signed Static Application Data", .b, .card, 0, modulusMax),
        entry(0x94, "Application File Locator (AFL)", .variable, .card, 0, 252),
        entry(0x95, "Terminal Verification Results", .b, .terminal, 5, 5),
        entry(0x97, "Transaction Certificate Data Object List (TDOL)", .b, .card, 0, 252),
        entry(0x98, "Transaction Certificate (TC) Hash Value", .b, .terminal, 20, 20),
        entry(0x99, "Transaction Personal Identification Number (PIN) Data", .b, .terminal, 0, unbounded),
        entry(0x9A, "Transaction Date", .n, .terminal, 3, 3),
        entry(0x9B, "Transaction Status Information", .b, .terminal, 2, 2),
        entry(0x9C, "Transaction Type", .n, .terminal, 1, 1),
        entry(0x9D, "Directory Definition File (DDF) Name", .b, .card, 5, 16),
        entry(0xA5, "File Control Information (FCI) Proprietary Template", .variable, .card, 0, unbounded),

        // Two-byte tags, class application (5F).
        entry(0x5F20, "Cardholder Name", .ans, .card, 2, 26),
        entry(0x5F24, "Application Expiration Date", .n, .card, 3, 3),
        entry(0x5F25, "Application Effective Date", .n, .card, 3, 3),
        entry(0x5F28, "Issuer Country Code", .n, .card, 2, 2),
        entry(0x5F2A, "Transaction Currency Code", .n, .terminal, 2, 2),
        entry(0x5F2D, "Language Preference", .an, .card, 2, 8),
        entry(0x5F30, "Service Code", .n, .card, 2, 2),
        entry(0x5F34, "Application Primary Account Number (PAN) Sequence Number", .n, .card, 1, 1),
        entry(0x5F36, "Transaction Currency Exponent", .n, .terminal, 1, 1),
        entry(0x5F50, "Issuer URL", .ans, .card, 0, unbounded),
        entry(0x5F53, "International Bank Account Number (IBAN)", .variable, .card, 0, 34),
        // ISO 9362 BICs are 8 or 11 characters; nothing in between is valid.
        entry(0x5F54, "Bank Identifier Code (BIC)", .variable, .card, 8, 11),
        entry(0x5F55, "Issuer Country Code (alpha2 format)", .a, .card, 2, 2),
        entry(0x5F56, "Issuer Country Code (alpha3 format)", .a, .card, 3, 3),
        entry(0x5F57, "Account Type", .n, .terminal, 1, 1),

        // Two-byte tags, context-specific (9F).
        // n 6-11 digits, always sent in 6 bytes.
        entry(0x9F01, "Acquirer Identifier", .n, .terminal, 6, 6),
        entry(0x9F02, "Amount, Authorised (Numeric)", .n, .terminal, 6, 6),
        entry(0x9F03, "Amount, Other (Numeric)", .n, .terminal, 6, 6),
        entry(0x9F04, "Amount, Other (Binary)", .b, .terminal, 4, 4),
        entry(0x9F05, "Application Discretionary Data", .b, .card, 1, 32),
        entry(0x9F06, "Application Identifier (AID) - terminal", .b, .terminal, 5, 16),
        entry(0x9F07, "Application Usage Control", .b, .card, 2, 2),
        entry(0x9F08, "Application Version Number", .b, .card, 2, 2),
        entry(0x9F09, "Application Version Number", .b, .terminal, 2, 2),
        entry(0x9F0A, "Application Selection Registered Proprietary Data (ASRPD)", .b, .card, 0, unbounded),
        entry(0x9F0B, "Cardholder Name Extended", .ans, .card, 27, 45),
        // 6 or 8 digits, so 3 or 4 bytes; it exists because tag 42 cannot grow past 6.
        entry(0x9F0C, "Issuer Identification Number Extended (IINE)", .n, .card, 3, 4),
        entry(0x9F0D, "Issuer Action Code - Default", .b, .card, 5, 5),
        entry(0x9F0E, "Issuer Action Code - Denial", .b, .card, 5, 5),
        entry(0x9F0F, "Issuer Action Code - Online", .b, .card, 5, 5),
        entry(0x9F10, "Issuer Application Data", .b, .card, 0, 32),
        entry(0x9F11, "Issuer Code Table Index", .n, .card, 1, 1),
        entry(0x9F12, "Application Preferred Name", .ans, .card, 1, 16),
        entry(0x9F13, "Last Online Application Transaction Counter (ATC) Register", .b, .card, 2, 2),
        entry(0x9F14, "Lower Consecutive Offline Limit", .b, .card, 1, 1),
        entry(0x9F15, "Merchant Category Code", .n, .terminal, 2, 2),
        entry(0x9F16, "Merchant Identifier", .ans, .terminal, 15, 15),
        entry(0x9F17, "Personal Identification Number (PIN) Try Counter", .b, .card, 1, 1),
        entry(0x9F18, "Issuer Script Identifier", .b, .issuer, 4, 4),
        entry(0x9F19, "Token Requestor ID", .n, .card, 6, 6),
        entry(0x9F1A, "Terminal Country Code", .n, .terminal, 2, 2),
        entry(0x9F1B, "Terminal Floor Limit", .b, .terminal, 4, 4),
        entry(0x9F1C, "Terminal Identification", .an, .terminal, 8, 8),
        entry(0x9F1D, "Terminal Risk Management Data", .b, .terminal, 1, 8),
        entry(0x9F1E, "Interface Device (IFD) Serial Number", .an, .terminal, 8, 8),
        entry(0x9F1F, "Track 1 Discretionary Data", .ans, .card, 0, unbounded),
        entry(0x9F20, "Track 2 Discretionary Data", .cn, .card, 0, unbounded),
        entry(0x9F21, "Transaction Time", .n, .terminal, 3, 3),
        entry(0x9F22, "Certification Authority Public Key Index", .b, .terminal, 1, 1),
        entry(0x9F23, "Upper Consecutive Offline Limit", .b, .card, 1, 1),
        entry(0x9F24, "Payment Account Reference (PAR)", .an, .card, 29, 29),
        entry(0x9F25, "Last 4 Digits of PAN", .n, .card, 2, 2),
        entry(0x9F26, "Application Cryptogram", .b, .card, 8, 8),
        entry(0x9F27, "Cryptogram Information Data", .b, .card, 1, 1),
        entry(0x9F2D, "Integrated Circuit Card (ICC) PIN Encipherment Public Key Certificate", .b, .card, 0, modulusMax),
        // Exponents are 3 or 65537, coded in 1 or 3 bytes.
        entry(0x9F2E, "Integrated Circuit Card (ICC) PIN Encipherment Public Key Exponent", .b, .card, 1, 3),
        // N_PE - N_I + 42, and N_PE never exceeds N_I.
        entry(0x9F2F, "Integrated Circuit Card (ICC) PIN Encipherment Public Key Remainder", .b, .card, 0, 42),
        entry(0x9F32, "Issuer Public Key Exponent", .b, .card, 1, 3),
        entry(0x9F33, "Terminal Capabilities", .b, .terminal, 3, 3),
        entry(0x9F34, "Cardholder Verification Method (CVM) Results", .b, .terminal, 3, 3),
        entry(0x9F35, "Terminal Type", .n, .terminal, 1, 1),
        entry(0x9F36, "Application Transaction Counter (ATC)", .b, .card, 2, 2),
        entry(0x9F37, "Unpredictable Number", .b, .terminal, 4, 4),
        entry(0x9F38, "Processing Options Data Object List (PDOL)", .b, .card, 0, unbounded),
        entry(0x9F39, "Point-of-Service (POS) Entry Mode", .n, .terminal, 1, 1),
        entry(0x9F3A, "Amount, Reference Currency", .b, .terminal, 4, 4),
        // One to four currency codes of 2 bytes each.
        entry(0x9F3B, "Application Reference Currency", .n, .card, 2, 8),
        entry(0x9F3C, "Transaction Reference Currency Code", .n, .terminal, 2, 2),
        entry(0x9F3D, "Transaction Reference Currency Exponent", .n, .terminal, 1, 1),
        entry(0x9F40, "Additional Terminal Capabilities", .b, .terminal, 5, 5),
        entry(0x9F41, "Transaction Sequence Counter", .n, .terminal, 2, 4),
        entry(0x9F42, "Application Currency Code", .n, .card, 2, 2),
        // One exponent per Application Reference Currency.
        entry(0x9F43, "Application Reference Currency Exponent", .n, .card, 1, 4),
        entry(0x9F44, "Application Currency Exponent", .n, .card, 1, 1),
        entry(0x9F45, "Data Authentication Code", .b, .card, 2, 2),
        entry(0x9F46, "Integrated Circuit Card (ICC) Public Key Certificate", .b, .card, 0, modulusMax),
        entry(0x9F47, "Integrated Circuit Card (ICC) Public Key Exponent", .b, .card, 1, 3),
        // N_IC - N_I + 42, and N_IC never exceeds N_I.
        entry(0x9F48, "Integrated Circuit Card (ICC) Public Key Remainder", .b, .card, 0, 42),
        entry(0x9F49, "Dynamic Data Authentication Data Object List (DDOL)", .b, .card, 0, 252),
        entry(0x9F4A, "Static Data Authentication Tag List", .variable, .card, 0, unbounded),
        entry(0x9F4B, "Signed Dynamic Application Data", .b, .card, 0, modulusMax),
        entry(0x9F4C, "Integrated Circuit Card (ICC) Dynamic Number", .b, .card, 2, 8),
        entry(0x9F4D, "Log Entry", .b, .card, 2, 2),
        entry(0x9F4E, "Merchant Name and Location", .ans, .terminal, 0, unbounded),
        entry(0x9F4F, "Log Format", .b, .card, 0, unbounded),

        // Scheme tags outside Annex A. 9F6E and 9F7C mean different things per scheme;
        // these are Mastercard's (M/Chip), matching 9F53, which only Mastercard defines.
        entry(0x9F53, "Transaction Category Code", .an, .terminal, 1, 1),
        entry(0x9F6E, "Third Party Data", .b, .card, 5, 32),
        entry(0x9F7C, "Merchant Custom Data", .b, .terminal, 20, 20),

        // Two-byte tag, context-specific class, constructed (BF).
        entry(0xBF0C, "File Control Information (FCI) Issuer Discretionary Data", .variable, .card, 0, 222),
    ]
}
