import EMV

/// A transmission protocol carrying C-APDUs to a card on a line: `T0Transport` or `T1Transport`.
public protocol APDUTransport: AnyObject {
    /// Sends a C-APDU and returns data ‖ SW1 SW2.
    func transmit(_ apdu: [UInt8]) throws(CardIOError) -> [UInt8]
    /// The guard times waited so far: line time, not the host's.
    var guardWaited: Duration { get }
}

extension T0Transport: APDUTransport {}
extension T1Transport: APDUTransport {}

extension ISO7816 {
    /// The transport for the protocol the ATR asks for (`preferredProtocol(of:)`), with its
    /// timings; for T=1 it first raises IFSD to 254 with S(IFS request), as EMV terminals do.
    /// - Parameters:
    ///   - line: the line, already wrapped for the ATR's convention (`line(_:for:)`).
    ///   - etu: 1 / baud rate at the rate the line now runs at.
    ///   - rate: `.default`, or the ATR's Fi/Di after a successful PPS or in specific mode.
    /// - Throws: `.protocolError` for a protocol other than T=0 and T=1; the errors of
    ///   `T1Transport.negotiateIFSD(_:)`.
    public static func makeTransport(line: any CardLine, atr: ATR, etu: Duration, rate: Rate = .default,
                                     slack: Duration = defaultSlack) throws(CardIOError) -> any APDUTransport {
        switch preferredProtocol(of: atr) {
        case 0:
            return T0Transport(line: line, atr: atr, etu: etu, rate: rate, slack: slack)
        case 1:
            let t1 = T1Transport(line: line, atr: atr, etu: etu, rate: rate, slack: slack)
            try t1.negotiateIFSD(254)
            return t1
        case let other:
            throw .protocolError(reader: line.readerName, detail: "the ATR asks for T=\(other); only T=0 and T=1 are supported (\(Hex.encode(atr.bytes)))")
        }
    }
}
