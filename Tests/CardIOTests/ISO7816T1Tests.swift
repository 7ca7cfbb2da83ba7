import EMV
import Foundation
import Testing
@testable import CardIO

@Suite("ISO 7816-3 T=1 over a byte line")
struct ISO7816T1Tests {
    static let records: [UInt8] = Array(1...10)

    func card(_ tweak: (inout CardSimulator.T1Behaviour) -> Void = { _ in }) -> CardSimulator.Configuration {
        var behaviour = CardSimulator.T1Behaviour()
        behaviour.cwi = 5   // CWT 47 etu: draining after a bad block takes 5 ms, not CWI 13's 0.85 s
        tweak(&behaviour)
        return .init(.t1(behaviour))
    }

    /// A transport with short waits, for tests that make the card late or silent.
    func quick(_ rig: Rig, bwt: Duration = .milliseconds(50), ifsc: Int = 254, edc: ISO7816.EDC = .lrc) throws -> T1Transport {
        _ = try rig.readATR()
        rig.tap.clear()
        return T1Transport(line: rig.tap, ifsc: ifsc, edc: edc, blockWaitingTime: bwt,
                           characterWaitingTime: .milliseconds(50), slack: .milliseconds(20))
    }

    @Test("IFSD negotiation then I-blocks with alternating N(S) both ways")
    func simpleExchange() throws {
        let rig = try Rig(card())
        let t1 = try rig.t1()
        #expect(t1.ifsc == 254 && t1.ifsd == 32)
        try t1.negotiateIFSD()
        #expect(t1.ifsd == 254)
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        #expect(try t1.transmit(h("00 20 00 80 02 1234")) == [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T 00C101FE3E", "C 00E101FE1E",
            "T " + lrcBlock(0x00, h("00B2010C00")), "C " + lrcBlock(0x00, Self.records + [0x90, 0x00]),
            "T " + lrcBlock(0x40, h("00200080021234")), "C " + lrcBlock(0x40, [0x90, 0x00]),
        ])
        #expect(rig.card.commands == [h("00B2010C00"), h("00200080021234")], "T=1 carries the APDU unchanged, Le included")
    }

    @Test("makeTransport picks T=1 from the ATR and raises IFSD first; T=0 from a T=0 ATR")
    func makeTransport() throws {
        let rig = try Rig(card())
        let (atr, convention) = try rig.readATR()
        rig.tap.clear()
        let transport = try ISO7816.makeTransport(line: ISO7816.line(rig.tap, for: convention), atr: atr, etu: rig.etu)
        #expect(transport is T1Transport)
        #expect(rig.tap.transcript == ["T 00C101FE3E", "C 00E101FE1E"])
        #expect(try transport.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])

        let t0 = try Rig(.init(.t0(.init())))
        let (t0ATR, _) = try t0.readATR()
        #expect(try ISO7816.makeTransport(line: t0.tap, atr: t0ATR, etu: t0.etu) is T0Transport)
        guard case .protocolError(_, let detail)? = thrown({
            try ISO7816.makeTransport(line: t0.tap, atr: try ATR.parse([0x3B, 0x80, 0x02, 0x82]), etu: t0.etu)
        }) else {
            Issue.record("T=2 must be refused")
            return
        }
        #expect(detail.contains("T=2"), "\(detail)")
    }

    @Test("a C-APDU longer than IFSC goes as chained I-blocks, each acknowledged by an R-block")
    func chainingToTheCard() throws {
        let rig = try Rig(card { $0.ifsc = 16 })
        let t1 = try rig.t1()
        #expect(t1.ifsc == 16)
        try t1.negotiateIFSD()
        rig.tap.clear()
        let data = (0..<35).map { UInt8($0) }
        let apdu = h("00 DA 00 00 23") + data
        #expect(try t1.transmit(apdu) == data + [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T " + lrcBlock(0x20, Array(apdu[0..<16])), "C " + lrcBlock(0x90),
            "T " + lrcBlock(0x60, Array(apdu[16..<32])), "C " + lrcBlock(0x80),
            "T " + lrcBlock(0x00, Array(apdu[32...])), "C " + lrcBlock(0x00, data + [0x90, 0x00]),
        ])
        #expect(rig.card.commands == [apdu])
    }

    @Test("a response longer than IFSD comes chained; the terminal acknowledges each block")
    func chainingFromTheCard() throws {
        let rig = try Rig(card())
        let t1 = try rig.t1()
        let response = (0..<100).map { UInt8($0) } + [0x90, 0x00]
        #expect(try t1.transmit(h("00 B0 00 64 00")) == response)
        #expect(rig.tap.transcript == [
            "T " + lrcBlock(0x00, h("00B0006400")), "C " + lrcBlock(0x20, Array(response[0..<32])),
            "T " + lrcBlock(0x90), "C " + lrcBlock(0x60, Array(response[32..<64])),
            "T " + lrcBlock(0x80), "C " + lrcBlock(0x20, Array(response[64..<96])),
            "T " + lrcBlock(0x90), "C " + lrcBlock(0x40, Array(response[96...])),
        ])

        // With IFSD 254 the card sends 202 bytes in one block.
        try t1.negotiateIFSD(254)
        rig.tap.clear()
        let long = (0..<200).map { UInt8($0) } + [0x90, 0x00]
        #expect(try t1.transmit(h("00 B0 00 C8 00")) == long)
        #expect(rig.tap.transcript == ["T " + lrcBlock(0x40, h("00B000C800")), "C " + lrcBlock(0x00, long)])
    }

    @Test("S(WTX request) is answered and the next block gets BWT × the multiplier; without it BWT holds")
    func waitingTimeExtension() throws {
        var config = card { $0.waitingTimeExtension = 4 }
        config.responseDelay = .milliseconds(250)
        let rig = try Rig(config)
        let t1 = try quick(rig, bwt: .milliseconds(100))
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T " + lrcBlock(0x00, h("00B2010C00")), "C " + lrcBlock(0xC3, [0x04]),
            "T " + lrcBlock(0xE3, [0x04]), "C " + lrcBlock(0x00, Self.records + [0x90, 0x00]),
        ])

        var slow = card()
        slow.responseDelay = .milliseconds(250)
        let control = try Rig(slow)
        let t1Control = try quick(control, bwt: .milliseconds(100))
        #expect(try t1Control.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        #expect(control.tap.transcript.first?.hasPrefix("T " + lrcBlock(0x00, h("00B2010C00")) + "00820082") == true,
                "past BWT the terminal asks again with R(0) 'other error'")
    }

    @Test("a block with a bad LRC is asked for again with R(N(R)) 'EDC error' and the exchange recovers")
    func badLRCRecovered() throws {
        let rig = try Rig(card())
        let t1 = try rig.t1()
        rig.card.inject(.badEDC(blocks: 1))
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        var bad = T1Block(pcb: 0x00, info: Self.records + [0x90, 0x00]).encoded(.lrc)
        bad[bad.count - 1] ^= 0xFF
        #expect(rig.tap.transcript == [
            "T " + lrcBlock(0x00, h("00B2010C00")), "C " + Hex.encode(bad),
            "T 00810081", "C " + lrcBlock(0x00, Self.records + [0x90, 0x00]),
        ])
        #expect(rig.card.commands.count == 1, "the card answered once and retransmitted")
    }

    @Test("a garbled byte in a block is recovered the same way")
    func garbledByteRecovered() throws {
        let rig = try Rig(card())
        let t1 = try rig.t1()
        rig.card.inject(.garbleNextByte)
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.transcript.count == 4)
        #expect(rig.tap.transcript[1].hasPrefix("C 81"), "the NAD arrived garbled")
        #expect(rig.tap.transcript[2] == "T 00810081")
    }

    @Test("a lost block: past BWT the terminal sends R(N(R)) and the card sends its block again")
    func lostBlock() throws {
        let rig = try Rig(card())
        let t1 = try quick(rig)
        rig.card.inject(.dropBlocks(1))
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T " + lrcBlock(0x00, h("00B2010C00")) + "00820082",
            "C " + lrcBlock(0x00, Self.records + [0x90, 0x00]),
        ])
        #expect(rig.card.log.contains { $0.hasPrefix("lost I(0,-)") })
    }

    @Test("CRC mode: the ATR's TC3 picks CRC, blocks carry two EDC bytes, and the CRC is ISO 13239's")
    func crcMode() throws {
        #expect(ISO7816.EDC.crc.compute(Array("123456789".utf8)) == [0x6F, 0x91])
        #expect(ISO7816.EDC.lrc.compute([0x00, 0xC1, 0x01, 0xFE]) == [0x3E])
        let rig = try Rig(card { $0.edc = .crc })
        let t1 = try rig.t1()
        #expect(t1.edc == .crc)
        try t1.negotiateIFSD()
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        let crc = { (pcb: UInt8, info: [UInt8]) in Hex.encode(T1Block(pcb: pcb, info: info).encoded(.crc)) }
        #expect(rig.tap.transcript == [
            "T " + crc(0xC1, [0xFE]), "C " + crc(0xE1, [0xFE]),
            "T " + crc(0x00, h("00B2010C00")), "C " + crc(0x00, Self.records + [0x90, 0x00]),
        ])
        #expect(rig.tap.entries[0].bytes.count == 6)

        rig.card.inject(.badEDC(blocks: 1))
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00], "a bad CRC is recovered too")
    }

    @Test("three bad blocks make the terminal resynchronise, then the APDU is sent again from N(S) 0")
    func resynchronisation() throws {
        let rig = try Rig(card())
        let t1 = try quick(rig)
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        rig.tap.clear()
        rig.card.inject(.badEDC(blocks: 3))
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        let transcript = rig.tap.transcript
        #expect(transcript.first == "T " + lrcBlock(0x40, h("00B2010C00")))
        #expect(transcript.filter { $0 == "T 00910091" }.count == 2, "two R(1) 'EDC error'")
        #expect(transcript.contains("T 00C000C0"))
        #expect(transcript.contains("C 00E000E0"))
        #expect(transcript.suffix(2) == ["T " + lrcBlock(0x00, h("00B2010C00")), "C " + lrcBlock(0x00, Self.records + [0x90, 0x00])])
        #expect(rig.card.commands.count == 3, "the APDU ran again after the resynchronisation")
        #expect(try t1.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00], "and the numbering goes on from there")
        #expect(rig.tap.transcript.suffix(2) == ["T " + lrcBlock(0x40, h("00B2010C00")), "C " + lrcBlock(0x40, Self.records + [0x90, 0x00])])
    }

    @Test("a card whose blocks stay wrong ends in a protocol error after the resynchronisation fails")
    func cardStaysWrong() throws {
        let rig = try Rig(card())
        let t1 = try quick(rig)
        rig.card.inject(.badEDC(blocks: 1000))
        let (error, elapsed) = timed { thrown { try t1.transmit(h("00 B2 01 0C 00")) } }
        guard case .protocolError(_, let detail)? = error else {
            Issue.record("expected a protocol error, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("resynchronisation failed"), "\(detail)")
        #expect(detail.contains("wrong LRC"), "\(detail)")
        #expect(elapsed < .seconds(5))
        #expect(rig.tap.transcript.filter { $0 == "T 00C000C0" }.count == 3, "S(RESYNCH request) three times")
        guard case .protocolError(_, let after)? = thrown({ try t1.transmit(h("00 B2 01 0C 00")) }) else {
            Issue.record("the transport must refuse until the card is reset")
            return
        }
        #expect(after.contains("reset the card"))
    }

    @Test("a silent card: R-blocks, then S(RESYNCH), then .timeout")
    func silentCard() throws {
        let rig = try Rig(card())
        let t1 = try quick(rig)
        rig.card.inject(.silence)
        let (error, elapsed) = timed { thrown { try t1.transmit(h("00 B2 01 0C 00")) } }
        #expect(error == .timeout(reader: "sim1", seconds: 0.07))
        #expect(elapsed >= .milliseconds(6 * 70) && elapsed < .seconds(5))
        #expect(rig.tap.transcript == ["T " + lrcBlock(0x00, h("00B2010C00")) + "00820082" + "00820082" + "00C000C0" + "00C000C0" + "00C000C0"])
    }

    @Test("the line closing in the middle of a block is .cardRemoved")
    func lineClosesMidExchange() throws {
        let rig = try Rig(card())
        let t1 = try rig.t1()
        rig.card.inject(.close(afterBytes: 5))
        #expect(thrown { try t1.transmit(h("00 B2 01 0C 00")) } == .cardRemoved(reader: "sim1"))
        #expect(rig.tap.transcript == ["T " + lrcBlock(0x00, h("00B2010C00")), "C 00000C0102"])
        #expect(thrown { try t1.transmit(h("00 B2 01 0C 00")) } != nil)
    }
}
