/// A card's I/O line as the ISO 7816-3 protocols see it: bytes in the direct convention's
/// bit order as the UART delivers them (the protocols apply the inverse convention themselves
/// once the ATR has shown it), with any echo already removed.
public protocol CardLine: AnyObject {
    /// The reader's name, for errors.
    var readerName: String { get }
    /// Writes bytes to the card.
    func write(_ bytes: [UInt8]) throws(CardIOError)
    /// Reads one byte, waiting at most `timeout`; throws `CardIOError.timeout` when none came,
    /// `.cardRemoved` when the line is gone (EOF/hang-up).
    func read(timeout: Duration) throws(CardIOError) -> UInt8
    /// Discards bytes received and not yet read (before a retransmission or after an error).
    func discardInput()
}
