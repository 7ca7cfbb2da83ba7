/// The string formatter of the Worldline Online Payments client SDKs (`OPStringFormatter`,
/// earlier `ICStringFormatter`/`GCStringFormatter`), for masks such as
/// `{{9999}} {{9999}} {{9999}} {{9999}} {{999}}`.
///
/// Characters inside `{{ }}` are placeholders: `9` takes an ASCII digit, `a` a lower-case and
/// `A` an upper-case ASCII letter, `*` any character. Characters outside are literals.
///
/// The algorithm follows the SDK's `formatString:withMask:` rather than its documentation:
/// - A value character a placeholder does not accept is dropped ("1234abcd5678" -> "1234 5678").
/// - A literal is written while value characters remain; a value character equal to the
///   literal is consumed with it, so formatting a formatted value changes nothing.
/// - When the value runs out, the first mask segment left unfinished is completed if it is a
///   literal and the mask stops there: "12345678" under `{{99}} {{99}} {{99}} {{99}} {{99}}`
///   gives "12 34 56 78 " (the SDK's own test says so; it moves the cursor past the separator
///   while typing). Hence the 16-digit example of the zh-CN guide really gives
///   "1234 5678 9012 3456 " with a trailing space, not the "1234 5678 9012 3456" it prints.
/// - Value characters beyond the last placeholder are dropped.
///
/// Unlike the SDK, which reads any stray brace as a literal, the initializer rejects masks it
/// cannot read unambiguously.
public struct MaskFormatter: Sendable {
    /// The mask as given.
    public let mask: String
    private let segments: [Segment]

    private enum Placeholder: Character, Sendable {
        case digit = "9", lower = "a", upper = "A", any = "*"

        func accepts(_ c: Character) -> Bool {
            switch self {
            case .digit: c.isASCII && c.isWholeNumber
            case .lower: c.isASCII && c.isLowercase
            case .upper: c.isASCII && c.isUppercase
            case .any: true
            }
        }
    }

    private enum Segment: Sendable {
        case literal([Character])
        case placeholders([Placeholder])

        var count: Int {
            switch self {
            case .literal(let chars): chars.count
            case .placeholders(let slots): slots.count
            }
        }
    }

    /// Parses `mask`. Fails on an unclosed or unopened `{{ }}` group, a nested or empty group,
    /// a single `{` or `}`, a placeholder other than `9`, `a`, `A`, `*`, or a mask without
    /// any placeholder (it could never show a value).
    public init(mask: String) throws(EMVError) {
        let chars = Array(mask)
        var segments: [Segment] = []
        var literal: [Character] = []
        var slots: [Placeholder]? = nil
        var i = 0
        while i < chars.count {
            let c = chars[i]
            let doubled = i + 1 < chars.count && chars[i + 1] == c
            if c == "{" {
                guard doubled else {
                    throw EMVError(field: "mask", rule: "single '{' at position \(i + 1); groups open with '{{'")
                }
                guard slots == nil else {
                    throw EMVError(field: "mask", rule: "'{{' at position \(i + 1) opens a group inside another")
                }
                if !literal.isEmpty { segments.append(.literal(literal)); literal = [] }
                slots = []
                i += 2
            } else if c == "}" {
                guard doubled else {
                    throw EMVError(field: "mask", rule: "single '}' at position \(i + 1); groups close with '}}'")
                }
                guard let group = slots else {
                    throw EMVError(field: "mask", rule: "'}}' at position \(i + 1) closes no group")
                }
                guard !group.isEmpty else {
                    throw EMVError(field: "mask", rule: "empty '{{}}' group at position \(i - 1)")
                }
                segments.append(.placeholders(group))
                slots = nil
                i += 2
            } else if slots != nil {
                guard let p = Placeholder(rawValue: c) else {
                    throw EMVError(field: "mask", rule: "placeholder '\(c)' at position \(i + 1) is not 9, a, A or *")
                }
                slots!.append(p)
                i += 1
            } else {
                literal.append(c)
                i += 1
            }
        }
        guard slots == nil else {
            throw EMVError(field: "mask", rule: "'{{' group is never closed with '}}'")
        }
        if !literal.isEmpty { segments.append(.literal(literal)) }
        guard segments.contains(where: { if case .placeholders = $0 { true } else { false } }) else {
            throw EMVError(field: "mask", rule: "has no '{{ }}' placeholders")
        }
        self.mask = mask
        self.segments = segments
    }

    /// Formats `value` with the mask: "1234567890123456" -> "1234 5678 9012 3456 " under the
    /// card-number mask, "12345" -> "1234 5". See the type's documentation for the details.
    public func apply(_ value: String) -> String {
        String(render(Array(value), relaxed: false).map(\.char))
    }

    /// Recovers the value from a formatted string, as the SDK's `unformatString:withMask:`:
    /// the input is formatted first (so stray characters are dropped the same way), then the
    /// characters at placeholder positions are kept. "1234 5678 9012 3456" -> "1234567890123456".
    public func remove(_ formatted: String) -> String {
        let masked = Array(apply(formatted))
        var out: [Character] = []
        var index = 0
        for segment in segments {
            let length = min(segment.count, masked.count - index)
            if case .placeholders = segment {
                out.append(contentsOf: masked[index..<(index + length)])
            }
            index += length
        }
        return String(out)
    }

    /// The account-on-file display of `value`: formatted with every placeholder relaxed to `*`
    /// (as `maskedValueForField:` does, so an already obfuscated "************7412" from the
    /// server works as well as the clear PAN), all placeholder characters but the last
    /// `visible` replaced by '*', and surrounding whitespace trimmed as the SDK's account
    /// label does: "4567350000427412" -> "**** **** **** 7412" with `visible` 4.
    public func obfuscated(last visible: Int, of value: String) -> String {
        var cells = render(Array(value), relaxed: true)
        let filled = cells.indices.filter { cells[$0].fromValue }
        let hidden = max(0, filled.count - max(0, visible))
        for i in filled.prefix(hidden) { cells[i].char = "*" }
        var chars = cells.map(\.char)
        while let first = chars.first, first.isWhitespace { chars.removeFirst() }
        while let last = chars.last, last.isWhitespace { chars.removeLast() }
        return String(chars)
    }

    /// The SDK's `formatString:withMask:`, tagging each output character with whether it came
    /// from the value (a placeholder) or from the mask (a literal). `relaxed` makes every
    /// placeholder accept anything, as the SDK's `relaxMask:` does for stored accounts.
    private func render(_ value: [Character], relaxed: Bool) -> [(char: Character, fromValue: Bool)] {
        var out: [(char: Character, fromValue: Bool)] = []
        var v = 0
        // Only the first segment the value leaves unfinished may be completed from the mask.
        var appendRestOfMask = true
        for segment in segments {
            var m = 0
            switch segment {
            case .literal(let chars):
                while v < value.count, m < chars.count {
                    out.append((chars[m], false))
                    if value[v] == chars[m] { v += 1 }
                    m += 1
                }
                if appendRestOfMask, m < chars.count {
                    out.append(contentsOf: chars[m...].map { ($0, false) })
                    appendRestOfMask = false
                }
            case .placeholders(let slots):
                while v < value.count, m < slots.count {
                    if relaxed || slots[m].accepts(value[v]) {
                        out.append((value[v], true))
                        m += 1
                    }
                    v += 1
                }
                if appendRestOfMask, m < slots.count {
                    appendRestOfMask = false
                }
            }
        }
        return out
    }
}

/// Field checks of the SDK's card payment products (`cardNumber`, `expiryDate`, `cvv`),
/// done on the unformatted value. Every error names the SDK's field id.
public enum CardFieldValidation {
    /// Checks a card number: spaces are ignored; the rest must be digits, of a known brand,
    /// of a length that brand issues, and pass the Luhn check. Errors never show more than
    /// the first 6 digits.
    public static func cardNumber(_ value: String) throws(EMVError) {
        let field = "cardNumber"
        let digits = value.filter { $0 != " " }
        guard !digits.isEmpty else {
            throw EMVError(field: field, rule: "must not be empty")
        }
        if let bad = digits.first(where: { !($0.isASCII && $0.isWholeNumber) }) {
            throw EMVError(field: field, rule: "must contain digits and spaces only, found '\(bad)'")
        }
        guard let brand = CardBrand.detect(pan: digits) else {
            throw EMVError(field: field, rule: "IIN \(digits.prefix(6)) is not a supported card brand")
        }
        guard brand.panLengths.contains(digits.count) else {
            let lengths = brand.panLengths.map(String.init).joined(separator: ", ")
            throw EMVError(field: field, rule: "\(brand.displayName) numbers have \(lengths) digits, got \(digits.count)")
        }
        guard Luhn.isValid(digits) else {
            throw EMVError(field: field, rule: "fails the Luhn check (IIN \(digits.prefix(6)))")
        }
    }

    /// Checks an expiry date given as "MM/YY" or "MMYY". As the SDK's
    /// `OPValidatorExpirationDate`: the century is taken from `now`, the card is valid through
    /// its expiry month, and a year more than 25 years after `now`'s is refused.
    /// - Parameter now: the current month, passed in because this module reads no clock.
    public static func expiryDate(_ value: String, now: (year: Int, month: Int)) throws(EMVError) {
        let field = "expiryDate"
        let chars = Array(value)
        let digits: [Character]
        if chars.count == 5, chars[2] == "/" {
            digits = Array(chars[0..<2] + chars[3..<5])
        } else if chars.count == 4 {
            digits = chars
        } else {
            digits = []
        }
        guard digits.count == 4, digits.allSatisfy({ $0.isASCII && $0.isWholeNumber }),
              let month = Int(String(digits[0..<2])),
              let yy = Int(String(digits[2..<4])) else {
            throw EMVError(field: field, rule: "must be MM/YY or MMYY, got '\(value)'")
        }
        guard (1...12).contains(month) else {
            throw EMVError(field: field, rule: "month must be 01-12, got \(String(digits[0..<2]))")
        }
        let year = now.year / 100 * 100 + yy
        guard year * 12 + month >= now.year * 12 + now.month else {
            throw EMVError(field: field, rule: "card expired: \(twoDigits(month))/\(year) is before \(twoDigits(now.month))/\(now.year)")
        }
        guard year <= now.year + 25 else {
            throw EMVError(field: field, rule: "year \(year) is more than 25 years after \(now.year)")
        }
    }

    /// Checks a card security code: digits only, 4 for American Express, 3 for the other
    /// brands, 3 or 4 when the brand is not known yet.
    public static func cvv(_ value: String, brand: CardBrand?) throws(EMVError) {
        let field = "cvv"
        guard !value.isEmpty else {
            throw EMVError(field: field, rule: "must not be empty")
        }
        guard value.allSatisfy({ $0.isASCII && $0.isWholeNumber }) else {
            throw EMVError(field: field, rule: "must contain digits only")
        }
        if let brand {
            guard value.count == brand.cvvLength else {
                throw EMVError(field: field, rule: "must be \(brand.cvvLength) digits for \(brand.displayName), got \(value.count)")
            }
        } else {
            guard value.count == 3 || value.count == 4 else {
                throw EMVError(field: field, rule: "must be 3 or 4 digits, got \(value.count)")
            }
        }
    }

    private static func twoDigits(_ n: Int) -> String {
        n < 10 && n >= 0 ? "0\(n)" : "\(n)"
    }
}
