import EMV
import Foundation
import Testing
@testable import CardIO

@Suite("ISO 7816-3 T=0 over a byte line")
struct ISO7816T0Tests {
    static let records: [UInt8] = Array(1...10)
    static let fci = Array(testApplet(h("00A4040007A0000000031010")).dropLast(2))

    func card(_ tweak: (inout CardSimulator.T0Behaviour) -> Void = { _ in }) -> CardSimulator.Configuration {
        var behaviour = CardSimulator.T0Behaviour()
        tweak(&behaviour)
        return .init(.t0(behaviour))
    }

    @Test("case 1 goes with P3 = 00 and the card answers with SW1 SW2 alone")
    func case1() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("84 1E 00 00")) == [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 841E000000", "C 9000"])
        #expect(rig.card.commands == [h("841E0000")])
    }

    @Test("case 2: INS acknowledgement then Le bytes; 6Cxx re-issues with the right P3 and keeps at most Le bytes")
    func case2() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("00 B2 01 0C 0A")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 00B2010C0A", "C B2" + Hex.encode(Self.records) + "9000"])

        rig.tap.clear()
        #expect(try t0.transmit(h("00 B2 01 0C 00")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 00B2010C00", "C 6C0A", "T 00B2010C0A", "C B2" + Hex.encode(Self.records) + "9000"])

        rig.tap.clear()
        #expect(try t0.transmit(h("00 B2 01 0C 05")) == Array(1...5) + [0x90, 0x00], "La > Le keeps the first Le bytes")
        #expect(rig.tap.transcript == ["T 00B2010C05", "C 6C0A", "T 00B2010C0A", "C B2" + Hex.encode(Self.records) + "9000"])

        rig.tap.clear()
        #expect(try t0.transmit(h("00 B2 03 0C 00")) == [0x6A, 0x83], "an error status passes unchanged")
        #expect(rig.tap.transcript == ["T 00B2030C00", "C 6A83"])
    }

    @Test("case 2 with Le = 256 (P3 00) receives 256 bytes")
    func le256() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        let all = (0...255).map { UInt8($0) }
        #expect(try t0.transmit(h("00 B2 02 0C 00")) == all + [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 00B2020C00", "C B2" + Hex.encode(all) + "9000"])
    }

    @Test("case 3: header, INS, data, status")
    func case3() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        let verify = h("00 20 00 80 08 24 12 34 FF FF FF FF FF")
        #expect(try t0.transmit(verify) == [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 0020008008", "C 20", "T 241234FFFFFFFFFF", "C 9000"])
        #expect(rig.card.commands == [verify])
    }

    @Test("case 4: data sent after INS, 61xx, GET RESPONSE with P3 = xx")
    func case4() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("00 A4 04 00 07 A0000000031010 00")) == Self.fci + [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T 00A4040007", "C A4", "T A0000000031010", "C 6112",
            "T 00C0000012", "C C0" + Hex.encode(Self.fci) + "9000",
        ])
        #expect(rig.card.commands == [h("00A4040007A0000000031010")], "over T=0 the card never sees Le")
    }

    @Test("the GET RESPONSE loop follows 61xx until the card is done, gathering the data in order")
    func getResponseLoop() throws {
        let rig = try Rig(card { $0.getResponseChunk = 8 })
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("00 A4 04 00 07 A0000000031010 00")) == Self.fci + [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T 00A4040007", "C A4", "T A0000000031010", "C 6108",
            "T 00C0000008", "C C0" + Hex.encode(Self.fci[0..<8]) + "6108",
            "T 00C0000008", "C C0" + Hex.encode(Self.fci[8..<16]) + "6102",
            "T 00C0000002", "C C0" + Hex.encode(Self.fci[16...]) + "9000",
        ])
    }

    @Test("a case 4 warning (6283) with no data gets GET RESPONSE 00, and the data come back with the warning")
    func case4Warning() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        let name = Hex.encode(Array("BLOCKED".utf8))
        #expect(try t0.transmit(h("00 A4 04 00 07" + name + "00")) == Self.fci + [0x62, 0x83])
        #expect(rig.tap.transcript == [
            "T 00A4040007", "C A4", "T " + name, "C 6283",
            "T 00C0000000", "C 6C12", "T 00C0000012", "C C0" + Hex.encode(Self.fci) + "9000",
        ])
    }

    @Test("NULL bytes before procedure bytes are skipped")
    func nullBytes() throws {
        let rig = try Rig(card { $0.nullBytes = 2 })
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("00 B2 01 0C 0A")) == Self.records + [0x90, 0x00])
        #expect(try t0.transmit(h("00 20 00 80 02 1234")) == [0x90, 0x00])
        #expect(rig.tap.transcript == [
            "T 00B2010C0A", "C 6060B2" + Hex.encode(Self.records) + "9000",
            "T 0020008002", "C 606020", "T 1234", "C 60609000",
        ])
    }

    @Test("~INS moves one byte at a time, both ways")
    func complementedINS() throws {
        let rig = try Rig(card { $0.acknowledgement = .complementedINS })
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("00 20 00 80 03 24 12 34")) == [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 0020008003", "C DF", "T 24", "C DF", "T 12", "C DF", "T 34", "C 9000"])

        rig.tap.clear()
        #expect(try t0.transmit(h("00 B2 01 0C 0A")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.transcript == ["T 00B2010C0A", "C " + Self.records.map { "4D" + Hex.encode([$0]) }.joined() + "9000"])
    }

    @Test("a silent card exceeds the work waiting time: .timeout, and the transport then asks for a reset")
    func workWaitingTime() throws {
        let rig = try Rig(card())
        _ = try rig.readATR()
        let t0 = T0Transport(line: rig.tap, workWaitingTime: .milliseconds(50), slack: .milliseconds(50))
        rig.card.inject(.silence)
        let (error, elapsed) = timed { thrown { try t0.transmit(h("00 B2 01 0C 0A")) } }
        #expect(error == .timeout(reader: "sim1", seconds: 0.1))
        #expect(elapsed >= .milliseconds(100) && elapsed < .seconds(1))
        guard case .protocolError(_, let detail)? = thrown({ try t0.transmit(h("00 B2 01 0C 0A")) }) else {
            Issue.record("a transport after a timeout must refuse")
            return
        }
        #expect(detail.contains("reset the card"), "\(detail)")
    }

    @Test("NULL bytes keep a slow card within the work waiting time")
    func nullBytesExtendTheWait() throws {
        let rig = try Rig(card {
            $0.nullBytes = 4
            $0.nullInterval = .milliseconds(60)
        })
        _ = try rig.readATR()
        let t0 = T0Transport(line: rig.tap, workWaitingTime: .milliseconds(100), slack: .milliseconds(50))
        let (response, elapsed) = try timed { try t0.transmit(h("00 B2 01 0C 0A")) }
        #expect(response == Self.records + [0x90, 0x00])
        #expect(elapsed >= .milliseconds(240), "longer than one WWT in all")
    }

    @Test("a garbled procedure byte is a clean protocol error")
    func garbledProcedureByte() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        rig.card.inject(.garbleNextByte)
        guard case .protocolError(_, let detail)? = thrown({ try t0.transmit(h("00 B2 01 0C 0A")) }) else {
            Issue.record("B2 garbled to 33 must be refused")
            return
        }
        #expect(detail.contains("procedure byte 33"), "\(detail)")
    }

    @Test("the line closing in the middle of the response is .cardRemoved")
    func lineClosesMidExchange() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        rig.card.inject(.close(afterBytes: 4))
        #expect(thrown { try t0.transmit(h("00 B2 01 0C 0A")) } == .cardRemoved(reader: "sim1"))
        #expect(rig.tap.transcript == ["T 00B2010C0A", "C B2010203"])
    }

    @Test("extended-length APDUs are refused before anything is sent")
    func extendedRefused() throws {
        let rig = try Rig(card())
        let t0 = try rig.t0()
        guard case .io(_, let detail)? = thrown({ try t0.transmit(h("00 B0 00 00 00 01 00")) }) else {
            Issue.record("an extended APDU must be refused")
            return
        }
        #expect(detail.contains("nothing was sent"), "\(detail)")
        #expect(rig.tap.transcript.isEmpty)
        #expect(try t0.transmit(h("00 B2 01 0C 0A")) == Self.records + [0x90, 0x00], "and the transport still works")
    }

    @Test("inverse convention: T=0 bytes are inverted on the wire both ways")
    func inverseT0() throws {
        var config = card()
        config.convention = .inverse
        let rig = try Rig(config)
        let t0 = try rig.t0()
        #expect(try t0.transmit(h("00 B2 01 0C 0A")) == Self.records + [0x90, 0x00])
        #expect(rig.tap.entries.map { $0.bytes.map(ISO7816.inverse) } == [h("00B2010C0A"), [0xB2] + Self.records + [0x90, 0x00]])
    }
}
