import EMV

/// The T=0 character protocol (ISO 7816-3 §10) and its transport of short C-APDUs (ISO 7816-3
/// §12.2, EMV Book 1 §9.3.1 and Annex A): procedure bytes, NULL, GET RESPONSE after 61xx,
/// re-issue after 6Cxx, the case 4 warning rule, and the work waiting time on every character.
///
/// Not thread-safe: one caller drives a transport, as an EMV kernel drives one channel.
public final class T0Transport {
    /// The work waiting time: the longest the card may leave between two characters it sends,
    /// or between our last character and its first (EMV's tolerance included, slack not).
    public let workWaitingTime: Duration
    /// Added to every wait.
    public var slack: Duration { io.slack }
    /// The guard waits so far (see `GuardedLine`).
    public var guardWaited: Duration { io.waited }

    private let io: GuardedLine
    private var brokenBy: String?

    /// A transport with explicit timings.
    /// - Parameters:
    ///   - workWaitingTime: the WWT.
    ///   - guardTime: the pause between the card's last character and the terminal's first (16 etu).
    ///   - slack: added to every wait (`ISO7816.defaultSlack`).
    public init(line: any CardLine, workWaitingTime: Duration, guardTime: Duration = .zero,
                slack: Duration = ISO7816.defaultSlack) {
        self.workWaitingTime = workWaitingTime
        self.io = GuardedLine(line, slack: slack, guardTime: guardTime)
    }

    /// A transport with the timings of `atr` at the line's current etu.
    ///
    /// WWT = 960 · WI · Fi / f (ISO 7816-3 §10.2) with WI from TC2, plus the D · 480 etu EMV
    /// tolerates (EMV Book 1 §9.2.2.1). 1/f is derived from the etu and the rate the line runs
    /// at (etu = F / (D · f)), so the caller only says what it knows: the baud rate and whether
    /// PPS moved to the ATR's Fi/Di.
    /// - Parameters:
    ///   - line: the line, already wrapped for the ATR's convention (`ISO7816.line(_:for:)`).
    ///   - etu: 1 / baud rate, at the current rate.
    ///   - rate: F and D the line runs at: `.default` unless PPS succeeded or the card is in
    ///     specific mode.
    public convenience init(line: any CardLine, atr: ATR, etu: Duration, rate: ISO7816.Rate = .default,
                            slack: Duration = ISO7816.defaultSlack) {
        let fi = atr.fi ?? 372
        let wi = max(atr.waitingIntegerWI, 1)
        let wwt = etu * (960 * wi * fi * rate.d) / rate.f + etu * (480 * rate.d)
        self.init(line: line, workWaitingTime: wwt, guardTime: etu * (16 - ISO7816.receiveTimeInETU), slack: slack)
    }

    /// Sends a short C-APDU (cases 1 to 4) and returns data ‖ SW1 SW2.
    ///
    /// Case 1 goes as CLA INS P1 P2 00, case 2 with P3 = Le, cases 3 and 4 with P3 = Lc and the
    /// data after the card's acknowledgement. 61xx is followed by GET RESPONSE (CLA 00, P3 = xx)
    /// until the card stops asking, the data gathered in order; 6Cxx after case 2 re-issues the
    /// command with P3 = xx once (keeping at most Le bytes, ISO 7816-4 Annex A); a case 4
    /// command answered with a warning (62xx, 63xx, or 9xxx other than 9000) and no data gets
    /// GET RESPONSE with Le = 00 and returns its data with the warning (EMV Book 1 §9.3.1.4).
    /// - Throws: `.io` for a malformed or extended-length APDU (nothing is sent); `.timeout`
    ///   when the card leaves more than the WWT between characters; `.protocolError` for a
    ///   procedure byte that is neither NULL, INS, ~INS nor SW1; `.cardRemoved`. After any error
    ///   other than `.io` the transport refuses further APDUs: reset the card.
    public func transmit(_ apdu: [UInt8]) throws(CardIOError) -> [UInt8] {
        if let brokenBy {
            throw .protocolError(reader: io.readerName, detail: "T=0 exchange left in an unknown state by an earlier error (\(brokenBy)); reset the card")
        }
        let command: CommandAPDU
        do {
            command = try CommandAPDU(bytes: apdu)
        } catch {
            throw .io(reader: io.readerName, detail: "T=0 carries short APDUs only: \(error.description); nothing was sent")
        }
        // A late byte from an earlier exchange would read as a procedure byte.
        io.discardInput()
        do {
            return try exchange(command)
        } catch {
            brokenBy = error.description
            io.discardInput()
            throw error
        }
    }

    private func exchange(_ command: CommandAPDU) throws(CardIOError) -> [UInt8] {
        try T0Exchange.exchange(command, reader: io.readerName) { (header, p3, outgoing, incoming) throws(CardIOError) in
            let (data, sw) = try tpdu(header, p3: p3, send: outgoing, receive: incoming)
            return (data, sw)
        }
    }

    /// One command TPDU: the header with P3, then procedure bytes until SW1 SW2, sending
    /// `send` or receiving `receive` bytes as the acknowledgements allow.
    private func tpdu(_ header: [UInt8], p3: UInt8, send outgoing: [UInt8], receive incoming: Int) throws(CardIOError) -> ([UInt8], (UInt8, UInt8)) {
        let ins = header[1]
        try io.write(header + [p3])
        var sent = 0
        var received: [UInt8] = []
        while true {
            let procedure = try readByte()
            switch procedure {
            case 0x60:
                continue
            case ins:
                if sent < outgoing.count {
                    try io.write(Array(outgoing[sent...]))
                    sent = outgoing.count
                } else {
                    while received.count < incoming {
                        received.append(try readByte())
                    }
                }
            case ins ^ 0xFF:
                if sent < outgoing.count {
                    try io.write([outgoing[sent]])
                    sent += 1
                } else if received.count < incoming {
                    received.append(try readByte())
                }
            case let sw1 where sw1 & 0xF0 == 0x60 || sw1 & 0xF0 == 0x90:
                let sw2 = try readByte()
                return (received, (sw1, sw2))
            default:
                throw .protocolError(reader: io.readerName, detail: "T=0 procedure byte \(ISO7816.hex(procedure)) after \(Hex.encode(header + [p3])) is none of NULL 60, INS \(ISO7816.hex(ins)), ~INS \(ISO7816.hex(ins ^ 0xFF)), 6x or 9x")
            }
        }
    }

    private func readByte() throws(CardIOError) -> UInt8 {
        do {
            return try io.read(within: workWaitingTime)
        } catch .timeout {
            throw .timeout(reader: io.readerName, seconds: (workWaitingTime + io.slack).seconds)
        }
    }
}
