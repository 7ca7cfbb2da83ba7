import EMV

/// The T=1 block protocol (ISO 7816-3 §11, EMV Book 1 §9.2.4) and its transport of C-APDUs
/// (§12.3): I-blocks chained both ways, R-block acknowledgements, S-blocks for IFS, WTX, ABORT
/// and RESYNCH, the LRC or CRC, and recovery from bad, lost and silent blocks.
///
/// Recovery follows ISO 7816-3 §11.6.3: a block received with a bad EDC, a parity error, a bad
/// structure or a sequence number out of turn, and a block that never came within BWT, are
/// answered with an R-block asking for the expected block (or with the last R-block or S
/// request again, when that was what went unanswered). A block goes at most three times; after
/// the third failure the terminal sends S(RESYNCH request) up to three times, and when the card
/// answers, both sides restart at N(S) = 0 and the APDU is sent again from its first block. A
/// second failure streak in the same APDU is an error.
///
/// Not thread-safe: one caller drives a transport, as an EMV kernel drives one channel.
public final class T1Transport {
    /// Information field size of the card: the most the terminal puts in one I-block.
    public private(set) var ifsc: Int
    /// Information field size of the terminal: the most the card may put in one I-block.
    /// 32 until `negotiateIFSD(_:)` raises it.
    public private(set) var ifsd: Int = 32
    /// The error detection code on every block.
    public let edc: ISO7816.EDC
    /// How long the card may take to start a block after ours (EMV's tolerance included, slack not).
    public let blockWaitingTime: Duration
    /// How long the card may leave between two characters of one block.
    public let characterWaitingTime: Duration
    /// Added to every wait.
    public var slack: Duration { io.slack }
    /// The guard waits so far (see `GuardedLine`).
    public var guardWaited: Duration { io.waited }

    /// A block is transmitted at most this many times before the terminal resynchronises.
    public static let maximumTransmissions = 3

    private let io: GuardedLine
    private let initialIFSC: Int
    /// N(S) of the terminal's next I-block.
    private var ns: UInt8 = 0
    /// N(S) the card's next I-block must carry.
    private var nr: UInt8 = 0
    private var brokenBy: String?

    /// A transport with explicit parameters.
    /// - Parameters:
    ///   - ifsc: the card's information field size, 1 to 254 (32 by default, TA3 otherwise).
    ///   - guardTime: the block guard time, between the card's last character and our first (22 etu).
    ///   - slack: added to every wait (`ISO7816.defaultSlack`).
    public init(line: any CardLine, ifsc: Int = 32, edc: ISO7816.EDC = .lrc,
                blockWaitingTime: Duration, characterWaitingTime: Duration,
                guardTime: Duration = .zero, slack: Duration = ISO7816.defaultSlack) {
        precondition((1...254).contains(ifsc), "IFSC is 1 to 254")
        self.ifsc = ifsc
        self.initialIFSC = ifsc
        self.edc = edc
        self.blockWaitingTime = blockWaitingTime
        self.characterWaitingTime = characterWaitingTime
        self.io = GuardedLine(line, slack: slack, guardTime: guardTime)
    }

    /// A transport with the parameters `atr` gives for T=1: IFSC from TA3 (32 when absent or
    /// RFU), BWI and CWI from TB3, the EDC from TC3.
    ///
    /// BWT = 11 etu + 2^BWI · 960 · 372 / f, plus the D · 960 etu EMV tolerates; CWT = (11 +
    /// 2^CWI) etu, plus 4 etu (ISO 7816-3 §11.4.3, EMV Book 1 §9.2.4.2.2). 1/f comes from the etu
    /// and the rate in use (etu = F / (D · f)).
    /// - Parameters:
    ///   - line: the line, already wrapped for the ATR's convention (`ISO7816.line(_:for:)`).
    ///   - etu: 1 / baud rate, at the current rate.
    ///   - rate: F and D the line runs at.
    public convenience init(line: any CardLine, atr: ATR, etu: Duration, rate: ISO7816.Rate = .default,
                            slack: Duration = ISO7816.defaultSlack) {
        let ifsc = (1...254).contains(atr.ifsc) ? atr.ifsc : 32
        let bwt = etu * 11 + etu * ((1 << atr.bwi) * 960 * 372 * rate.d) / rate.f + etu * (960 * rate.d)
        let cwt = etu * (11 + (1 << atr.cwi)) + etu * 4
        self.init(line: line, ifsc: ifsc, edc: ISO7816.EDC(atr: atr), blockWaitingTime: bwt,
                  characterWaitingTime: cwt, guardTime: etu * (22 - ISO7816.receiveTimeInETU), slack: slack)
    }

    // MARK: - IFSD

    /// Tells the card the terminal accepts I-blocks of up to `ifsd` bytes: S(IFS request) with
    /// INF = `ifsd`, answered by S(IFS response) with the same byte (EMV Book 1 §9.2.4.3: a
    /// terminal sends it with 254 right after the ATR). Sent at most three times.
    /// - Throws: `.timeout` when the card never answers, `.protocolError` when it answers
    ///   wrongly three times; the transport is then unusable.
    public func negotiateIFSD(_ ifsd: Int = 254) throws(CardIOError) {
        guard (1...254).contains(ifsd) else {
            throw .io(reader: io.readerName, detail: "IFSD must be 1 to 254, got \(ifsd); nothing was sent")
        }
        try usable()
        do {
            try supervisoryExchange(.ifs, [UInt8(ifsd)])
            self.ifsd = ifsd
        } catch {
            brokenBy = error.description
            throw error
        }
    }

    // MARK: - APDUs

    /// Sends a C-APDU (any case, short or extended: T=1 carries it unchanged) and returns the
    /// card's data ‖ SW1 SW2.
    /// - Throws: `.io` for an APDU shorter than 4 bytes (nothing is sent); `.timeout` when the
    ///   card stays silent through the retransmissions and the resynchronisation;
    ///   `.protocolError` when its blocks stay wrong, it aborts the chain, or its response
    ///   lacks SW1 SW2; `.cardRemoved`. After any error other than `.io` the transport refuses
    ///   further APDUs: reset the card.
    public func transmit(_ apdu: [UInt8]) throws(CardIOError) -> [UInt8] {
        guard apdu.count >= 4 else {
            throw .io(reader: io.readerName, detail: "a C-APDU is at least 4 bytes (CLA INS P1 P2), got \(apdu.count); nothing was sent")
        }
        try usable()
        // A late duplicate of an earlier block would read as the answer to this one.
        io.discardInput()
        do throws(CardIOError) {
            let response = try exchange(apdu)
            guard response.count >= 2 else {
                throw .protocolError(reader: io.readerName, detail: "T=1 response of \(response.count) byte\(response.count == 1 ? "" : "s") has no SW1 SW2")
            }
            return response
        } catch {
            brokenBy = error.description
            throw error
        }
    }

    private func usable() throws(CardIOError) {
        if let brokenBy {
            throw .protocolError(reader: io.readerName, detail: "T=1 exchange left in an unknown state by an earlier error (\(brokenBy)); reset the card")
        }
    }

    /// Why an attempt gave up: the last problem seen, and whether it was the card's silence.
    private struct Streak {
        let reason: String
        let silent: Bool
    }

    private func exchange(_ apdu: [UInt8]) throws(CardIOError) -> [UInt8] {
        switch try attempt(apdu) {
        case .success(let response):
            return response
        case .failure(let streak):
            try resynchronise(after: streak)
            switch try attempt(apdu) {
            case .success(let response):
                return response
            case .failure(let again):
                throw failure(again, "after a resynchronisation")
            }
        }
    }

    private func failure(_ streak: Streak, _ context: String) -> CardIOError {
        if streak.silent {
            return .timeout(reader: io.readerName, seconds: (blockWaitingTime + io.slack).seconds)
        }
        return .protocolError(reader: io.readerName, detail: "T=1 block still wrong after \(Self.maximumTransmissions) transmissions \(context): \(streak.reason)")
    }

    private enum Attempt {
        case success([UInt8])
        case failure(Streak)
    }

    /// One run of the APDU through the block protocol, from its first I-block to the card's last.
    private func attempt(_ apdu: [UInt8]) throws(CardIOError) -> Attempt {
        var offset = 0
        var chunk = min(ifsc, apdu.count)
        var lastI = T1Block.information(sequence: ns, more: chunk < apdu.count, Array(apdu[0..<chunk]))
        var lastSent = lastI
        var sending = true
        var response: [UInt8] = []
        var failures = 0
        var multiplier = 1
        try send(lastI)

        while true {
            let received = try receive(waiting: blockWaitingTime * multiplier)
            multiplier = 1
            var problem: (code: UInt8, reason: String, silent: Bool)?
            var retransmit: T1Block?

            switch received {
            case .silence:
                problem = (2, "no block within \(CardIOError.format((blockWaitingTime + io.slack).seconds)) s (BWT) after \(lastSent)", true)
            case .invalid(let code, let reason):
                problem = (code, reason, false)
            case .block(let block):
                switch block.kind {
                case .information(let sequence, let more)?:
                    guard !sending || offset + chunk == apdu.count else {
                        problem = (2, "\(block) while the terminal's chain was not finished (an R-block was due)", false)
                        break
                    }
                    guard sequence == nr else {
                        problem = (2, "\(block) carries N(S)=\(sequence), expected \(nr)", false)
                        break
                    }
                    if sending {
                        // The card's first I-block acknowledges our last one.
                        ns ^= 1
                        sending = false
                    }
                    nr ^= 1
                    failures = 0
                    response += block.info
                    guard response.count <= 65_538 else {
                        throw .protocolError(reader: io.readerName, detail: "T=1 response chain longer than 65,538 bytes (65,536 data bytes and SW1 SW2)")
                    }
                    guard more else { return .success(response) }
                    lastSent = .receiveReady(sequence: nr)
                    try send(lastSent)
                    continue
                case .receiveReady(let sequence, _)?:
                    if sending && lastI.pcb & 0x20 != 0 && sequence != ns {
                        // Acknowledges the chained block: on with the next one.
                        ns ^= 1
                        offset += chunk
                        chunk = min(ifsc, apdu.count - offset)
                        lastI = .information(sequence: ns, more: offset + chunk < apdu.count,
                                             Array(apdu[offset..<offset + chunk]))
                        lastSent = lastI
                        failures = 0
                        try send(lastI)
                        continue
                    }
                    if sending && sequence == ns {
                        retransmit = lastI
                        problem = (0, "the card asked for \(lastI) again", false)
                    } else {
                        retransmit = lastSent
                        problem = (0, "\(block) acknowledges nothing after \(lastSent)", false)
                    }
                case .supervisory(let type, false)?:
                    switch type {
                    case .wtx:
                        multiplier = max(1, Int(block.info[0]))
                        lastSent = .supervisory(.wtx, response: true, block.info)
                        try send(lastSent)
                        continue
                    case .ifs:
                        let size = Int(block.info[0])
                        guard (1...254).contains(size) else {
                            problem = (2, "S(IFS request) with IFSC \(size), which must be 1 to 254", false)
                            break
                        }
                        ifsc = size
                        lastSent = .supervisory(.ifs, response: true, block.info)
                        try send(lastSent)
                        continue
                    case .abort:
                        try send(.supervisory(.abort, response: true))
                        throw .protocolError(reader: io.readerName, detail: "the card aborted the T=1 chain with S(ABORT request)")
                    case .resynch:
                        problem = (2, "the card sent S(RESYNCH request), which only the terminal may send", false)
                    }
                case .supervisory?:
                    problem = (2, "unexpected \(block)", false)
                case nil:
                    problem = (2, "\(block) codes no block", false)
                }
            }

            guard let problem else { continue }
            failures += 1
            if failures >= Self.maximumTransmissions {
                return .failure(Streak(reason: problem.reason, silent: problem.silent))
            }
            if let retransmit {
                lastSent = retransmit
                try send(retransmit)
            } else if case .receiveReady? = lastSent.kind {
                try send(lastSent)
            } else {
                lastSent = .receiveReady(sequence: nr, error: problem.code)
                try send(lastSent)
            }
        }
    }

    /// S(RESYNCH request) up to three times; on S(RESYNCH response) both sides start again at
    /// N(S) = 0 with the initial IFSC and IFSD 32, and a larger IFSD is negotiated again.
    private func resynchronise(after streak: Streak) throws(CardIOError) {
        do {
            try supervisoryExchange(.resynch, [])
        } catch .timeout {
            throw failure(streak, "and no answer to S(RESYNCH request)")
        } catch .protocolError(_, let detail) {
            throw .protocolError(reader: io.readerName, detail: "T=1 block still wrong after \(Self.maximumTransmissions) transmissions (\(streak.reason)), and resynchronisation failed: \(detail)")
        }
        ns = 0
        nr = 0
        ifsc = initialIFSC
        let negotiated = ifsd
        ifsd = 32
        if negotiated != 32 {
            try supervisoryExchange(.ifs, [UInt8(negotiated)])
            ifsd = negotiated
        }
    }

    /// Sends S(`type` request) with `info` until the matching response comes, at most three times;
    /// answers the card's WTX requests meanwhile.
    private func supervisoryExchange(_ type: T1Block.SupervisoryType, _ info: [UInt8]) throws(CardIOError) {
        let request = T1Block.supervisory(type, response: false, info)
        var multiplier = 1
        var transmissions = 1
        var lastProblem = ""
        var silent = false
        try send(request)
        while true {
            let received = try receive(waiting: blockWaitingTime * multiplier)
            multiplier = 1
            switch received {
            case .block(let block) where block.kind == .supervisory(type, response: true):
                guard block.info == info else {
                    lastProblem = "\(block) does not echo \(Hex.encode(info))"
                    silent = false
                    break
                }
                return
            case .block(let block) where block.kind == .supervisory(.wtx, response: false):
                multiplier = max(1, Int(block.info[0]))
                try send(.supervisory(.wtx, response: true, block.info))
                continue
            case .block(let block):
                lastProblem = "\(block) instead of S(\(type) response)"
                silent = false
            case .invalid(_, let reason):
                lastProblem = reason
                silent = false
            case .silence:
                lastProblem = "no S(\(type) response) within \(CardIOError.format((blockWaitingTime + io.slack).seconds)) s (BWT)"
                silent = true
            }
            guard transmissions < Self.maximumTransmissions else {
                if silent { throw .timeout(reader: io.readerName, seconds: (blockWaitingTime + io.slack).seconds) }
                throw .protocolError(reader: io.readerName, detail: "S(\(type) request) sent \(transmissions) times without a valid answer: \(lastProblem)")
            }
            transmissions += 1
            try send(request)
        }
    }

    // MARK: - Blocks on the line

    private func send(_ block: T1Block) throws(CardIOError) {
        try io.write(block.encoded(edc))
    }

    private func receive(waiting: Duration) throws(CardIOError) -> T1Block.Received {
        try T1Block.receive(from: io, edc: edc, maximumInfo: ifsd, blockWaitingTime: waiting,
                            characterWaitingTime: characterWaitingTime)
    }
}
