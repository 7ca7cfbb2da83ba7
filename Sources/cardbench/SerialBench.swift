import ArgumentParser
import CardIO
import Daemon
import Defaults
import EMV
import Foundation
import Terminal
import VirtualCard
import Workflows

struct SerialBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serial",
        abstract: "The host's time per APDU over a pty, against the wire time of the same bytes at 9600 baud.",
        discussion: """
        For T=0 and T=1, a card simulator speaks ISO 7816-3 byte by byte on a pseudo-terminal's \
        master side; a SerialReader on the slave side (the daemon's serial reader code) connects \
        and exchanges APDUs for --seconds. A pty moves bytes at memory speed, so the time per APDU \
        is what the host and the simulated card spend, with no wire time at all, plus the guard \
        times ISO 7816-3 has the terminal leave before it turns the line round (16 etu for T=0, \
        22 for T=1, between leading edges), which a real line spends too and are shown apart. The \
        floor is the wire time of the bytes actually exchanged, counted at the port, at 9600 baud \
        and 12 etu per character (start bit, 8 data bits, parity, 2 stop bits). The overhead is \
        the time per APDU less the guard waits, over that wire time; the goal is at most 1%.
        """
    )

    @Option(help: "Seconds per protocol.")
    var seconds: Double = 2

    @Option(help: "Data bytes in each command and in each response (0–250), for --workload apdu.")
    var size: Int = 64

    @Option(help: "apdu: one case 4 command over and over; sale: whole EMV sales by the kernel against a virtual card.")
    var workload: String = "apdu"

    @Option(help: "The card profile of --workload sale.")
    var card: String = EmbeddedDefaults.demoCard

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw CLIError(message: "--seconds: must be above 0 and at most 600", code: 2) }
        guard (0...250).contains(size) else { throw CLIError(message: "--size: must be 0 to 250", code: 2) }
        guard ["apdu", "sale"].contains(workload) else { throw CLIError(message: "--workload: must be apdu or sale", code: 2) }
    }

    struct Row: Encodable {
        let transmissionProtocol: Int
        let apdus: Int
        let microsecondsPerAPDU: Double
        let guardMicrosecondsPerAPDU: Double
        let bytesPerAPDU: Double
        let wireMicrosecondsPerAPDU: Double
        let overheadPercentOfWireTime: Double
        let goalPercent = 1.0
    }

    func run() throws {
        var rows: [Row] = []
        for t in [0, 1] { rows.append(try measure(t)) }
        if json { return try printJSON(rows) }
        print(workload == "sale"
              ? "cardbench bench serial: whole EMV sales (kernel, \(card)) over a pty, the virtual card behind a simulator on the master side"
              : "cardbench bench serial: APDUs of \(size) data bytes each way over a pty, card simulated on the master side")
        for r in rows {
            print(String(format: "T=%d: %d APDUs, %.1f µs each over the pty, of which %.1f µs guard times; %.1f bytes on the line = %.0f µs at 9600 baud; host overhead %.3f%% of wire time (goal ≤ 1%%)",
                         r.transmissionProtocol, r.apdus, r.microsecondsPerAPDU, r.guardMicrosecondsPerAPDU, r.bytesPerAPDU,
                         r.wireMicrosecondsPerAPDU, r.overheadPercentOfWireTime))
        }
    }

    /// Whole sales: the kernel (cardholder verification with the profile's PIN, the host's
    /// ARQC check and ARPC) over the pty; the APDUs counted at the card.
    func measureSales(_ t: Int, reader: SerialReader, channel: any CardChannel, card: CardSimulator, profile: CardProfile) throws -> Row {
        let pinKey = try TDESKey(SecureRandom.bytes(16))
        let host = EmulatedHost(pinKey: pinKey, amountTable: .none)
        try host.register(profile)
        func sale() throws {
            var kernel = Kernel(configuration: TerminalConfiguration(pinKey: pinKey), card: ChannelCardLink(channel),
                                keypad: TerminalKeypad(autoPIN: profile.pin), host: host)
            let outcome = try kernel.run(TransactionRequest(amount: 100, date: UTCDateParts(secondsSince1970: 1_800_000_000), stan: .first))
            guard outcome.decision == .approved else { throw CLIError(message: "T=\(t): the sale was declined (\(outcome.responseCode))") }
        }
        try sale()
        let before = reader.byteCounts ?? (0, 0)
        let guardBefore = reader.guardWaited
        let commandsBefore = card.commands.count
        let clock = ContinuousClock()
        let start = clock.now
        let end = start + .milliseconds(Int64(seconds * 1000))
        var sales = 0
        while clock.now < end || sales == 0 {
            try sale()
            sales += 1
        }
        return Self.row(t, apdus: card.commands.count - commandsBefore, elapsed: clock.now - start, reader: reader,
                        bytesBefore: before, guardBefore: guardBefore)
    }

    /// The figures of `apdus` exchanges that took `elapsed`, from the reader's counters.
    static func row(_ t: Int, apdus: Int, elapsed: Duration, reader: SerialReader, bytesBefore: (written: Int, read: Int),
                    guardBefore: Duration) -> Row {
        func micros(_ d: Duration) -> Double { (Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18) * 1e6 }
        let after = reader.byteCounts ?? (0, 0)
        let bytes = Double(after.written - bytesBefore.written + after.read - bytesBefore.read) / Double(apdus)
        let perAPDU = micros(elapsed) / Double(apdus)
        let guardPerAPDU = micros(reader.guardWaited - guardBefore) / Double(apdus)
        let wire = bytes * 12 / 9600 * 1e6
        return Row(transmissionProtocol: t, apdus: apdus, microsecondsPerAPDU: perAPDU, guardMicrosecondsPerAPDU: guardPerAPDU,
                   bytesPerAPDU: bytes, wireMicrosecondsPerAPDU: wire, overheadPercentOfWireTime: (perAPDU - guardPerAPDU) / wire * 100)
    }

    func measure(_ t: Int) throws -> Row {
        let pty = try PseudoTerminal()
        defer { pty.close() }
        let reply = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) } + [0x90, 0x00]
        let configuration = CardSimulator.Configuration(t == 0 ? .t0(CardSimulator.T0Behaviour()) : .t1(CardSimulator.T1Behaviour()))
        let profile = try loadCardProfile(self.card, option: "--card")
        let holder = CardHolder(try VirtualCard(profile: profile))
        let sale = workload == "sale"
        let card = CardSimulator(line: pty, configuration: configuration) { command in sale ? holder.respond(command) : reply }
        card.start()
        defer { _ = card.stop(timeout: .seconds(2)) }
        let reader = SerialReader(name: "bench", path: pty.slavePath, settings: .pty)
        reader.start()
        defer { reader.stop() }
        let channel = try reader.connect(timeout: .seconds(5))
        if sale { return try measureSales(t, reader: reader, channel: channel, card: card, profile: profile) }
        // A case 4 command (INTERNAL AUTHENTICATE): data to the card, data back (over T=0 through GET RESPONSE).
        let command: [UInt8] = [0x00, 0x88, 0x00, 0x00, UInt8(size)] + Array(repeating: 0x5A, count: size) + [0x00]
        let sized = size == 0 ? [0x00, 0x88, 0x00, 0x00, 0x00] : command
        _ = try channel.transmit(sized)
        let before = reader.byteCounts ?? (0, 0)
        let guardBefore = reader.guardWaited
        let clock = ContinuousClock()
        let start = clock.now
        let end = start + .milliseconds(Int64(seconds * 1000))
        var count = 0
        while clock.now < end {
            let response = try channel.transmit(sized)
            guard response == reply else { throw CLIError(message: "T=\(t): the simulated card answered \(Hex.encode(response))") }
            count += 1
        }
        return Self.row(t, apdus: count, elapsed: clock.now - start, reader: reader, bytesBefore: before, guardBefore: guardBefore)
    }
}

/// The bench's virtual card, answered on the simulator's thread only.
final class CardHolder: @unchecked Sendable {
    private var card: VirtualCard
    init(_ card: VirtualCard) { self.card = card }
    func respond(_ command: [UInt8]) -> [UInt8] { card.respond(to: command) }
}
