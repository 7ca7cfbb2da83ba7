import Foundation

/// A card line with the two timing rules both transports share: every wait gets the slack, and
/// the terminal leaves the guard time between the card's last character and its own first one
/// (16 etu for T=0, ISO 7816-3 §7.2; the block guard time of 22 etu for T=1, §11.2).
///
/// Those guard times run between the characters' leading edges, and a UART hands a character
/// over no earlier than 10 etu after its leading edge (start bit, 8 data bits, parity), so the
/// wait after a read returns is the guard time less `ISO7816.receiveTime`.
final class GuardedLine {
    let line: any CardLine
    let slack: Duration
    /// The wait after a character is read before the next one is written.
    let guardTime: Duration
    private var lastReceived: ContinuousClock.Instant?
    /// All the guard waits so far: line time a real line spends too, kept apart from the host's
    /// own time by `cardbench bench serial`.
    private(set) var waited: Duration = .zero

    init(_ line: any CardLine, slack: Duration, guardTime: Duration) {
        self.line = line
        self.slack = slack
        self.guardTime = guardTime
    }

    var readerName: String { line.readerName }

    func write(_ bytes: [UInt8]) throws(CardIOError) {
        if let lastReceived {
            let due = lastReceived + guardTime
            let now = ContinuousClock.now
            if due > now {
                // What the rule asks for is line time; a sleep's overshoot is the host's, and
                // Linux lets a sleep run 50 µs late by default (timer slack): sleep until just
                // before, then spin the rest.
                let early = due - .microseconds(100)
                if early > now { Thread.sleep(forTimeInterval: (early - now).seconds) }
                while ContinuousClock.now < due {}
                waited += due - now
            }
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
