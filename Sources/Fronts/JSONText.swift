/// JSON written field by field, for the replies the API sends with every sale.
///
/// `JSONEncoder` spent more instructions on a sale's reply (an `OpenResult` of some fifty values)
/// than the ledger's commit did: each value passes through boxes, containers and generic
/// dispatch. The hot replies write themselves with this instead; everything else keeps
/// `JSONEncoder`. The output means the same as `JSONEncoder`'s with `.withoutEscapingSlashes`
/// (keys in declaration order, nil optionals left out), which `JSONTextTests` checks by decoding
/// both.
package struct JSONText {
    package private(set) var bytes: [UInt8] = []
    private var needsComma = false

    package init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// Writes `{`, the fields `body` writes, and `}`.
    package mutating func object(_ body: (inout JSONText) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        let outer = needsComma
        needsComma = false
        body(&self)
        needsComma = outer
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func key(_ name: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A string field; none when `value` is nil.
    package mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// An integer field; none when `value` is nil.
    package mutating func field<I: BinaryInteger>(_ name: StaticString, _ value: I?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    package mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
    }

    /// An object field written by `body`.
    package mutating func field(_ name: StaticString, object body: (inout JSONText) -> Void) {
        key(name)
        object(body)
    }

    /// An array field of objects, each written by `element`; none when `values` is nil.
    package mutating func field<T>(_ name: StaticString, array values: [T]?, _ element: (inout JSONText, T) -> Void) {
        guard let values else { return }
        key(name)
        bytes.append(UInt8(ascii: "["))
        var first = true
        for value in values {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            object { element(&$0, value) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A top-level array of objects, each written by `element`.
    package mutating func array<T>(_ values: [T], _ element: (inout JSONText, T) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            object { element(&$0, value) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// An array field of strings.
    package mutating func field(_ name: StaticString, strings values: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, … or `\u00XX`;
    /// everything else as its UTF-8, `/` included.
    package mutating func string(_ value: String) { Self.append(string: value, to: &bytes) }

    /// Appends `value` as a JSON string to `bytes` (`string`'s escaping, for other writers).
    package static func append(string value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case 0x0A: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "f"))
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
