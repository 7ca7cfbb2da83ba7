import ArgumentParser
import CardIO
import EMV
import Foundation

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

    @Option(help: "Data bytes in each command and in each response (0–250).")
    var size: Int = 64

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw CLIError(message: "--seconds: must be above 0 and at most 600", code: 2) }
        guard (0...250).contains(size) else { throw CLIError(message: "--size: must be 0 to 250", code: 2) }
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
        print("cardbench bench serial: APDUs of \(size) data bytes each way over a pty, card simulated on the master side")
        for r in rows {
            print(String(format: "T=%d: %d APDUs, %.1f µs each over the pty, of which %.1f µs guard times; %.1f bytes on the line = %.0f µs at 9600 baud; host overhead %.3f%% of wire time (goal ≤ 1%%)",
                         r.transmissionProtocol, r.apdus, r.microsecondsPerAPDU, r.guardMicrosecondsPerAPDU, r.bytesPerAPDU,
                         r.wireMicrosecondsPerAPDU, r.overheadPercentOfWireTime))
        }
    }

    func measure(_ t: Int) throws -> Row {
        let pty = try PseudoTerminal()
        defer { pty.close() }
        let reply = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) } + [0x90, 0x00]
        let configuration = CardSimulator.Configuration(t == 0 ? .t0(CardSimulator.T0Behaviour()) : .t1(CardSimulator.T1Behaviour()))
        let card = CardSimulator(line: pty, configuration: configuration) { _ in reply }
        card.start()
        defer { _ = card.stop(timeout: .seconds(2)) }
        let reader = SerialReader(name: "bench", path: pty.slavePath, settings: .pty)
        reader.start()
        defer { reader.stop() }
        let channel = try reader.connect(timeout: .seconds(5))
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
        let elapsed = clock.now - start
        let after = reader.byteCounts ?? (0, 0)
        let bytes = Double(after.written - before.written + after.read - before.read) / Double(count)
        let perAPDU = (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) / Double(count) * 1e6
        let wire = bytes * 12 / 9600 * 1e6
        let guarded = reader.guardWaited - guardBefore
        let guardPerAPDU = (Double(guarded.components.seconds) + Double(guarded.components.attoseconds) / 1e18) / Double(count) * 1e6
        return Row(transmissionProtocol: t, apdus: count, microsecondsPerAPDU: perAPDU, guardMicrosecondsPerAPDU: guardPerAPDU,
                   bytesPerAPDU: bytes, wireMicrosecondsPerAPDU: wire, overheadPercentOfWireTime: (perAPDU - guardPerAPDU) / wire * 100)
    }
}
