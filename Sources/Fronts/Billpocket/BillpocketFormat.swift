import EMV
import Terminal

/// Whether the card's account is a credit or a debit one: the callback's `accountType`.
public enum BillpocketAccountType: String, Sendable, Equatable, CaseIterable {
    /// "credit".
    case credit
    /// "debit".
    case debit
}

/// The values of the Billpocket callback that are computed from transaction data. Pure.
public enum BillpocketFormat {
    // MARK: Amounts

    /// The largest amount accepted, in cents, tip included: 12 digits, the size of ISO 8583 field
    /// 4 and of EMV's Amount, Authorised (9F02), so every accepted sale reaches the card and the
    /// host unchanged (9,999,999,999.99).
    public static let maximumAmount = 999_999_999_999

    /// An amount as the app writes it, a decimal point and exactly 2 decimals, no grouping and no
    /// currency sign: 10000 -> "100.00", 50 -> "0.50", 0 -> "0.00".
    public static func amount(cents: Int) -> String { Money.decimal(cents) }

    /// Why a text is not an amount.
    enum AmountProblem: Error, Equatable {
        /// Not `digits[.d[d]]`.
        case notDecimal
        /// Digits, a point and more than 2 digits after it.
        case tooManyDecimals
        /// More than `maximumAmount` cents.
        case tooLarge
    }

    /// Cents from `digits`, or `digits.d` / `digits.dd`: ASCII digits only, leading zeros allowed,
    /// no sign, no grouping, no exponent, at least one digit on each side of the point. The rule
    /// is textual: `1.500` has 3 decimals even though it equals 1.50, because the document asks
    /// for "2 decimals" and a sender that writes 3 has a formatting bug worth seeing.
    static func cents(_ text: String) -> Result<Int, AmountProblem> {
        let bytes = Array(text.utf8)
        let point = bytes.firstIndex(of: UInt8(ascii: "."))
        let whole = bytes[..<(point ?? bytes.count)]
        let fraction = point.map { bytes[($0 + 1)...] } ?? []
        guard !whole.isEmpty, whole.allSatisfy(isDigit), fraction.allSatisfy(isDigit), point == nil || !fraction.isEmpty else {
            return .failure(.notDecimal)
        }
        guard fraction.count <= 2 else { return .failure(.tooManyDecimals) }
        let significant = whole.drop { $0 == UInt8(ascii: "0") }
        // 10 whole digits is the most 999_999_999_999 cents has; more cannot fit, and stopping
        // here keeps the arithmetic below from overflowing.
        guard significant.count <= 10 else { return .failure(.tooLarge) }
        var cents = significant.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } * 100
        for (i, digit) in fraction.enumerated() {
            cents += Int(digit - UInt8(ascii: "0")) * (i == 0 ? 10 : 1)
        }
        guard cents <= maximumAmount else { return .failure(.tooLarge) }
        return .success(cents)
    }

    static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    /// An amount for people, as a Mexican receipt prints it: `$` and thousands separated by commas,
    /// 123456 -> "$1,234.56".
    public static func money(cents: Int) -> String {
        var plain = amount(cents: cents)
        if cents < 0 { plain.removeFirst() }
        let point = plain.firstIndex(of: ".")!
        var whole = Array(plain[..<point])
        var grouped: [Character] = []
        while whole.count > 3 {
            grouped.insert(contentsOf: [","] + whole.suffix(3), at: 0)
            whole.removeLast(3)
        }
        grouped.insert(contentsOf: whole, at: 0)
        return (cents < 0 ? "-$" : "$") + String(grouped) + plain[point...]
    }

    // MARK: Card

    /// The callback's `cardtype` for a card brand; nil for a card Billpocket does not take.
    ///
    /// The app reports four types: VISA, MASTERCARD, CARNET and AMERICAN EXPRESS (the brands
    /// Billpocket accepts in Mexico). Maestro is Mastercard's debit brand, routed over its network,
    /// so it reports MASTERCARD. Discover, JCB, UnionPay and an unknown brand give nil: the caller
    /// ends the sale as `BillpocketFailure.cardNotAccepted` when the card is read, as a terminal
    /// that does not take the brand would, rather than report a type no POS expects.
    public static func cardType(brand: CardBrand?) -> String? {
        switch brand {
        case .visa: CardBrand.visa.displayName
        case .mastercard, .maestro: CardBrand.mastercard.displayName
        case .americanExpress: CardBrand.americanExpress.displayName
        case .carnet: CardBrand.carnet.displayName
        case .discover, .jcb, .unionPay, nil: nil
        }
    }

    /// The callback's `creditcard`: the last 4 digits of a PAN, full or masked (`PAN.last4`).
    public static func creditCard(pan: String) -> String {
        PAN.last4(pan)
    }

    /// Bytes as upper-case hex, the form of `arqc` and `aid` (`A0000000031010`).
    public static func hex(_ bytes: [UInt8]) -> String {
        Hex.encode(bytes)
    }
}
