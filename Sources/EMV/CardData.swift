/// The Luhn (mod 10) check that ends every payment card number (ISO/IEC 7812-1 annex B).
public enum Luhn {
    /// Whether `digits` passes the Luhn check. Empty input and anything but ASCII digits is
    /// `false`, so a caller never mistakes "nothing to check" for "checked and fine".
    public static func isValid(_ digits: String) -> Bool {
        guard let sum = weightedSum(digits, doublingFirst: false) else { return false }
        return sum % 10 == 0
    }

    /// The digit to append to `partial` so that the result passes the Luhn check;
    /// `nil` when `partial` is empty or holds anything but ASCII digits.
    public static func checkDigit(for partial: String) -> Character? {
        // The check digit will sit at position 0 from the right, so the current last digit
        // moves to position 1 and is one of the doubled ones.
        guard let sum = weightedSum(partial, doublingFirst: true) else { return nil }
        let digit = (10 - sum % 10) % 10
        return Character(Unicode.Scalar(UInt8(ascii: "0") + UInt8(digit)))
    }

    /// Sum of the digits read right to left with every second one doubled (9 subtracted when
    /// the double has two digits). `doublingFirst` says whether the rightmost digit is doubled.
    private static func weightedSum(_ text: String, doublingFirst: Bool) -> Int? {
        guard !text.isEmpty else { return nil }
        var sum = 0
        var double = doublingFirst
        for byte in text.utf8.reversed() {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            var d = Int(byte - UInt8(ascii: "0"))
            if double {
                d *= 2
                if d > 9 { d -= 9 }
            }
            sum += d
            double.toggle()
        }
        return sum
    }
}

/// A card scheme, as terminals and acquirers report it.
public enum CardBrand: String, Sendable, CaseIterable, Codable {
    case visa, mastercard, americanExpress, discover, jcb, unionPay, maestro, carnet

    /// The upper-case name terminals put in receipts and callbacks. Billpocket's `cardtype`
    /// uses exactly "VISA", "MASTERCARD", "CARNET" and "AMERICAN EXPRESS".
    public var displayName: String {
        switch self {
        case .visa: "VISA"
        case .mastercard: "MASTERCARD"
        case .americanExpress: "AMERICAN EXPRESS"
        case .discover: "DISCOVER"
        case .jcb: "JCB"
        case .unionPay: "UNIONPAY"
        case .maestro: "MAESTRO"
        case .carnet: "CARNET"
        }
    }

    /// The PAN lengths the scheme issues (Wikipedia "Payment card number" table; Carnet: 16
    /// per ActiveMerchant's detector, the only public source found).
    public var panLengths: [Int] {
        switch self {
        case .visa: [13, 16, 19]
        case .mastercard: [16]
        case .americanExpress: [15]
        case .discover, .jcb, .unionPay: Array(16...19)
        case .maestro: Array(12...19)
        case .carnet: [16]
        }
    }

    /// Digits in the card security code: Amex prints 4 (CID), every other scheme here 3.
    public var cvvLength: Int {
        self == .americanExpress ? 4 : 3
    }

    /// The brand of a PAN, or of its first digits, from ``iinRanges``.
    ///
    /// `pan` must be ASCII digits only (strip separators first); anything else gives `nil`.
    /// A range is only considered once `pan` has as many digits as the range's prefix, and the
    /// matching range with the longest prefix wins. So a brand can change while digits are
    /// typed: "5062" is Maestro (50), "506228" is Carnet (506199-506499).
    public static func detect(pan: String) -> CardBrand? {
        let digits = Array(pan.utf8)
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        var best: (digits: Int, brand: CardBrand)? = nil
        for range in iinRanges where range.digits <= digits.count {
            var prefix = 0
            for d in digits[0..<range.digits] { prefix = prefix * 10 + Int(d - UInt8(ascii: "0")) }
            guard range.low <= prefix, prefix <= range.high else { continue }
            if range.digits > best?.digits ?? 0 {
                best = (range.digits, range.brand)
            }
        }
        return best?.brand
    }

    /// IIN table: a PAN whose first `digits` digits, read as a number, lie in `low...high`
    /// belongs to `brand`; the longest matching prefix wins (see ``detect(pan:)``), so a narrow
    /// range carved out of a broad one needs no ordering or exclusion logic. Two rows of the
    /// same prefix length must never overlap with different brands (a test checks this).
    ///
    /// Sources: Wikipedia "Payment card number" (Visa, Amex, Discover, JCB, UnionPay, Maestro,
    /// Maestro UK); Mastercard's 2-series BIN bulletin (222100-272099); Discover's IPP/VAR
    /// enabler compliance guide as quoted in ActiveMerchant's UNIONPAY_RANGES (81000000-81719999);
    /// ActiveMerchant `credit_card_methods.rb` CARNET_RANGES/CARNET_BINS (Carnet).
    static let iinRanges: [(low: Int, high: Int, digits: Int, brand: CardBrand)] = [
        (4, 4, 1, .visa),

        (51, 55, 2, .mastercard),
        (2221, 2720, 4, .mastercard),

        (34, 34, 2, .americanExpress),
        (37, 37, 2, .americanExpress),

        (6011, 6011, 4, .discover),
        (644, 649, 3, .discover),
        (65, 65, 2, .discover),

        (3528, 3589, 4, .jcb),

        (62, 62, 2, .unionPay),
        // 622126-622925 is listed under Discover in most IIN tables, but those are cards
        // issued by Chinese banks under China UnionPay; Discover only *acquires* them through
        // its network alliance, and only in the US, Mexico and the Caribbean (Business::CreditCard
        // 0.34 changes; Oracle's preamble table calls them "Discover (CUP)"; ActiveMerchant
        // detects them as UnionPay). The cardholder sees the UnionPay logo, so report UnionPay.
        // The row repeats what 62 already says, on purpose, so the decision is visible here.
        (622126, 622925, 6, .unionPay),
        (810000, 817199, 6, .unionPay),

        (50, 50, 2, .maestro),
        (56, 58, 2, .maestro),
        (6304, 6304, 4, .maestro),
        (6759, 6759, 4, .maestro),
        (6761, 6763, 4, .maestro),
        (676770, 676770, 6, .maestro),
        (676774, 676774, 6, .maestro),

        // Carnet (Mexico, Prosa network). These sit inside Maestro's 50 and 58 and UnionPay's 62;
        // being 6-8 digit prefixes they outrank those 2-digit rows. ActiveMerchant's 50633601,
        // 50633606, 58877274 and 62753500 are inside the rows below and need no row of their own.
        // Its older 604622 BIN was narrowed to 60462203-60462204, which is what is used here.
        (286900, 286900, 6, .carnet),
        (502275, 502275, 6, .carnet),
        (506199, 506499, 6, .carnet),
        (588772, 588772, 6, .carnet),
        (60462203, 60462204, 8, .carnet),
        (606333, 606333, 6, .carnet),
        (627535, 627535, 6, .carnet),
        (636318, 636318, 6, .carnet),
        (636379, 636379, 6, .carnet),
        (639388, 639388, 6, .carnet),
        (639484, 639484, 6, .carnet),
        (639559, 639559, 6, .carnet),
    ]
}

/// Primary account numbers: validation and the masked forms terminals report.
public enum PAN {
    /// Checks that `pan` is 12-19 ASCII digits passing the Luhn check, and returns it.
    /// Errors never echo more than the first 6 digits, which PCI DSS allows to be shown.
    /// - Parameter field: the name used in the error.
    @discardableResult
    public static func validate(_ pan: String, field: String = "pan") throws(EMVError) -> String {
        guard !pan.isEmpty else {
            throw EMVError(field: field, rule: "must not be empty")
        }
        var position = 0
        for c in pan {
            position += 1
            guard c.isASCII, c.isWholeNumber else {
                throw EMVError(field: field, rule: "must contain digits only; character \(position) is '\(c)'")
            }
        }
        guard (12...19).contains(pan.count) else {
            throw EMVError(field: field, rule: "must be 12-19 digits, got \(pan.count)")
        }
        guard Luhn.isValid(pan) else {
            throw EMVError(field: field, rule: "fails the Luhn check (IIN \(pan.prefix(6)))")
        }
        return pan
    }

    /// The PAN with its first 6 and last 4 digits kept and every other one replaced by '*':
    /// "5356861234561364" -> "535686******1364", the form Viva reports in `accountNumber`.
    /// Below 11 characters first 6 + last 4 would show everything, so all but the last 4 are
    /// masked; at 4 or fewer, everything is, since showing it would show the whole input.
    public static func masked(_ pan: String) -> String {
        let chars = Array(pan)
        let n = chars.count
        if n <= 4 { return String(repeating: "*", count: n) }
        if n < 11 { return String(repeating: "*", count: n - 4) + String(chars[(n - 4)...]) }
        return String(chars[..<6]) + String(repeating: "*", count: n - 10) + String(chars[(n - 4)...])
    }

    /// The last 4 characters of the PAN (all of it when shorter), as Billpocket's `creditcard`.
    public static func last4(_ pan: String) -> String {
        String(pan.suffix(4))
    }
}

extension PAN {
    /// Where `text` holds something that looks like a card number, or nil: 13–19 digits (single
    /// spaces or dashes between them allowed, as people type card numbers), not touching another
    /// digit, passing the Luhn check, of a length a known brand issues for its IIN.
    ///
    /// Request text that a tester or a merchant's app types (references, identifiers, callback
    /// URLs) is scanned with this so a card number never reaches the ledger or a log: cardbench
    /// refuses such a value rather than store it. The brand and length rules keep numeric
    /// references of other shapes from being taken for card numbers; a 16-digit reference that
    /// starts like a Visa and passes Luhn (one in ten of those) is refused, as a PCI data-loss
    /// scanner would flag it.
    public static func likelyPANRange(in text: String) -> Range<String.Index>? {
        // Every request field passes through here, so the common cases must cost little: fewer
        // than 13 ASCII digits cannot hold a card number (a digit a combining mark follows is not
        // one either, so counting bytes only overcounts), and ASCII text is scanned as bytes,
        // where one byte is one character (but for "\r\n", which is neither digit nor separator).
        var digitCount = 0, ascii = true
        for byte in text.utf8 {
            if byte &- UInt8(ascii: "0") < 10 { digitCount += 1 } else if byte >= 0x80 { ascii = false }
        }
        if digitCount < 13 { return nil }
        if ascii { return asciiLikelyPANRange(in: text) }
        return characterLikelyPANRange(in: text)
    }

    /// `likelyPANRange` for ASCII text, on its bytes.
    static func asciiLikelyPANRange(in text: String) -> Range<String.Index>? {
        let utf8 = Array(text.utf8)
        func isDigit(_ i: Int) -> Bool { utf8[i] &- UInt8(ascii: "0") < 10 }
        func index(_ offset: Int) -> String.Index { text.utf8.index(text.utf8.startIndex, offsetBy: offset) }
        var index0 = 0
        while index0 < utf8.count {
            guard isDigit(index0) else {
                index0 += 1
                continue
            }
            var groups: [Range<Int>] = []
            var groupStart = index0
            var i = index0
            while i < utf8.count {
                if isDigit(i) {
                    i += 1
                } else if utf8[i] == UInt8(ascii: " ") || utf8[i] == UInt8(ascii: "-") {
                    let next = i + 1
                    guard next < utf8.count, isDigit(next) else { break }
                    groups.append(groupStart..<i)
                    groupStart = next
                    i = next
                } else {
                    break
                }
            }
            groups.append(groupStart..<i)
            func digits(_ range: Range<Int>) -> String { String(decoding: utf8[range], as: UTF8.self) }
            if groups.count > 1, groups.allSatisfy({ (2...6).contains($0.count) }) {
                if Self.isLikely(groups.map(digits).joined()) { return index(groups[0].lowerBound)..<index(groups[groups.count - 1].upperBound) }
            } else if let found = groups.first(where: { (13...19).contains($0.count) && Self.isLikely(digits($0)) }) {
                return index(found.lowerBound)..<index(found.upperBound)
            }
            index0 = i
        }
        return nil
    }

    /// `likelyPANRange` by characters, for text that is not all ASCII.
    static func characterLikelyPANRange(in text: String) -> Range<String.Index>? {
        var index = text.startIndex
        while index < text.endIndex {
            guard text[index].isASCII, text[index].isWholeNumber else {
                index = text.index(after: index)
                continue
            }
            // A run: groups of digits joined by single separators.
            var groups: [(digits: String, range: Range<String.Index>)] = []
            var groupStart = index
            var digits = ""
            var i = index
            while i < text.endIndex {
                let c = text[i]
                if c.isASCII, c.isWholeNumber {
                    digits.append(c)
                    i = text.index(after: i)
                } else if c == " " || c == "-" {
                    let next = text.index(after: i)
                    guard next < text.endIndex, text[next].isASCII, text[next].isWholeNumber else { break }
                    groups.append((digits, groupStart..<i))
                    digits = ""
                    groupStart = next
                    i = next
                } else {
                    break
                }
            }
            groups.append((digits, groupStart..<i))
            // People group a card number in fours (Amex 4-6-5): a run of short groups is read as one
            // number; a run with a longer group (a UUID's 8-4-4-4-12) as separate numbers.
            if groups.count > 1, groups.allSatisfy({ (2...6).contains($0.digits.count) }) {
                let all = groups.map(\.digits).joined()
                if Self.isLikely(all) { return groups[0].range.lowerBound..<groups[groups.count - 1].range.upperBound }
            } else if let found = groups.first(where: { Self.isLikely($0.digits) }) {
                return found.range
            }
            index = i
        }
        return nil
    }

    /// 13–19 digits passing the Luhn check, of a length a known brand issues for their IIN.
    static func isLikely(_ digits: String) -> Bool {
        guard (13...19).contains(digits.count), Luhn.isValid(digits), let brand = CardBrand.detect(pan: digits) else { return false }
        return brand.panLengths.contains(digits.count)
    }

    /// `text` with everything in it that looks like a card number (`likelyPANRange`) masked
    /// (first 6, last 4): for text a peer or a client sent that is kept or shown.
    public static func maskingLikelyPANs(in text: String) -> String {
        var text = text
        while let range = likelyPANRange(in: text) {
            text.replaceSubrange(range, with: masked(String(text[range])))
        }
        return text
    }

    /// Whether `text` holds something that looks like a card number (`likelyPANRange`).
    public static func looksLikeItHoldsAPAN(_ text: String) -> Bool { likelyPANRange(in: text) != nil }
}

/// Characters no text field of a payment request has a use for.
public enum ControlCharacters {
    /// The position (1-based, in Unicode scalars) of the first C0 or C1 control character or DEL in
    /// `text`, and its code point, or nil. NUL is among them: SQLite's C interface ends text at
    /// a NUL, so a value holding one would be stored cut short.
    public static func first(in text: String) -> (position: Int, scalar: Unicode.Scalar)? {
        var position = 0
        for scalar in text.unicodeScalars {
            position += 1
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { return (position, scalar) }
        }
        return nil
    }

    /// "U+0000 at position 9", for error messages.
    public static func describe(_ found: (position: Int, scalar: Unicode.Scalar)) -> String {
        let hex = String(found.scalar.value, radix: 16, uppercase: true)
        return "U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex) at position \(found.position)"
    }
}

/// Card numbers on the schemes' and acquirers' published test ranges: a captured card with one of
/// them keeps its number; any other number is a live card's and is replaced (docs/recording.md).
public enum TestCardNumbers {
    /// Prefixes of test ranges: Visa's ADVT/VSDC test cards (476173), Mastercard's M-TIP and test
    /// cards (541333, 520473, 222300), American Express (374245, 371449, 378282), Discover
    /// (601111, 651000), JCB (3566002), UnionPay (6212345), Diners (3056930), and the well-known
    /// gateway test numbers listed whole below.
    public static let prefixes = ["476173", "541333", "520473", "222300", "374245", "371449", "378282", "601111", "651000",
                                  "3566002", "6212345", "3056930"]
    public static let numbers: Set<String> = [
        "4111111111111111", "4012888888881881", "4000000000000002", "4242424242424242", "5555555555554444", "5105105105105100",
        "2223000048400011", "6011111111111117", "3530111333300000",
    ]

    public static func isTest(_ pan: String) -> Bool {
        numbers.contains(pan) || prefixes.contains { pan.hasPrefix($0) }
    }

    /// A number of the same BIN (8 digits for 16 digits or more, else 6) and length, with a valid
    /// check digit and random digits between, that is not `pan`.
    public static func substitute(for pan: String) -> String {
        let keep = pan.count >= 16 ? 8 : 6
        let prefix = String(pan.prefix(keep))
        while true {
            let middle = SecureRandom.bytes(pan.count - keep - 1).map { String($0 % 10) }.joined()
            let partial = prefix + middle
            guard let check = Luhn.checkDigit(for: partial) else { return pan }
            let candidate = partial + String(check)
            if candidate != pan { return candidate }
        }
    }
}
