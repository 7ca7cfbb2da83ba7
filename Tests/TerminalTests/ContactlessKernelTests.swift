import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

/// A bench whose card is tapped (or swiped) rather than inserted, with the shipped CA keys.
func tapBench(_ file: String, pins: [String]? = nil, interface: CardInterface = .contactless,
              configure: (inout TerminalConfiguration) -> Void = { _ in }) throws -> Bench {
    let b = try Bench(file, pins: pins) { c in
        c.oda = ODAConfiguration(caKeys: shippedCAKeys)
        configure(&c)
    }
    b.link.interface = interface
    return b
}

extension Bench {
    /// The decline or failure a run ends with, when it must not approve.
    mutating func presentAgain(amount: Int) throws -> (CardInterface, TransactionFailure) {
        let f = try failure(amount: amount)
        guard case .presentAgain(let interface, _) = f.error else {
            Issue.record("expected a request to present the card again, got \(f.error)")
            throw CancellationError()
        }
        return (interface, f)
    }
}

@Suite("Entry Point: pre-processing and combination selection (Book B)")
struct EntryPointTests {
    let visa = ContactlessCombination(aid: [0xA0, 0, 0, 0, 0x03], kernel: 3, transactionLimit: 2_000_000, floorLimit: 5_000, cvmRequiredLimit: 40_000)
    let ttq: [UInt8] = [0x36, 0x00, 0x40, 0x80]

    @Test("limits: transaction and CVM required at or above, floor above (v2.11 3.1.1.5–8)", arguments: [
        (4_999, true, false, false), (5_000, true, false, false), (5_001, true, true, false),
        (39_999, true, true, false), (40_000, true, true, true), (1_999_999, true, true, true), (2_000_000, false, true, true),
    ])
    func limits(amount: Int, allowed: Bool, online: Bool, cvm: Bool) {
        let p = preprocess(visa, amount: amount, baseTTQ: ttq, terminalFloorLimit: 0)
        #expect(p.allowed == allowed)
        #expect(p.floorLimitExceeded == online)
        #expect(p.cvmRequired == cvm)
        #expect(TTQ.has(p.ttq, TTQ.onlineCryptogramRequired) == online)
        #expect(TTQ.has(p.ttq, TTQ.cvmRequired) == cvm)
    }

    @Test("the configured TTQ's byte 2 bits 8 and 7 are cleared before the amount sets them (3.1.1.2)")
    func ttqReset() {
        let p = preprocess(visa, amount: 100, baseTTQ: [0x36, 0xC0, 0x40, 0x80], terminalFloorLimit: 0)
        #expect(p.ttq == [0x36, 0x00, 0x40, 0x80])
    }

    @Test("zero amount: online when allowed, not allowed otherwise; status check: one unit goes online")
    func zeroAndStatusCheck() {
        #expect(preprocess(visa, amount: 0, baseTTQ: ttq, terminalFloorLimit: 0).ttq[1] & 0x80 != 0)
        var strict = visa
        strict.zeroAmountAllowed = false
        #expect(!preprocess(strict, amount: 0, baseTTQ: ttq, terminalFloorLimit: 0).allowed)
        var check = visa
        check.statusCheck = true
        #expect(TTQ.has(preprocess(check, amount: 100, baseTTQ: ttq, terminalFloorLimit: 0).ttq, TTQ.onlineCryptogramRequired))
        #expect(!TTQ.has(preprocess(visa, amount: 100, baseTTQ: ttq, terminalFloorLimit: 0).ttq, TTQ.onlineCryptogramRequired))
    }

    @Test("Kernel 2's transaction limits are the kernel's own, not pre-processing's")
    func kernel2Limit() {
        let mc = ContactlessCombination(aid: [0xA0, 0, 0, 0, 0x04], kernel: 2, transactionLimit: 100, floorLimit: 0, cvmRequiredLimit: 0)
        #expect(preprocess(mc, amount: 1_000, baseTTQ: ttq, terminalFloorLimit: 0).allowed)
    }

    @Test("candidates: the RID's default kernel without 9F2A, the named kernel with it, by priority")
    func selection() throws {
        let mc = ContactlessCombination(aid: [0xA0, 0, 0, 0, 0x04], kernel: 2, transactionLimit: nil, floorLimit: nil, cvmRequiredLimit: nil)
        let combos = [visa, mc].map { preprocess($0, amount: 100, baseTTQ: ttq, terminalFloorLimit: 0) }
        func ppse(_ entries: [[TLV]]) -> TLV {
            TLV(0x6F, children: [TLV(0x84, Array("2PAY.SYS.DDF01".utf8)), TLV(0xA5, children: [TLV(0xBF0C, children: entries.map { TLV(0x61, children: $0) })])])
        }
        let two = ppse([[TLV(0x4F, try Hex.decode("A0000000041010")), TLV(0x87, [2])],
                        [TLV(0x4F, try Hex.decode("A0000000031010")), TLV(0x87, [1])]])
        let found = candidates(ppse: two, combinations: combos).candidates
        #expect(found.map { Hex.encode($0.aid) } == ["A0000000031010", "A0000000041010"])
        #expect(found.map(\.preprocessed.combination.kernel) == [3, 2])
        // A Visa AID asking for kernel 2 matches no combination.
        let wrong = ppse([[TLV(0x4F, try Hex.decode("A0000000031010")), TLV(0x9F2A, [0x02])]])
        #expect(candidates(ppse: wrong, combinations: combos).candidates.isEmpty)
        let named = ppse([[TLV(0x4F, try Hex.decode("A0000000031010")), TLV(0x9F2A, [0x03])]])
        #expect(candidates(ppse: named, combinations: combos).candidates.count == 1)
        // An AID no combination takes.
        let amex = ppse([[TLV(0x4F, try Hex.decode("A00000002501"))]])
        #expect(candidates(ppse: amex, combinations: combos).candidates.isEmpty)
    }

    @Test("the PC/SC part 3 ATR: built from historical bytes, recognised, and told from contact ATRs")
    func contactlessATR() throws {
        #expect(ATR.contactless(historical: []) == [0x3B, 0x80, 0x80, 0x01, 0x01])
        #expect(ATR.isContactless(try Hex.decode("3B8580012063CBA1002D")))  // a real Visa debit card's (pcsc-tools list)
        #expect(ATR.isContactless(try Hex.decode("3B8680014B4F4E41141109")))
        #expect(!ATR.isContactless(CardProfile.defaultATR))
        #expect(!ATR.isContactless(try Hex.decode("3B8580012063CBA1002E")))  // wrong TCK
        #expect(try ATR.parse(ATR.contactless(historical: [0x80, 0x73])).protocols.contains(1))
    }
}

@Suite("Kernel 3 (Visa qVSDC) against the virtual cards")
struct Kernel3Tests {
    @Test("online-only card: the ARQC comes from GPO, no records, no GENERATE AC; the host verifies it")
    func onlineOnly() throws {
        var b = try tapBench("visa-debit-contactless.yaml")
        let outcome = try b.run(amount: 15_000)
        #expect(outcome.decision == .approved && outcome.responseCode.code == "00", "\(outcome.hostMessage)")
        #expect(outcome.entry.kernel == 3 && outcome.entry.outcome == "online request" && outcome.entry.posEntryMode == "07")
        #expect(outcome.entryMode == .contactless)
        #expect(!b.link.instructions.contains(0xB2) && !b.link.instructions.contains(0xAE))
        #expect(outcome.arqc?.count == 8)
    }

    @Test("offline-capable card below the floor limit: TC, fDDA passes, no host; tampered 9F69 fails it")
    func offlineFDDA() throws {
        var b = try tapBench("visa-credit-qvsdc-fdda.yaml")
        let before = b.balance
        let outcome = try b.run(amount: 3_000)
        #expect(outcome.responseCode.code == "Y1" && outcome.decision == .approved)
        #expect(outcome.oda.method == .dda && outcome.oda.result == .passed, "\(outcome.oda.lines)")
        #expect(outcome.tsi.contains(TSI.offlineDataAuthenticationPerformed))
        #expect(b.balance == before)
        // The same tap with 9F69 altered on its way: the signature no longer verifies, and the
        // card's CTQ (go online if ODA fails) sends it online.
        var spoilt = try tapBench("visa-credit-qvsdc-fdda.yaml")
        spoilt.link.alter = { command, response, _ in
            guard command[1] == 0xA8 else { return response }
            var r = response
            if let i = (0..<r.count - 3).first(where: { r[$0] == 0x9F && r[$0 + 1] == 0x69 && r[$0 + 2] == 7 }) { r[i + 4] ^= 0x01 }
            return r
        }
        let online = try spoilt.run(amount: 3_000)
        #expect(online.oda.result == .failed && online.oda.failedCheck == "signed dynamic data hash", "\(online.oda.lines)")
        #expect(online.tvr.contains(TVR.ddaFailed))
        #expect(online.entry.outcome == "online request" && online.responseCode.code == "00")
    }

    @Test("fDDA fails, CTQ switch interface: try another interface (insert); without a contact slot: declined (C-3 5.6)")
    func switchInterface() throws {
        var b = try tapBench("visa-credit-fdda-switch-interface.yaml")
        let (interface, failure) = try b.presentAgain(amount: 3_000)
        #expect(interface == .contact)
        #expect(failure.entry?.outcome == "try another interface")
        var noSlot = try tapBench("visa-credit-fdda-switch-interface.yaml") { $0.contactless.ttq[0] &= ~0x10 }
        let declined = try noSlot.run(amount: 3_000)
        #expect(declined.decision == .declined && declined.responseCode.code == "Z1")
    }

    @Test("CVM required: online PIN asked and sent to the issuer; the wrong PIN is the issuer's 55")
    func onlinePIN() throws {
        var b = try tapBench("visa-debit-contactless.yaml", pins: ["1234"])
        let outcome = try b.run(amount: 40_000)
        #expect(outcome.cvm == .encipheredPINOnline && outcome.responseCode.code == "00")
        #expect(b.keypad.pinPrompts.count == 1 && b.keypad.pinPrompts[0].online)
        #expect(outcome.tvr.contains(TVR.onlinePINEntered))
        var wrong = try tapBench("visa-debit-contactless.yaml", pins: ["0000"])
        #expect(try wrong.run(amount: 40_000).responseCode.code == "55")
    }

    @Test("a phone: CDCVM above the CVM limit; a locked phone answers 6986 and the next tap goes through")
    func consumerDevice() throws {
        var b = try tapBench("visa-mobile-cdcvm.yaml")
        let outcome = try b.run(amount: 80_000)
        #expect(outcome.cvm == .consumerDevice && outcome.entry.cvm == "consumer device CVM")
        #expect(b.keypad.pinPrompts.isEmpty)
        var locked = try tapBench("visa-mobile-see-phone.yaml")
        let (interface, _) = try locked.presentAgain(amount: 80_000)
        #expect(interface == .contactless)
        #expect(try locked.run(amount: 80_000).decision == .approved)
    }

    @Test("a CDCVM claim whose signed copy in 9F69 differs: declined")
    func cdcvmMismatch() throws {
        // The phone claims CDCVM on an offline-capable fDDA card: flip the CTQ's CDCVM bit in 9F6C only.
        var b = try tapBench("visa-credit-qvsdc-fdda.yaml")
        b.link.alter = { command, response, _ in
            guard command[1] == 0xA8 else { return response }
            var r = response
            if let i = (0..<r.count - 3).first(where: { r[$0] == 0x9F && r[$0 + 1] == 0x6C && r[$0 + 2] == 2 }) { r[i + 4] |= 0x80 }
            return r
        }
        let outcome = try b.run(amount: 3_000)
        #expect(outcome.decision == .declined && outcome.responseCode.code == "Z1", "\(outcome.hostMessage)")
    }

    @Test("6984 from a wearable with no common CVM: try another interface; 6985: select next, none left: end application")
    func gpoStatuses() throws {
        var b = try tapBench("visa-wearable.yaml")
        let (interface, _) = try b.presentAgain(amount: 50_000)
        #expect(interface == .contact)
        var refused = try tapBench("visa-debit-contactless.yaml")
        refused.link.refuse = [(0xA8, 0x0000, [0x69, 0x85])]
        let f = try refused.failure(amount: 15_000)
        guard case .endApplication(let reason) = f.error else { Issue.record("\(f.error)"); return }
        #expect(reason.contains("GPO 6985"))
    }

    @Test("at and above the contactless transaction limit: try another interface, nothing sent to the card but the amount check")
    func transactionLimit() throws {
        var b = try tapBench("visa-debit-contactless.yaml")
        let (interface, failure) = try b.presentAgain(amount: 2_000_000)
        // Only Kernel 2's combination stays allowed (its limits are its own): the PPSE is read, the Visa AID is not selected.
        #expect(interface == .contact && b.link.instructions == [0xA4])
        #expect(failure.entry?.path.last?.contains("transaction limit") == true)
        var below = try tapBench("visa-debit-contactless.yaml")
        #expect(try below.run(amount: 1_999_999).entry.outcome == "online request")
    }

    @Test("a card that leaves the field before the kernel is done: try again (tap)")
    func tooShort() throws {
        var b = try tapBench("visa-debit-contactless.yaml")
        b.link.removeBefore = 3
        let (interface, failure) = try b.presentAgain(amount: 15_000)
        #expect(interface == .contactless && failure.entry?.outcome == "try again")
    }
}

@Suite("Kernel 2 (Mastercard, EMV mode) against the virtual cards")
struct Kernel2Tests {
    @Test("below the floor limit: TC with CDA, approved offline; above it: ARQC with CDA, the host approves")
    func cda() throws {
        var b = try tapBench("mastercard-paypass-cvn16.yaml")
        let offline = try b.run(amount: 3_000)
        #expect(offline.responseCode.code == "Y1" && offline.oda.method == .cda && offline.oda.result == .passed, "\(offline.oda.lines)")
        #expect(offline.entry.kernel == 2)
        var online = try tapBench("mastercard-paypass-cvn16.yaml")
        let o = try online.run(amount: 15_000)
        #expect(o.responseCode.code == "00" && o.oda.result == .passed && o.tvr.contains(TVR.exceedsFloorLimit))
        #expect(online.link.instructions.filter { $0 == 0xAE }.count == 1)
    }

    @Test("9F33 byte 2 follows the CVM required limit: online PIN above it, no CVM below")
    func cvmCapability() throws {
        var above = try tapBench("mastercard-paypass-cvn16.yaml", pins: ["1234"])
        #expect(try above.run(amount: 40_000).cvm == .encipheredPINOnline)
        var below = try tapBench("mastercard-paypass-cvn16.yaml")
        let o = try below.run(amount: 39_999)
        #expect(o.cvm == .noCVMRequired && below.keypad.pinPrompts.isEmpty)
    }

    @Test("on-device CVM: confirmation code verified above the CVM limit (01 00 02), no CVM below (3F 00 02)")
    func onDevice() throws {
        var b = try tapBench("mastercard-mobile-odcv.yaml")
        let above = try b.run(amount: 60_000)
        #expect(above.cvm == .consumerDevice && above.cvmResults.bytes == [0x01, 0x00, 0x02])
        var c = try tapBench("mastercard-mobile-odcv.yaml")
        let below = try c.run(amount: 10_000)
        #expect(below.cvm == .noCVMRequired && below.cvmResults.bytes == [0x3F, 0x00, 0x02])
    }

    @Test("transaction limits: a card above DF8124 is passed over (another interface); a phone has DF8125, and above it ends")
    func limits() throws {
        var card = try tapBench("mastercard-paypass-cvn16.yaml")
        let (interface, failure) = try card.presentAgain(amount: 2_000_001)
        #expect(interface == .contact && failure.entry?.path.last?.contains("DF8124") == true)
        var phone = try tapBench("mastercard-mobile-odcv.yaml")
        #expect(try phone.run(amount: 5_000_000).decision == .approved)
        // Above DF8125 a phone's tap ends: it has no chip to insert (device type 01 in its 9F6E).
        var tooMuch = try tapBench("mastercard-mobile-odcv.yaml")
        let f = try tooMuch.failure(amount: 10_000_001)
        guard case .endApplication(let reason) = f.error else { Issue.record("\(f.error)"); return }
        #expect(reason.contains("device type 01"))
        #expect(f.entry?.path.count == 1, "\(f.entry?.path ?? [])")
    }

    @Test("See Phone: AAC with DF4B ends the tap for another; the next tap is approved")
    func seePhone() throws {
        var b = try tapBench("mastercard-see-phone.yaml")
        let (interface, failure) = try b.presentAgain(amount: 60_000)
        #expect(interface == .contactless && failure.entry?.outcome == "end application (See Phone)")
        #expect(try b.run(amount: 60_000).decision == .approved)
    }

    @Test("a card's AAC: try another interface; a card offering mag-stripe mode only: end application")
    func aacAndMagStripeMode() throws {
        // Denial action codes that match any TVR bit (above the floor limit: "exceeds floor limit"):
        // the terminal asks for an AAC, the card gives it.
        var b = try tapBench("mastercard-paypass-cvn16.yaml") { $0.tacDenial = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF] }
        let (interface, _) = try b.presentAgain(amount: 15_000)
        #expect(interface == .contact)
        // A phone's AAC is a decline: it has no chip to insert.
        var phone = try tapBench("mastercard-mobile-odcv.yaml") { $0.tacDenial = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF] }
        let declined = try phone.run(amount: 15_000)
        #expect(declined.decision == .declined && declined.responseCode.code == "Z1")
        var stripeMode = try tapBench("mastercard-paypass-cvn16.yaml")
        stripeMode.link.alter = { command, response, _ in
            guard command[1] == 0xA8 else { return response }
            var r = response
            if let i = (0..<r.count - 4).first(where: { r[$0] == 0x82 && r[$0 + 1] == 2 }) { r[i + 3] &= 0x7F }
            return r
        }
        let f = try stripeMode.failure(amount: 3_000)
        guard case .endApplication(let reason) = f.error else { Issue.record("\(f.error)"); return }
        #expect(reason.contains("mag-stripe mode"))
    }
}

@Suite("Magnetic stripe and fallback")
struct MagstripeTests {
    @Test("a stripe-only card: POS entry mode 90, signature, no cryptogram, approved")
    func stripeOnly() throws {
        var b = try tapBench("magstripe-only-101.yaml", interface: .magstripe)
        let outcome = try b.run(amount: 15_000)
        #expect(outcome.decision == .approved && outcome.entry.posEntryMode == "90" && outcome.entryMode == .magstripe)
        #expect(outcome.arqc == nil && outcome.aid.isEmpty && outcome.cvm == .signature)
    }

    @Test("a chip card swiped first: insert it; swiped after the chip failed: fallback 80; the issuer may decline it")
    func chipCardSwiped() throws {
        var b = try tapBench("visa-credit-cvn10.yaml", interface: .magstripe)
        let (interface, _) = try b.presentAgain(amount: 15_000)
        #expect(interface == .contact)
        var fallback = try tapBench("visa-unreadable-chip.yaml", interface: .magstripe)
        var request = TransactionRequest(amount: 15_000, date: Bench.date, stan: STAN(7)!)
        request.chipFailed = true
        let o = try fallback.kernel.run(request)
        #expect(o.entry.posEntryMode == "80" && o.entryMode == .fallback && o.decision == .approved)
        var declined = try tapBench("visa-fallback-declined.yaml", interface: .magstripe)
        let d = try declined.kernel.run(request)
        #expect(d.responseCode.code == "05" && d.decision == .declined)
    }

    @Test("a chip with no supported application: fallback offered only when the terminal allows it; a removed card never")
    func chipFailure() throws {
        var on = try tapBench("visa-unreadable-chip.yaml", interface: .contact) { $0.fallback = true }
        let (interface, failure) = try on.presentAgain(amount: 15_000)
        #expect(interface == .magstripe && failure.entry?.path.first?.hasPrefix("insert: chip failed") == true)
        var off = try tapBench("visa-unreadable-chip.yaml", interface: .contact)
        #expect(try off.failure(amount: 15_000).error == .noApplication)
        var removed = try tapBench("visa-credit-cvn10.yaml", interface: .contact) { $0.fallback = true }
        removed.link.removeBefore = 4
        guard case .cardRemoved = try removed.failure(amount: 15_000).error else { Issue.record("expected card removed"); return }
    }

    @Test("tracks: parsed with and without sentinels; a PAN, expiry or service code out of shape is refused by name")
    func tracks() throws {
        let s = try MagneticStripe(track1: "%B4761739001010176^CARDBENCH/STRIPE ONLY^2905101100000000?", track2: ";4761739001010176=29051011000000000?")
        #expect(s.pan == "4761739001010176" && s.expiry == "2905" && s.serviceCode == "101" && !s.chipCard)
        #expect(s.cardholderName == "CARDBENCH/STRIPE ONLY")
        #expect(try MagneticStripe(track1: nil, track2: "4761739001010176=2905201").chipCard)
        #expect(throws: EMVError.self) { try MagneticStripe(track1: nil, track2: "4761739001010176D2905201") }
        #expect(throws: EMVError.self) { try MagneticStripe(track1: nil, track2: "4761739001010176=2913201") }
        #expect(throws: EMVError.self) { try MagneticStripe(track1: "B4761739001010184^X Y^2905101", track2: "4761739001010176=2905101") }
    }
}
