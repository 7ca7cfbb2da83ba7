/// A failure talking to a card through a reader. Every case names the reader (or, for the card
/// side, the endpoint it connected to) so a log line or an error shown to a user needs no context.
public enum CardIOError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No card is inserted, or none arrived within the time `connect(timeout:)` waited.
    case noCard(reader: String)
    /// The card disconnected, before or during an APDU; its channel is dead.
    case cardRemoved(reader: String)
    /// The card stayed silent past the reader's response timeout; the reader ejected it.
    case timeout(reader: String, seconds: Double)
    /// The card broke the vpcd framing (empty frame, response without SW1 SW2, a length its
    /// payload never delivered); the reader ejected it.
    case malformedFrame(reader: String, detail: String)
    /// A system call failed, or the call cannot be carried out (errno text, size limits, a
    /// powered-off or superseded channel).
    case io(reader: String, detail: String)
    /// The card broke ISO 7816-3 on a serial line (a bad TS or ATR, a PPS answer that does not
    /// match, an unexpected T=0 procedure byte, T=1 blocks still wrong after the retries and
    /// resynchronisation); the detail names the byte or block and the rule.
    case protocolError(reader: String, detail: String)
    /// A `--reader` value (or an endpoint given to a reader) is not usable; the message names the rule.
    case invalidEndpoint(String)

    /// One line, starting with the reader, fit for a log or a user.
    public var description: String {
        switch self {
        case .noCard(let reader):
            "reader \(reader): no card inserted"
        case .cardRemoved(let reader):
            "reader \(reader): card removed (it disconnected before or during the APDU)"
        case .timeout(let reader, let seconds):
            // No "card ejected": a serial reader whose presence line is `always` has nothing to eject.
            "reader \(reader): card silent for more than \(Self.format(seconds)) s (response timeout)"
        case .malformedFrame(let reader, let detail):
            "reader \(reader): malformed vpcd frame: \(detail); card ejected"
        case .io(let reader, let detail):
            "reader \(reader): \(detail)"
        case .protocolError(let reader, let detail):
            "reader \(reader): ISO 7816-3 protocol error: \(detail)"
        case .invalidEndpoint(let message):
            message
        }
    }

    /// "10" rather than "10.0", "1.25" rather than "1.2499999999999933" (a sum of timeouts in
    /// floating point): to the millisecond, without trailing zeros.
    static func format(_ seconds: Double) -> String {
        guard seconds.isFinite, abs(seconds) < 1e12 else { return String(seconds) }
        let millis = Int64((seconds * 1000).rounded())
        let whole = millis / 1000, fraction = abs(millis % 1000)
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(millis < 0 && whole == 0 ? "-" : "")\(whole).\(digits)"
    }
}

extension Duration {
    /// The duration in seconds, for timeouts handed to the kernel and for messages.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
