import Yams
import Foundation
import Testing
@testable import EMV
@testable import VirtualCard

let cardsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios/cards")

func loadProfile(_ name: String) throws -> CardProfile {
    let url = cardsDirectory.appendingPathComponent(name)
    return try CardProfile.parse(yaml: String(contentsOf: url, encoding: .utf8), file: name)
}

func hex(_ s: String) -> [UInt8] { try! Hex.decode(s) }

/// A minimal terminal for driving the card: just enough EMV to check the card's side of it.
struct TestTerminal {
    var card: VirtualCard
    var log: [(command: CommandAPDU, response: ResponseAPDU)] = []

    init(_ card: VirtualCard) { self.card = card }

    @discardableResult
    mutating func send(_ command: CommandAPDU) -> ResponseAPDU {
        let response = try! ResponseAPDU(bytes: card.respond(to: command.bytes))
        log.append((command, response))
        return response
    }

    /// Terminal data for the DOLs: a fixed purchase of 100.00 MXN on 2026-11-22.
    static let terminalData: [EMVTag: [UInt8]] = [
        0x9F02: hex("000000010000"), 0x9F03: hex("000000000000"), 0x9F1A: hex("0484"), 0x95: hex("0000008000"),
        0x5F2A: hex("0484"), 0x9A: hex("261122"), 0x9C: hex("00"), 0x9F37: hex("1A2B3C4D"), 0x9F35: hex("22"),
        0x9F45: hex("0000"), 0x9F34: hex("420300"), 0x9F66: hex("36000000"),
    ]
}

@Suite("shipped card profiles")
struct ShippedProfileTests {
    static let files = (try? FileManager.default.contentsOfDirectory(atPath: cardsDirectory.path))?.filter { $0.hasSuffix(".yaml") }.sorted() ?? []

    /// The profiles a contact terminal can read through the PSE: not stripe-only, not a phone, not a chip without a PSE.
    static let contactFiles = files.filter { file in
        (try? loadProfile(file)).map { $0.interfaces.contains(.contact) && $0.hasPSE && !$0.applications.isEmpty } ?? false
    }

    @Test func atLeastTheTenTheIssueNames() {
        #expect(Self.files.count >= 10)
    }

    @Test("loads, PAN passes Luhn and sits in its brand's range", arguments: files)
    func loads(file: String) throws {
        let profile = try loadProfile(file)
        #expect(Luhn.isValid(profile.pan))
        let brand = try #require(profile.brand)
        // The PAN's brand is the scheme of the card's application (its RID).
        let rids: [String: CardBrand] = ["A000000003": .visa, "A000000004": .mastercard, "A000000025": .americanExpress, "A000000672": .carnet]
        // (A stripe-only card has no application: its PAN alone says its brand.)
        // The unreadable-chip cards (for fallback) carry an AID of no scheme on purpose.
        if let app = profile.applications.first {
            if let scheme = rids[Hex.encode(app.aid.prefix(5))] { #expect(brand == scheme) } else { #expect(app.label == "PROPRIETARY", "\(file)") }
        }
    }

    /// The whole contact flow against each profile that can complete one, with an issuer check
    /// of every cryptogram.
    @Test("PSE, SELECT, GPO, READ RECORD, VERIFY, GENERATE AC, issuer authentication, TC",
          arguments: contactFiles.filter { !$0.contains("blocked") && !$0.contains("t0-get-response") })
    func fullTransaction(file: String) throws {
        let profile = try loadProfile(file)
        var t = TestTerminal(try VirtualCard(profile: profile))

        // Application selection through the PSE directory.
        #expect(t.send(.selectPSE).status == .success)
        var directory: [[UInt8]] = []
        for record in 1... {
            let r = t.send(.readRecord(sfi: 1, record: record))
            if r.status == StatusWord(0x6A83) { break }
            try #require(r.status == .success)
            directory.append(try #require(try TLV.parse(r.data).first(0x4F)?.value))
        }
        #expect(directory == profile.applications.map(\.aid))
        let app = profile.applications[0]
        let fci = t.send(.select(name: app.aid))
        #expect(fci.status == .success)
        #expect(try TLV.parse(fci.data).first(0x50)?.value == Array(app.label.utf8))

        // GPO with the PDOL filled, then every AFL record.
        let pdolData = app.pdol?.fill { TestTerminal.terminalData[$0] } ?? []
        let gpo = t.send(.getProcessingOptions(pdolData: pdolData))
        try #require(gpo.status == .success)
        let gpoTLV = try #require(try TLV.parse(gpo.data).first)
        let aflBytes = gpoTLV.tag == 0x80 ? Array(gpoTLV.value.dropFirst(2)) : try #require(gpoTLV.first(0x94)?.value)
        var cardData: [EMVTag: [UInt8]] = [:]
        for entry in try AFLEntry.parseList(aflBytes) {
            for record in entry.records {
                let r = t.send(.readRecord(sfi: entry.sfi, record: record))
                try #require(r.status == .success, "SFI \(entry.sfi) record \(record): \(r.status)")
                cardData.merge(try TLV.parse(r.data).primitives()) { a, _ in a }
            }
        }
        let panDigits = Hex.encode(try #require(cardData[0x5A])).filter { $0 != "F" }
        #expect(panDigits == profile.pan)
        #expect(cardData[0x8E] == app.cvmList.bytes)

        // Offline PIN when the CVM list starts with it.
        if app.cvmList.rules.first?.method == .plaintextPINByICC, let pin = profile.pin {
            #expect(t.send(.verify(pinBlock: try PlaintextPINBlock.encode(pin: pin))).status == .success)
        }

        // First GENERATE AC asking for an ARQC; the issuer checks it from its master key.
        let cdol1 = try DOL.parse(try #require(cardData[0x8C]))
        let cdol1Data = cdol1.fill { TestTerminal.terminalData[$0] }
        let first = t.send(.generateAC(.arqc, cdolData: cdol1Data))
        try #require(first.status == .success)
        let ac1 = try Self.parseGenerateAC(first.data)
        #expect(ac1.cid == 0x80)
        #expect(ac1.atc == VirtualCard.twoBytes(profile.atcStart + 1))
        let issuer = try CryptogramKeys(cvn: app.cvn, issuerMasterKey: app.issuerMasterKey, pan: profile.pan, psn: profile.psn)
        var tags = TestTerminal.terminalData
        tags[0x82] = app.aip.bytes
        tags[0x9F36] = ac1.atc
        #expect(try issuer.verify(ac1.cryptogram, CryptogramData(tags: tags, issuerApplicationData: ac1.iad)))

        // Issuer approves: ARPC, then the second GENERATE AC asking for a TC.
        let arc = Array("00".utf8)
        let input: ARPCInput = app.cvn.arpcMethod == 1 ? .responseCode(arc) : .cardStatusUpdate(hex("00000000"))
        let issuerData = try issuer.issuerAuthenticationData(arqc: ac1.cryptogram, input, atc: ac1.atc)
        let cdol2 = try DOL.parse(try #require(cardData[0x8D]))
        if app.aip.contains(AIP.issuerAuthenticationSupported) {
            #expect(t.send(.externalAuthenticate(issuerData)).status == .success)
        }
        var second = TestTerminal.terminalData
        second[0x8A] = arc
        second[0x91] = issuerData
        let ac2Response = t.send(.generateAC(.tc, cdolData: cdol2.fill { second[$0] }))
        try #require(ac2Response.status == .success)
        let ac2 = try Self.parseGenerateAC(ac2Response.data)
        #expect(ac2.cid == 0x40, "a correct ARPC and an approval give a TC")
        #expect(ac2.atc == ac1.atc, "the ATC counts transactions, not GENERATE ACs")
        var tcTags = tags
        for (tag, value) in cdol2.split(cdol2.fill { second[$0] }) { tcTags[tag] = value }
        #expect(try issuer.verify(ac2.cryptogram, CryptogramData(tags: tcTags, issuerApplicationData: ac2.iad)))
        #expect(t.send(.generateAC(.tc, cdolData: cdol2.fill { second[$0] })).status == StatusWord(0x6985))
    }

    struct GenerateACResponse {
        let cid: UInt8
        let atc: [UInt8]
        let cryptogram: [UInt8]
        let iad: [UInt8]
    }

    static func parseGenerateAC(_ data: [UInt8]) throws -> GenerateACResponse {
        let tlv = try #require(try TLV.parse(data).first)
        if tlv.tag == 0x80 {
            let v = tlv.value
            return GenerateACResponse(cid: v[0], atc: Array(v[1..<3]), cryptogram: Array(v[3..<11]), iad: Array(v[11...]))
        }
        return GenerateACResponse(cid: try #require(tlv.first(0x9F27)?.value.first), atc: try #require(tlv.first(0x9F36)?.value),
                                  cryptogram: try #require(tlv.first(0x9F26)?.value), iad: try #require(tlv.first(0x9F10)?.value))
    }
}

extension DOL {
    /// Test convenience: split data this DOL produced.
    func split(_ data: [UInt8]) -> [EMVTag: [UInt8]] { try! split(data, field: "test") }
}

@Suite("the emulated card's answers")
struct CardBehaviourTests {
    static func selected(_ file: String) throws -> TestTerminal {
        var t = TestTerminal(try VirtualCard(profile: try loadProfile(file)))
        t.send(.select(name: t.card.profile.applications[0].aid))
        return t
    }

    @Test func wrongPINCountsDownThenBlocks() throws {
        var t = try Self.selected("visa-credit-cvn10.yaml")
        #expect(t.send(.getProcessingOptions(pdolData: [])).status == .success)
        let wrong = try PlaintextPINBlock.encode(pin: "9999")
        #expect(t.send(.verify(pinBlock: wrong)).status == StatusWord(0x63C2))
        #expect(t.send(.verify(pinBlock: wrong)).status == StatusWord(0x63C1))
        // The right PIN resets the counter.
        #expect(t.send(.verify(pinBlock: try PlaintextPINBlock.encode(pin: "1234"))).status == .success)
        #expect(t.card.state.pinTriesRemaining == 3)
        for expected: UInt16 in [0x63C2, 0x63C1, 0x63C0, 0x6983] {
            #expect(t.send(.verify(pinBlock: wrong)).status == StatusWord(expected))
        }
        // Once blocked, even the right PIN is refused.
        #expect(t.send(.verify(pinBlock: try PlaintextPINBlock.encode(pin: "1234"))).status == StatusWord(0x6983))
        let ptc = t.send(.getData(0x9F17))
        #expect(ptc.data == hex("9F170100"))
    }

    @Test func oneTryLeftBlocksOnTheFirstWrongPIN() throws {
        var t = try Self.selected("visa-one-pin-try.yaml")
        t.send(.getProcessingOptions(pdolData: []))
        #expect(t.send(.verify(pinBlock: try PlaintextPINBlock.encode(pin: "0000"))).status == StatusWord(0x63C0))
        #expect(t.send(.verify(pinBlock: try PlaintextPINBlock.encode(pin: "1234"))).status == StatusWord(0x6983))
    }

    @Test func blockedApplicationAnswers6283AndNothingElse() throws {
        var t = TestTerminal(try VirtualCard(profile: try loadProfile("mastercard-blocked-application.yaml")))
        let select = t.send(.select(name: hex("A0000000041010")))
        #expect(select.status == StatusWord(0x6283))
        #expect(try TLV.parse(select.data).first(0x84)?.value == hex("A0000000041010"))
        #expect(t.send(.getProcessingOptions(pdolData: [])).status == StatusWord(0x6985))
        #expect(t.send(.readRecord(sfi: 1, record: 1)).status == StatusWord(0x6985))
    }

    @Test("a t0GetResponse card answers TPDUs as a T=0 card: 61xx then GET RESPONSE, 6Cxx, warnings alone; whole APDUs whole")
    func t0GetResponse() throws {
        var card = try VirtualCard(profile: try loadProfile("visa-t0-get-response.yaml"))
        // SELECT as a T=0 terminal sends it (case 4 without Le): 61 La, the FCI waits.
        let pse = card.respond(to: hex("00A404000E315041592E5359532E4444463031"))
        #expect(pse.count == 2 && pse[0] == 0x61)
        // A GET RESPONSE asking for more than waits gets 6C La; the right P3 gets the FCI.
        #expect(card.respond(to: hex("00C00000FF")) == [0x6C, pse[1]])
        let fci = card.respond(to: hex("00C00000") + [pse[1]])
        #expect(fci.count == Int(pse[1]) + 2 && fci.suffix(2) == [0x90, 0x00])
        #expect(fci.first == 0x6F)
        // Taken in two parts: 61 for the rest.
        _ = card.respond(to: hex("00A404000E315041592E5359532E4444463031"))
        let part = card.respond(to: hex("00C0000004"))
        #expect(Array(part.prefix(4)) == Array(fci.prefix(4)) && part.suffix(2) == [0x61, pse[1] - 4])
        // Nothing waits after another command.
        _ = card.respond(to: hex("80CA9F3600"))
        #expect(card.respond(to: hex("00C0000004")) == [0x69, 0x85])
        // READ RECORD with P3 00 where the record is shorter: 6C La, then the record.
        let read = card.respond(to: hex("00B2010C00"))
        #expect(read.count == 2 && read[0] == 0x6C)
        #expect(card.respond(to: hex("00B2010C") + [read[1]]).count == Int(read[1]) + 2)
        // The same SELECT as a whole APDU (Le present), as an APDU-level reader passes it, is answered whole.
        #expect(card.respond(to: hex("00A404000E315041592E5359532E444446303100")) == fci)
        // A blocked application's SELECT (6283) in TPDU form: the warning alone, the FCI for GET RESPONSE 00.
        let blockedYAML = ProfileErrorTests.good.replacingOccurrences(of: "    cvn: 10", with: "    cvn: 10\n    blocked: true") + "\nt0GetResponse: true\n"
        var blocked = try VirtualCard(profile: try CardProfile.parse(yaml: blockedYAML, file: "blocked.yaml"))
        #expect(blocked.respond(to: hex("00A4040007A0000000031010")) == hex("6283"))
        let blockedFCI = blocked.respond(to: hex("00C0000000"))
        #expect(blockedFCI.count == 2 && blockedFCI[0] == 0x6C)
        let fetched = blocked.respond(to: hex("00C00000") + [blockedFCI[1]])
        #expect(fetched.first == 0x6F && fetched.suffix(2) == [0x90, 0x00])
        // A t0GetResponse profile needs a T=0 ATR.
        let t1 = ProfileErrorTests.good + "\natr: \"3B9513810180 73FF01000B\"\nt0GetResponse: true\n"
        #expect(throws: ProfileError.self) { try CardProfile.parse(yaml: t1.replacingOccurrences(of: "80 73", with: "8073"), file: "t1.yaml") }
        let t0 = ProfileErrorTests.good + "\nt0GetResponse: true\n"
        #expect(try CardProfile.parse(yaml: t0, file: "t0.yaml").t0GetResponse)
    }

    @Test func partialNameSelectionWithNextOccurrence() throws {
        var t = TestTerminal(try VirtualCard(profile: try loadProfile("visa-two-applications.yaml")))
        let first = t.send(.select(name: hex("A000000003")))
        #expect(try TLV.parse(first.data).first(0x84)?.value == hex("A0000000031010"))
        let next = t.send(.select(name: hex("A000000003"), next: true))
        #expect(try TLV.parse(next.data).first(0x84)?.value == hex("A0000000032010"))
        #expect(t.send(.select(name: hex("A000000003"), next: true)).status == StatusWord(0x6A82))
        #expect(t.send(.select(name: hex("A0000000049999"))).status == StatusWord(0x6A82))
        // Both ask for cardholder confirmation (bit 8 of tag 87).
        #expect(try TLV.parse(next.data).first(0x87)?.value == [0x82])
    }

    @Test("malformed commands get a card's status words", arguments: [
        ("80A404000E315041592E5359532E444446303100", 0x6E00),   // SELECT with CLA 80
        ("00FF000000", 0x6D00),                                 // unknown INS
        ("00A4050007A000000003101000", 0x6A86),                 // SELECT with P1 05
        ("00A404000F", 0x6700),                                 // Lc says 15, nothing follows
        ("00B2010800", 0x6A86),                                 // READ RECORD P2 without the 100 bits
        ("00B2090C00", 0x6A83),                                 // SFI 1 record 9 absent
        ("00B2015C00", 0x6A82),                                 // SFI 11 absent
        ("80CA9F7F00", 0x6A88),                                 // GET DATA of an unknown tag
        ("80AE800000", 0x6985),                                 // GENERATE AC before GPO
        ("0082000000", 0x6985),                                 // EXTERNAL AUTHENTICATE with nothing to check
        ("80A80000038301AA00", 0x6700),                         // GPO with PDOL data where the card has no PDOL
        ("80A8000002840000", 0x6A80),                           // GPO data not in tag 83
        ("0020008808241234FFFFFFFFFF", 0x6A81),                 // enciphered offline PIN is not supported
        ("00200080081234FFFFFFFFFFFF", 0x6A80),                 // not a plaintext PIN block
    ])
    func refusals(command: String, status: UInt16) throws {
        var t = try Self.selected("visa-credit-cvn10.yaml")
        let r = try ResponseAPDU(bytes: t.card.respond(to: hex(command)))
        #expect(r.status == StatusWord(status), "\(command)")
        #expect(r.data.isEmpty)
    }

    @Test func getDataAndATCPersistence() throws {
        var t = try Self.selected("visa-credit-cvn10.yaml")
        #expect(t.send(.getData(0x9F36)).data == hex("9F36020001"))
        t.send(.getProcessingOptions(pdolData: []))
        let cdol1 = t.card.profile.applications[0].cdol1
        #expect(t.send(.generateAC(.aac, cdolData: cdol1.fill { TestTerminal.terminalData[$0] })).status == .success)
        #expect(t.card.state.atc["A0000000031010"] == 2)

        // The state survives a new card object, as the state file carries it.
        let saved = try JSONEncoder().encode(t.card.state)
        var again = TestTerminal(try VirtualCard(profile: t.card.profile, state: try JSONDecoder().decode(CardState.self, from: saved)))
        again.send(.select(name: hex("A0000000031010")))
        #expect(again.send(.getData(0x9F36)).data == hex("9F36020002"))
    }

    @Test func cardActionAnalysisNeverUpgrades() throws {
        for (requested, expectedCID) in [(CryptogramType.aac, UInt8(0x00)), (.tc, 0x80), (.arqc, 0x80)] {
            var t = try Self.selected("visa-credit-cvn10.yaml")
            t.send(.getProcessingOptions(pdolData: []))
            let data = t.card.profile.applications[0].cdol1.fill { TestTerminal.terminalData[$0] }
            let r = t.send(.generateAC(requested, cdolData: data))
            #expect(try ShippedProfileTests.parseGenerateAC(r.data).cid == expectedCID, "requested \(requested)")
        }
    }

    @Test func wrongARPCFailsIssuerAuthenticationAndDeclines() throws {
        var t = try Self.selected("visa-credit-cvn10.yaml")
        t.send(.getProcessingOptions(pdolData: []))
        let app = t.card.profile.applications[0]
        let first = t.send(.generateAC(.arqc, cdolData: app.cdol1.fill { TestTerminal.terminalData[$0] }))
        #expect(first.status == .success)
        #expect(t.send(.externalAuthenticate(hex("00112233445566773030"))).status == StatusWord(0x6300))
        var second = TestTerminal.terminalData
        second[0x8A] = Array("00".utf8)
        let r = t.send(.generateAC(.tc, cdolData: app.cdol2.fill { second[$0] }))
        let ac2 = try ShippedProfileTests.parseGenerateAC(r.data)
        #expect(ac2.cid == 0x00, "issuer authentication failed: the card declines")
        // CVR byte 2 bit 4: issuer authentication performed and failed.
        #expect(ac2.iad[4] & 0x08 != 0)
    }

    @Test func mastercardARPCInCDOL2() throws {
        var t = try Self.selected("mastercard-credit-cvn16.yaml")
        t.send(.getProcessingOptions(pdolData: []))
        let app = t.card.profile.applications[0]
        let first = try ShippedProfileTests.parseGenerateAC(t.send(.generateAC(.arqc, cdolData: app.cdol1.fill { TestTerminal.terminalData[$0] })).data)
        // No EXTERNAL AUTHENTICATE on this card: its AIP does not offer it.
        #expect(t.send(.externalAuthenticate(hex("00112233445566770010"))).status == StatusWord(0x6985))
        var second = TestTerminal.terminalData
        second[0x8A] = Array("00".utf8)
        second[0x91] = hex("00112233445566773030")  // a wrong ARPC
        let r = try ShippedProfileTests.parseGenerateAC(t.send(.generateAC(.tc, cdolData: app.cdol2.fill { second[$0] })).data)
        #expect(r.cid == 0x00)
        #expect(first.cid == 0x80)
    }

    @Test func unableToGoOnlineDeclinesAnOnlineOnlyCard() throws {
        var t = try Self.selected("visa-debit-cvn18.yaml")
        t.send(.getProcessingOptions(pdolData: []))
        let app = t.card.profile.applications[0]
        t.send(.generateAC(.arqc, cdolData: app.cdol1.fill { TestTerminal.terminalData[$0] }))
        var second = TestTerminal.terminalData
        second[0x8A] = Array("Y3".utf8)
        let r = try ShippedProfileTests.parseGenerateAC(t.send(.generateAC(.tc, cdolData: app.cdol2.fill { second[$0] })).data)
        #expect(r.cid == 0x00)
        #expect(r.iad[4] & 0x01 != 0, "CVR: unable to go online")
    }

    @Test func powerCycleForgetsTheTransaction() throws {
        var t = try Self.selected("visa-credit-cvn10.yaml")
        t.send(.getProcessingOptions(pdolData: []))
        t.card.reset()
        #expect(t.send(.getProcessingOptions(pdolData: [])).status == StatusWord(0x6985), "no application selected after reset")
    }
}

@Suite("profile errors name the file, the field and the rule")
struct ProfileErrorTests {
    static let good = """
    name: test
    pan: "4761739001010010"
    expiry: "2030-12"
    pin: "1234"
    applications:
      - aid: "A0000000031010"
        label: "VISA"
        cvn: 10
        issuerMasterKey: "0123456789ABCDEFFEDCBA9876543210"
        cvmList: "000000000000000041031E031F00"
    """

    @Test func theBaseProfileLoads() throws {
        let p = try CardProfile.parse(yaml: Self.good, file: "t.yaml")
        #expect(p.psn == "00")
        #expect(p.applications[0].cvn == .visa10)
        #expect(Hex.encode(p.track2).hasPrefix("4761739001010010D3012201"))
        #expect(p.afl(for: p.applications[0]).map { Hex.encode($0.bytes) } == ["08010100", "10010201"])
    }

    @Test(arguments: [
        ("pan: \"4761739001010010\"", "pan: \"4761739001010011\"", "pan", "Luhn"),
        ("pan: \"4761739001010010\"", "pan: \"47617390A1010010\"", "pan", "digits only"),
        ("expiry: \"2030-12\"", "expiry: \"12/30\"", "expiry", "YYYY-MM"),
        ("pin: \"1234\"", "pin: \"12\"", "pin", "4–12 digits"),
        ("pin: \"1234\"\n", "", "pin", "is required: a CVM list offers PIN"),
        ("cvn: 10", "cvn: 11", "applications[0].cvn", "must be one of"),
        ("issuerMasterKey: \"0123456789ABCDEFFEDCBA9876543210\"", "issuerMasterKey: \"0123\"", "applications[0].issuerMasterKey", "16 bytes"),
        ("cvmList: \"000000000000000041031E031F00\"", "cvmList: \"0000\"", "applications[0].cvmList", "amounts X and Y"),
        ("label: \"VISA\"", "label: \"VISA\"\n    lable: \"typo\"", "applications[0].lable", "unknown field"),
        ("name: test", "name: test\ncolour: blue", "colour", "unknown field"),
        ("aid: \"A0000000031010\"", "aid: \"A000\"", "applications[0].aid", "5–16 bytes"),
        ("cvn: 10", "cvn: 10\n    cdol1: \"9F0206\"", "applications[0].cdol1", "must request 9F03"),
        ("cvn: 10", "cvn: 10\n    records: [{ sfi: 1, record: 1, tags: [\"57\"] }]", "applications[0].records", "no record holds 5A"),
    ])
    func refused(replace: String, with: String, field: String, reason: String) {
        let yaml = Self.good.replacingOccurrences(of: replace, with: with)
        #expect(yaml != Self.good)
        do {
            _ = try CardProfile.parse(yaml: yaml, file: "bad.yaml")
            Issue.record("accepted a bad profile: \(with)")
        } catch {
            #expect(error.file == "bad.yaml")
            #expect(error.field == field)
            #expect(error.reason.contains(reason), "\(error.reason)")
        }
    }

    @Test func notYAMLOrEmpty() {
        #expect(throws: ProfileError.self) { try CardProfile.parse(yaml: "", file: "e.yaml") }
        #expect(throws: ProfileError.self) { try CardProfile.parse(yaml: "name: [unclosed", file: "e.yaml") }
        #expect(throws: ProfileError(file: "e.yaml", field: "(document)", reason: "must be a mapping of fields")) {
            try CardProfile.parse(yaml: "- a list", file: "e.yaml")
        }
    }
}

@Suite("YAML text as cardbench writes it")
struct YAMLTextTests {
    @Test("a quoted scalar reads back as itself: quotes, backslashes, newlines, tabs, control characters, accents")
    func roundTrip() throws {
        for text in ["plain", "say \"hi\"", "back\\slash", "two\nlines", "tab\there", "bell\u{07}", "del\u{7F}", "Peña ñ", ""] {
            let node = try #require(try Yams.compose(yaml: "v: \(YAMLText.quoted(text))"))
            #expect(node["v"]?.string == text, "\(YAMLText.quoted(text))")
        }
    }
}
