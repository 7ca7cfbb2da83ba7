#if canImport(Glibc)
import Glibc
#endif
import CLibPCSCLite
import EMV
import Foundation
import Testing
@testable import CardIO

@Suite("PC/SC reader names")
struct PCSCReaderPatternTests {
    @Test("pcscd's plug index and slot are cut off; the rest matches as a substring ignoring case")
    func substring() throws {
        #expect(PCSCReaderPattern.baseName("Virtual PCD 00 01") == "Virtual PCD")
        #expect(PCSCReaderPattern.baseName("SCM SCR 331 (80000F3A) 0A 00") == "SCM SCR 331 (80000F3A)")
        // Lower-case hex or one pair is not pcscd's suffix.
        #expect(PCSCReaderPattern.baseName("Reader 0a 00") == "Reader 0a 00")
        #expect(PCSCReaderPattern.baseName("Reader 00") == "Reader 00")
        let omnikey = try PCSCReaderPattern(parsing: "omnikey 3x21")
        #expect(omnikey.matches("HID Global OMNIKEY 3x21 Smart Card Reader 00 00"))
        #expect(omnikey.matches("HID Global OMNIKEY 3x21 Smart Card Reader 01 00"))
        #expect(!omnikey.matches("HID Global OMNIKEY 5022 Smart Card Reader 00 00"))
        // The index is not part of what a substring is matched against…
        #expect(!(try PCSCReaderPattern(parsing: "00 00")).matches("Virtual PCD 00 00"))
        // …but the whole name picks one slot.
        let slot = try PCSCReaderPattern(parsing: "Virtual PCD 00 01")
        #expect(slot.select(from: ["Virtual PCD 00 00", "Virtual PCD 00 01"]) == ["Virtual PCD 00 01"])
        // The USB serial in parentheses pins one physical reader.
        let serial = try PCSCReaderPattern(parsing: "(80000F3A)")
        #expect(serial.select(from: ["SCM SCR 331 (80000F3B) 00 00", "SCM SCR 331 (80000F3A) 01 00"]) == ["SCM SCR 331 (80000F3A) 01 00"])
    }

    @Test("/…/ is a regular expression; the first match in pcscd's order is the one used")
    func regex() throws {
        let pattern = try PCSCReaderPattern(parsing: "/Prox-DU \\[.*Contactless.*\\]/")
        let names = ["Gemalto Prox-DU [Prox-DU Contact_09A00795] (09A00795) 00 00",
                     "Gemalto Prox-DU [Prox-DU Contactless_09A00795] (09A00795) 01 00"]
        #expect(pattern.select(from: names) == [names[1]])
        #expect(try PCSCReaderPattern(parsing: "/^Virtual/").select(from: ["Virtual PCD 00 00", "Virtual PCD 00 01", "Other 00 00"])
                == ["Virtual PCD 00 00", "Virtual PCD 00 01"])
        #expect(pattern.description == "pcsc:/Prox-DU \\[.*Contactless.*\\]/")
    }

    @Test("an empty pattern and a /…/ that is not a regular expression are refused with the rule")
    func refused() {
        #expect(throws: PCSCReaderPattern.PatternError.self) { try PCSCReaderPattern(parsing: "") }
        #expect(throws: PCSCReaderPattern.PatternError.self) { try PCSCReaderPattern(parsing: "  ") }
        do {
            _ = try PCSCReaderPattern(parsing: "/([/")
            Issue.record("a broken regex was accepted")
        } catch {
            #expect(error.rule.hasPrefix("pcsc:/…/ must be a regular expression"), "\(error.rule)")
        }
    }

    @Test("the protocol asked of pcscd is the ATR's first; either when the ATR cannot be read")
    func protocols() {
        #expect(PCSCReader.protocols(for: h("3B6800008066A2060201320E")) == DWORD(SCARD_PROTOCOL_T0))
        #expect(PCSCReader.protocols(for: h("3B 95 13 81 01 80 73 FF 01 00 0B")) == DWORD(SCARD_PROTOCOL_T1))
        #expect(PCSCReader.protocols(for: [0x3B]) == PCSCReader.anyProtocol)
        #expect(PCSCReader.protocols(for: nil) == PCSCReader.anyProtocol)
    }

    @Test("pcscd's codes read as their names, and as what they mean to a reader")
    func errors() {
        let sharing = PCSCError(code: SCARD_E_SHARING_VIOLATION, call: "SCardConnect")
        #expect(sharing.description == "SCardConnect: SCARD_E_SHARING_VIOLATION (Sharing violation.)")
        #expect(!sharing.isServiceGone && !sharing.isCardGone)
        #expect(PCSCError(code: SCARD_E_NO_SERVICE, call: "x").isServiceGone)
        #expect(PCSCError(code: SCARD_F_COMM_ERROR, call: "x").isServiceGone)
        #expect(PCSCError(code: SCARD_W_REMOVED_CARD, call: "x").isCardGone)
        #expect(PCSCError(code: 0x1234, call: "x").name == "0x00001234")
    }
}

/// A card behind a scripted T=0 wire: records the TPDUs and answers from a script.
final class ScriptedTPDUs {
    var sent: [String] = []
    var answers: [String]
    init(_ answers: [String]) { self.answers = answers }
    func send(_ tpdu: [UInt8]) throws(CardIOError) -> [UInt8] {
        sent.append(Hex.encode(tpdu))
        guard !answers.isEmpty else { throw .io(reader: "script", detail: "no answer left for \(Hex.encode(tpdu))") }
        return h(answers.removeFirst())
    }
    func run(_ apdu: String) throws(CardIOError) -> String {
        Hex.encode(try T0Exchange.transmit(h(apdu), reader: "script") { (tpdu: [UInt8]) throws(CardIOError) -> [UInt8] in try send(tpdu) })
    }
}

@Suite("T=0 above a reader that passes TPDUs through (PC/SC)")
struct T0ExchangeTests {
    @Test("case 4 goes without Le; 61xx is followed by GET RESPONSE with P3 = xx")
    func getResponse() throws {
        let wire = ScriptedTPDUs(["6105", "01020304059000"])
        #expect(try wire.run("00A4040003A0000005") == "01020304059000")
        #expect(wire.sent == ["00A4040003A00000", "00C0000005"])
    }

    @Test("61xx again and again: the data of every GET RESPONSE, in order, with the last status")
    func chained() throws {
        let wire = ScriptedTPDUs(["6102", "AABB6101", "CC9000"])
        #expect(try wire.run("80AE8000020102 00") == "AABBCC9000")
        #expect(wire.sent == ["80AE8000020102", "00C0000002", "00C0000001"])
    }

    @Test("case 2 answered 6Cxx is sent again with P3 = xx, keeping at most Le bytes")
    func wrongLength() throws {
        let wire = ScriptedTPDUs(["6C03", "0A0B0C9000"])
        #expect(try wire.run("00B2010C00") == "0A0B0C9000")
        #expect(wire.sent == ["00B2010C00", "00B2010C03"])
        let short = ScriptedTPDUs(["6C04", "0A0B0C0D9000"])
        #expect(try short.run("80CA9F1702") == "0A0B9000")
    }

    @Test("case 4 answered with a warning and no data: GET RESPONSE 00 fetches the data, the warning stays")
    func warning() throws {
        let wire = ScriptedTPDUs(["6283", "6C04", "111213149000"])
        #expect(try wire.run("00A4040002A00000") == "111213146283")
        #expect(wire.sent == ["00A4040002A000", "00C0000000", "00C0000004"])
        // Case 3 (no Le) keeps a warning as it is: there is nothing to fetch.
        let case3 = ScriptedTPDUs(["6283"])
        #expect(try case3.run("00A4040002A000") == "6283")
        #expect(case3.sent.count == 1)
    }

    @Test("a reader that works in APDUs answers data ‖ 9000 at once: nothing more is sent")
    func apduLevel() throws {
        let wire = ScriptedTPDUs(["6F0184019000"])
        #expect(try wire.run("00A4040002A00000") == "6F0184019000")
        #expect(wire.sent.count == 1)
        let case1 = ScriptedTPDUs(["9000"])
        #expect(try case1.run("841E0000") == "9000")
        #expect(case1.sent == ["841E000000"])
    }

    @Test("refusals: an extended APDU sends nothing, an answer without SW1 SW2, a card that never stops answering 61xx")
    func refusals() throws {
        let wire = ScriptedTPDUs([])
        #expect(throws: CardIOError.self) { try wire.run("00B2010C000100") }
        #expect(wire.sent.isEmpty)
        let mute = ScriptedTPDUs(["90"])
        do {
            _ = try mute.run("00B2010C00")
            Issue.record("a 1-byte answer was accepted")
        } catch {
            #expect(error.description.contains("has no SW1 SW2"), "\(error)")
        }
        let babbling = ScriptedTPDUs(["6100"] + Array(repeating: String(repeating: "00", count: 256) + "6100", count: 300))
        do {
            _ = try babbling.run("00A4040002A00000")
            Issue.record("an endless 61xx chain was followed")
        } catch {
            #expect(error.description.contains("keeps answering 61xx"), "\(error)")
        }
    }
}

// MARK: - Against a real pcscd with vsmartcard's vpcd

/// The pcscd this test process uses: libpcsclite reads `PCSCLITE_CSOCK_NAME` once per process, so
/// every in-process PC/SC test shares one socket path, set before the first PC/SC call.
let processPCSCD: PrivatePCSCD? = {
    guard PrivatePCSCD.missing.isEmpty else { return nil }
    let directory = "/tmp/cardio-pcscd-\(getpid())"
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    guard let pcscd = try? PrivatePCSCD(directory: directory) else { return nil }
    setenv("PCSCLITE_CSOCK_NAME", pcscd.socket, 1)
    return pcscd
}()

/// Whether the real-pcscd suites run: root with pcscd, vpcd and systemd-socket-activate, or
/// `CARDBENCH_REQUIRE_PCSC=1` (CI), which makes a missing piece a failure instead of a skip.
let pcscAvailable = PrivatePCSCD.missing.isEmpty || ProcessInfo.processInfo.environment["CARDBENCH_REQUIRE_PCSC"] == "1"

/// A PCSCReader on the process's private pcscd, its events recorded.
final class PCSCRig: @unchecked Sendable {
    let pcscd: PrivatePCSCD
    let reader: PCSCReader
    let recorder = Recorder()

    init(pattern: String? = nil, startPCSCD: Bool = true) throws {
        pcscd = try #require(processPCSCD, "a private pcscd needs: \(PrivatePCSCD.missing.joined(separator: ", "))")
        if startPCSCD { try pcscd.start() }
        reader = PCSCReader(name: "usb1", pattern: try PCSCReaderPattern(parsing: pattern ?? pcscd.reader(slot: 0)), logger: recorder.logger)
        let recorder = self.recorder
        reader.addObserver { recorder.observe($0) }
        reader.start()
    }

    var endpoint: ReaderEndpoint { .tcp(host: "127.0.0.1", port: pcscd.port) }

    func insert(atr: [UInt8] = ISO7816T0Tests.t0ATR, respond: @escaping @Sendable (TestCard, [UInt8]) -> [UInt8] = { echoCard($1) }) throws -> TestCard {
        let card = try TestCard(endpoint, atr: atr, respond: respond)
        #expect(eventually(5) { self.reader.isCardPresent }, "pcscd did not report the card: \(pcscd.logText.suffix(600))")
        return card
    }

    func tearDown() {
        reader.stop()
        pcscd.stop()
    }
}

extension ISO7816T0Tests {
    /// A T=0 ATR (the virtual cards' default).
    static let t0ATR = h("3B6800008066A2060201320E")
    /// A T=1 ATR: TD1 = 81 (T=1 follows), TD2 = 01.
    static let t1ATR = h("3B 95 13 81 01 80 73 FF 01 00 0B")
}

/// A T=0 card as it answers on the wire: a command carrying data gets 61xx, READ RECORD with the
/// wrong Le gets 6Cxx.
@Sendable func t0WireCard(_ card: TestCard, _ command: [UInt8]) -> [UInt8] {
    let fci = h("6F0A8408A000000003101099")
    switch (command[1], command.count) {
    case (0xA4, 5 + Int(command[4])): return [0x61, UInt8(fci.count)]
    case (0xC0, 5): return command[4] == UInt8(fci.count) ? fci + [0x90, 0x00] : [0x6C, UInt8(fci.count)]
    case (0xB2, 5): return command[4] == 3 ? [0x70, 0x01, 0x5A, 0x90, 0x00] : [0x6C, 0x03]
    default: return [0x6D, 0x00]
    }
}

@Suite("PC/SC reader on a real pcscd + vpcd", .serialized, .enabled(if: pcscAvailable, "needs root, pcscd, vsmartcard-vpcd and systemd-socket-activate"))
struct PCSCReaderTests {
    @Test("a T=0 card: case 4 goes without Le, GET RESPONSE and the 6Cxx re-issue run above SCardTransmit; the status shows it")
    func t0() throws {
        let rig = try PCSCRig()
        defer { rig.tearDown() }
        let card = try rig.insert(respond: t0WireCard)
        defer { card.remove() }
        let channel = try rig.reader.connect(timeout: .seconds(5))
        #expect(channel.atr == ISO7816T0Tests.t0ATR)
        #expect(Hex.encode(try channel.transmit(h("00A4040007A000000003101000"))) == "6F0A8408A0000000031010999000")
        #expect(Hex.encode(try channel.transmit(h("00B2010C00"))) == "70015A9000")
        #expect(card.commands.map { Hex.encode($0) } == ["00A4040007A0000000031010", "00C000000C", "00B2010C00", "00B2010C03"])
        let status = rig.reader.status
        #expect(status.device == rig.pcscd.reader(slot: 0))
        #expect(status.state == "ready")
        #expect(status.transmissionProtocol == 0)
        #expect(status.atr == Hex.encode(ISO7816T0Tests.t0ATR))
        channel.powerOff()
        #expect(eventually { card.powerEvents.last == .powerOff }, "\(card.powerEvents)")
        #expect(rig.recorder.seen.prefix(2) == [.readerAdded(reader: "usb1", device: rig.pcscd.reader(slot: 0)), .cardInserted(reader: "usb1")])
    }

    @Test("a T=1 card gets whole APDUs, Le included; a warm reset gives the ATR again")
    func t1() throws {
        let rig = try PCSCRig()
        defer { rig.tearDown() }
        let card = try rig.insert(atr: ISO7816T0Tests.t1ATR)
        defer { card.remove() }
        let channel = try rig.reader.connect(timeout: .seconds(5))
        #expect(Hex.encode(try channel.transmit(h("80AE80000301020300"))) == "0102039000")
        #expect(card.commands.map { Hex.encode($0) } == ["80AE80000301020300"])
        #expect(rig.reader.status.transmissionProtocol == 1)
        #expect(try channel.reset() == ISO7816T0Tests.t1ATR)
        #expect(card.powerEvents.contains(.reset), "\(card.powerEvents)")
        #expect(Hex.encode(try channel.transmit(h("0001000000"))) == "9000")
    }

    @Test("the card pulled out: removal event, and an exchange after it or during it fails as a removed card")
    func removal() throws {
        let rig = try PCSCRig()
        defer { rig.tearDown() }
        let card = try rig.insert()
        let channel = try rig.reader.connect(timeout: .seconds(5))
        #expect(Hex.encode(try channel.transmit(h("0001000001AA"))) == "AA9000")
        card.remove()
        #expect(eventually(5) { rig.recorder.seen.contains(.cardRemoved(reader: "usb1")) }, "\(rig.recorder.seen)")
        #expect(throws: CardIOError.cardRemoved(reader: "usb1")) { try channel.transmit(h("0001000001AA")) }
        #expect(!rig.reader.isCardPresent)

        // Mid-exchange: the card leaves instead of answering the second command.
        let second = try rig.insert { card, command in
            if command[1] == 0x02 { card.link.close() }
            return echoCard(command)
        }
        let fresh = try rig.reader.connect(timeout: .seconds(5))
        #expect(Hex.encode(try fresh.transmit(h("0001000001AA"))) == "AA9000")
        #expect(throws: CardIOError.cardRemoved(reader: "usb1")) { try fresh.transmit(h("0002000001AA")) }
        second.remove()
        // No card: connect waits, then says so.
        #expect(eventually(5) { !rig.reader.isCardPresent })
        #expect(throws: CardIOError.noCard(reader: "usb1")) { try rig.reader.connect(timeout: .milliseconds(300)) }
    }

    @Test("another program holding the reader exclusively: a clear refusal naming it, and the reader works once it lets go")
    func sharingViolation() throws {
        let rig = try PCSCRig()
        defer { rig.tearDown() }
        let card = try rig.insert()
        defer { card.remove() }
        // A second PC/SC client, on a connection of its own to pcscd, as another program is.
        let other = try PCSCContext()
        defer { other.release() }
        let held = try other.connect(reader: rig.pcscd.reader(slot: 0), protocols: PCSCReader.anyProtocol)
        #expect(eventually(5) { rig.reader.status.state == "in-use" }, "\(rig.reader.status)")
        do {
            _ = try rig.reader.connect(timeout: .seconds(2))
            Issue.record("connected to a reader another program holds")
        } catch {
            #expect(error.description.contains("is in use by another program"), "\(error)")
            #expect(error.description.contains("SCARD_E_SHARING_VIOLATION"), "\(error)")
        }
        #expect(rig.reader.status.error?.contains("in use by another program") == true)
        held.disconnect()
        let channel = try rig.reader.connect(timeout: .seconds(5))
        #expect(Hex.encode(try channel.transmit(h("0001000001AA"))) == "AA9000")
    }

    @Test("pcscd stops and comes back: loss and return reported, the reader and a new card work again")
    func restart() throws {
        let rig = try PCSCRig()
        defer { rig.tearDown() }
        let card = try rig.insert()
        let channel = try rig.reader.connect(timeout: .seconds(5))
        rig.pcscd.stop()
        #expect(eventually(5) { rig.recorder.seen.contains { if case .serviceLost = $0 { true } else { false } } }, "\(rig.recorder.seen)")
        #expect(rig.recorder.seen.contains(.cardRemoved(reader: "usb1")))
        #expect(rig.recorder.seen.contains(.readerRemoved(reader: "usb1", device: rig.pcscd.reader(slot: 0))))
        #expect(rig.reader.status.state == "no-service")
        #expect(rig.reader.status.error?.contains("pcscd went away") == true, "\(rig.reader.status)")
        #expect(throws: CardIOError.cardRemoved(reader: "usb1")) { try channel.transmit(h("0001000001AA")) }
        card.remove()

        try rig.pcscd.start()
        #expect(eventually(5) { rig.recorder.seen.contains { if case .serviceRestored = $0 { true } else { false } } }, "\(rig.recorder.seen)")
        #expect(eventually(5) { rig.reader.status.state == "ready" }, "\(rig.reader.status)")
        let again = try rig.insert()
        defer { again.remove() }
        let fresh = try rig.reader.connect(timeout: .seconds(5))
        #expect(Hex.encode(try fresh.transmit(h("0001000001BB"))) == "BB9000")
        #expect(rig.recorder.seen.filter { $0 == .readerAdded(reader: "usb1", device: rig.pcscd.reader(slot: 0)) }.count == 2)
    }

    @Test("pcscd not there at start, and a pattern nothing matches: the states say so")
    func absent() throws {
        let rig = try PCSCRig(pattern: "No Such Reader", startPCSCD: false)
        defer { rig.tearDown() }
        #expect(eventually(5) { rig.reader.status.state == "no-service" }, "\(rig.reader.status)")
        #expect(rig.reader.status.error?.contains("pcscd cannot be reached") == true, "\(rig.reader.status)")
        try rig.pcscd.start()
        #expect(eventually(5) { rig.reader.status.state == "absent" }, "\(rig.reader.status)")
        #expect(rig.reader.status.matches.isEmpty)
        #expect(throws: CardIOError.noCard(reader: "usb1")) { try rig.reader.connect(timeout: .milliseconds(200)) }
        let listing = try PCSCReader.survey()
        #expect(listing.map(\.name) == [rig.pcscd.reader(slot: 0), rig.pcscd.reader(slot: 1)])
        #expect(listing.first?.baseName == rig.pcscd.readerName)
        #expect(listing.first?.state == "empty")
    }
}
