import EMV

/// A powered card behind a reader. Raw C-APDU in, raw R-APDU (data ‖ SW1 SW2) out.
///
/// A channel belongs to one card insertion and one power-on: once the card is removed, powered
/// off, or connected again through the reader, this channel throws and a new one is needed.
/// Calls from several threads are serialised; an EMV kernel drives one channel from one thread.
public protocol CardChannel: AnyObject, Sendable {
    /// The name of the reader the card sits in, for messages and traces.
    var readerName: String { get }
    /// The card's answer to reset from the latest power-on or reset.
    var atr: [UInt8] { get }
    /// Sends a C-APDU and returns the card's R-APDU (data ‖ SW1 SW2, at least 2 bytes).
    func transmit(_ command: [UInt8]) throws(CardIOError) -> [UInt8]
    /// Warm reset (vpcd `02` then `04`); returns the new ATR.
    func reset() throws(CardIOError) -> [UInt8]
    /// Powers the card off (vpcd `00`); later calls on this channel throw.
    func powerOff()
    /// The tracks when the card was swiped (an in-process virtual card only: no reader protocol
    /// here carries a stripe); nil for an inserted or tapped card.
    var magneticStripe: MagneticStripe? { get }
}

extension CardChannel {
    public var magneticStripe: MagneticStripe? { nil }
}

/// A card arriving in or leaving a reader.
public enum ReaderEvent: Sendable, Equatable {
    /// A card connected to the reader named `reader`.
    case cardInserted(reader: String)
    /// The card left: it disconnected, was ejected after an error, or the reader stopped.
    case cardRemoved(reader: String)
    /// The device a reader follows appeared (a PC/SC reader matching the pattern was listed by
    /// pcscd); `device` is its full name.
    case readerAdded(reader: String, device: String)
    /// The device went away (unplugged, or its service stopped).
    case readerRemoved(reader: String, device: String)
    /// The service behind the reader (pcscd) is gone: every connection to it ended, and the
    /// reader keeps trying to reach it again.
    case serviceLost(reader: String, detail: String)
    /// The service is back (pcscd restarted): the reader made a new connection; `devices` are
    /// the readers it lists.
    case serviceRestored(reader: String, devices: [String])
}

/// Identifies an observer added with `CardReader.addObserver(_:)`, to remove it later.
public struct ReaderObservation: Hashable, Sendable {
    let id: UInt64
}

/// A card reader: something a card can be inserted in and talked to.
///
/// Events are delivered to observers rather than through a stream so that several listeners (the
/// daemon's event feed, a test, a log) can follow one reader; `events()` wraps an observer in an
/// `AsyncStream` for async code.
public protocol CardReader: AnyObject, Sendable {
    /// The reader's name, as shown to users and in errors.
    var name: String { get }
    /// Whether a card is inserted and still connected.
    var isCardPresent: Bool { get }
    /// Waits up to `timeout` for a card, powers it on (vpcd `01`, then `04` to get the ATR) and
    /// returns its channel. Throws `noCard` when none arrived in time.
    func connect(timeout: Duration) throws(CardIOError) -> any CardChannel
    /// Calls `observer` for every insertion and removal from now on, in the order they happened.
    /// A reader may call it from its own thread: an observer must return promptly, and must not
    /// wait for the reader to stop.
    /// An observer added while a card is present hears of its removal but not of its insertion:
    /// check `isCardPresent` after adding one.
    @discardableResult
    func addObserver(_ observer: @escaping @Sendable (ReaderEvent) -> Void) -> ReaderObservation
    /// Stops calling an observer; unknown observations are ignored.
    func removeObserver(_ observation: ReaderObservation)
}

extension CardReader {
    /// The reader's events as an `AsyncStream`; the observer behind it goes away when the stream
    /// is cancelled or dropped.
    public func events() -> AsyncStream<ReaderEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ReaderEvent.self)
        let observation = addObserver { continuation.yield($0) }
        continuation.onTermination = { [weak self] _ in self?.removeObserver(observation) }
        return stream
    }
}

/// What the reader did to a card's power, as the card side sees it: a virtual card resets its
/// volatile state (selected application, transaction) on power-on and reset.
public enum PowerEvent: Sendable, Equatable {
    /// vpcd `00`: the reader cut the card's power.
    case powerOff
    /// vpcd `01`: cold start; an ATR request follows.
    case powerOn
    /// vpcd `02`: warm reset; an ATR request follows.
    case reset
}
