import Crypto
import EMV
import Foundation
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

/// The unguessable part of a page's address that a platform hands out for one payment (a 3-D
/// Secure challenge): 128 random bits, kept only as their SHA-256, so neither a payment's id
/// (which may run in sequence) nor the database reaches the page.
public enum PageToken {
    /// A new token and the hash to keep of it.
    public static func make() -> (token: String, hash: String) {
        var g = SystemRandomNumberGenerator()
        let token = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
        return (token, hash(token))
    }

    /// The hash kept of `token`: lower-case hex SHA-256.
    public static func hash(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `token` is the one `hash` was kept of; equal-length digests compared in full.
    public static func matches(_ token: String, _ hash: String?) -> Bool {
        guard let hash else { return false }
        let presented = Array(Self.hash(token).utf8), kept = Array(hash.utf8)
        guard presented.count == kept.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(presented, kept) { difference |= a ^ b }
        return difference == 0
    }
}
