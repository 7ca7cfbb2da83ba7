import EMV
import Foundation

/// The card's end of a byte line, which a simulator can also hang up.
public protocol CardSideLine: CardLine, Sendable {
    /// Hangs the line up: the terminal's next read finds it gone, as when the card is pulled out.
    func close()
}

extension SocketLine: CardSideLine {}

/// A card speaking ISO 7816-3 byte by byte on its own thread, for tests and benchmarks of the
/// terminal side: it sends its ATR (T=0 or T=1, either convention, with or without TA1),
/// answers a PPS request, then serves APDUs through `respond` with T=0 procedure bytes or T=1
/// blocks, as configured; faults can be injected at any time (`inject(_:)`).
///
/// It behaves like a correct card: over T=0 it acknowledges with INS or byte by byte with ~INS,
/// may send NULL bytes first, answers 6Cxx when Le does not match a case 2 response, keeps a
/// case 4 response for GET RESPONSE behind 61xx (or behind a warning status, EMV's case 4
/// warning), and serves GET RESPONSE in chunks when told to. Over T=1 it chains to the IFSD the
/// terminal set, acknowledges chained blocks, asks for WTX when told to, retransmits what the
/// terminal's R-blocks ask for, and obeys S(IFS), S(RESYNCH) and S(ABORT).
public final class CardSimulator: @unchecked Sendable {
    // Unchecked: the configuration and `respond` never change; faults and records are inside
    // `Locked`; the protocol state lives in `run()` on the simulator's thread.

    /// How the card runs T=0.
    public struct T0Behaviour: Sendable {
        /// The procedure byte that lets the data flow.
        public enum Acknowledgement: Sendable {
            /// INS: all remaining data bytes at once.
            case ins
            /// ~INS before every single data byte.
            case complementedINS
        }

        /// How data is acknowledged.
        public var acknowledgement: Acknowledgement = .ins
        /// NULL bytes (60) sent before the first procedure byte after each header and before
        /// the status after incoming data.
        public var nullBytes = 0
        /// The pause before each of those NULL bytes.
        public var nullInterval: Duration = .zero
        /// The most one GET RESPONSE returns; the rest is announced with 61xx again.
        public var getResponseChunk = 256
        /// TC2, the waiting integer WI; nil leaves it out (WI = 10).
        public var waitingInteger: UInt8?
        /// The instructions whose P3 is Lc (data to the card); any other instruction's P3 is Le.
        public var dataInstructions: Set<UInt8> = CardSimulator.dataInstructions

        /// The default behaviour: INS acknowledgements, no NULL bytes, no chunking.
        public init() {}
    }

    /// How the card runs T=1.
    public struct T1Behaviour: Sendable {
        /// TA3, the card's IFSC: the terminal chains C-APDUs longer than this.
        public var ifsc: UInt8 = 254
        /// TC3's choice of error detection code.
        public var edc: ISO7816.EDC = .lrc
        /// TB3's block waiting integer.
        public var bwi: UInt8 = 4
        /// TB3's character waiting integer.
        public var cwi: UInt8 = 13
        /// When set, the card sends S(WTX request) with this multiplier before every response,
        /// then waits `Configuration.responseDelay`.
        public var waitingTimeExtension: UInt8?

        /// The default behaviour: IFSC 254, LRC, BWI 4, CWI 13, no WTX.
        public init() {}
    }

    /// The protocol the card offers in its ATR and runs.
    public enum TransmissionProtocol: Sendable {
        case t0(T0Behaviour)
        case t1(T1Behaviour)
    }

    /// How the card answers a PPS request.
    public enum PPSAnswer: Sendable {
        /// Echoes the request.
        case accept
        /// Answers without PPS1: the protocol at the default rate.
        case keepDefaultRate
        /// Echoes the request with a wrong PCK.
        case wrongPCK
        /// Does not answer.
        case silent
    }

    /// Everything about the card but its application.
    public struct Configuration: Sendable {
        /// T=0 or T=1 and how the card runs it.
        public var transmissionProtocol: TransmissionProtocol
        /// The convention announced by TS and used for every byte.
        public var convention: ATR.Convention = .direct
        /// TA1 (Fi/Di); nil leaves it out, so there is no PPS to make.
        public var ta1: UInt8?
        /// The historical bytes, at most 15.
        public var historicalBytes: [UInt8] = Array("cardbench".utf8)
        /// How a PPS request is answered.
        public var ppsAnswer: PPSAnswer = .accept
        /// Sent (in the configured convention) instead of the ATR built from the other fields:
        /// for malformed, truncated or overlong ATRs.
        public var rawATR: [UInt8]?
        /// The pause before answering each APDU.
        public var responseDelay: Duration = .zero
        /// The card stops serving when the terminal has been silent this long.
        public var idleTimeout: Duration = .seconds(30)

        /// A card running `transmissionProtocol`, direct convention, no TA1.
        public init(_ transmissionProtocol: TransmissionProtocol) {
            self.transmissionProtocol = transmissionProtocol
        }
    }

    /// A fault the card commits from now on.
    public enum Fault: Sendable, Equatable {
        /// The next byte the card writes has bits 8 and 1 flipped.
        case garbleNextByte
        /// The next `blocks` T=1 blocks carry a wrong EDC.
        case badEDC(blocks: Int)
        /// The next `blocks` T=1 blocks are lost: the card believes it sent them.
        case dropBlocks(Int)
        /// The card stops writing (it still reads); the line stays open.
        case silence
        /// The card writes `afterBytes` more bytes, then hangs the line up.
        case close(afterBytes: Int)
    }

    /// The instructions that carry data to the card in EMV and ISO 7816-4 (P3 is Lc over T=0).
    public static let dataInstructions: Set<UInt8> = [
        0x0E, 0x16, 0x18, 0x1E, 0x20, 0x21, 0x22, 0x24, 0x2A, 0x2C, 0x82, 0x86, 0x88, 0xA4, 0xA8,
        0xAE, 0xC2, 0xD0, 0xD2, 0xD6, 0xDA, 0xDB, 0xDC, 0xE2,
    ]

    /// The configuration the card runs with.
    public let configuration: Configuration
    /// The ATR the card sends, as decoded (TS 3B or 3F).
    public let atr: [UInt8]

    private let base: any CardSideLine
    private let wire: any CardLine
    private let respond: @Sendable ([UInt8]) -> [UInt8]
    private let faults = Locked(Faults())
    private let records = Locked(Records())
    private let finished = DispatchSemaphore(value: 0)

    private struct Faults {
        var garble = false
        var badEDC = 0
        var drop = 0
        var silent = false
        var closeAfter: Int?
    }

    private struct Records {
        var commands: [[UInt8]] = []
        var ppsRequests: [[UInt8]] = []
        var log: [String] = []
        var outcome: CardIOError?? = nil
    }

    /// A card on `line` (its end of the channel) answering C-APDUs with `respond`, which gets
    /// the command as the card sees it (over T=0, a command with data arrives without Le, as
    /// CLA INS P1 P2 Lc data) and returns data ‖ SW1 SW2. Call `start()` to power it up.
    public init(line: any CardSideLine, configuration: Configuration,
                respond: @escaping @Sendable ([UInt8]) -> [UInt8]) {
        self.configuration = configuration
        self.base = line
        self.wire = ConventionLine(line, convention: configuration.convention)
        self.respond = respond
        self.atr = Self.buildATR(configuration)
    }

    /// The ATR a configuration gives (ignoring `rawATR`), decoded: TS, T0, TA1 when set, then for
    /// T=0 TD1/TC2 when WI is set, for T=1 TD1 = 81, TD2 = 31 or 71, TA3 (IFSC), TB3 (BWI, CWI),
    /// TC3 01 for CRC; the historical bytes; TCK for T=1.
    public static func buildATR(_ configuration: Configuration) -> [UInt8] {
        precondition(configuration.historicalBytes.count <= 15, "at most 15 historical bytes")
        var interface: [UInt8] = []
        var y1: UInt8 = 0
        if let ta1 = configuration.ta1 {
            y1 |= 0x1
            interface.append(ta1)
        }
        var needsTCK = false
        switch configuration.transmissionProtocol {
        case .t0(let t0):
            if let wi = t0.waitingInteger {
                y1 |= 0x8
                interface += [0x40, wi]
            }
        case .t1(let t1):
            y1 |= 0x8
            let crc = t1.edc == .crc
            interface += [0x81, crc ? 0x71 : 0x31, t1.ifsc, t1.bwi << 4 | t1.cwi]
            if crc { interface.append(0x01) }
            needsTCK = true
        }
        let ts: UInt8 = configuration.convention == .direct ? 0x3B : 0x3F
        var bytes = [ts, y1 << 4 | UInt8(configuration.historicalBytes.count)] + interface + configuration.historicalBytes
        if needsTCK { bytes.append(bytes.dropFirst().reduce(0, ^)) }
        return bytes
    }

    // MARK: - Control

    /// Powers the card: its thread sends the ATR and serves until the line closes, the terminal
    /// stays idle past `idleTimeout`, or a fault hangs up.
    public func start() {
        let thread = Thread { [self] in
            var failure: CardIOError?
            do throws(CardIOError) {
                try run()
            } catch {
                failure = error
            }
            records.withLock { $0.outcome = .some(failure) }
            finished.signal()
        }
        thread.name = "card-simulator"
        thread.start()
    }

    /// Pulls the card out: hangs the line up and waits for the thread to end.
    @discardableResult
    public func stop(timeout: Duration = .seconds(5)) -> Bool {
        base.close()
        return waitUntilFinished(timeout: timeout)
    }

    /// Waits for the card's thread to end; false if it did not within `timeout`.
    @discardableResult
    public func waitUntilFinished(timeout: Duration) -> Bool {
        guard finished.wait(timeout: .now() + timeout.seconds) == .success else { return false }
        finished.signal()
        return true
    }

    /// Adds a fault, effective for the next bytes the card writes.
    public func inject(_ fault: Fault) {
        faults.withLock { f in
            switch fault {
            case .garbleNextByte: f.garble = true
            case .badEDC(let blocks): f.badEDC += blocks
            case .dropBlocks(let blocks): f.drop += blocks
            case .silence: f.silent = true
            case .close(let afterBytes): f.closeAfter = afterBytes
            }
        }
    }

    /// The C-APDUs the card received, as `respond` saw them.
    public var commands: [[UInt8]] { records.withLock { $0.commands } }
    /// The PPS requests the card received.
    public var ppsRequests: [[UInt8]] { records.withLock { $0.ppsRequests } }
    /// What the card saw and did, one line each: "rx I(0,-) 00A4…", "tx R(1)", "tx 61 10"…
    public var log: [String] { records.withLock { $0.log } }
    /// nil while the card runs; then the error that ended it, or .some(nil) for a normal end
    /// (line closed, idle timeout, a hang-up fault).
    public var outcome: CardIOError?? { records.withLock { $0.outcome } }

    // MARK: - The card's thread

    private static let byteTimeout: Duration = .seconds(2)

    private func note(_ line: String) {
        records.withLock { $0.log.append(line) }
    }

    private func run() throws(CardIOError) {
        do {
            try emit(configuration.rawATR ?? atr)
            var first: UInt8
            do {
                first = try wire.read(timeout: configuration.idleTimeout)
            } catch .timeout {
                return
            }
            if first == 0xFF {
                try answerPPS()
                do {
                    first = try wire.read(timeout: configuration.idleTimeout)
                } catch .timeout {
                    return
                }
            }
            switch configuration.transmissionProtocol {
            case .t0(let behaviour): try serveT0(behaviour, first: first)
            case .t1(let behaviour): try serveT1(behaviour, first: first)
            }
        } catch .cardRemoved {
            return
        }
    }

    /// Writes through the faults: silence swallows, garbling flips bits, a pending hang-up
    /// closes the line after its byte count.
    private func emit(_ bytes: [UInt8]) throws(CardIOError) {
        var out: [UInt8] = []
        var hangUp = false
        faults.withLock { f in
            guard !f.silent else { return }
            for var byte in bytes {
                if f.closeAfter == 0 { break }
                if f.garble {
                    byte ^= 0x81
                    f.garble = false
                }
                out.append(byte)
                if let left = f.closeAfter { f.closeAfter = left - 1 }
            }
            hangUp = f.closeAfter == 0
        }
        if !out.isEmpty { try wire.write(out) }
        if hangUp {
            note("hang up")
            base.close()
            throw .cardRemoved(reader: base.readerName)
        }
    }

    private func readByte(_ timeout: Duration = byteTimeout) throws(CardIOError) -> UInt8 {
        try wire.read(timeout: timeout)
    }

    private func pause(_ duration: Duration) {
        if duration > .zero { Thread.sleep(forTimeInterval: duration.seconds) }
    }

    // MARK: PPS

    private func answerPPS() throws(CardIOError) {
        var request: [UInt8] = [0xFF]
        let pps0 = try readByte()
        request.append(pps0)
        for bit in [UInt8(0x10), 0x20, 0x40] where pps0 & bit != 0 {
            request.append(try readByte())
        }
        request.append(try readByte())
        records.withLock { $0.ppsRequests.append(request) }
        note("rx PPS \(Hex.encode(request))")
        var answer = request
        switch configuration.ppsAnswer {
        case .accept:
            break
        case .keepDefaultRate:
            answer = [0xFF, pps0 & 0x0F]
            answer.append(answer.reduce(0, ^))
        case .wrongPCK:
            answer[answer.count - 1] ^= 0x01
        case .silent:
            return
        }
        note("tx PPS \(Hex.encode(answer))")
        try emit(answer)
    }

    // MARK: T=0

    private func serveT0(_ behaviour: T0Behaviour, first: UInt8) throws(CardIOError) {
        var next: UInt8? = first
        var pending: [UInt8] = []
        var pendingStatus: [UInt8] = [0x90, 0x00]

        func procedure(_ bytes: [UInt8]) throws(CardIOError) {
            for _ in 0..<behaviour.nullBytes {
                pause(behaviour.nullInterval)
                try emit([0x60])
            }
            try emit(bytes)
        }
        func sendData(_ ins: UInt8, _ data: [UInt8], status: [UInt8]) throws(CardIOError) {
            switch behaviour.acknowledgement {
            case .ins:
                try procedure([ins])
                try emit(data + status)
            case .complementedINS:
                try procedure([])
                for byte in data { try emit([ins ^ 0xFF, byte]) }
                try emit(status)
            }
        }
        func announce(_ count: Int) -> [UInt8] {
            [0x61, UInt8(min(count, behaviour.getResponseChunk, 256) & 0xFF)]
        }

        while true {
            var header: [UInt8] = []
            do {
                if let byte = next {
                    header.append(byte)
                    next = nil
                } else {
                    header.append(try readByte(configuration.idleTimeout))
                }
                while header.count < 5 { header.append(try readByte()) }
            } catch .timeout {
                if header.isEmpty { return }
                wire.discardInput()
                continue
            }
            note("rx \(Hex.encode(header))")
            let ins = header[1]
            let p3 = Int(header[4])
            pause(configuration.responseDelay)

            if ins == 0xC0 && !pending.isEmpty {
                let available = min(pending.count, behaviour.getResponseChunk, 256)
                guard (p3 == 0 ? 256 : p3) == available else {
                    note("tx 6C \(Hex.encode([UInt8(available & 0xFF)]))")
                    try procedure([0x6C, UInt8(available & 0xFF)])
                    continue
                }
                let chunk = Array(pending.prefix(available))
                pending.removeFirst(available)
                let status = pending.isEmpty ? pendingStatus : announce(pending.count)
                note("tx data \(chunk.count) + \(Hex.encode(status))")
                try sendData(ins, chunk, status: status)
                continue
            }

            let command: [UInt8]
            let incoming = behaviour.dataInstructions.contains(ins) && p3 > 0
            if incoming {
                var data: [UInt8] = []
                do {
                    switch behaviour.acknowledgement {
                    case .ins:
                        try procedure([ins])
                        while data.count < p3 { data.append(try readByte()) }
                    case .complementedINS:
                        for index in 0..<p3 {
                            if index == 0 { try procedure([ins ^ 0xFF]) } else { try emit([ins ^ 0xFF]) }
                            data.append(try readByte())
                        }
                    }
                } catch .timeout {
                    wire.discardInput()
                    continue
                }
                command = Array(header[0..<4]) + [header[4]] + data
            } else if behaviour.dataInstructions.contains(ins) {
                command = Array(header[0..<4])
            } else {
                command = header
            }
            records.withLock { $0.commands.append(command) }
            let response = respond(command)
            let data = Array(response.dropLast(2))
            let status = Array(response.suffix(2))
            pending = []

            if incoming || behaviour.dataInstructions.contains(ins) {
                if data.isEmpty {
                    note("tx \(Hex.encode(status))")
                    try procedure(status)
                } else {
                    // Case 4: the data wait for GET RESPONSE, announced by 61xx, or behind a
                    // warning status the terminal answers with GET RESPONSE 00.
                    pending = data
                    pendingStatus = [0x90, 0x00]
                    let announced = status == [0x90, 0x00] ? announce(data.count) : status
                    note("tx \(Hex.encode(announced))")
                    try procedure(announced)
                }
                continue
            }
            let le = p3 == 0 ? 256 : p3
            if data.isEmpty {
                note("tx \(Hex.encode(status))")
                try procedure(status)
            } else if data.count != le {
                note("tx 6C \(Hex.encode([UInt8(data.count & 0xFF)]))")
                try procedure([0x6C, UInt8(data.count & 0xFF)])
            } else {
                note("tx data \(data.count) + \(Hex.encode(status))")
                try sendData(ins, data, status: status)
            }
        }
    }

    // MARK: T=1

    private func serveT1(_ behaviour: T1Behaviour, first: UInt8) throws(CardIOError) {
        let edc = behaviour.edc
        let reader = PrefixedLine(wire, first: first)
        let io = GuardedLine(reader, slack: .zero, guardTime: .zero)
        var expected: UInt8 = 0      // N(S) of the terminal's next I-block
        var sequence: UInt8 = 0      // N(S) of the card's next I-block
        var ifsd = 32
        var incoming: [UInt8] = []
        var outgoing: [UInt8] = []
        var awaitingAck = false      // sent I(M=1), waiting for R
        var responded = false        // sent the last I-block of a response
        var lastI: T1Block?
        var lastSent: T1Block?

        func send(_ block: T1Block) throws(CardIOError) {
            lastSent = block
            var bytes = block.encoded(edc)
            let (drop, corrupt) = faults.withLock { f -> (Bool, Bool) in
                if f.drop > 0 {
                    f.drop -= 1
                    return (true, false)
                }
                if f.badEDC > 0 {
                    f.badEDC -= 1
                    return (false, true)
                }
                return (false, false)
            }
            if drop {
                note("lost \(block)")
                return
            }
            if corrupt { bytes[bytes.count - 1] ^= 0xFF }
            note("tx \(block)\(corrupt ? " (bad EDC)" : "")")
            try emit(bytes)
        }
        func sendNextChunk() throws(CardIOError) {
            let count = min(ifsd, outgoing.count)
            let more = count < outgoing.count
            let block = T1Block.information(sequence: sequence, more: more, Array(outgoing.prefix(count)))
            outgoing.removeFirst(count)
            sequence ^= 1
            lastI = block
            awaitingAck = more
            responded = !more
            try send(block)
        }

        while true {
            let received = try T1Block.receive(from: io, edc: edc, maximumInfo: Int(behaviour.ifsc),
                                               blockWaitingTime: configuration.idleTimeout,
                                               characterWaitingTime: .milliseconds(100))
            switch received {
            case .silence:
                return
            case .invalid(let code, let reason):
                note("rx invalid: \(reason)")
                if let last = lastSent, case .receiveReady? = last.kind {
                    try send(last)
                } else {
                    try send(.receiveReady(sequence: expected, error: code))
                }
            case .block(let block):
                note("rx \(block)")
                switch block.kind {
                case .information(let seq, let more)?:
                    guard seq == expected else {
                        // A block taken already: our answer to it was lost, so send that again.
                        try send(lastSent ?? .receiveReady(sequence: expected, error: 2))
                        continue
                    }
                    expected ^= 1
                    awaitingAck = false
                    responded = false
                    incoming += block.info
                    if more {
                        try send(.receiveReady(sequence: expected))
                        continue
                    }
                    let command = incoming
                    incoming = []
                    records.withLock { $0.commands.append(command) }
                    if let multiplier = behaviour.waitingTimeExtension {
                        try send(.supervisory(.wtx, response: false, [multiplier]))
                        let answer = try T1Block.receive(from: io, edc: edc, maximumInfo: Int(behaviour.ifsc),
                                                         blockWaitingTime: Self.byteTimeout,
                                                         characterWaitingTime: .milliseconds(100))
                        if case .block(let b) = answer { note("rx \(b)") }
                    }
                    pause(configuration.responseDelay)
                    outgoing = respond(command)
                    try sendNextChunk()
                case .receiveReady(let seq, _)?:
                    if awaitingAck, let last = lastI, seq != last.pcb >> 6 & 1 {
                        try sendNextChunk()
                    } else if awaitingAck || responded, let last = lastI, seq == last.pcb >> 6 & 1 {
                        try send(last)
                    } else if let last = lastSent, case .receiveReady? = last.kind {
                        try send(last)
                    } else {
                        try send(.receiveReady(sequence: expected))
                    }
                case .supervisory(.resynch, false)?:
                    expected = 0
                    sequence = 0
                    ifsd = 32
                    incoming = []
                    outgoing = []
                    awaitingAck = false
                    responded = false
                    lastI = nil
                    try send(.supervisory(.resynch, response: true))
                case .supervisory(.ifs, false)?:
                    ifsd = Int(block.info[0])
                    try send(.supervisory(.ifs, response: true, block.info))
                case .supervisory(.abort, false)?:
                    incoming = []
                    outgoing = []
                    awaitingAck = false
                    try send(.supervisory(.abort, response: true))
                case .supervisory(_, true)?:
                    continue
                case .supervisory(.wtx, false)?, nil:
                    try send(.receiveReady(sequence: expected, error: 2))
                }
            }
        }
    }
}

/// A line that hands out one byte already read before reading on.
private final class PrefixedLine: CardLine {
    let base: any CardLine
    var first: UInt8?

    init(_ base: any CardLine, first: UInt8) {
        self.base = base
        self.first = first
    }

    var readerName: String { base.readerName }

    func write(_ bytes: [UInt8]) throws(CardIOError) { try base.write(bytes) }

    func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        if let byte = first {
            first = nil
            return byte
        }
        return try base.read(timeout: timeout)
    }

    func discardInput() {
        first = nil
        base.discardInput()
    }
}
