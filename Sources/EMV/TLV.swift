/// A BER-TLV tag as EMV uses it: one to three bytes, kept as a big-endian number (`9F02`, `BF0C`).
public struct EMVTag: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// The tag's bytes as a big-endian integer, e.g. `0x9F02`.
    public let value: UInt32

    /// Makes a tag from its big-endian value, e.g. `EMVTag(0x5F2A)`.
    public init(_ value: UInt32) { self.value = value }
    public init(integerLiteral value: UInt32) { self.value = value }

    /// Parses a tag written in hex (`"9F02"`); the bytes must form exactly one well-formed tag.
    public init(hex: String, field: String = "tag") throws(EMVError) {
        let bytes = try Hex.decode(hex, field: field)
        var reader = ByteReader(bytes)
        let tag: EMVTag
        do { tag = try reader.readTag() } catch { throw EMVError(field: field, rule: "'\(hex)' is not a BER-TLV tag: \(error.rule)") }
        guard reader.isAtEnd else {
            throw EMVError(field: field, rule: "'\(hex)' holds more than one tag (a tag ends at the first byte with bit 8 clear)")
        }
        self = tag
    }

    /// The tag's encoded bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        var v = value
        repeat {
            out.insert(UInt8(v & 0xFF), at: 0)
            v >>= 8
        } while v != 0
        return out
    }

    /// Bit 6 of the first byte: the value is itself a sequence of TLVs.
    public var isConstructed: Bool { (bytes[0] & 0x20) != 0 }

    /// The EMV name of the tag, if the dictionary knows it.
    public var name: String? { TagDictionary.name(value) }

    public var description: String { Hex.encode(bytes) }

    public static func < (a: EMVTag, b: EMVTag) -> Bool { a.value < b.value }
}

/// One BER-TLV data object. Constructed objects also carry their parsed children.
public struct TLV: Hashable, Sendable {
    /// How many templates may nest inside one another, so hostile input cannot exhaust the stack.
    public static let maximumDepth = 16

    public let tag: EMVTag
    /// The raw value bytes (for a constructed object, the encoding of its children).
    public let value: [UInt8]
    /// Children of a constructed object; empty for a primitive one.
    public let children: [TLV]

    /// A primitive data object.
    public init(_ tag: EMVTag, _ value: [UInt8]) {
        self.tag = tag
        self.value = value
        self.children = []
    }

    /// A constructed data object (template) made of `children`.
    public init(_ tag: EMVTag, children: [TLV]) {
        self.tag = tag
        self.children = children
        self.value = children.flatMap { $0.encoded() }
    }

    init(tag: EMVTag, value: [UInt8], children: [TLV]) {
        self.tag = tag
        self.value = value
        self.children = children
    }

    /// Parses a sequence of TLV objects. Padding bytes `00` and `FF` between objects are skipped,
    /// as EMV Book 3 allows. Truncated, overlong or malformed input throws an error that says
    /// which tag at which offset broke which rule.
    public static func parse(_ bytes: [UInt8]) throws(EMVError) -> [TLV] {
        var reader = ByteReader(bytes)
        return try parseSequence(&reader, depth: 0)
    }

    /// Parses hex text; see `parse(_:)`.
    public static func parse(hex: String) throws(EMVError) -> [TLV] {
        try parse(Hex.decode(hex, field: "TLV"))
    }

    /// Parses objects up to the reader's current end; a template narrows the end to its own value
    /// so a child can never run into its parent's siblings.
    private static func parseSequence(_ reader: inout ByteReader, depth: Int) throws(EMVError) -> [TLV] {
        guard depth <= maximumDepth else {
            throw EMVError(field: "TLV", rule: "templates nested deeper than \(maximumDepth) levels at offset \(reader.offset)")
        }
        var out: [TLV] = []
        while !reader.isAtEnd {
            let b = reader.peek()
            if b == 0x00 || b == 0xFF {
                reader.skip(1)
                continue
            }
            let start = reader.offset
            let tag = try reader.readTag()
            let length = try reader.readLength(tag: tag, tagOffset: start)
            guard length <= reader.remaining else {
                throw EMVError(field: "TLV", rule: "tag \(tag) at offset \(start) declares \(length) bytes but only \(reader.remaining) remain")
            }
            let valueStart = reader.offset
            let valueEnd = valueStart + length
            let value = Array(reader.bytes[valueStart..<valueEnd])
            var children: [TLV] = []
            if tag.isConstructed {
                let outerEnd = reader.end
                reader.end = valueEnd
                children = try parseSequence(&reader, depth: depth + 1)
                reader.end = outerEnd
            }
            reader.seek(valueEnd)
            out.append(TLV(tag: tag, value: value, children: children))
        }
        return out
    }

    /// The object's encoding: tag, definite length, value.
    public func encoded() -> [UInt8] {
        tag.bytes + TLV.encodeLength(value.count) + value
    }

    /// Encodes a definite length in the shortest form (`7F`, `81 80`, `82 01 00`, ...).
    public static func encodeLength(_ n: Int) -> [UInt8] {
        precondition(n >= 0 && n <= 0xFF_FFFF, "TLV length out of range")
        if n < 0x80 { return [UInt8(n)] }
        if n <= 0xFF { return [0x81, UInt8(n)] }
        if n <= 0xFFFF { return [0x82, UInt8(n >> 8), UInt8(n & 0xFF)] }
        return [0x83, UInt8(n >> 16), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
    }

    /// The first object with `tag`, searching this object and then its descendants depth first.
    public func first(_ tag: EMVTag) -> TLV? {
        if self.tag == tag { return self }
        for child in children {
            if let hit = child.first(tag) { return hit }
        }
        return nil
    }
}

extension Array where Element == TLV {
    /// The first object with `tag` in this list or below it, depth first.
    public func first(_ tag: EMVTag) -> TLV? {
        for item in self {
            if let hit = item.first(tag) { return hit }
        }
        return nil
    }

    /// All primitive objects, flattened, keyed by tag (first occurrence wins) — what a kernel
    /// keeps as its card data.
    public func primitives() -> [EMVTag: [UInt8]] {
        var out: [EMVTag: [UInt8]] = [:]
        func walk(_ items: [TLV]) {
            for item in items {
                if item.tag.isConstructed { walk(item.children) } else if out[item.tag] == nil { out[item.tag] = item.value }
            }
        }
        walk(self)
        return out
    }
}

/// A bounds-checked cursor over bytes; every read is checked so malformed input cannot
/// read out of bounds.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset = 0
    /// Reads stop here; narrowed while a template's children are parsed.
    var end: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.end = bytes.count
    }

    var isAtEnd: Bool { offset >= end }
    var remaining: Int { end - offset }

    func peek() -> UInt8 { bytes[offset] }

    mutating func skip(_ n: Int) { offset += n }

    mutating func seek(_ position: Int) { offset = position }

    mutating func read(_ n: Int) -> [UInt8] {
        let out = Array(bytes[offset..<offset + n])
        offset += n
        return out
    }

    mutating func readTag() throws(EMVError) -> EMVTag {
        let start = offset
        guard !isAtEnd else { throw EMVError(field: "TLV", rule: "data ends where a tag was expected at offset \(start)") }
        let first = bytes[offset]
        offset += 1
        var value = UInt32(first)
        if first & 0x1F == 0x1F {
            // Subsequent tag bytes follow while bit 8 is set; EMV tags are at most three bytes.
            var count = 1
            while true {
                guard !isAtEnd else {
                    throw EMVError(field: "TLV", rule: "tag starting \(Hex.encode([first])) at offset \(start) is cut off")
                }
                let b = bytes[offset]
                offset += 1
                count += 1
                guard count <= 3 else {
                    throw EMVError(field: "TLV", rule: "tag at offset \(start) is longer than 3 bytes")
                }
                value = value << 8 | UInt32(b)
                if b & 0x80 == 0 { break }
            }
        }
        return EMVTag(value)
    }

    mutating func readLength(tag: EMVTag, tagOffset: Int) throws(EMVError) -> Int {
        guard !isAtEnd else {
            throw EMVError(field: "TLV", rule: "tag \(tag) at offset \(tagOffset) has no length byte")
        }
        let first = bytes[offset]
        offset += 1
        if first < 0x80 { return Int(first) }
        if first == 0x80 {
            throw EMVError(field: "TLV", rule: "tag \(tag) at offset \(tagOffset) uses the indefinite length form (80), which EMV forbids")
        }
        let count = Int(first & 0x7F)
        guard count <= 3 else {
            throw EMVError(field: "TLV", rule: "tag \(tag) at offset \(tagOffset) has a \(count)-byte length field; at most 3 are allowed")
        }
        guard remaining >= count else {
            throw EMVError(field: "TLV", rule: "length of tag \(tag) at offset \(tagOffset) is cut off")
        }
        var n = 0
        for _ in 0..<count {
            n = n << 8 | Int(bytes[offset])
            offset += 1
        }
        return n
    }
}
