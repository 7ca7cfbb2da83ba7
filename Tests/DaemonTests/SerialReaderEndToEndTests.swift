import CardIO
import Daemon
import Foundation
import Testing
import VirtualCard

/// A virtual card behind a pty, speaking ISO 7816-3 byte by byte as a card in a serial reader.
final class PtyCard: @unchecked Sendable {
    let pty: PseudoTerminal
    let simulator: CardSimulator

    /// The virtual card, answered from the simulator's thread only.
    private final class Holder: @unchecked Sendable {
        var card: VirtualCard
        init(_ card: VirtualCard) { self.card = card }
    }

    init(_ profile: String, _ configuration: CardSimulator.Configuration) throws {
        pty = try PseudoTerminal()
        let text = try String(contentsOfFile: repositoryRoot.appendingPathComponent("Scenarios/cards/\(profile)").path, encoding: .utf8)
        let holder = Holder(try VirtualCard(profile: try CardProfile.parse(yaml: text, file: profile)))
        simulator = CardSimulator(line: pty, configuration: configuration) { command in holder.card.respond(to: command) }
        simulator.start()
    }

    func remove() {
        _ = simulator.stop(timeout: .seconds(2))
        pty.close()
    }
}

@Suite("Serial readers in cardbenchd, over ptys", .serialized)
struct SerialReaderEndToEndTests {
    func daemon(_ cards: [(String, PtyCard)]) async throws -> DaemonProcess {
        var yaml = "terminals: [bench1\(cards.map { ", \($0.0)" }.joined())]\nterminal:\n  bench1:\n    tid: \"10000001\"\n"
        for (i, (name, card)) in cards.enumerated() {
            yaml += """
                  \(name):
                    tid: "1000001\(i + 2)"
                    reader: serial:\(card.pty.slavePath)
                    serial:
                      parity: none
                      reset: none
                      presence: always
                      echo: false

                """
        }
        yaml += "timeouts:\n  card_seconds: 5\n"
        return try await DaemonProcess(["--demo-card", card("visa-credit-cvn10.yaml")], config: yaml)
    }

    @Test("a sale through T=1 and one through T=0 with procedure bytes; readers show the ATR and the protocol")
    func sales() async throws {
        var t1 = CardSimulator.T1Behaviour()
        t1.ifsc = 32
        let t1Card = try PtyCard("visa-credit-cvn10.yaml", .init(.t1(t1)))
        var t0 = CardSimulator.T0Behaviour()
        t0.acknowledgement = .complementedINS
        t0.nullBytes = 1
        t0.getResponseChunk = 64
        let t0Card = try PtyCard("visa-credit-cvn10.yaml", .init(.t0(t0)))
        defer { t1Card.remove(); t0Card.remove() }
        let daemon = try await daemon([("serial1", t1Card), ("serial2", t0Card)])
        defer { daemon.remove() }

        for terminal in ["serial1", "serial2"] {
            let result = try #require(try await daemon.open(saleURL(reference: "serial-\(terminal)"), terminal: terminal).result,
                                      "\(daemon.logText)")
            #expect(result.status == "success", "\(terminal): \(result.message) \(daemon.logText)")
            let id = try #require(result.transaction?.id)
            let shown = try cli(["tx", "show", String(id)], socket: daemon.socket)
            #expect(shown.stdout.contains("GENERATE AC"), "\(shown.stdout)")
        }
        let readers = try cli(["readers"], socket: daemon.socket)
        let serial1 = try #require(readers.stdout.split(separator: "\n").first { $0.hasPrefix("serial1 ") })
        #expect(serial1.contains("serial \(t1Card.pty.slavePath) open"), "\(serial1)")
        #expect(serial1.contains("card present"))
        #expect(serial1.contains("ATR \(t1Card.simulator.atr.map { String(format: "%02X", $0) }.joined()) T=1"), "\(serial1)")
        #expect(readers.stdout.contains("T=0"))
        #expect(t1Card.simulator.commands.count >= 8, "the kernel's APDUs reached the card over the pty")
    }

    @Test("a wrong LRC is recovered; a garbled byte, a card gone silent and a pty closed mid-transaction end in failed callbacks; the other terminals go on")
    func faults() async throws {
        let t1Card = try PtyCard("visa-credit-cvn10.yaml", .init(.t1(CardSimulator.T1Behaviour())))
        let silentCard = try PtyCard("visa-credit-cvn10.yaml", .init(.t0(CardSimulator.T0Behaviour())))
        let garbledCard = try PtyCard("visa-credit-cvn10.yaml", .init(.t0(CardSimulator.T0Behaviour())))
        defer { t1Card.remove(); silentCard.remove(); garbledCard.remove() }
        let daemon = try await daemon([("serial1", t1Card), ("serial2", silentCard), ("serial3", garbledCard)])
        defer { daemon.remove() }

        // A garbled T=0 procedure byte: the exchange fails, the transaction is recorded failed.
        garbledCard.simulator.inject(.garbleNextByte)
        let garbled = try #require(try await daemon.open(saleURL(reference: "garbled-1"), terminal: "serial3").result)
        #expect(garbled.status == "failed", "\(garbled.message)")
        #expect(garbled.transaction?.status == "failed")

        t1Card.simulator.inject(.badEDC(blocks: 1))
        let recovered = try #require(try await daemon.open(saleURL(reference: "lrc-1"), terminal: "serial1").result)
        #expect(recovered.status == "success", "an R-block asked for the block again: \(recovered.message)")

        silentCard.simulator.inject(.silence)
        let silent = try #require(try await daemon.open(saleURL(reference: "silent-1"), terminal: "serial2").result)
        #expect(silent.status == "failed")
        #expect(silent.transaction?.status == "failed")

        t1Card.simulator.inject(.close(afterBytes: 20))
        let closed = try #require(try await daemon.open(saleURL(reference: "closed-1"), terminal: "serial1").result)
        #expect(closed.status == "failed", "\(closed.message)")
        #expect(closed.transaction?.status == "failed")

        let demo = try #require(try await daemon.open(saleURL(reference: "still-up"), terminal: "bench1").result)
        #expect(demo.status == "success", "the virtual terminal goes on: \(demo.message)")
        #expect(daemon.process.isRunning)
    }
}
