/// Hexadecimal conversion for byte arrays; uppercase on output, either case on input.
public enum Hex {
    private static let digits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Encodes bytes as uppercase hex with no separators.
    ///
    /// Every APDU of every trace is encoded, so contiguous bytes (the usual caller's) are written
    /// straight into the string's storage rather than walked through a generic iterator.
    public static func encode<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        if let encoded = bytes.withContiguousStorageIfAvailable({ encode(buffer: $0) }) { return encoded }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes an array of bytes (the common caller; no generic dispatch).
    public static func encode(_ bytes: [UInt8]) -> String { bytes.withUnsafeBufferPointer { encode(buffer: $0) } }

    private static func encode(buffer: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: buffer.count * 2) { out in
            var i = 0
            for b in buffer {
                out[i] = hexDigit(b >> 4)
                out[i + 1] = hexDigit(b & 0x0F)
                i += 2
            }
            return i
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") - 10 + nibble
    }

    /// Decodes a hex string. Spaces are ignored so values can be pasted from traces.
    /// - Parameter field: the name used in the error when the text is not valid hex.
    public static func decode(_ text: String, field: String = "hex") throws(EMVError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count / 2)
        var high: UInt8? = nil
        var position = 0
        for c in text.utf8 {
            if c == UInt8(ascii: " ") { continue }
            position += 1
            guard let v = nibble(c) else {
                throw EMVError(field: field, rule: "must be hexadecimal; character \(position) is '\(Character(Unicode.Scalar(c)))'")
            }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        guard high == nil else {
            throw EMVError(field: field, rule: "must have an even number of hex digits, got \(position)")
        }
        return out
    }

    /// Decodes hex that must be exactly `count` bytes long.
    public static func decode(_ text: String, field: String, count: Int) throws(EMVError) -> [UInt8] {
        let bytes = try decode(text, field: field)
        guard bytes.count == count else {
            throw EMVError(field: field, rule: "must be \(count) bytes (\(count * 2) hex digits), got \(bytes.count) bytes")
        }
        return bytes
    }

    @inline(__always)
    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}
