import EMV
import Terminal

/// The apps cardbench stands in for. Each front parses and checks the URL its app receives and
/// renders the callback URL the app would send back; it knows nothing of APDUs or sockets.
public enum Fronts {}

/// Who declined a transaction, which every front reports in its own words.
public enum Decline: Sendable, Equatable {
    /// The card: an AAC (Z1), or a decline at the second GENERATE AC after the host approved
    /// (the approval was reversed).
    case byCard
    /// Nobody: the host could not be reached and the terminal declined offline (Z3).
    case hostUnavailable
    /// The issuer, with its response code.
    case byHost(ResponseCode)

    /// Classifies a decline by its response code; `reversed` says the host approved and the card
    /// then declined (the kernel reports 05 or Z3 then), which is the card's doing.
    public init(responseCode: ResponseCode, reversed: Bool) {
        if reversed {
            self = .byCard
            return
        }
        switch responseCode.code {
        case "Z1": self = .byCard
        case "Z3": self = .hostUnavailable
        default: self = .byHost(responseCode)
        }
    }
}

/// The rules every text value of a request obeys, whichever front it came to, before any
/// field's own rules: no control characters, and no card number.
public enum TextRules {
    /// The rule a value holding a card number breaks.
    public static let panRule = "must not hold a card number (13 to 19 digits of a card brand's IIN that pass the Luhn check): "
        + "cardbench never stores or echoes one; send a reference of another shape"

    /// Why `value` breaks a rule every request text obeys, or nil.
    ///
    /// A control character has no use in any field these apps take, and a NUL would be cut at by
    /// SQLite's C interface (a later, different value would then match the stored one); a card
    /// number in a reference would be stored and echoed in the clear.
    /// - Parameter panLike: false for a field whose own rules make it a numeric identifier
    ///   cardbench issued (which may happen to pass the Luhn check).
    public static func problem(_ value: String, panLike: Bool = true) -> String? {
        if let found = ControlCharacters.first(in: value) {
            return "must not contain control characters; found \(ControlCharacters.describe(found))"
        }
        if panLike, PAN.looksLikeItHoldsAPAN(value) { return panRule }
        return nil
    }
}
