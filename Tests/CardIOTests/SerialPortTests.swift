#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Testing
@testable import CardIO

/// The test holds the pty's master (the card's side); a `SerialPort` opens the slave.
typealias Pty = PseudoTerminal

extension PseudoTerminal {
    func read(_ count: Int) -> [UInt8] { read(count, timeout: .seconds(2)) }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite("Serial port over a pty")
struct SerialPortTests {
    @Test("raw bytes pass both ways unchanged, including the ones a line discipline would eat")
    func rawBytes() throws {
        let pty = try Pty()
        defer { pty.close() }
        let port = try SerialPort(path: pty.slavePath, settings: .pty, readerName: "serial1")
        defer { port.close() }
        let all = (0...255).map { UInt8($0) }
        try port.write(all)
        #expect(pty.read(256) == all)
        try pty.write(all)
        var got: [UInt8] = []
        for _ in 0..<256 { got.append(try port.read(timeout: .seconds(2))) }
        #expect(got == all)
    }

    @Test("a read times out after its timeout, discardInput drops what waits, and closing the far side is a removal")
    func timeoutsAndHangUp() throws {
        let pty = try Pty()
        let port = try SerialPort(path: pty.slavePath, settings: .pty, readerName: "serial1")
        defer { port.close() }
        let start = ContinuousClock.now
        #expect(throws: CardIOError.timeout(reader: "serial1", seconds: 0.2)) { try port.read(timeout: .milliseconds(200)) }
        #expect(ContinuousClock.now - start >= .milliseconds(200))
        try pty.write([1, 2, 3])
        usleep(50_000)
        port.discardInput()
        try pty.write([9])
        #expect(try port.read(timeout: .seconds(1)) == 9)
        pty.close()
        #expect(throws: CardIOError.cardRemoved(reader: "serial1")) { try port.read(timeout: .seconds(1)) }
    }

    @Test("echo cancellation: the echo is checked and dropped; a garbled or missing echo is an error")
    func echo() throws {
        let pty = try Pty()
        defer { pty.close() }
        var settings = SerialSettings.pty
        settings.echo = true
        let port = try SerialPort(path: pty.slavePath, settings: settings, readerName: "serial1")
        defer { port.close() }
        // The far side echoes each byte, as a reader with TX tied to RX does, then answers.
        let echoer = Thread {
            let got = pty.read(3)
            try? pty.write(got)
            try? pty.write([0x90, 0x00])
        }
        echoer.start()
        try port.write([0x00, 0xA4, 0x04])
        #expect(try port.read(timeout: .seconds(2)) == 0x90, "the echo was dropped, the answer is what is read")
        #expect(try port.read(timeout: .seconds(2)) == 0x00)

        let garbler = Thread {
            _ = pty.read(2)
            try? pty.write([0x00, 0xA5])
        }
        garbler.start()
        guard case .io(_, let detail) = thrown({ try port.write([0x00, 0xA4]) }) else {
            Issue.record("a garbled echo must be an error")
            return
        }
        #expect(detail.contains("wrote A4, read back A5"), "\(detail)")
        #expect(thrown { try port.write([0x01]) } != nil, "no echo at all is an error too")
    }

    @Test("a pty has no modem lines: using them is an error that says what to configure")
    func noModemLines() throws {
        let pty = try Pty()
        defer { pty.close() }
        var settings = SerialSettings.pty
        settings.resetLine = .rts
        settings.presenceLine = .cts
        let port = try SerialPort(path: pty.slavePath, settings: settings, readerName: "serial1")
        defer { port.close() }
        for error in [thrown { try port.resetCard() }, thrown { try port.cardPresent() }] {
            guard case .io(_, let detail) = error else {
                Issue.record("expected an io error, got \(String(describing: error))")
                continue
            }
            #expect(detail.contains("no modem lines") && detail.contains("reset line to none"), "\(detail)")
        }
        #expect(try SerialPort(path: pty.slavePath, settings: .pty, readerName: "s").cardPresent())
    }

    @Test("bad settings and paths are refused with the reason")
    func refusals() throws {
        var settings = SerialSettings.pty
        settings.baud = 12345
        #expect(throws: CardIOError.self) { try SerialPort(path: "/dev/null", settings: settings, readerName: "s") }
        guard case .io(_, let detail) = thrown({ try SerialPort(path: "/nonexistent/tty", settings: .pty, readerName: "s") }) else {
            Issue.record("a missing device must be an io error")
            return
        }
        #expect(detail.contains("/nonexistent/tty"))
        // /dev/null is not a terminal: tcgetattr fails, and says so.
        guard case .io(_, let null) = thrown({ try SerialPort(path: "/dev/null", settings: .pty, readerName: "s") }) else {
            Issue.record("a non-tty must be refused")
            return
        }
        #expect(null.contains("tcgetattr"))
    }

    @Test("wire time is 12 etu a character at the port's speed")
    func wireTime() throws {
        let pty = try Pty()
        defer { pty.close() }
        let port = try SerialPort(path: pty.slavePath, settings: .pty, readerName: "s")
        #expect(port.wireTime(800) == .seconds(1))
        try port.setBaud(19200)
        #expect(port.baud == 19200)
        #expect(port.wireTime(1600) == .seconds(1))
    }

    @Test("on a real UART the reset pulse leaves the reset line released at the configured level, and presence follows its level",
          .enabled(if: access("/dev/ttyS0", R_OK | W_OK) == 0, "needs read-write access to /dev/ttyS0"))
    func modemLinesOnARealPort() throws {
        for (line, bit) in [(SerialSettings.ResetLine.rts, TIOCM_RTS), (.dtr, TIOCM_DTR)] {
            for assertedIsReset in [true, false] {
                var settings = SerialSettings()
                settings.resetLine = line
                settings.resetAssertedIsReset = assertedIsReset
                settings.resetPulse = .milliseconds(2)
                let port = try SerialPort(path: "/dev/ttyS0", settings: settings, readerName: "uart")
                defer { port.close() }
                try port.resetCard()
                // After the pulse the card runs: the line is at the level that is not reset.
                #expect((try port.modemLines() & bit != 0) == !assertedIsReset, "\(line) asserted-is-reset \(assertedIsReset)")
            }
        }
        var settings = SerialSettings()
        settings.presenceLine = .cts
        let high = try SerialPort(path: "/dev/ttyS0", settings: settings, readerName: "uart")
        defer { high.close() }
        settings.presenceAssertedIsCard = false
        let low = try SerialPort(path: "/dev/ttyS0", settings: settings, readerName: "uart")
        defer { low.close() }
        let cts = try high.modemLines() & TIOCM_CTS != 0
        #expect(try high.cardPresent() == cts)
        #expect(try low.cardPresent() == !cts, "the inverted switch reads the other way")
    }

    @Test("a serial reader over a pty: inverse convention, PPS to 19200 baud, T=1; then the card pulled out")
    func readerInverseAndPPS() throws {
        let pty = try Pty()
        defer { pty.close() }
        var configuration = CardSimulator.Configuration(.t1(CardSimulator.T1Behaviour()))
        configuration.convention = .inverse
        configuration.ta1 = 0x12 // Fi 372, Di 2: 19200 baud with the usual clock
        let card = CardSimulator(line: pty, configuration: configuration) { command in command.suffix(3) + [0x90, 0x00] }
        card.start()
        defer { _ = card.stop(timeout: .seconds(2)) }
        let events = Locked<[ReaderEvent]>([])
        let reader = SerialReader(name: "pty1", path: pty.slavePath, settings: .pty, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        reader.addObserver { event in events.withLock { $0.append(event) } }
        reader.start()
        defer { reader.stop() }
        let channel = try reader.connect(timeout: .seconds(5))
        #expect(channel.atr == card.atr)
        #expect(channel.atr.first == 0x3F, "TS read as 03 and decoded")
        // The card answers with the command's last 3 bytes: what it got, decoded, after PPS.
        #expect(try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x01, 0x0C, 0x00, 0x90, 0x00])
        #expect(try channel.transmit([0x00, 0x88, 0x00, 0x00, 0x02, 0xAB, 0xCD, 0x00]) == [0xAB, 0xCD, 0x00, 0x90, 0x00])
        #expect(card.ppsRequests == [[0xFF, 0x11, 0x12, 0xFF ^ 0x11 ^ 0x12]], "PPS asked for T=1 at TA1 12")
        let status = reader.status
        #expect(status.state == "open" && status.cardPresent && status.transmissionProtocol == 1)
        #expect(status.atr == card.atr.map { String(format: "%02X", $0) }.joined())
        #expect(events.withLock { $0 } == [.cardInserted(reader: "pty1")])
        card.inject(.close(afterBytes: 0))
        #expect(throws: CardIOError.self) { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) }
        #expect(throws: CardIOError.self) { try reader.connect(timeout: .milliseconds(300)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) }
    }
}
