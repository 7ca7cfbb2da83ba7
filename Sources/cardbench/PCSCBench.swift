import ArgumentParser
import CardIO
import EMV
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cardbench bench pcsc`: the same APDUs through pcscd + vpcd and over a virtual reader's socket.
struct PCSCBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pcsc",
        abstract: "APDU round trips through pcscd + vpcd (a pcsc: reader), beside SCardTransmit alone and the virtual reader's socket",
        discussion: """
        Starts a private pcscd (root; Debian's pcscd, vsmartcard-vpcd and systemd-socket-activate) on \
        a socket and ports of its own, connects a card that echoes the command's data to vpcd, and \
        times three paths with the same APDUs in alternating slices: cardbench's PC/SC reader channel \
        (PCSCReader: exclusive connection, the T=0 layer, session checks), SCardTransmit alone on an \
        exclusive connection (pcscd's own cost: the floor), and the virtual reader's Unix socket (what \
        a virtual terminal pays). The ratios are per round trip: the channel over SCardTransmit alone \
        (cardbench's own cost above pcscd), and the channel over the virtual socket.
        """
    )

    @Option(help: "Seconds to run each path, per size.")
    var seconds: Double = 2

    @Option(help: "Comma-separated C-APDU data sizes, each 0–255.")
    var sizes: String = "0,32,250"

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw CLIError(message: "--seconds: must be more than 0 and at most 600", code: 2) }
        _ = try CardBench.parseSizes(sizes)
    }

    struct Figures: Encodable {
        let size: Int
        let channelRoundTripsPerSecond: Double
        let scardTransmitRoundTripsPerSecond: Double
        let virtualSocketRoundTripsPerSecond: Double
        /// Channel time per round trip over SCardTransmit alone's.
        let overPCSCD: Double
        /// Channel time per round trip over the virtual socket's.
        let overVirtualSocket: Double
    }

    func run() throws {
        let missing = PrivatePCSCD.missing
        guard missing.isEmpty else { throw CLIError(message: "bench pcsc needs \(missing.joined(separator: ", ")) (apt-get install pcscd vsmartcard-vpcd systemd)") }
        var template = Array("/tmp/cardbench-bench-pcsc-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CLIError(message: "cannot make a temporary directory") }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pcscd = try PrivatePCSCD(directory: directory)
        // libpcsclite reads the socket's name once, at its first call: before any.
        setenv("PCSCLITE_CSOCK_NAME", pcscd.socket, 1)
        try pcscd.start()
        defer { pcscd.stop() }

        let link = try VPCDCardLink.connect(to: .tcp(host: "127.0.0.1", port: pcscd.port))
        let card = Thread {
            try? link.serve(atr: CardBench.atr, respond: CardBench.echo)
        }
        card.start()
        defer { link.close() }
        let reader = PCSCReader(name: "bench", pattern: try PCSCReaderPattern(parsing: pcscd.reader(slot: 0)))
        reader.start()
        defer { reader.stop() }
        let deadline = Date(timeIntervalSinceNow: 10)
        while !reader.isCardPresent {
            guard Date() < deadline else { throw CLIError(message: "pcscd did not report the card in \(pcscd.reader(slot: 0))") }
            usleep(20_000)
        }

        var rows: [Figures] = []
        for size in try CardBench.parseSizes(sizes) {
            let command = CardBench.command(size: size)
            let expected = CardBench.echo(command)
            let virtual = try CardBench.LinkPingPong(command: command, responder: CardBench.echo)
            defer { virtual.close() }
            var channelRates: [Double] = [], rawRates: [Double] = [], socketRates: [Double] = []
            let slice = seconds / Double(CardBench.rounds)
            for _ in 0..<CardBench.rounds {
                let channel = try reader.connect(timeout: .seconds(5))
                guard try channel.transmit(command) == expected else { throw CLIError(message: "the card's answer through pcscd differs from its own") }
                channelRates.append(try CardBench.timed(seconds: slice) { _ = try channel.transmit(command) })
                channel.powerOff()
                let raw: PCSCRawConnection
                do throws(PCSCError) { raw = try PCSCRawConnection(reader: pcscd.reader(slot: 0)) } catch { throw CLIError(message: "\(error)") }
                // T=0 TPDU form: case 4 goes without Le, as the channel sends it; the echo answers 9000 with the data.
                let tpdu = size > 0 ? Array(command.dropLast()) : command
                rawRates.append(try CardBench.timed(seconds: slice) {
                    do throws(PCSCError) { _ = try raw.transmit(tpdu) } catch { throw CLIError(message: "\(error)") }
                })
                raw.close()
                socketRates.append(try CardBench.timed(seconds: slice) { _ = try virtual.roundTrip() })
            }
            let (c, r, v) = (CardBench.median(channelRates), CardBench.median(rawRates), CardBench.median(socketRates))
            rows.append(Figures(size: size, channelRoundTripsPerSecond: c.rounded(), scardTransmitRoundTripsPerSecond: r.rounded(),
                                virtualSocketRoundTripsPerSecond: v.rounded(), overPCSCD: (r / c * 100).rounded() / 100,
                                overVirtualSocket: (v / c * 100).rounded() / 100))
        }
        if json { return try printJSON(rows) }
        print("cardbench bench pcsc: APDU round trips through a private pcscd + vpcd (\(pcscd.reader(slot: 0))), an echoing T=0 card")
        print("\(CLIFormat.seconds(seconds)) s per path per size, in \(CardBench.rounds) alternating slices; size = C-APDU data bytes")
        for r in rows {
            print("size \(r.size): PC/SC channel \(CLIFormat.grouped(r.channelRoundTripsPerSecond))/s, SCardTransmit alone (floor) \(CLIFormat.grouped(r.scardTransmitRoundTripsPerSecond))/s, "
                  + "virtual reader socket \(CLIFormat.grouped(r.virtualSocketRoundTripsPerSecond))/s; "
                  + String(format: "ratio %.2fx over pcscd, %.2fx over the virtual socket", r.overPCSCD, r.overVirtualSocket))
        }
    }
}
