import EMV
import Foundation

/// A card that lives in the reader's own process (the daemon's demo card, a card a scenario
/// inserts through the API): the reader hands its C-APDUs straight to it on the caller's thread.
///
/// A card behind a socket costs two thread wake-ups per APDU; on a bench running hundreds of
/// scripted sales that is most of a sale's CPU, and it buys nothing when the card is software in
/// the same process anyway. The kernel sees the same `CardChannel` either way.
public protocol InProcessCard: AnyObject, Sendable {
    /// Powers the card on, or resets it when `warm`, and returns its ATR.
    func powerOn(warm: Bool) -> [UInt8]
    /// Powers the card off; the next power-on is a cold start.
    func powerOff()
    /// Answers one C-APDU with an R-APDU (data ‖ SW1 SW2). Calls are serialised by the reader.
    func respond(to command: [UInt8]) -> [UInt8]
    /// True once the card has left the reader by itself (a scripted removal after an answer, a
    /// tap or swipe that is over): the reader then treats it as removed.
    var hasLeft: Bool { get }
    /// The tracks when the card is being swiped rather than inserted or tapped.
    var magneticStripe: MagneticStripe? { get }
    /// True once (then false) when the card has just left the field or slot but will be
    /// presented again: the current power-on is over, the card stays.
    func takeSessionLoss() -> Bool
}

extension InProcessCard {
    public var hasLeft: Bool { false }
    public var magneticStripe: MagneticStripe? { nil }
    public func takeSessionLoss() -> Bool { false }
}

/// An in-process card sitting in a reader: it stays until removed; each power-on starts a new
/// session, so a channel from an earlier one throws, as over vpcd.
final class InProcessSlot: CardSessions, @unchecked Sendable {
    // Unchecked: every mutable field is guarded by `lock`, which is also held across the card's
    // answer so two callers' exchanges never interleave.
    let card: any InProcessCard
    let readerName: String
    private let lock = NSLock()
    private var removed = false
    private var session: UInt64 = 0
    private var powered = false
    /// A power-on the card walked away from (and will come back after): its channel reads as removed.
    private var lostSession: UInt64? = nil
    /// Told when the card leaves by itself, so the reader can report the removal.
    var onLeft: (@Sendable () -> Void)?

    init(card: any InProcessCard, readerName: String) {
        self.card = card
        self.readerName = readerName
    }

    var isRemoved: Bool { lock.withLock { removed } }

    /// Marks the card gone; a blocked caller cannot exist (answers are synchronous), later ones throw.
    func remove() {
        lock.withLock {
            removed = true
            if powered { card.powerOff() }
            powered = false
        }
    }

    func powerOn() throws(CardIOError) -> (session: UInt64, atr: [UInt8]) {
        try withLiveCard { () -> (UInt64, [UInt8]) in
            session += 1
            powered = true
            return (session, card.powerOn(warm: false))
        }
    }

    func transmit(_ command: [UInt8], session expected: UInt64) throws(CardIOError) -> [UInt8] {
        let (response, left) = try withLiveCard(session: expected) { () -> ([UInt8], Bool) in
            let response = card.respond(to: command)
            if card.takeSessionLoss() {
                powered = false
                lostSession = session
            }
            guard card.hasLeft else { return (response, false) }
            removed = true
            powered = false
            return (response, true)
        }
        if left { onLeft?() }
        return response
    }

    func reset(session expected: UInt64) throws(CardIOError) -> [UInt8] {
        try withLiveCard(session: expected) { card.powerOn(warm: true) }
    }

    func powerOff(session expected: UInt64) {
        let left = lock.withLock { () -> Bool in
            guard !removed, powered, session == expected else { return false }
            powered = false
            card.powerOff()
            // A tap or a swipe is over when the card is powered off: it leaves unless presented again.
            guard card.hasLeft else { return false }
            removed = true
            return true
        }
        if left { onLeft?() }
    }

    private func withLiveCard<T>(session expected: UInt64? = nil, _ body: () -> T) throws(CardIOError) -> T {
        lock.lock()
        defer { lock.unlock() }
        guard !removed else { throw .cardRemoved(reader: readerName) }
        if let expected {
            if lostSession == expected { throw .cardRemoved(reader: readerName) }
            guard powered, session == expected else {
                throw .io(reader: readerName, detail: "the card was powered off or reconnected; this channel is stale")
            }
        }
        return body()
    }
}
