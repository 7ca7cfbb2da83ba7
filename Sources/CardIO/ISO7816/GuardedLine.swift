import Foundation

/// A card line with the two timing rules both transports share: every wait gets the slack, and
/// the terminal leaves the guard time between the card's last character and its own first one
/// (16 etu for T=0, ISO 7816-3 §7.2; the block guard time of 22 etu for T=1, §11.2).
final class GuardedLine {
    let line: any CardLine
    let slack: Duration
    let guardTime: Duration
    private var lastReceived: ContinuousClock.Instant?

    init(_ line: any CardLine, slack: Duration, guardTime: Duration) {
        self.line = line
        self.slack = slack
        self.guardTime = guardTime
    }

    var readerName: String { line.readerName }

    func write(_ bytes: [UInt8]) throws(CardIOError) {
        // Measured from when the read returned, which is after the character's leading edge:
        // waiting the full guard time from there errs on the safe side.
        if let lastReceived {
            let due = lastReceived + guardTime
            let now = ContinuousClock.now
            if due > now { Thread.sleep(forTimeInterval: (due - now).seconds) }
            self.lastReceived = nil
        }
        try line.write(bytes)
    }

    /// Reads one byte the card must send within `within`; the slack is added here.
    func read(within: Duration) throws(CardIOError) -> UInt8 {
        let byte = try line.read(timeout: within + slack)
        lastReceived = .now
        return byte
    }

    func discardInput() { line.discardInput() }

    /// Starts the guard time now, for a first write that follows bytes read elsewhere (the ATR).
    func noteReceived() { lastReceived = .now }
}
