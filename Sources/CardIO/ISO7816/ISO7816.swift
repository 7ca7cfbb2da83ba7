import EMV

/// ISO/IEC 7816-3 over a `CardLine`: the answer to reset, the inverse convention, PPS and the
/// timings the T=0 and T=1 transports derive from the ATR. See docs/iso7816.md.
public enum ISO7816 {
    /// Added to every timeout the protocols compute. A pty or a USB-serial bridge delivers bytes
    /// in bursts and a loaded test machine schedules threads late; a waiting time of a few etu
    /// would otherwise fire before a byte that the card sent in time has reached us.
    public static let defaultSlack: Duration = .milliseconds(200)

    /// The baud rate every card starts at with the usual 3.5712 MHz clock (F = 372, D = 1).
    public static let initialBaudRate = 9600

    /// How long after a character's leading edge a UART hands it over, at the earliest: start
    /// bit, 8 data bits and parity. Guard times count from leading edges; a terminal that starts
    /// counting when its read returns takes this much off.
    public static let receiveTimeInETU = 10

    /// One elementary time unit at `baudRate` bits per second.
    public static func etu(baudRate: Int) -> Duration {
        precondition(baudRate > 0, "a baud rate is positive")
        return .seconds(1) / baudRate
    }

    /// How long to wait for each character of the ATR, TS included, and for a PPS answer:
    /// the initial waiting time of 9,600 etu (ISO 7816-3 §8.2, §10.2 with WI = 10) plus the
    /// 480 etu EMV lets a terminal add (EMV Book 1 §8.2: a terminal accepts characters up to
    /// 10,080 etu apart).
    public static func initialWaitingTime(etu: Duration) -> Duration {
        etu * 10_080
    }

    // MARK: - Rates

    /// The clock-rate conversion factor F and the baud-rate adjustment factor D the line runs at:
    /// `default` (372, 1) after reset, the ATR's Fi/Di after a successful PPS or in specific mode.
    public struct Rate: Sendable, Hashable, CustomStringConvertible {
        /// F, in clock cycles.
        public let f: Int
        /// D.
        public let d: Int

        /// Makes a rate; both factors are positive.
        public init(f: Int, d: Int) {
            precondition(f > 0 && d > 0, "F and D are positive")
            self.f = f
            self.d = d
        }

        /// Fd = 372, Dd = 1: the rate of the ATR and of every card that did not negotiate.
        public static let `default` = Rate(f: 372, d: 1)

        /// The ATR's Fi and Di (TA1), or nil when TA1 codes an RFU value.
        public static func fromTA1(of atr: ATR) -> Rate? {
            guard let f = atr.fi, let d = atr.di else { return nil }
            return Rate(f: f, d: d)
        }

        /// The baud rate this rate gives with a card clock of `clockHz` (f · D / F).
        public func baudRate(clockHz: Int) -> Int { clockHz * d / f }

        public var description: String { "F=\(f) D=\(d)" }
    }

    /// The TA1 to propose in a PPS request, or nil when PPS has nothing to gain: TA1 absent or
    /// already the default 11, RFU codes, or a card in specific mode (TA2 present), which runs at
    /// its TA1 (or implicit) rate without negotiation.
    public static func proposedTA1(for atr: ATR) -> UInt8? {
        guard let ta1 = atr.ta1, ta1 != 0x11, atr.specificMode == nil, Rate.fromTA1(of: atr) != nil else {
            return nil
        }
        return ta1
    }

    /// The first protocol the ATR offers, as a PPS request names it (T=0 when only T=0 is offered).
    public static func preferredProtocol(of atr: ATR) -> Int {
        atr.specificMode?.protocol ?? atr.protocols.first ?? 0
    }

    // MARK: - Inverse convention

    /// A byte as the other convention sees it: bits complemented and their order reversed
    /// (ISO 7816-3 §8.1). Its own inverse, so the same table encodes and decodes.
    public static func inverse(_ byte: UInt8) -> UInt8 { inverseTable[Int(byte)] }

    private static let inverseTable: [UInt8] = (0..<256).map { value in
        var reversed: UInt8 = 0
        for bit in 0..<8 where value & (1 << bit) != 0 {
            reversed |= 0x80 >> bit
        }
        return ~reversed
    }

    /// `line` as the protocols should use it once the ATR has shown `convention`.
    public static func line(_ line: any CardLine, for convention: ATR.Convention) -> any CardLine {
        switch convention {
        case .direct: line
        case .inverse: ConventionLine(line, convention: .inverse)
        }
    }

    // MARK: - Answer to reset

    /// Reads the answer to reset the card sends after the caller reset it.
    ///
    /// TS decides the convention: 3B is the direct convention; 03 is what a direct-convention
    /// UART reads of an inverse-convention card's 3F. (The parity bit of every inverse character
    /// also reads inverted, so a UART set to even parity reports parity errors until it is set to
    /// odd parity; the serial layer must not drop such bytes while reading the ATR.) Then exactly
    /// the characters that T0 and the TDi announce are read — interface bytes, K historical
    /// bytes, TCK when a protocol other than T=0 is indicated — and nothing more, so the line is
    /// left at the first byte after the ATR.
    /// - Parameters:
    ///   - initialWaitingTime: how long to wait for TS and then for each further character;
    ///     `initialWaitingTime(etu:)` at the reset baud rate.
    ///   - slack: added to each wait (`defaultSlack`).
    /// - Throws: `.timeout` when TS never comes; `.protocolError` for a bad TS, an ATR cut short
    ///   (the card went silent), one longer than 33 bytes, a wrong TCK or any other breach
    ///   `ATR.parse` reports; `.cardRemoved` when the line closes.
    public static func readATR(from line: any CardLine, initialWaitingTime: Duration,
                               slack: Duration = defaultSlack) throws(CardIOError) -> (atr: ATR, convention: ATR.Convention) {
        let wait = initialWaitingTime + slack
        let rawTS = try line.read(timeout: wait)
        let convention: ATR.Convention
        switch rawTS {
        case 0x3B: convention = .direct
        case 0x03: convention = .inverse
        default:
            throw .protocolError(reader: line.readerName, detail: "TS must read 3B (direct convention) or 03 (inverse convention, 3F decoded), got \(hex(rawTS)); check the UART settings (8 data bits, parity, 2 stop bits) and the baud rate")
        }
        let inverted = convention == .inverse
        func decode(_ byte: UInt8) -> UInt8 { inverted ? inverse(byte) : byte }
        var bytes: [UInt8] = [decode(rawTS)]

        func next(_ what: @autoclosure () -> String) throws(CardIOError) -> UInt8 {
            guard bytes.count < ATR.maximumLength else {
                throw .protocolError(reader: line.readerName, detail: "ATR too long: \(what()) would be byte \(bytes.count + 1), but an ATR is at most \(ATR.maximumLength) bytes (TS + 32): \(Hex.encode(bytes))")
            }
            do {
                let byte = decode(try line.read(timeout: wait))
                bytes.append(byte)
                return byte
            } catch .timeout {
                throw .protocolError(reader: line.readerName, detail: "ATR truncated: the card went silent for more than \(CardIOError.format(wait.seconds)) s after \(bytes.count) byte\(bytes.count == 1 ? "" : "s") (\(Hex.encode(bytes))) while \(what()) was due")
            }
        }

        let t0 = try next("T0")
        var y = t0 >> 4
        var group = 1
        var needsTCK = false
        while true {
            var td: UInt8? = nil
            for (bit, name) in [(UInt8(0x1), "TA"), (0x2, "TB"), (0x4, "TC"), (0x8, "TD")] where y & bit != 0 {
                let value = try next("\(name)\(group)")
                if bit == 0x8 { td = value }
            }
            guard let td else { break }
            if td & 0x0F != 0 { needsTCK = true }
            y = td >> 4
            group += 1
        }
        for i in 0..<Int(t0 & 0x0F) {
            _ = try next("historical byte \(i + 1) of \(t0 & 0x0F)")
        }
        if needsTCK { _ = try next("TCK") }

        do {
            let atr = try ATR.parse(bytes)
            return (atr, convention)
        } catch {
            throw .protocolError(reader: line.readerName, detail: "\(error.description) (\(Hex.encode(bytes)))")
        }
    }

    // MARK: - PPS

    /// Asks the card to run protocol `protocol` at the rate `ta1` codes (ISO 7816-3 §9): sends
    /// PPSS FF, PPS0 (PPS1 present, T), PPS1 = `ta1` and PCK, and checks the card's answer.
    ///
    /// Returns true when the card echoed PPS1, so the caller must now switch the line to the
    /// rate of `ta1`; false when the card answered without PPS1, accepting the protocol at the
    /// default rate (Fd = 372, Dd = 1), so the caller keeps the current baud rate.
    /// - Parameters:
    ///   - waitingTime: the wait for each character of the answer, `initialWaitingTime(etu:)`.
    ///   - guardTime: the pause before the request: 16 etu after the ATR's last character
    ///     (ISO 7816-3 §7.2), 1.7 ms at 9600 baud.
    ///   - slack: added to each wait.
    /// - Throws: `.timeout` when the card does not answer at all (ISO 7816-3 §9.1: a card that
    ///   does not support PPS stays silent; reset it and continue at the default rate);
    ///   `.protocolError` for an answer that is cut short, has a wrong PCK, names another
    ///   protocol, another PPS1, or PPS2/PPS3 that were not asked for.
    public static func negotiatePPS(line: any CardLine, protocol t: Int, ta1: UInt8,
                                    waitingTime: Duration = initialWaitingTime(etu: etu(baudRate: initialBaudRate)),
                                    guardTime: Duration = etu(baudRate: initialBaudRate) * (16 - receiveTimeInETU),
                                    slack: Duration = defaultSlack) throws(CardIOError) -> Bool {
        guard (0...14).contains(t) else {
            throw .io(reader: line.readerName, detail: "PPS names a protocol T=0 to T=14, got T=\(t); nothing was sent")
        }
        var request: [UInt8] = [0xFF, 0x10 | UInt8(t), ta1]
        request.append(request.reduce(0, ^))
        let io = GuardedLine(line, slack: slack, guardTime: guardTime)
        io.noteReceived()
        try io.write(request)

        let wait = waitingTime + slack
        var answer: [UInt8] = []
        func next(_ what: String) throws(CardIOError) -> UInt8 {
            do {
                let byte = try line.read(timeout: wait)
                answer.append(byte)
                return byte
            } catch .timeout where !answer.isEmpty {
                throw .protocolError(reader: line.readerName, detail: "PPS answer truncated after \(Hex.encode(answer)): \(what) did not come within \(CardIOError.format(wait.seconds)) s (request \(Hex.encode(request)))")
            }
        }
        func refuse(_ rule: String) -> CardIOError {
            .protocolError(reader: line.readerName, detail: "PPS answer \(Hex.encode(answer)) to \(Hex.encode(request)): \(rule)")
        }

        let ppss = try next("PPSS")
        guard ppss == 0xFF else {
            line.discardInput()
            throw refuse("PPSS must be FF")
        }
        let pps0 = try next("PPS0")
        var pps1: UInt8? = nil
        if pps0 & 0x10 != 0 { pps1 = try next("PPS1") }
        if pps0 & 0x20 != 0 { _ = try next("PPS2") }
        if pps0 & 0x40 != 0 { _ = try next("PPS3") }
        _ = try next("PCK")
        guard answer.reduce(0, ^) == 0 else {
            throw refuse("PCK must make the XOR of PPSS to PCK 00, it is \(hex(answer.reduce(0, ^)))")
        }
        guard Int(pps0 & 0x0F) == t else {
            throw refuse("PPS0 names T=\(pps0 & 0x0F) but T=\(t) was asked for")
        }
        guard pps0 & 0x60 == 0 else {
            throw refuse("PPS2 and PPS3 were not in the request, so they must be absent from the answer")
        }
        guard let pps1 else { return false }
        guard pps1 == ta1 else {
            throw refuse("PPS1 must echo the requested \(hex(ta1)) or be absent, got \(hex(pps1))")
        }
        return true
    }

    static func hex(_ byte: UInt8) -> String { Hex.encode([byte]) }
}

/// A line that applies the inverse convention both ways: the card's characters are decoded as
/// they are read and the terminal's encoded as they are written, so the protocols above deal in
/// logical bytes whatever TS said.
public final class ConventionLine: CardLine {
    /// The line as the UART sees it.
    public let base: any CardLine
    /// The convention applied; `.direct` passes bytes through.
    public let convention: ATR.Convention

    /// Wraps `base`, applying `convention`.
    public init(_ base: any CardLine, convention: ATR.Convention) {
        self.base = base
        self.convention = convention
    }

    public var readerName: String { base.readerName }

    public func write(_ bytes: [UInt8]) throws(CardIOError) {
        try base.write(convention == .inverse ? bytes.map(ISO7816.inverse) : bytes)
    }

    public func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        let byte = try base.read(timeout: timeout)
        return convention == .inverse ? ISO7816.inverse(byte) : byte
    }

    public func discardInput() { base.discardInput() }
}
