import EMV
import Foundation
import Testing
@testable import CardIO

@Suite("ISO 7816-3 answer to reset, conventions and PPS")
struct ISO7816ATRTests {
    @Test("the inverse table: 03 is TS 3F, known values, and a round trip for all 256 bytes")
    func inverseTable() {
        #expect(ISO7816.inverse(0x03) == 0x3F)
        #expect(ISO7816.inverse(0x3F) == 0x03)
        #expect(ISO7816.inverse(0x00) == 0xFF)
        #expect(ISO7816.inverse(0xFF) == 0x00)
        #expect(ISO7816.inverse(0x80) == 0xFE)
        #expect(ISO7816.inverse(0x01) == 0x7F)
        #expect(ISO7816.inverse(0x3B) == 0x23)
        var images = Set<UInt8>()
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(ISO7816.inverse(ISO7816.inverse(byte)) == byte)
            images.insert(ISO7816.inverse(byte))
        }
        #expect(images.count == 256, "a bijection")
    }

    @Test("a direct-convention T=0 ATR is read byte for byte and nothing more")
    func directATR() throws {
        var config = CardSimulator.Configuration(.t0(.init()))
        config.ta1 = 0x96
        let rig = try Rig(config)
        let (atr, convention) = try rig.readATR()
        #expect(convention == .direct)
        #expect(atr.bytes == rig.card.atr)
        #expect(atr.bytes == [0x3B, 0x19, 0x96] + Array("cardbench".utf8))
        #expect(atr.fi == 512 && atr.di == 32)
        #expect(atr.tck == nil)
        #expect(rig.tap.transcript == ["C " + Hex.encode(rig.card.atr)])
        #expect(thrown { try rig.readerLine.read(timeout: .milliseconds(50)) } == .timeout(reader: "sim1", seconds: 0.05),
                "the line is left after the ATR")
    }

    @Test("an inverse-convention ATR reads TS as 03, decodes to 3F, and T=1 then runs inverted both ways")
    func inverseATR() throws {
        var config = CardSimulator.Configuration(.t1(.init()))
        config.convention = .inverse
        let rig = try Rig(config)
        let (atr, convention) = try rig.readATR()
        #expect(convention == .inverse)
        #expect(atr.convention == .inverse)
        #expect(atr.bytes.first == 0x3F)
        #expect(atr.bytes == rig.card.atr)
        #expect(atr.protocols == [1])
        #expect(rig.tap.entries.first?.bytes == rig.card.atr.map(ISO7816.inverse))
        #expect(rig.tap.entries.first?.bytes.first == 0x03)

        rig.tap.clear()
        let t1 = T1Transport(line: ISO7816.line(rig.tap, for: convention), atr: atr, etu: rig.etu)
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Array(1...10) + [0x90, 0x00])
        let wire = rig.tap.entries
        #expect(wire.count == 2)
        #expect(wire[0].bytes.map(ISO7816.inverse) == h("00 00 05 00B2010C00") + [h("000005 00B2010C00").reduce(0, ^)])
        #expect(wire[1].bytes.map(ISO7816.inverse).prefix(3) == [0x00, 0x00, 0x0C])
    }

    @Test("a T=1 ATR's TCK is checked: a wrong one is a clean protocol error")
    func wrongTCK() throws {
        var config = CardSimulator.Configuration(.t1(.init()))
        var bytes = CardSimulator.buildATR(config)
        bytes[bytes.count - 1] ^= 0x01
        config.rawATR = bytes
        let rig = try Rig(config)
        let error = thrown { try rig.readATR() }
        guard case .protocolError(let reader, let detail)? = error else {
            Issue.record("expected a protocol error, got \(String(describing: error))")
            return
        }
        #expect(reader == "sim1")
        #expect(detail.contains("TCK mismatch"), "\(detail)")
        #expect(rig.tap.transcript == ["C " + Hex.encode(bytes)], "exactly the announced bytes were read")
    }

    @Test("a truncated ATR ends in a protocol error after one character waiting time, naming what was due")
    func truncatedATR() throws {
        var config = CardSimulator.Configuration(.t0(.init()))
        config.rawATR = [0x3B, 0x95, 0x13, 0x81]   // K = 5 historical bytes never come
        let rig = try Rig(config)
        let (error, elapsed) = timed { thrown { try rig.readATR(wait: .milliseconds(100)) } }
        guard case .protocolError(_, let detail)? = error else {
            Issue.record("expected a protocol error, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("ATR truncated"), "\(detail)")
        #expect(detail.contains("after 4 bytes"), "\(detail)")
        #expect(detail.contains("TD2") || detail.contains("historical"), "\(detail)")
        #expect(elapsed < .seconds(2))
    }

    @Test("silence before TS is a timeout; a bad TS and an endless TD chain are protocol errors")
    func silentAndMalformed() throws {
        let silent = try Rig(.init(.t0(.init())), before: { $0.inject(.silence) })
        let (error, elapsed) = timed { thrown { try silent.readATR(wait: .milliseconds(100)) } }
        #expect(error == .timeout(reader: "sim1", seconds: 0.2))
        #expect(elapsed < .seconds(2))

        var config = CardSimulator.Configuration(.t0(.init()))
        config.rawATR = [0x3C, 0x00]
        let badTS = try Rig(config)
        guard case .protocolError(_, let detail)? = thrown({ try badTS.readATR() }) else {
            Issue.record("a TS of 3C must be refused")
            return
        }
        #expect(detail.contains("TS must read 3B") && detail.contains("got 3C"), "\(detail)")

        config.rawATR = [0x3B, 0x80] + [UInt8](repeating: 0x80, count: 40)
        let endless = try Rig(config)
        guard case .protocolError(_, let detail)? = thrown({ try endless.readATR() }) else {
            Issue.record("an ATR over 33 bytes must be refused")
            return
        }
        #expect(detail.contains("ATR too long"), "\(detail)")
        #expect(endless.tap.entries.first?.bytes.count == 33, "it stops reading at the limit")
    }

    @Test("PPS to the card's TA1: request FF 11 13 FD echoed, so the caller switches rate")
    func ppsAccepted() throws {
        var config = CardSimulator.Configuration(.t1(.init()))
        config.ta1 = 0x13
        let rig = try Rig(config)
        let (atr, _) = try rig.readATR()
        rig.tap.clear()
        #expect(ISO7816.proposedTA1(for: atr) == 0x13)
        #expect(ISO7816.preferredProtocol(of: atr) == 1)
        #expect(try ISO7816.negotiatePPS(line: rig.tap, protocol: 1, ta1: 0x13, waitingTime: .milliseconds(100)))
        #expect(rig.tap.transcript == ["T FF1113FD", "C FF1113FD"])
        #expect(rig.card.ppsRequests == [h("FF1113FD")])
        let rate = try #require(ISO7816.Rate.fromTA1(of: atr))
        #expect(rate == ISO7816.Rate(f: 372, d: 4))
        #expect(rate.baudRate(clockHz: 3_571_200) == 38_400)

        // The card then serves T=1 as usual.
        let t1 = T1Transport(line: rig.tap, atr: atr, etu: ISO7816.etu(baudRate: 38_400), rate: rate)
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Array(1...10) + [0x90, 0x00])
    }

    @Test("PPS answered without PPS1 keeps the default rate; a wrong PCK and silence are errors")
    func ppsRefused() throws {
        var config = CardSimulator.Configuration(.t0(.init()))
        config.ta1 = 0x96
        config.ppsAnswer = .keepDefaultRate
        let keep = try Rig(config)
        _ = try keep.readATR()
        keep.tap.clear()
        #expect(try ISO7816.negotiatePPS(line: keep.tap, protocol: 0, ta1: 0x96, waitingTime: .milliseconds(100)) == false)
        #expect(keep.tap.transcript == ["T FF109679", "C FF00FF"])

        config.ppsAnswer = .wrongPCK
        let wrong = try Rig(config)
        _ = try wrong.readATR()
        guard case .protocolError(_, let detail)? = thrown({
            try ISO7816.negotiatePPS(line: wrong.tap, protocol: 0, ta1: 0x96, waitingTime: .milliseconds(100))
        }) else {
            Issue.record("a wrong PCK must be refused")
            return
        }
        #expect(detail.contains("PCK"), "\(detail)")

        config.ppsAnswer = .silent
        let silent = try Rig(config)
        _ = try silent.readATR()
        #expect(thrown {
            try ISO7816.negotiatePPS(line: silent.tap, protocol: 0, ta1: 0x96, waitingTime: .milliseconds(50), slack: .milliseconds(50))
        } == .timeout(reader: "sim1", seconds: 0.1))
    }

    @Test("PPS answers naming another protocol or another PPS1 are refused")
    func ppsMismatch() throws {
        final class ScriptLine: CardLine {
            var input: [UInt8]
            var written: [UInt8] = []
            init(_ input: [UInt8]) { self.input = input }
            var readerName: String { "script" }
            func write(_ bytes: [UInt8]) throws(CardIOError) { written += bytes }
            func read(timeout: Duration) throws(CardIOError) -> UInt8 {
                guard !input.isEmpty else { throw .timeout(reader: "script", seconds: timeout.seconds) }
                return input.removeFirst()
            }
            func discardInput() { input = [] }
        }
        let otherT = ScriptLine([0xFF, 0x10, 0x96, 0x79])
        guard case .protocolError(_, let detail)? = thrown({ try ISO7816.negotiatePPS(line: otherT, protocol: 1, ta1: 0x96) }) else {
            Issue.record("another protocol must be refused")
            return
        }
        #expect(detail.contains("T=0 but T=1"), "\(detail)")
        #expect(otherT.written == h("FF119678"))

        let otherPPS1 = ScriptLine([0xFF, 0x11, 0x95, 0x7B])
        guard case .protocolError(_, let detail2)? = thrown({ try ISO7816.negotiatePPS(line: otherPPS1, protocol: 1, ta1: 0x96) }) else {
            Issue.record("another PPS1 must be refused")
            return
        }
        #expect(detail2.contains("PPS1 must echo"), "\(detail2)")
    }

    @Test("a protocol error reads as one line naming the reader and ISO 7816-3")
    func protocolErrorDescription() {
        let error = CardIOError.protocolError(reader: "serial0", detail: "TS must read 3B")
        #expect(error.description == "reader serial0: ISO 7816-3 protocol error: TS must read 3B")
    }

    @Test("timings come from the ATR and the etu: WWT, BWT, CWT, IFSC, EDC")
    func timings() throws {
        let etu = ISO7816.etu(baudRate: 9600)
        #expect(ISO7816.initialWaitingTime(etu: etu) == etu * 10_080)
        #expect(abs((ISO7816.initialWaitingTime(etu: etu) - .seconds(1.05)).seconds) < 1e-6)
        let (reader, _) = try SocketLine.pair()
        // WI = 10 by default: 960 · 10 · 372/372 etu + 480 etu.
        let t0 = T0Transport(line: reader, atr: try ATR.parse([0x3B, 0x00]), etu: etu)
        #expect(t0.workWaitingTime == etu * 10_080)
        // TC2 = 20, TA1 = 96 (Fi 512, Di 32) after PPS: 960 · 20 · 512 · 32 / 512 etu + 480 · 32 etu.
        let fast = try ATR.parse([0x3B, 0x90, 0x96, 0x40, 0x14])
        let t0Fast = T0Transport(line: reader, atr: fast, etu: etu, rate: .init(f: 512, d: 32))
        #expect(t0Fast.workWaitingTime == etu * (960 * 20 * 32 + 480 * 32))

        let t1ATR = try ATR.parse(CardSimulator.buildATR({
            var c = CardSimulator.Configuration(.t1({
                var b = CardSimulator.T1Behaviour()
                b.ifsc = 0x80
                b.bwi = 2
                b.cwi = 5
                b.edc = .crc
                return b
            }()))
            c.historicalBytes = []
            return c
        }()))
        let t1 = T1Transport(line: reader, atr: t1ATR, etu: etu)
        #expect(t1.ifsc == 128)
        #expect(t1.edc == .crc)
        #expect(t1.blockWaitingTime == etu * (11 + 4 * 960 + 960))
        #expect(t1.characterWaitingTime == etu * (11 + 32 + 4))
        #expect(t1.ifsd == 32)
    }
}

@Suite("CardIOError messages")
struct CardIOErrorMessageTests {
    @Test("a timeout shows its seconds to the millisecond and claims no ejection")
    func timeoutMessage() {
        #expect(CardIOError.timeout(reader: "phoenix", seconds: 1.2499999999999933).description
                == "reader phoenix: card silent for more than 1.25 s (response timeout)")
        #expect(CardIOError.timeout(reader: "r", seconds: 10).description.contains("more than 10 s"))
        #expect(CardIOError.timeout(reader: "r", seconds: 0.2).description.contains("more than 0.2 s"))
    }
}
