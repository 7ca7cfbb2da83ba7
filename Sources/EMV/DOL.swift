/// A Data Object List (PDOL 9F38, CDOL1 8C, CDOL2 8D, DDOL 9F49, TDOL 97): tags and the lengths
/// the card wants them in, with no values.
public struct DOL: Hashable, Sendable {
    /// One requested data object.
    public struct Entry: Hashable, Sendable {
        public let tag: EMVTag
        public let length: Int
        public init(tag: EMVTag, length: Int) {
            self.tag = tag
            self.length = length
        }
    }

    public let entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    /// Parses a DOL. A tag without its length byte, or a multi-byte length, is an error.
    public static func parse(_ bytes: [UInt8], field: String = "DOL") throws(EMVError) -> DOL {
        var reader = ByteReader(bytes)
        var entries: [Entry] = []
        while !reader.isAtEnd {
            let start = reader.offset
            let tag: EMVTag
            do { tag = try reader.readTag() } catch { throw EMVError(field: field, rule: error.rule) }
            guard !reader.isAtEnd else {
                throw EMVError(field: field, rule: "tag \(tag) at offset \(start) has no length byte")
            }
            let length = reader.peek()
            reader.skip(1)
            guard length < 0x80 else {
                throw EMVError(field: field, rule: "tag \(tag) at offset \(start) asks for length \(Hex.encode([length])); DOL lengths are one byte below 80")
            }
            entries.append(Entry(tag: tag, length: Int(length)))
        }
        return DOL(entries: entries)
    }

    /// The DOL's own encoding (tag, length, tag, length, ...).
    public var bytes: [UInt8] { entries.flatMap { $0.tag.bytes + [UInt8($0.length)] } }

    /// Bytes the filled data will occupy.
    public var dataLength: Int { entries.reduce(0) { $0 + $1.length } }

    /// Concatenates the values `source` gives for each tag, shaped by EMV Book 3 §5.4:
    /// unknown or constructed tags give zeros; a longer value is truncated (numeric: leftmost
    /// bytes dropped; others: rightmost); a shorter one is padded (numeric: leading zeros;
    /// compressed numeric: trailing FF; others: trailing zeros).
    public func fill(from source: (EMVTag) -> [UInt8]?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(dataLength)
        for entry in entries {
            out += Self.shape(source(entry.tag), for: entry)
        }
        return out
    }

    /// Splits filled DOL data back into values by tag — what a card does with the data a
    /// terminal sent for its PDOL or CDOL.
    public func split(_ data: [UInt8], field: String = "DOL data") throws(EMVError) -> [EMVTag: [UInt8]] {
        guard data.count == dataLength else {
            throw EMVError(field: field, rule: "must be \(dataLength) bytes for this DOL, got \(data.count)")
        }
        var out: [EMVTag: [UInt8]] = [:]
        var i = 0
        for entry in entries {
            out[entry.tag] = Array(data[i..<i + entry.length])
            i += entry.length
        }
        return out
    }

    static func shape(_ value: [UInt8]?, for entry: Entry) -> [UInt8] {
        let n = entry.length
        // Absent, empty (EMV treats a zero-length object as absent) or constructed: zeros.
        guard let value, !value.isEmpty, !entry.tag.isConstructed else { return [UInt8](repeating: 0, count: n) }
        let format = TagDictionary.info(entry.tag.value)?.format ?? .b
        if value.count == n { return value }
        if value.count > n {
            return format == .n ? Array(value.suffix(n)) : Array(value.prefix(n))
        }
        let pad = n - value.count
        switch format {
        case .n: return [UInt8](repeating: 0, count: pad) + value
        case .cn: return value + [UInt8](repeating: 0xFF, count: pad)
        default: return value + [UInt8](repeating: 0, count: pad)
        }
    }
}

/// One Application File Locator entry: which records of which short file to read.
public struct AFLEntry: Hashable, Sendable {
    public let sfi: Int
    public let firstRecord: Int
    public let lastRecord: Int
    /// How many records, from the first, take part in offline data authentication.
    public let offlineAuthenticationRecords: Int

    public init(sfi: Int, firstRecord: Int, lastRecord: Int, offlineAuthenticationRecords: Int) {
        self.sfi = sfi
        self.firstRecord = firstRecord
        self.lastRecord = lastRecord
        self.offlineAuthenticationRecords = offlineAuthenticationRecords
    }

    /// The records this entry names, in reading order.
    public var records: ClosedRange<Int> { firstRecord...lastRecord }

    /// Parses an AFL (tag 94): 4-byte entries, SFI 1–30, first record ≥ 1, last ≥ first, and
    /// no more offline-authentication records than records.
    public static func parseList(_ bytes: [UInt8]) throws(EMVError) -> [AFLEntry] {
        guard !bytes.isEmpty, bytes.count % 4 == 0 else {
            throw EMVError(field: "AFL", rule: "length must be a non-zero multiple of 4, got \(bytes.count)")
        }
        var out: [AFLEntry] = []
        for i in stride(from: 0, to: bytes.count, by: 4) {
            let n = i / 4 + 1
            let sfi = Int(bytes[i] >> 3)
            let first = Int(bytes[i + 1]), last = Int(bytes[i + 2]), oda = Int(bytes[i + 3])
            guard bytes[i] & 0x07 == 0 else {
                throw EMVError(field: "AFL", rule: "entry \(n): the low 3 bits of the SFI byte must be zero, got \(Hex.encode([bytes[i]]))")
            }
            guard (1...30).contains(sfi) else { throw EMVError(field: "AFL", rule: "entry \(n): SFI must be 1–30, got \(sfi)") }
            guard first >= 1 else { throw EMVError(field: "AFL", rule: "entry \(n): first record must be at least 1") }
            guard last >= first else {
                throw EMVError(field: "AFL", rule: "entry \(n): last record \(last) is before first record \(first)")
            }
            guard oda <= last - first + 1 else {
                throw EMVError(field: "AFL", rule: "entry \(n): \(oda) offline-authentication records but only \(last - first + 1) records")
            }
            out.append(AFLEntry(sfi: sfi, firstRecord: first, lastRecord: last, offlineAuthenticationRecords: oda))
        }
        return out
    }

    /// The entry's 4-byte encoding.
    public var bytes: [UInt8] { [UInt8(sfi << 3), UInt8(firstRecord), UInt8(lastRecord), UInt8(offlineAuthenticationRecords)] }
}
