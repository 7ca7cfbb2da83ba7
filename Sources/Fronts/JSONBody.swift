import Foundation

/// The API's JSON bodies, read strictly: what `JSONDecoder` lets through and a careful client
/// never sends is refused with the path of the value at fault.
///
/// `JSONDecoder` keeps the first of two equal keys (`{"url": "a", "url": "b"}` opens "a"), so two
/// readers of the same body can disagree about it; it also takes `"\u0000"`, which no field of
/// this API has a use for and SQLite's C interface would cut a stored value at. Neither reaches
/// a handler. Foundation only, so the fuzzer builds it on its own.
public enum JSONBody {
    /// Why a body is refused: the JSON path of the value (`body`, `body.url`, `body.items[2]`) and the rule.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public let path: String
        public let rule: String
        public var description: String { "\(path): \(rule)" }

        public init(path: String, rule: String) {
            self.path = path
            self.rule = rule
        }
    }

    /// How deep objects and arrays may nest; the API's bodies use two levels.
    public static let maximumDepth = 32

    /// Checks `bytes` and decodes a `T` from them.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try check(bytes)
        return try JSONDecoder().decode(T.self, from: Data(bytes))
    }

    /// Refuses a duplicate key in any object, a NUL in any string, nesting deeper than
    /// `maximumDepth`, and text after the value; anything else is left to `JSONDecoder`, which
    /// reads the same bytes next.
    public static func check(_ bytes: [UInt8]) throws(Problem) {
        var scanner = Scanner(bytes: bytes)
        scanner.skipSpace()
        try scanner.value(path: "body", depth: 0)
        scanner.skipSpace()
        guard scanner.i == bytes.count else {
            throw Problem(path: "body", rule: "must be one JSON value; there is more after it at byte \(scanner.i + 1)")
        }
    }

    struct Scanner {
        let bytes: [UInt8]
        var i = 0

        mutating func skipSpace() {
            while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 }
        }

        func malformed(_ path: String) -> Problem {
            Problem(path: path, rule: "must be well-formed JSON (at byte \(min(i, bytes.count) + 1))")
        }

        mutating func value(path: String, depth: Int) throws(Problem) {
            guard i < bytes.count else { throw malformed(path) }
            switch bytes[i] {
            case UInt8(ascii: "{"):
                guard depth < JSONBody.maximumDepth else {
                    throw Problem(path: path, rule: "nests deeper than \(JSONBody.maximumDepth) levels")
                }
                i += 1
                var keys = Set<String>()
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return }
                while true {
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw malformed(path) }
                    let key = try string(path: path)
                    let child = path + "." + (key.count > 40 ? String(key.prefix(40)) + "…" : key)
                    guard keys.insert(key).inserted else {
                        throw Problem(path: child, rule: "appears twice in one object; send each key once")
                    }
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw malformed(child) }
                    i += 1
                    skipSpace()
                    try value(path: child, depth: depth + 1)
                    skipSpace()
                    guard i < bytes.count else { throw malformed(path) }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "}") { i += 1; return }
                    throw malformed(path)
                }
            case UInt8(ascii: "["):
                guard depth < JSONBody.maximumDepth else {
                    throw Problem(path: path, rule: "nests deeper than \(JSONBody.maximumDepth) levels")
                }
                i += 1
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return }
                var index = 0
                while true {
                    skipSpace()
                    try value(path: "\(path)[\(index)]", depth: depth + 1)
                    index += 1
                    skipSpace()
                    guard i < bytes.count else { throw malformed(path) }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "]") { i += 1; return }
                    throw malformed(path)
                }
            case UInt8(ascii: "\""):
                _ = try string(path: path)
            default:
                // A number, true, false or null: its characters up to a delimiter; JSONDecoder judges them.
                let start = i
                while i < bytes.count, !",]} \t\r\n".utf8.contains(bytes[i]) { i += 1 }
                if i == start { throw malformed(path) }
            }
        }

        /// A string at `i` (on its opening quote), decoded; a NUL in it is refused.
        mutating func string(path: String) throws(Problem) -> String {
            i += 1
            var out: [UInt8] = []
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\"") {
                    i += 1
                    return String(decoding: out, as: UTF8.self)
                }
                if b == UInt8(ascii: "\\") {
                    guard i + 1 < bytes.count else { throw malformed(path) }
                    let e = bytes[i + 1]
                    i += 2
                    switch e {
                    case UInt8(ascii: "u"):
                        var scalar = try hex4(path)
                        if (0xD800...0xDBFF).contains(scalar), i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"),
                           bytes[i + 1] == UInt8(ascii: "u") {
                            i += 2
                            let low = try hex4(path)
                            guard (0xDC00...0xDFFF).contains(low) else { throw malformed(path) }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard scalar != 0 else { throw Problem(path: path, rule: "must not contain NUL (\\u0000)") }
                        out.append(contentsOf: Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    default: out.append(e)
                    }
                    continue
                }
                if b == 0 { throw Problem(path: path, rule: "must not contain NUL") }
                out.append(b)
                i += 1
            }
            throw malformed(path)
        }

        mutating func hex4(_ path: String) throws(Problem) -> UInt32 {
            guard i + 4 <= bytes.count else { throw malformed(path) }
            var v: UInt32 = 0
            for b in bytes[i..<(i + 4)] {
                let d: UInt32
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
                default: throw malformed(path)
                }
                v = v << 4 | d
            }
            i += 4
            return v
        }
    }
}
