import Foundation
import Testing
@testable import EMV
@testable import VirtualCard

@Suite("virtual cards: the contactless interface and the stripe")
struct ContactlessCardTests {
    static let gpoTTQ = "9F66049F02069F03069F1A0295055F2A029A039C019F3704"

    /// The PDOL data of a Visa contactless application for a TTQ.
    static func pdolData(_ ttq: String) -> [UInt8] {
        hex(ttq) + hex("000000015000") + hex("000000000000") + hex("0484") + hex("0000000000") + hex("0484") + hex("261124") + hex("00") + hex("1A2B3C4D")
    }

    @Test("tapped: a PC/SC part 3 ATR, the PPSE with one entry per tappable application, no PSE; inserted: no PPSE")
    func interfaces() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-debit-contactless.yaml"))
        #expect(card.powerOn(.contactless) == [0x3B, 0x80, 0x80, 0x01, 0x01])
        var t = TestTerminal(card)
        let ppse = t.send(.select(name: Array("2PAY.SYS.DDF01".utf8)))
        #expect(ppse.status.isSuccess)
        let entries = try #require(try TLV.parse(ppse.data).first(0xBF0C)).children.filter { $0.tag == 0x61 }
        #expect(entries.map { $0.first(0x4F)?.value } == [hex("A0000000031010")])
        #expect(t.send(.selectPSE).status == StatusWord(0x6A82))
        card = t.card
        _ = card.powerOn(.contact)
        var contact = TestTerminal(card)
        #expect(contact.send(.select(name: Array("2PAY.SYS.DDF01".utf8))).status == StatusWord(0x6A82))
        #expect(contact.send(.selectPSE).status.isSuccess)
    }

    @Test("the contactless interface's own CVN: CVN 18's IAD on a tap, CVN 10's in the chip slot")
    func perInterfaceCVN() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-debit-contactless.yaml"))
        _ = card.powerOn(.contactless)
        var t = TestTerminal(card)
        t.send(.select(name: hex("A0000000031010")))
        let iad = try #require(try TLV.parse(t.send(.getProcessingOptions(pdolData: Self.pdolData("36804080"))).data).first(0x9F10)?.value)
        #expect(iad[2] == 18)
        card = t.card
        _ = card.powerOn(.contact)
        var c = TestTerminal(card)
        c.send(.select(name: hex("A0000000031010")))
        c.send(.getProcessingOptions(pdolData: []))
        let ac = c.send(.generateAC(.arqc, cdolData: card.profile.applications[0].cdol1.fill { TestTerminal.terminalData[$0] }))
        #expect(ac.status.isSuccess)
        #expect(ac.data.count > 13 && ac.data[2 + 11 + 2] == 10, "\(Hex.encode(ac.data))")  // format 1: 80 L CID ATC AC(8) IAD(06 DKI CVN …)
    }

    @Test("qVSDC: GPO returns the cryptogram, CTQ, track 2 and FFI in a 77; a GENERATE AC after it is refused")
    func qualifiedGPO() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-debit-contactless.yaml"))
        _ = card.powerOn(.contactless)
        var t = TestTerminal(card)
        let fci = t.send(.select(name: hex("A0000000031010")))
        #expect(try TLV.parse(fci.data).first(0x9F38)?.value == hex(Self.gpoTTQ))
        let gpo = t.send(.getProcessingOptions(pdolData: Self.pdolData("36804080")))
        let items = try TLV.parse(gpo.data)
        #expect(items.first?.tag == 0x77)
        for tag: EMVTag in [0x82, 0x57, 0x9F10, 0x9F26, 0x9F27, 0x9F36, 0x9F6C, 0x9F6E] { #expect(items.first(tag) != nil, "no \(tag)") }
        #expect(items.first(0x94) == nil)  // records: none
        #expect(items.first(0x9F27)?.value == [0x80])
        #expect(t.send(.generateAC(.arqc, cdolData: [UInt8](repeating: 0, count: 29))).status == StatusWord(0x6985))
    }

    @Test("CVM required: online PIN in the CTQ for a card with 42 03; a wearable with no CVM answers 6984")
    func cvm() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-debit-contactless.yaml"))
        _ = card.powerOn(.contactless)
        var t = TestTerminal(card)
        t.send(.select(name: hex("A0000000031010")))
        let gpo = t.send(.getProcessingOptions(pdolData: Self.pdolData("36C04080")))
        #expect(try TLV.parse(gpo.data).first(0x9F6C)?.value == hex("A000"))
        var wearable = try VirtualCard(profile: try loadProfile("visa-wearable.yaml"))
        _ = wearable.powerOn(.contactless)
        var w = TestTerminal(wearable)
        w.send(.select(name: hex("A0000000031010")))
        #expect(w.send(.getProcessingOptions(pdolData: Self.pdolData("36C04080"))).status == StatusWord(0x6984))
        #expect(w.send(.getProcessingOptions(pdolData: Self.pdolData("36804080"))).status.isSuccess)
        #expect(w.send(.getProcessingOptions(pdolData: Self.pdolData("36804080"))).status == StatusWord(0x6985))  // one cryptogram per selection
    }

    @Test("a locked phone answers 6986 once; the holder has unlocked it by the next tap")
    func seePhone() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-mobile-see-phone.yaml"))
        for expected in [StatusWord(0x6986), StatusWord(0x9000)] {
            _ = card.powerOn(.contactless)
            var t = TestTerminal(card)
            t.send(.select(name: hex("A0000000031010")))
            #expect(t.send(.getProcessingOptions(pdolData: Self.pdolData("36C04080"))).status == expected)
            card = t.card
        }
    }

    @Test("offline-capable with fDDA: a TC with 9F4B and a 7-byte 9F69 (version 01, card number, CTQ)")
    func fDDA() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-credit-qvsdc-fdda.yaml"))
        _ = card.powerOn(.contactless)
        var t = TestTerminal(card)
        t.send(.select(name: hex("A0000000031010")))
        let items = try TLV.parse(t.send(.getProcessingOptions(pdolData: Self.pdolData("36004080"))).data)
        #expect(items.first(0x9F27)?.value == [0x40])
        let cardData = try #require(items.first(0x9F69)?.value)
        #expect(cardData.count == 7 && cardData[0] == 0x01 && Array(cardData[5...]) == items.first(0x9F6C)?.value)
        #expect(items.first(0x9F4B) != nil && items.first(0x94) != nil)
    }

    @Test("profile rules: each names its field")
    func rules() throws {
        let base = try String(contentsOf: cardsDirectory.appendingPathComponent("visa-debit-contactless.yaml"), encoding: .utf8)
        func error(_ from: String, _ to: String) -> String {
            do { _ = try CardProfile.parse(yaml: base.replacingOccurrences(of: from, with: to), file: "x.yaml"); return "accepted" } catch {
                return "\(error)"
            }
        }
        #expect(error("interfaces: [contact, contactless, magstripe]", "interfaces: [contact, magstripe]").contains("interfaces"))
        #expect(error("interfaces: [contact, contactless, magstripe]", "interfaces: [contact, bluetooth]").contains("bluetooth"))
        #expect(error("      records: none", "      records: none\n      offlineApproval: true").contains("records"))
        #expect(error("      cvn: 18\n", "      cvn: 16\n").contains("scheme"))
        #expect(error("      cvn: 18\n", "      cvn: 11\n").contains("cvn"))
        #expect(error("      ctq: \"2000\"", "      ctq: \"2000\"\n      pdol: \"9F02069F03069F1A0295055F2A029A039C019F3704\"").contains("9F66"))
        #expect(error("interfaces: [contact, contactless, magstripe]", "interfaces: [contact, contactless, magstripe]\ncdcvm: performed").contains("cdcvm"))
        #expect(error("interfaces: [contact, contactless, magstripe]", "interfaces: [contact, contactless, magstripe]\nformFactor: phone").contains("interfaces"))
        #expect(error("issuerState: { balance: \"20000.00\", currency: \"484\" }", "issuerState: { balance: \"20000.00\", currency: \"484\", fallback: maybe }")
            .contains("fallback"))
        #expect(error("interfaces: [contact, contactless, magstripe]",
                      "interfaces: [contact, contactless, magstripe]\nmagstripe: {track2: \"4761739001010010=3106201\"}").contains("PAN"))
        #expect(error("interfaces: [contact, contactless, magstripe]",
                      "interfaces: [contact, contactless, magstripe]\nmagstripe: {track2: \"4761739001010119=3107201\"}").contains("expiry"))
        #expect(error("interfaces: [contact, contactless, magstripe]",
                      "interfaces: [contact, contactless, magstripe]\nmagstripe: {track2: \"4761739001010119=3106101\"}").contains("service code"))
        #expect(error("interfaces: [contact, contactless, magstripe]", "interfaces: [contact, contactless, magstripe]\nmagstripe: {track2: \"4761739001010119=3106201\"}")
            == "accepted")
        let contactOnly = base.replacingOccurrences(of: "interfaces: [contact, contactless, magstripe]", with: "interfaces: [contact]\ncontactless: {historicalBytes: \"80\"}")
            .replacingOccurrences(of: "    contactless:\n      records: none\n      ctq: \"2000\"\n", with: "")
        #expect(throws: ProfileError.self) { try CardProfile.parse(yaml: contactOnly, file: "x.yaml") }
        do { _ = try CardProfile.parse(yaml: contactOnly, file: "x.yaml") } catch { #expect("\(error)".contains("does not list contactless"), "\(error)") }
    }

    @Test("tracks: derived from the card (service code, expiry, name); a name with '^' still makes a track 1 that parses")
    func tracks() throws {
        let stripe = try #require(try loadProfile("visa-debit-contactless.yaml").magneticStripe)
        #expect(stripe.track2.hasPrefix("4761739001010119=3106201") && stripe.chipCard)
        #expect(stripe.cardholderName == "CARDBENCH/VISA DEBIT")
        let yaml = try String(contentsOf: cardsDirectory.appendingPathComponent("magstripe-only-101.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "CARDBENCH/STRIPE ONLY", with: "Ana^%Lopez?")
        let odd = try #require(try CardProfile.parse(yaml: yaml, file: "x.yaml").magneticStripe)
        #expect(odd.cardholderName == "ANA  LOPEZ")
        #expect(try MagneticStripe(track1: odd.track1, track2: odd.track2) == odd)
        #expect(try loadProfile("visa-wearable.yaml").magneticStripe == nil)
    }
}
