/// A message type indicator read: its class, its function and whether the sender repeats it
/// (ISO 8583:1987's four digits: version, class, function, origin). The MTI stays text on the
/// wire and in the trace; what a message is, is read from this.
public struct MTI: Sendable, Equatable, CustomStringConvertible {
    /// The second digit.
    public enum Class: Character, Sendable, CaseIterable {
        case authorisation = "1", financial = "2", fileAction = "3", reversal = "4", reconciliation = "5", administrative = "6"
        case networkManagement = "8"

        public var words: String {
            switch self {
            case .authorisation: "authorisation"
            case .financial: "financial"
            case .fileAction: "file action"
            case .reversal: "reversal"
            case .reconciliation: "reconciliation"
            case .administrative: "administrative"
            case .networkManagement: "network management"
            }
        }
    }

    /// The third digit.
    public enum Function: Character, Sendable, CaseIterable {
        case request = "0", response = "1", advice = "2", adviceResponse = "3"

        public var words: String {
            switch self {
            case .request: "request"
            case .response: "response"
            case .advice: "advice"
            case .adviceResponse: "advice response"
            }
        }

        /// A request or an advice: a message that wants an answer.
        public var wantsAnswer: Bool { self == .request || self == .advice }
    }

    public let text: String
    /// Nil for a class this reader does not know (or an MTI that is not four digits).
    public let messageClass: Class?
    public let function: Function?
    /// The sender's repeat of a message it sent before (origin 1 or 3).
    public let isRepeat: Bool

    public init(_ text: String) {
        self.text = text
        let c = Array(text)
        let fourDigits = c.count == 4 && c.allSatisfy(\.isASCII) && c.allSatisfy(\.isNumber)
        messageClass = fourDigits ? Class(rawValue: c[1]) : nil
        function = fourDigits ? Function(rawValue: c[2]) : nil
        isRepeat = fourDigits && (c[3] == "1" || c[3] == "3")
    }

    public var description: String { text }

    /// "financial request", "network management response"; the digit where a part is unknown.
    public var meaning: String {
        let c = Array(text)
        guard c.count == 4 else { return "unknown" }
        return (messageClass?.words ?? "class \(c[1])") + " " + (function?.words ?? "function \(c[2])")
    }
}

extension ISOMessage {
    /// What the message is, from its MTI.
    public var kind: MTI { MTI(mti) }
}
