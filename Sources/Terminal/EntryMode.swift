/// How a card's data reached the transaction, as the ledger records it (`entry_mode`) and the
/// fronts word it.
public enum EntryMode: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// The chip, through the contact kernel.
    case chip
    /// A tap, through a contactless kernel.
    case contactless
    /// A swiped stripe.
    case magstripe
    /// A stripe swiped after the chip failed (POS entry mode 80).
    case fallback
    /// Keyed by the customer on a web page or an app (the card-not-present platforms).
    case ecommerce
    /// Approved in the payer's wallet app.
    case wallet

    public var description: String { rawValue }

    /// The mode an ISO 8583 message's POS entry mode (field 22's first two digits) says.
    public init(posEntryMode: String?) {
        switch posEntryMode {
        case "07": self = .contactless
        case "90", "02": self = .magstripe
        case "80": self = .fallback
        default: self = .chip
        }
    }
}
