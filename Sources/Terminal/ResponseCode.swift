/// An ISO 8583 field 39 response code, or one of the codes EMV terminals make themselves
/// (Y1/Z1 offline, Y3/Z3 unable to go online).
public struct ResponseCode: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// Two characters, e.g. "00", "51", "Z3".
    public let code: String

    public init(_ code: String) {
        precondition(code.utf8.count == 2, "a response code is 2 characters")
        self.code = code
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// Whether the code approves the transaction.
    public var isApproval: Bool { ["00", "08", "10", "11", "Y1", "Y3"].contains(code) }

    /// The code's meaning, as an acquirer documents it.
    public var meaning: String { Self.meanings[code] ?? "Declined (response code \(code))" }

    /// The two bytes that go in tag 8A (the characters in ASCII).
    public var bytes: [UInt8] { Array(code.utf8) }

    public var description: String { "\(code) (\(meaning))" }

    public static let approved: ResponseCode = "00"

    /// Whether a host may send `code` and the terminal knows it: the terminal's own Y1/Z1/Y3/Z3
    /// and codes outside its table are not.
    public static func isKnownHostCode(_ code: String) -> Bool {
        meanings[code] != nil && !code.hasPrefix("Y") && !code.hasPrefix("Z")
    }

    static let meanings: [String: String] = [
        "00": "Approved",
        "01": "Refer to card issuer",
        "02": "Refer to card issuer, special condition",
        "03": "Invalid merchant",
        "04": "Pick up card",
        "05": "Do not honour",
        "06": "Error",
        "07": "Pick up card, special condition",
        "08": "Honour with identification",
        "10": "Approved for partial amount",
        "11": "Approved (VIP)",
        "12": "Invalid transaction",
        "13": "Invalid amount",
        "14": "Invalid card number",
        "15": "No such issuer",
        "19": "Re-enter transaction",
        "30": "Format error",
        "36": "Restricted card",
        "41": "Lost card, pick up",
        "43": "Stolen card, pick up",
        "51": "Insufficient funds",
        "54": "Expired card",
        "55": "Incorrect PIN",
        "57": "Transaction not permitted to cardholder",
        "58": "Transaction not permitted to terminal",
        "61": "Exceeds withdrawal amount limit",
        "62": "Restricted card",
        "65": "Exceeds withdrawal frequency limit",
        "75": "Allowable number of PIN tries exceeded",
        "78": "Blocked, first used",
        "82": "Negative CAM, dCVV, iCVV or CVV results",
        "91": "Issuer or switch inoperative",
        "94": "Duplicate transmission",
        "N7": "Decline for CVV2 failure",
        "96": "System malfunction",
        "Y1": "Offline approved",
        "Z1": "Offline declined",
        "Y3": "Unable to go online, offline approved",
        "Z3": "Unable to go online, offline declined",
    ]
}
