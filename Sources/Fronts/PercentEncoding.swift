/// Percent-encoding for the URLs fronts read and write (RFC 3986 §2.1), done by hand so the result
/// does not depend on which Foundation a platform ships: the callback bytes must be identical on
/// every machine that runs a scenario.
enum PercentEncoding {
    /// Bytes a value keeps as they are in a rendered callback. RFC 3986's unreserved characters,
    /// plus `*`, `:` and `+`: the Viva document's own examples carry `479275******9999` and
    /// `+03:00` literally, all three are legal in a query (sub-delims and pchar), and none of them
    /// separates query items for URLComponents, which splits only on `&`, `=` and `#`.
    static func isKeptInValue(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
             UInt8(ascii: "*"), UInt8(ascii: ":"), UInt8(ascii: "+"):
            true
        default:
            false
        }
    }

    /// `value` with every byte of its UTF-8 form that ``isKeptInValue(_:)`` rejects written as `%XX`
    /// (upper-case hex, as RFC 3986 §2.1 recommends); a space is `%20`, never `+`.
    static func encodeValue(_ value: String) -> String {
        encode(value, keeping: isKeptInValue)
    }

    /// `value` with every byte of its UTF-8 form that `isKept` rejects written as `%XX` (upper-case
    /// hex); each front says which bytes its app leaves alone, and everything else is escaped.
    static func encode(_ value: String, keeping isKept: (UInt8) -> Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if isKept(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Characters allowed as they are in a URL's query (RFC 3986 §3.4: pchar, `/` and `?`), `%`
    /// included because escapes are checked separately. Anything else (space, `"`, `<`, `>`, `\`,
    /// `^`, `` ` ``, `{`, `|`, `}`, controls, non-ASCII) has to arrive percent-encoded.
    static func isQueryCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("-._~!$&'()*+,;=:@/?%".utf8).contains(byte)
        }
    }

    /// The byte range of a URI's authority (after `scheme://`, up to the next `/`, `?` or `#`),
    /// where RFC 3986 lets `[` and `]` enclose an IPv6 address: `http://[::1]:8080/cb`.
    static func authorityRange(_ bytes: [UInt8]) -> Range<Int>? {
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
              bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else { return nil }
        let start = colon + 3
        let end = bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.count
        return start..<end
    }

    /// Whether byte `i` of a URI is a character it may hold unencoded: a query character, or a
    /// bracket of an IPv6 literal in its authority.
    static func isURICharacter(_ bytes: [UInt8], at i: Int, authority: Range<Int>?) -> Bool {
        let byte = bytes[i]
        if isQueryCharacter(byte) { return true }
        guard byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]"), let authority, authority.contains(i) else { return false }
        return true
    }

    /// Why a URI's authority has no usable port, or nil: after the host (an IPv6 literal's `]`),
    /// a `:` must be followed by nothing or by digits up to 65535 (RFC 3986 `port = *DIGIT`).
    static func portProblem(_ bytes: [UInt8], authority: Range<Int>?) -> String? {
        guard let authority else { return nil }
        var host = Array(bytes[authority])
        if let at = host.lastIndex(of: UInt8(ascii: "@")) { host = Array(host[(at + 1)...]) }
        let afterHost = host.first == UInt8(ascii: "[") ? (host.firstIndex(of: UInt8(ascii: "]")).map { $0 + 1 } ?? host.count) : 0
        guard let colon = host[afterHost...].firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let port = host[(colon + 1)...]
        guard port.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              port.isEmpty || (port.count <= 5 && Int(String(decoding: port, as: UTF8.self))! <= 65_535) else {
            return "must be a URI whose port is a number from 0 to 65535"
        }
        return nil
    }

    /// Why a raw query text cannot be decoded.
    enum DecodingProblem: Error, Equatable {
        /// A character that must be percent-encoded, and its 1-based position in the text.
        case unencoded(Character, position: Int)
        /// A `%` not followed by two hex digits, at its 1-based position.
        case badEscape(position: Int)
        /// The decoded bytes are not UTF-8.
        case notUTF8

        /// The rule the text broke, for an error message.
        var rule: String {
            switch self {
            case .unencoded(let c, let position):
                "character \(position) (\(String(c).debugDescription)) must be percent-encoded"
            case .badEscape(let position):
                "'%' at character \(position) must be followed by two hex digits"
            case .notUTF8:
                "percent-decodes to bytes that are not UTF-8"
            }
        }
    }

    /// Decodes `%XX` escapes once, the way URLComponents' `queryItems` does: `+` stays `+`, and the
    /// result must be UTF-8. Characters outside ``isQueryCharacter(_:)`` are refused rather than
    /// passed through, so a sender that forgot to encode a value finds out here and not in a callback.
    static func decode(_ text: Substring) throws(DecodingProblem) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        let utf8 = Array(text.utf8)
        var i = 0
        while i < utf8.count {
            let byte = utf8[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < utf8.count, let high = hexValue(utf8[i + 1]), let low = hexValue(utf8[i + 2]) else {
                    throw .badEscape(position: characterPosition(of: i, in: utf8))
                }
                bytes.append(high << 4 | low)
                i += 3
            } else if isQueryCharacter(byte) {
                bytes.append(byte)
                i += 1
            } else {
                throw .unencoded(character(at: i, in: utf8), position: characterPosition(of: i, in: utf8))
            }
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else { throw .notUTF8 }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// The 1-based character (not byte) position of UTF-8 offset `offset`, so an error points where
    /// a person counting characters would look.
    private static func characterPosition(of offset: Int, in utf8: [UInt8]) -> Int {
        String(decoding: utf8[..<offset], as: UTF8.self).count + 1
    }

    /// The character starting at UTF-8 offset `offset`; U+FFFD when the bytes there are not UTF-8.
    private static func character(at offset: Int, in utf8: [UInt8]) -> Character {
        String(decoding: utf8[offset...], as: UTF8.self).first ?? "\u{FFFD}"
    }
}

/// Reading back a callback a front rendered: the daemon answers with its fields as well as its
/// URL, and replays a stored one.
public enum RenderedCallback {
    /// The fields of `url` in order, decoded once: after `?` (Viva, a Billpocket webhook) or,
    /// with no `?`, after `://` (a Billpocket app scheme); none when it has neither. A field
    /// whose escapes are malformed (never one we rendered) keeps its text as it is.
    public static func fields(of url: String) -> [(name: String, value: String)] {
        let query: Substring
        if let mark = url.firstIndex(of: "?") {
            query = url[url.index(after: mark)...]
        } else if let range = url.range(of: "://") {
            query = url[range.upperBound...]
        } else {
            return []
        }
        return split(query)
    }

    /// The fields a front appended to `callback` in `url`: only those, not the callback's own
    /// query items (`myapp://r?status=success` must not pass for the result's status).
    public static func fields(of url: String, renderedAfter callback: String) -> [(name: String, value: String)] {
        let base = callback.contains(":") ? callback : callback + "://"
        guard url.hasPrefix(base) else { return fields(of: url) }
        var rest = url.dropFirst(base.count)
        if rest.first == "?" || rest.first == "&" { rest = rest.dropFirst() }
        return split(rest)
    }

    private static func split(_ query: Substring) -> [(name: String, value: String)] {
        func decoded(_ text: Substring) -> String { (try? PercentEncoding.decode(text)) ?? String(text) }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decoded(parts[0]), parts.count > 1 ? decoded(parts[1]) : "")
        }
    }
}

/// Case folding for the parts of a URL that are ASCII by definition (schemes, hosts, parameter
/// names). `String.lowercased()` folds Unicode too: the KELVIN SIGN U+212A becomes "k", so
/// "billpoc\u{212A}et" would pass for "billpocket".
public enum ASCII {
    /// `text` with A–Z folded to a–z and every other character kept.
    public static func lowercased<S: StringProtocol>(_ text: S) -> String {
        String(decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}

/// Percent-encoding for a value placed in a URL's query, as every callback's values are.
public enum QueryValue {
    public static func encode(_ value: String) -> String { PercentEncoding.encodeValue(value) }
}
