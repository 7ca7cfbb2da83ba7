import EMV

/// One field's value: text for numeric, track, amount and text fields, bytes for binary ones.
public enum FieldValue: Sendable, Equatable, CustomStringConvertible {
    case text(String)
    case bytes([UInt8])

    public var text: String? {
        if case .text(let t) = self { return t }
        return nil
    }

    public var bytes: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    public var description: String {
        switch self {
        case .text(let t): t
        case .bytes(let b): Hex.encode(b)
        }
    }
}

/// A message that could not be packed or unpacked: which part, where, and the rule it broke.
public struct ISO8583Error: Error, Sendable, Equatable, CustomStringConvertible {
    /// "MTI", "bitmap", "field 4 (Amount, Transaction)", "frame", …
    public let part: String
    /// Where in the message, in bytes, when unpacking.
    public let offset: Int?
    public let reason: String
    /// The field at fault, when it is one: what an answer's code is chosen by (13 for field 4).
    public let field: Int?
    /// The field is absent (or not a value of its kind at all) rather than holding a value the
    /// rule refuses: a format error (30), never "invalid amount" (13).
    public let isMissing: Bool

    public init(part: String, offset: Int? = nil, reason: String) {
        self.part = part
        self.offset = offset
        self.reason = reason
        field = nil
        isMissing = false
    }

    /// An error of field `field`, named `name` in `part` ("field 4 (Amount, Transaction)").
    public init(field: Int, name: String, offset: Int? = nil, reason: String, isMissing: Bool = false) {
        part = "field \(field) (\(name))"
        self.offset = offset
        self.reason = reason
        self.field = field
        self.isMissing = isMissing
    }

    public var description: String {
        offset.map { "\(part) at byte \($0): \(reason)" } ?? "\(part): \(reason)"
    }
}

/// An ISO 8583 message: its type and its fields by number (2…128; the bitmaps follow from them).
public struct ISOMessage: Sendable, Equatable {
    /// The message type indicator: "0200".
    public var mti: String
    public var fields: [Int: FieldValue]

    public init(mti: String, fields: [Int: FieldValue] = [:]) {
        self.mti = mti
        self.fields = fields
    }

    public subscript(_ n: Int) -> String? {
        get { fields[n]?.text }
        set { fields[n] = newValue.map(FieldValue.text) }
    }

    public func bytes(_ n: Int) -> [UInt8]? { fields[n]?.bytes }

    /// The most messages can hold: one bitmap of 64 fields, a second when any of 65…128 is there.
    public static let maximumField = 128
}

extension Packager {
    /// Writes `message` in this format.
    public func pack(_ message: ISOMessage) throws(ISO8583Error) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        guard message.mti.count == 4, message.mti.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw ISO8583Error(part: "MTI", reason: "must be 4 digits, not '\(message.mti)'")
        }
        if mti == .bcd { out += Self.bcdPack(message.mti, left: true) } else { out += Array(message.mti.utf8) }
        for n in message.fields.keys where !(2...ISOMessage.maximumField).contains(n) {
            throw ISO8583Error(part: "field \(n)", reason: "fields are numbered 2 to 128 (1 is the secondary bitmap)")
        }
        let secondary = message.fields.keys.contains { $0 > 64 }
        var bitmap = [UInt8](repeating: 0, count: secondary ? 16 : 8)
        if secondary { bitmap[0] |= 0x80 }
        for n in message.fields.keys { bitmap[(n - 1) / 8] |= 0x80 >> UInt8((n - 1) % 8) }
        let blocks = secondary ? [Array(bitmap[0..<8]), Array(bitmap[8..<16])] : [bitmap]
        for block in blocks { out += self.bitmap == .hex ? Array(Hex.encode(block).utf8) : block }
        for n in message.fields.keys.sorted() {
            try packField(field(n), message.fields[n]!, into: &out)
        }
        return out
    }

    func packField(_ f: FieldSpec, _ value: FieldValue, into out: inout [UInt8]) throws(ISO8583Error) {
        let part = "field \(f.number) (\(f.name))"
        switch f.content {
        case .binary:
            guard let bytes = value.bytes else { throw ISO8583Error(part: part, reason: "is binary; give bytes") }
            let enc = binaryEncoding(f.number)
            if case .fixed(let n) = f.length, bytes.count != n {
                throw ISO8583Error(part: part, reason: "must be \(n) bytes, not \(bytes.count)")
            }
            let units = enc == .hex && hexLengthCountsCharacters ? bytes.count * 2 : bytes.count
            if case .fixed = f.length {} else if units > f.length.maximum {
                throw ISO8583Error(part: part, reason: "\(units) \(enc == .hex && hexLengthCountsCharacters ? "characters" : "bytes"), at most \(f.length.maximum)")
            }
            try packLength(f, units, into: &out)
            out += enc == .hex ? Array(Hex.encode(bytes).utf8) : bytes
        case .numeric, .track, .amount, .text:
            guard var text = value.text else { throw ISO8583Error(part: part, reason: "is \(f.unit == "characters" ? "text" : "a number"); give text") }
            try Self.check(text, f, part: part)
            if case .fixed(let n) = f.length {
                guard text.count <= n else { throw ISO8583Error(part: part, reason: "\(text.count) \(f.unit), must be \(n)") }
                // jPOS pads as its field packagers do: numbers with zeros on the left, text with spaces.
                if f.content == .text {
                    text += String(repeating: " ", count: n - text.count)
                } else if f.content == .amount {
                    text = String(text.prefix(1)) + String(repeating: "0", count: n - text.count) + text.dropFirst()
                } else {
                    text = String(repeating: "0", count: n - text.count) + text
                }
            } else {
                guard text.count <= f.length.maximum else {
                    throw ISO8583Error(part: part, reason: "\(text.count) \(f.unit), at most \(f.length.maximum)")
                }
                try packLength(f, text.count, into: &out)
            }
            switch (f.content, numbers) {
            case (.numeric, .bcd), (.track, .bcd):
                // Fixed numbers are left-padded (IFB_NUMERIC), variable ones right-padded (IFB_LLNUM).
                out += Self.bcdPack(text, left: f.length.prefixDigits == 0)
            case (.amount, .bcd):
                out += Array(text.utf8.prefix(1)) + Self.bcdPack(String(text.dropFirst()), left: true)
            default:
                out += Array(text.utf8)
            }
        }
    }

    static func check(_ text: String, _ f: FieldSpec, part: String) throws(ISO8583Error) {
        for (i, c) in text.utf8.enumerated() {
            let ok: Bool = switch f.content {
            case .numeric: c >= 0x30 && c <= 0x39
            case .track: (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: "=") || c == UInt8(ascii: "D")
            case .amount: i == 0 ? (c == UInt8(ascii: "C") || c == UInt8(ascii: "D")) : (c >= 0x30 && c <= 0x39)
            case .text, .binary: c >= 0x20 && c < 0x7F
            }
            guard ok else {
                let rule = switch f.content {
                case .numeric: "digits only"
                case .track: "digits and '=' only"
                case .amount: "C or D, then digits"
                default: "printable ASCII only"
                }
                throw ISO8583Error(part: part, reason: "\(rule); character \(i + 1) is not")
            }
        }
    }

    func packLength(_ f: FieldSpec, _ count: Int, into out: inout [UInt8]) throws(ISO8583Error) {
        let digits = f.length.prefixDigits
        guard digits > 0 else { return }
        let text = String(count)
        let padded = String(repeating: "0", count: max(0, digits - text.count)) + text
        if lengths == .bcd { out += Self.bcdPack(padded, left: true) } else { out += Array(padded.utf8) }
    }

    /// Packs digits two to a byte, an odd count padded with a 0 nibble on the left or the right;
    /// `=` becomes the nibble D (track 2).
    static func bcdPack(_ digits: String, left: Bool) -> [UInt8] {
        var nibbles = digits.utf8.map { c -> UInt8 in c == UInt8(ascii: "=") || c == UInt8(ascii: "D") ? 0x0D : c &- 0x30 }
        if nibbles.count % 2 == 1 { if left { nibbles.insert(0, at: 0) } else { nibbles.append(0) } }
        return stride(from: 0, to: nibbles.count, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }
}

extension Packager {
    /// Reads a message in this format; every byte must belong to it.
    public func unpack(_ data: [UInt8]) throws(ISO8583Error) -> ISOMessage {
        var reader = Reader(data: data)
        let mtiText: String
        if mti == .bcd {
            let b = try reader.take(2, part: "MTI")
            mtiText = try Self.bcdUnpack(b, digits: 4, left: true, track: false, part: "MTI", offset: 0)
        } else {
            mtiText = try reader.ascii(4, part: "MTI", digits: true)
        }
        var present: [Int] = []
        var bitmapBlocks = 1
        var block = 0
        while block < bitmapBlocks {
            let start = reader.offset
            let bits: [UInt8]
            if bitmap == .hex {
                let text = try reader.ascii(16, part: "bitmap", digits: false)
                guard let decoded = Self.strictHex(text) else {
                    throw ISO8583Error(part: "bitmap", offset: start, reason: "16 hexadecimal characters expected, found '\(text)'")
                }
                bits = decoded
            } else {
                bits = try reader.take(8, part: "bitmap")
            }
            for i in 0..<64 where bits[i / 8] & (0x80 >> UInt8(i % 8)) != 0 {
                let n = block * 64 + i + 1
                if n == 1 { bitmapBlocks = 2 } else { present.append(n) }
            }
            block += 1
        }
        var message = ISOMessage(mti: mtiText)
        for n in present {
            message.fields[n] = try unpackField(field(n), &reader)
        }
        if reader.offset != data.count {
            throw ISO8583Error(part: "message", offset: reader.offset,
                               reason: "\(data.count - reader.offset) bytes left over after the last field the bitmap names")
        }
        return message
    }

    func unpackField(_ f: FieldSpec, _ r: inout Reader) throws(ISO8583Error) -> FieldValue {
        let part = "field \(f.number) (\(f.name))"
        let start = r.offset
        // The length in units.
        var count: Int
        switch f.length {
        case .fixed(let n):
            count = n
        case .llvar(let max), .lllvar(let max):
            let digits = f.length.prefixDigits
            let text: String
            if lengths == .bcd {
                let b = try r.take((digits + 1) / 2, part: part)
                text = try Self.bcdUnpack(b, digits: digits, left: true, track: false, part: "\(part) length", offset: start)
            } else {
                text = try r.ascii(digits, part: "\(part) length", digits: true)
            }
            count = Int(text)!
            guard count <= max else {
                throw ISO8583Error(part: part, offset: start, reason: "length \(count) is over the field's maximum of \(max)")
            }
        }
        switch f.content {
        case .binary:
            let enc = binaryEncoding(f.number)
            if enc == .hex {
                var chars = count
                if case .fixed = f.length { chars = count * 2 } else if !hexLengthCountsCharacters { chars = count * 2 }
                guard chars % 2 == 0 else {
                    throw ISO8583Error(part: part, offset: start, reason: "an odd number (\(chars)) of hexadecimal characters")
                }
                let at = r.offset
                let text = try r.ascii(chars, part: part, digits: false)
                guard let decoded = Self.strictHex(text) else {
                    throw ISO8583Error(part: part, offset: at, reason: "hexadecimal characters expected")
                }
                return .bytes(decoded)
            }
            return .bytes(try r.take(count, part: part))
        case .numeric, .track:
            if numbers == .bcd {
                let at = r.offset
                let b = try r.take((count + 1) / 2, part: part)
                return .text(try Self.bcdUnpack(b, digits: count, left: f.length.prefixDigits == 0, track: f.content == .track,
                                                part: part, offset: at))
            }
            let at = r.offset
            let text = try r.ascii(count, part: part, digits: false)
            try Self.check(text, f, part: part, offset: at)
            return .text(text)
        case .amount:
            let at = r.offset
            if numbers == .bcd {
                let sign = try r.ascii(1, part: part, digits: false)
                let b = try r.take(count / 2, part: part)
                let text = sign + (try Self.bcdUnpack(b, digits: count - 1, left: true, track: false, part: part, offset: at + 1))
                try Self.check(text, f, part: part, offset: at)
                return .text(text)
            }
            let text = try r.ascii(count, part: part, digits: false)
            try Self.check(text, f, part: part, offset: at)
            return .text(text)
        case .text:
            let at = r.offset
            let text = try r.ascii(count, part: part, digits: false)
            try Self.check(text, f, part: part, offset: at)
            return .text(text)
        }
    }

    static func check(_ text: String, _ f: FieldSpec, part: String, offset: Int) throws(ISO8583Error) {
        do { try check(text, f, part: part) } catch { throw ISO8583Error(part: error.part, offset: offset, reason: error.reason) }
    }

    /// Unpacks `digits` digits from BCD, dropping the pad nibble on the side it was added.
    static func bcdUnpack(_ bytes: [UInt8], digits: Int, left: Bool, track: Bool, part: String, offset: Int) throws(ISO8583Error) -> String {
        var nibbles: [UInt8] = []
        nibbles.reserveCapacity(bytes.count * 2)
        for b in bytes { nibbles.append(b >> 4); nibbles.append(b & 0x0F) }
        if nibbles.count > digits { if left { nibbles.removeFirst() } else { nibbles.removeLast() } }
        var out = ""
        out.reserveCapacity(digits)
        for (i, n) in nibbles.enumerated() {
            if n <= 9 {
                out.append(Character(Unicode.Scalar(0x30 + n)))
            } else if track && n == 0x0D {
                out.append("=")
            } else {
                throw ISO8583Error(part: part, offset: offset + i / 2, reason: "BCD digit expected, found nibble \(String(n, radix: 16, uppercase: true))")
            }
        }
        return out
    }

    /// Hex characters to bytes, nothing else allowed (EMV's Hex.decode skips spaces, which a
    /// fixed-length field must not).
    static func strictHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x37
            case 0x61...0x66: c - 0x57
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = value(digits[i]), let lo = value(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    /// A cursor over the message that never reads past its end.
    struct Reader {
        let data: [UInt8]
        var offset = 0

        mutating func take(_ n: Int, part: String) throws(ISO8583Error) -> [UInt8] {
            guard n <= data.count - offset else {
                throw ISO8583Error(part: part, offset: offset, reason: "needs \(n) bytes, the message has \(data.count - offset) left")
            }
            defer { offset += n }
            return Array(data[offset..<offset + n])
        }

        mutating func ascii(_ n: Int, part: String, digits: Bool) throws(ISO8583Error) -> String {
            let at = offset
            let b = try take(n, part: part)
            for (i, c) in b.enumerated() {
                if digits ? !(c >= 0x30 && c <= 0x39) : !(c >= 0x20 && c < 0x7F) {
                    throw ISO8583Error(part: part, offset: at + i, reason: digits ? "ASCII digits expected, found byte \(Hex.encode([c]))"
                                                                                    : "printable ASCII expected, found byte \(Hex.encode([c]))")
                }
            }
            return String(decoding: b, as: UTF8.self)
        }
    }
}
