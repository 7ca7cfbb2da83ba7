import Foundation

/// The platforms' replies, webhooks and IPNs as JSON text: their trees of dictionaries, arrays,
/// strings, integers, booleans and `NSNull`, keys sorted as `JSONSerialization`'s `.sortedKeys`
/// sorts them, slashes unescaped, the bytes `JSONSerialization` writes (`PlatformJSONTests`).
///
/// `JSONSerialization` spent 12–15% of a Worldline or Citcon payment's CPU on its reply: each
/// value is cast through `Any` several times and each dictionary's keys are boxed as
/// `AnyHashable` to be sorted. A tree holding anything else (a `Double`, a `Date`) is left to
/// `JSONSerialization`.
package enum PlatformJSON {
    package static func text(_ object: Any) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(2048)
        guard write(object, to: &out) else {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
            return String(decoding: data, as: UTF8.self)
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func plainKeyByte(_ b: UInt8) -> Bool {
        (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
    }

    /// Writes `value`; false when the tree holds something this writer leaves to `JSONSerialization`.
    private static func write(_ value: Any, to out: inout [UInt8]) -> Bool {
        // An NSNumber (a value read back from JSON) casts to Bool and to Int alike: only
        // JSONSerialization knows which it is.
        if type(of: value) is NSNumber.Type { return false }
        switch value {
        case let s as String:
            JSONText.append(string: s, to: &out)
        case let b as Bool:
            out.append(contentsOf: b ? Array("true".utf8) : Array("false".utf8))
        case let n as Int:
            out.append(contentsOf: String(n).utf8)
        case let n as Int64:
            out.append(contentsOf: String(n).utf8)
        case let n as Int32:
            out.append(contentsOf: String(n).utf8)
        case let d as [String: Any]:
            out.append(UInt8(ascii: "{"))
            // Keys of ASCII letters, `_` and `-` (all the platforms' keys) sort case-insensitively,
            // a lower-case letter before its capital; others (digits compare as numbers, accents by the locale) are
            // left to JSONSerialization.
            guard d.keys.allSatisfy({ $0.utf8.allSatisfy(plainKeyByte) }) else { return false }
            let keys = d.keys.sorted {
                let (a, b) = ($0.lowercased(), $1.lowercased())
                return a == b ? $0 > $1 : a < b
            }
            for (i, key) in keys.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.append(string: key, to: &out)
                out.append(UInt8(ascii: ":"))
                guard write(d[key]!, to: &out) else { return false }
            }
            out.append(UInt8(ascii: "}"))
        case let a as [Any]:
            out.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                guard write(element, to: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        // Last: a cast to NSNull goes through Objective-C bridging, the dearest of these checks.
        case is NSNull:
            out.append(contentsOf: Array("null".utf8))
        default:
            return false
        }
        return true
    }
}
