/// How messages are delimited on the TCP stream.
public enum Framing: String, Sendable, CaseIterable {
    /// A 2-byte big-endian length, then the message (jPOS's `PostChannel`, pyiso8583's examples).
    case binary2 = "binary2"
    /// A 2-byte length, a 5-byte TPDU, then the message; the answer's TPDU has its destination and
    /// source addresses swapped (jPOS's `NACChannel`).
    case nac = "nac"
    /// Four ASCII digits of length, then the message (jPOS's `ASCIIChannel`).
    case ascii4 = "ascii4"

    /// The longest message a frame can announce.
    public var maximumLength: Int {
        switch self {
        case .binary2: 65_535
        case .nac: 65_535 - 5
        case .ascii4: 9_999
        }
    }

    /// How many bytes announce the length.
    public var headerLength: Int { self == .ascii4 ? 4 : 2 }

    /// One frame around `message`; `tpdu` (5 bytes) for NAC.
    public func frame(_ message: [UInt8], tpdu: [UInt8] = Framing.defaultTPDU) throws(ISO8583Error) -> [UInt8] {
        let body = self == .nac ? tpdu + message : message
        guard message.count <= maximumLength else {
            throw ISO8583Error(part: "frame", reason: "a \(message.count)-byte message is over the \(rawValue) framing's \(maximumLength)")
        }
        switch self {
        case .binary2, .nac:
            return [UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
        case .ascii4:
            let text = String(body.count)
            return Array((String(repeating: "0", count: 4 - text.count) + text).utf8) + body
        }
    }

    /// The length the header announces (the bytes that follow it).
    public func bodyLength(_ header: [UInt8]) throws(ISO8583Error) -> Int {
        switch self {
        case .binary2, .nac:
            let n = Int(header[0]) << 8 | Int(header[1])
            if self == .nac, n < 5 { throw ISO8583Error(part: "frame", reason: "NAC frame of \(n) bytes cannot hold its 5-byte TPDU") }
            return n
        case .ascii4:
            guard header.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw ISO8583Error(part: "frame", reason: "the 4-character length header holds something other than digits")
            }
            return Int(String(decoding: header, as: UTF8.self))!
        }
    }

    /// Splits a frame's body into its TPDU (NAC) and the message.
    public func split(_ body: [UInt8]) -> (tpdu: [UInt8]?, message: [UInt8]) {
        self == .nac ? (Array(body.prefix(5)), Array(body.dropFirst(5))) : (nil, body)
    }

    /// A TPDU as a NAC terminal sends it: ID 60, destination 0001, source 0000.
    public static let defaultTPDU: [UInt8] = [0x60, 0x00, 0x01, 0x00, 0x00]

    /// The answer's TPDU: the request's with destination and source swapped, as NACChannel does.
    public static func replyTPDU(_ tpdu: [UInt8]) -> [UInt8] {
        guard tpdu.count == 5 else { return tpdu }
        return [tpdu[0], tpdu[3], tpdu[4], tpdu[1], tpdu[2]]
    }
}
