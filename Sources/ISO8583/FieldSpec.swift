/// What a field holds, which decides how a packager writes it.
public enum FieldContent: Sendable, Equatable {
    /// Digits only (`n`).
    case numeric
    /// Digits and a separator (`z`): track 2, whose `=` is `D` in BCD.
    case track
    /// Printable characters (`an`, `ans`), written as they are.
    case text
    /// A sign (`C` credit, `D` debit) and digits (`x+n`).
    case amount
    /// Bytes (`b`), written raw or as hex characters by the packager.
    case binary
}

/// How long a field is.
public enum FieldLength: Sendable, Equatable {
    case fixed(Int)
    /// A two-digit length prefix, then up to `max` units.
    case llvar(max: Int)
    /// A three-digit length prefix, then up to `max` units.
    case lllvar(max: Int)

    var maximum: Int {
        switch self {
        case .fixed(let n), .llvar(let n), .lllvar(let n): n
        }
    }

    var prefixDigits: Int {
        switch self {
        case .fixed: 0
        case .llvar: 2
        case .lllvar: 3
        }
    }
}

/// How numbers and bytes are written on the wire.
public enum Encoding: String, Sendable, Equatable {
    /// One ASCII character per digit or character.
    case ascii
    /// Two digits per byte (packed BCD).
    case bcd
    /// Bytes as they are.
    case raw
    /// Bytes as two hexadecimal ASCII characters each.
    case hex
}

/// One data element of ISO 8583:1987.
public struct FieldSpec: Sendable, Equatable {
    public let number: Int
    public let name: String
    public let content: FieldContent
    public let length: FieldLength
    /// Digits for numeric and track fields, characters for text, bytes for binary (characters
    /// when binary is written as hex and the length prefix counts characters).
    public var unit: String {
        switch content {
        case .numeric, .track, .amount: "digits"
        case .text: "characters"
        case .binary: "bytes"
        }
    }
}

/// A message format: how the MTI, the bitmaps, the numbers, the lengths and the bytes of every field
/// are written. The names are the packagers' own: jPOS's `ISO87APackager` and `ISO87BPackager`,
/// pyiso8583's `default` and `default_ascii` specs.
public struct Packager: Sendable, Equatable, CustomStringConvertible {
    public var description: String { name }

    /// Packagers are known by name: there is one of each.
    public static func == (a: Packager, b: Packager) -> Bool { a.name == b.name }
    public let name: String
    /// The MTI: ASCII (4 characters) or BCD (2 bytes).
    public let mti: Encoding
    /// Bitmaps: raw (8 bytes each) or hex (16 characters each).
    public let bitmap: Encoding
    /// Numeric and track fields: ASCII or BCD.
    public let numbers: Encoding
    /// Length prefixes: ASCII or BCD.
    public let lengths: Encoding
    /// Binary fields: raw or hex.
    public let binary: Encoding
    /// When binary is written as hex, variable-length prefixes count characters (pyiso8583),
    /// not bytes.
    public let hexLengthCountsCharacters: Bool
    /// Fields whose bytes are written raw even though `binary` is hex: jPOS's ASCII packager
    /// carries field 55 as LLLCHAR, the bytes themselves.
    let rawBinaryFields: Set<Int>
    let overrides: [Int: FieldSpec]

    /// The spec of field `number` (2…128) in this format.
    public func field(_ number: Int) -> FieldSpec {
        overrides[number] ?? Packager.iso87[number]
    }

    /// The encoding of binary field `number`'s bytes.
    func binaryEncoding(_ number: Int) -> Encoding {
        rawBinaryFields.contains(number) ? .raw : binary
    }

    /// jPOS `ISO87APackager`: every number and length in ASCII, hex-character bitmaps, binary fields
    /// (PIN block, MACs) as hex characters, field 55 as LLLCHAR bytes.
    public static let jposISO87A = Packager(
        name: "jpos-iso87a", mti: .ascii, bitmap: .hex, numbers: .ascii, lengths: .ascii, binary: .hex,
        hexLengthCountsCharacters: false, rawBinaryFields: [55],
        overrides: [55: FieldSpec(number: 55, name: iso87[55].name, content: .binary, length: .lllvar(max: 999))])

    /// jPOS `ISO87BPackager`: BCD numbers and lengths (numerics left-padded, LLNUM right-padded), raw
    /// bitmaps and binary fields, text in ASCII, field 55 as IFB_LLLCHAR bytes.
    public static let jposISO87B = Packager(
        name: "jpos-iso87b", mti: .bcd, bitmap: .raw, numbers: .bcd, lengths: .bcd, binary: .raw,
        hexLengthCountsCharacters: false, rawBinaryFields: [],
        overrides: [55: FieldSpec(number: 55, name: iso87[55].name, content: .binary, length: .lllvar(max: 999))])

    /// pyiso8583's `default` spec: ASCII text and lengths, raw bitmaps and binary fields (52, 55, 64,
    /// 65, 96, 128), field 55 up to 255 bytes.
    public static let pyiso8583Default = Packager(
        name: "pyiso8583-default", mti: .ascii, bitmap: .raw, numbers: .ascii, lengths: .ascii, binary: .raw,
        hexLengthCountsCharacters: false, rawBinaryFields: [], overrides: pyiso8583Overrides(field55: 255))

    /// pyiso8583's `default_ascii` spec: everything in ASCII, bitmaps and binary fields as hex
    /// characters, variable lengths counting characters (field 55 up to 510 characters, 255 bytes).
    public static let pyiso8583DefaultASCII = Packager(
        name: "pyiso8583-default-ascii", mti: .ascii, bitmap: .hex, numbers: .ascii, lengths: .ascii, binary: .hex,
        hexLengthCountsCharacters: true, rawBinaryFields: [], overrides: pyiso8583Overrides(field55: 510))

    /// Every packager by name, as configuration and `cardbench iso8583 decode` name them.
    public static let all: [Packager] = [pyiso8583Default, pyiso8583DefaultASCII, jposISO87A, jposISO87B]

    /// The packager called `name`, accepting pyiso8583's own spellings (`default`, `default_ascii`).
    public static func named(_ name: String) -> Packager? {
        switch name {
        case "default": return pyiso8583Default
        case "default_ascii": return pyiso8583DefaultASCII
        default: return all.first { $0.name == name }
        }
    }

    /// pyiso8583's specs give every field as text except the binary ones, and two other lengths.
    static func pyiso8583Overrides(field55: Int) -> [Int: FieldSpec] {
        var o: [Int: FieldSpec] = [:]
        for n in 2...128 {
            let f = iso87[n]
            switch f.content {
            case .amount, .numeric, .track, .text:
                o[n] = FieldSpec(number: n, name: f.name, content: f.content == .amount ? .text : f.content, length: f.length)
            case .binary:
                // 65 is one byte in jPOS and 96 sixteen; both are eight in pyiso8583.
                o[n] = FieldSpec(number: n, name: f.name, content: .binary, length: n == 65 || n == 96 ? .fixed(8) : f.length)
            }
        }
        o[54] = FieldSpec(number: 54, name: iso87[54].name, content: .text, length: .lllvar(max: 240))
        o[55] = FieldSpec(number: 55, name: iso87[55].name, content: .binary, length: .lllvar(max: field55))
        o[93] = FieldSpec(number: 93, name: iso87[93].name, content: .text, length: .fixed(5))
        return o
    }

    /// ISO 8583:1987's data elements as jPOS's packagers define them (index = field number; 0 and 1
    /// are the MTI and the secondary bitmap, handled apart).
    public static let iso87: [FieldSpec] = {
        var table = [FieldSpec(number: 0, name: "Message Type Indicator", content: .numeric, length: .fixed(4)),
                     FieldSpec(number: 1, name: "Bitmap, Secondary", content: .binary, length: .fixed(8))]
        for (i, row) in rows.enumerated() {
            let n = i + 2
            let (content, length): (FieldContent, FieldLength) = switch row.kind {
            case "n": (.numeric, .fixed(row.length))
            case "x": (.amount, .fixed(row.length))
            case "c": (.text, .fixed(row.length))
            case "b": (.binary, .fixed(row.length))
            case "LLn": (.numeric, .llvar(max: row.length))
            case "LLz": (.track, .llvar(max: row.length))
            case "LLc": (.text, .llvar(max: row.length))
            default: (.text, .lllvar(max: row.length))
            }
            table.append(FieldSpec(number: n, name: row.name, content: content, length: length))
        }
        return table
    }()

    private static let rows: [(kind: String, length: Int, name: String)] = [
        ("LLn", 19, "Primary Account Number (PAN)"), ("n", 6, "Processing Code"), ("n", 12, "Amount, Transaction"),
        ("n", 12, "Amount, Settlement"), ("n", 12, "Amount, Cardholder Billing"), ("n", 10, "Transmission Date and Time"),
        ("n", 8, "Amount, Cardholder Billing Fee"), ("n", 8, "Conversion Rate, Settlement"),
        ("n", 8, "Conversion Rate, Cardholder Billing"), ("n", 6, "System Trace Audit Number"),
        ("n", 6, "Time, Local Transaction"), ("n", 4, "Date, Local Transaction"), ("n", 4, "Date, Expiration"),
        ("n", 4, "Date, Settlement"), ("n", 4, "Date, Conversion"), ("n", 4, "Date, Capture"), ("n", 4, "Merchant Type"),
        ("n", 3, "Acquiring Institution Country Code"), ("n", 3, "PAN Country Code"),
        ("n", 3, "Forwarding Institution Country Code"), ("n", 3, "Point-of-Service Entry Mode"),
        ("n", 3, "PAN Sequence Number"), ("n", 3, "Network International ID (NII)"),
        ("n", 2, "Point-of-Service Condition Code"), ("n", 2, "Point-of-Service Capture Code"),
        ("n", 1, "Authorizing ID Response Length"), ("x", 9, "Amount, Transaction Fee"), ("x", 9, "Amount, Settlement Fee"),
        ("x", 9, "Amount, Transaction Processing Fee"), ("x", 9, "Amount, Settlement Processing Fee"),
        ("LLn", 11, "Acquiring Institution ID Code"), ("LLn", 11, "Forwarding Institution ID Code"),
        ("LLc", 28, "Primary Account Number, Extended"), ("LLz", 37, "Track 2 Data"), ("LLLc", 104, "Track 3 Data"),
        ("c", 12, "Retrieval Reference Number"), ("c", 6, "Authorization ID Response"), ("c", 2, "Response Code"),
        ("c", 3, "Service Restriction Code"), ("c", 8, "Card Acceptor Terminal ID"), ("c", 15, "Card Acceptor ID Code"),
        ("c", 40, "Card Acceptor Name/Location"), ("LLc", 25, "Additional Response Data"), ("LLc", 76, "Track 1 Data"),
        ("LLLc", 999, "Additional Data - ISO"), ("LLLc", 999, "Additional Data - National"),
        ("LLLc", 999, "Additional Data - Private"), ("c", 3, "Currency Code, Transaction"),
        ("c", 3, "Currency Code, Settlement"), ("c", 3, "Currency Code, Cardholder Billing"), ("b", 8, "PIN Data"),
        ("n", 16, "Security-Related Control Information"), ("LLLc", 120, "Additional Amounts"), ("LLLc", 999, "ICC Data"),
        ("LLLc", 999, "Reserved ISO"), ("LLLc", 999, "Reserved National"), ("LLLc", 999, "Reserved National"),
        ("LLLc", 999, "Reserved National"), ("LLLc", 999, "Reserved National"), ("LLLc", 999, "Reserved Private"),
        ("LLLc", 999, "Reserved Private"), ("LLLc", 999, "Reserved Private"), ("b", 8, "MAC"),
        ("b", 1, "Bitmap, Extended"), ("n", 1, "Settlement Code"), ("n", 2, "Extended Payment Code"),
        ("n", 3, "Receiving Institution Country Code"), ("n", 3, "Settlement Institution Country Code"),
        ("n", 3, "Network Management Information Code"), ("n", 4, "Message Number"), ("n", 4, "Message Number, Last"),
        ("n", 6, "Date, Action"), ("n", 10, "Credits, Number"), ("n", 10, "Credits, Reversal Number"),
        ("n", 10, "Debits, Number"), ("n", 10, "Debits, Reversal Number"), ("n", 10, "Transfer, Number"),
        ("n", 10, "Transfer, Reversal Number"), ("n", 10, "Inquiries, Number"), ("n", 10, "Authorizations, Number"),
        ("n", 12, "Credits, Processing Fee Amount"), ("n", 12, "Credits, Transaction Fee Amount"),
        ("n", 12, "Debits, Processing Fee Amount"), ("n", 12, "Debits, Transaction Fee Amount"),
        ("n", 16, "Credits, Amount"), ("n", 16, "Credits, Reversal Amount"), ("n", 16, "Debits, Amount"),
        ("n", 16, "Debits, Reversal Amount"), ("n", 42, "Original Data Elements"), ("c", 1, "File Update Code"),
        ("c", 2, "File Security Code"), ("c", 6, "Response Indicator"), ("c", 7, "Service Indicator"),
        ("c", 42, "Replacement Amounts"), ("b", 16, "Message Security Code"), ("x", 17, "Amount, Net Settlement"),
        ("c", 25, "Payee"), ("LLn", 11, "Settlement Institution ID Code"), ("LLn", 11, "Receiving Institution ID Code"),
        ("LLc", 17, "File Name"), ("LLc", 28, "Account ID 1"), ("LLc", 28, "Account ID 2"),
        ("LLLc", 100, "Transaction Description"),
    ] + Array(repeating: ("LLLc", 999, "Reserved for ISO Use"), count: 7)
        + Array(repeating: ("LLLc", 999, "Reserved for National Use"), count: 8)
        + Array(repeating: ("LLLc", 999, "Reserved for Private Use"), count: 8)
        + [("b", 8, "MAC")]
}
