import EMV
import Foundation
import Testing
@testable import CardIO

/// The terminal's end of a line, recording every byte each way: consecutive bytes in one
/// direction form one entry, "T …" for the terminal's, "C …" for the card's (as on the wire,
/// so inverse-convention bytes show encoded).
final class TapLine: CardLine {
    let base: any CardLine
    private(set) var entries: [(terminal: Bool, bytes: [UInt8])] = []

    init(_ base: any CardLine) { self.base = base }

    var readerName: String { base.readerName }

    func write(_ bytes: [UInt8]) throws(CardIOError) {
        record(terminal: true, bytes)
        try base.write(bytes)
    }

    func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        let byte = try base.read(timeout: timeout)
        record(terminal: false, [byte])
        return byte
    }

    func discardInput() { base.discardInput() }

    private func record(terminal: Bool, _ bytes: [UInt8]) {
        if let last = entries.last, last.terminal == terminal {
            entries[entries.count - 1].bytes += bytes
        } else {
            entries.append((terminal, bytes))
        }
    }

    var transcript: [String] {
        entries.map { ($0.terminal ? "T " : "C ") + Hex.encode($0.bytes) }
    }

    func clear() { entries = [] }
}

/// A card simulator on one end of a socket pair and a tapped terminal line on the other.
final class Rig {
    let card: CardSimulator
    let tap: TapLine
    let readerLine: SocketLine
    /// A fast line for tests: 1/9600 s is the real initial etu; the protocols' waits scale with it.
    let etu = ISO7816.etu(baudRate: 9600)

    init(_ configuration: CardSimulator.Configuration,
         respond: @escaping @Sendable ([UInt8]) -> [UInt8] = testApplet,
         before: (CardSimulator) -> Void = { _ in }) throws {
        let (reader, cardEnd) = try SocketLine.pair(readerName: "sim1")
        readerLine = reader
        tap = TapLine(reader)
        card = CardSimulator(line: cardEnd, configuration: configuration, respond: respond)
        before(card)
        card.start()
    }

    func readATR(wait: Duration = .seconds(1)) throws -> (atr: ATR, convention: ATR.Convention) {
        try ISO7816.readATR(from: tap, initialWaitingTime: wait, slack: .milliseconds(100))
    }

    /// Reads the ATR and makes the transport it asks for, on the convention's line.
    func t0(slack: Duration = .milliseconds(200)) throws -> T0Transport {
        let (atr, convention) = try readATR()
        tap.clear()
        return T0Transport(line: ISO7816.line(tap, for: convention), atr: atr, etu: etu, slack: slack)
    }

    func t1(slack: Duration = .milliseconds(200)) throws -> T1Transport {
        let (atr, convention) = try readATR()
        tap.clear()
        return T1Transport(line: ISO7816.line(tap, for: convention), atr: atr, etu: etu, slack: slack)
    }

    deinit {
        card.stop()
    }
}

/// The applet behind the simulated cards:
/// - READ RECORD (B2): record 1 is 01…0A, record 2 is the 256 bytes 00…FF, others 6A83;
/// - SELECT (A4): an 18-byte FCI with 9000, or with 6283 when the name is "BLOCKED";
/// - READ BINARY (B0): P1P2 bytes counting from 00, then 9000;
/// - VERIFY (20), APPLICATION BLOCK (1E): 9000;
/// - anything else: its data echoed, then 9000.
@Sendable func testApplet(_ command: [UInt8]) -> [UInt8] {
    guard command.count >= 4 else { return [0x67, 0x00] }
    let apdu = try? CommandAPDU(bytes: command)
    switch command[1] {
    case 0xB2:
        switch command[2] {
        case 1: return Array(1...10) + [0x90, 0x00]
        case 2: return (0...255).map { UInt8($0) } + [0x90, 0x00]
        default: return [0x6A, 0x83]
        }
    case 0xA4:
        let fci: [UInt8] = [0x6F, 0x10, 0x84, 0x07, 0xA0, 0x00, 0x00, 0x00, 0x03, 0x10, 0x10, 0xA5, 0x05, 0x50, 0x03, 0x56, 0x49, 0x53]
        return fci + (apdu?.data == Array("BLOCKED".utf8) ? [0x62, 0x83] : [0x90, 0x00])
    case 0xB0:
        let count = Int(command[2]) << 8 | Int(command[3])
        return (0..<count).map { UInt8($0 & 0xFF) } + [0x90, 0x00]
    case 0x20, 0x1E:
        return [0x90, 0x00]
    default:
        return (apdu?.data ?? []) + [0x90, 0x00]
    }
}

/// `bytes` as hex, for building expected transcripts.
func h(_ text: String) -> [UInt8] { (try? Hex.decode(text.replacingOccurrences(of: " ", with: ""))) ?? [] }

/// A T=1 block as the terminal or card sends it with LRC.
func lrcBlock(_ pcb: UInt8, _ info: [UInt8] = []) -> String {
    Hex.encode(T1Block(pcb: pcb, info: info).encoded(.lrc))
}

/// Measures how long `body` takes.
func timed<T>(_ body: () throws -> T) rethrows -> (T, Duration) {
    let start = ContinuousClock.now
    let value = try body()
    return (value, ContinuousClock.now - start)
}
