import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

private func hex(_ s: String) -> [UInt8] { try! Hex.decode(s) }

private let profileDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios/cards")

/// A card run to its first GENERATE AC, and an issuer account that knows it.
private struct Fixture {
    var card: VirtualCard
    let profile: CardProfile
    let request: AuthorisationRequest
    let host: EmulatedHost

    static let pinKey = try! TDESKey(hex: "0123456789ABCDEFFEDCBA9876543210")
    static let date = UTCDateParts(year: 2026, month: 11, day: 22, hour: 14)

    init(_ file: String, amount: Int = 10_000, table: AmountTable = .none, pinBlock: [UInt8]? = nil,
         issuerKeys: Bool = true, wrongKey: Bool = false) throws {
        let text = try String(contentsOf: profileDirectory.appendingPathComponent(file), encoding: .utf8)
        profile = try CardProfile.parse(yaml: text, file: file)
        card = try VirtualCard(profile: profile)
        let app = profile.applications[0]
        _ = card.respond(to: CommandAPDU.select(name: app.aid).bytes)
        _ = card.respond(to: CommandAPDU.getProcessingOptions(pdolData: []).bytes)
        let amountBCD = hex(String(format: "%012d", amount))
        let terminal: [EMVTag: [UInt8]] = [
            0x9F02: amountBCD, 0x9F03: hex("000000000000"), 0x9F1A: hex("0484"), 0x95: hex("0000008000"), 0x5F2A: hex("0484"),
            0x9A: Self.date.emvDate, 0x9C: [0x00], 0x9F37: hex("CAFEBABE"), 0x9F35: [0x22], 0x9F45: [0, 0], 0x9F34: hex("420300"),
        ]
        let response = card.respond(to: CommandAPDU.generateAC(.arqc, cdolData: app.cdol1.fill { terminal[$0] }).bytes)
        let tlv = try #require(try TLV.parse(Array(response.dropLast(2))).first)
        let (atc, arqc, iad): ([UInt8], [UInt8], [UInt8]) = tlv.tag == 0x80
            ? (Array(tlv.value[1..<3]), Array(tlv.value[3..<11]), Array(tlv.value[11...]))
            : (try #require(tlv.first(0x9F36)?.value), try #require(tlv.first(0x9F26)?.value), try #require(tlv.first(0x9F10)?.value))
        var tags = terminal
        tags[0x82] = app.aip.bytes
        tags[0x9F36] = atc
        request = AuthorisationRequest(pan: profile.pan, aid: app.aid, amount: amount, currency: 484, arqc: arqc,
                                       cryptogramData: CryptogramData(tags: tags, issuerApplicationData: iad),
                                       pinBlock: pinBlock, date: Self.date)
        host = EmulatedHost(pinKey: Self.pinKey, amountTable: table)
        let imk = wrongKey ? try TDESKey(hex: "00000000000000001111111111111111") : app.issuerMasterKey
        let keys = issuerKeys ? [Hex.encode(app.aid): try CryptogramKeys(cvn: app.cvn, issuerMasterKey: imk, pan: profile.pan, psn: profile.psn)] : [:]
        host.setAccount(pan: profile.pan, IssuerAccount(
            balance: profile.issuerState.balance, currency: profile.issuerState.currency, blocked: profile.issuerState.blocked,
            lost: profile.issuerState.lost, stolen: profile.issuerState.stolen, expiry: (profile.expiry.year, profile.expiry.month),
            pin: profile.pin, keys: keys))
    }
}

@Suite("emulated host")
struct HostTests {
    @Test("approves a genuine ARQC, debits the balance, and its ARPC satisfies the card",
          arguments: ["visa-credit-cvn10.yaml", "visa-debit-cvn18.yaml", "mastercard-credit-cvn16.yaml", "mastercard-debit-cvn20.yaml"])
    func approval(file: String) throws {
        var f = try Fixture(file)
        let before = try #require(f.host.account(pan: f.profile.pan)).balance
        let r = try f.host.authorise(f.request)
        #expect(r.responseCode == .approved)
        #expect(r.rule == "approve")
        #expect(r.authorisationCode?.count == 6)
        #expect(f.host.account(pan: f.profile.pan)?.balance == before - 10_000)
        let issuerData = try #require(r.issuerAuthenticationData)
        let app = f.profile.applications[0]
        if app.aip.contains(AIP.issuerAuthenticationSupported) {
            #expect(f.card.respond(to: CommandAPDU.externalAuthenticate(issuerData).bytes) == [0x90, 0x00])
        } else {
            // Mastercard: the ARPC travels in CDOL2's tag 91; the card answers a TC only if it verifies.
            let cdol2 = app.cdol2.fill { [0x91: issuerData, 0x8A: r.responseCode.bytes, 0x95: hex("0000008000"), 0x9F37: hex("CAFEBABE")][$0] }
            let ac = f.card.respond(to: CommandAPDU.generateAC(.tc, cdolData: cdol2).bytes)
            #expect(try TLV.parse(Array(ac.dropLast(2))).first(0x9F27)?.value == [0x40])
        }
    }

    @Test func aWrongIssuerKeyDeclinesWith82() throws {
        let f = try Fixture("visa-credit-cvn10.yaml", wrongKey: true)
        let r = try f.host.authorise(f.request)
        #expect(r.responseCode == "82")
        #expect(r.rule == "cryptogram")
        #expect(r.authorisationCode == nil)
    }

    @Test func aTamperedCryptogramDeclines() throws {
        let f = try Fixture("mastercard-debit-cvn20.yaml")
        var arqc = try #require(f.request.arqc)
        arqc[0] ^= 0x01
        let tampered = AuthorisationRequest(pan: f.request.pan, aid: f.request.aid, amount: f.request.amount, currency: 484,
                                            arqc: arqc, cryptogramData: f.request.cryptogramData, date: Fixture.date)
        #expect(try f.host.authorise(tampered).responseCode == "82")
    }

    @Test("issuer state, in order", arguments: [
        ("lost", "41"), ("stolen", "43"), ("blocked", "62"), ("expired", "54"), ("balance", "51"),
    ])
    func issuerState(condition: String, code: String) throws {
        let f = try Fixture("visa-credit-cvn10.yaml")
        var account = try #require(f.host.account(pan: f.profile.pan))
        switch condition {
        case "lost": account.lost = true
        case "stolen": account.stolen = true
        case "blocked": account.blocked = true
        case "expired": account.expiry = (2026, 10)
        default: account.balance = 9_999
        }
        f.host.setAccount(pan: f.profile.pan, account)
        let before = account.balance
        let r = try f.host.authorise(f.request)
        #expect(r.responseCode == ResponseCode(code))
        #expect(r.rule == "issuer")
        #expect(f.host.account(pan: f.profile.pan)?.balance == before, "a decline debits nothing")
    }

    @Test func aCardTheIssuerDoesNotKnowIs14() throws {
        let f = try Fixture("visa-credit-cvn10.yaml")
        let other = AuthorisationRequest(pan: "4111111111111111", aid: f.request.aid, amount: 100, currency: 484, arqc: nil,
                                         cryptogramData: nil, date: Fixture.date)
        let r = try f.host.authorise(other)
        #expect(r.responseCode == "14")
        #expect(r.issuerAuthenticationData == nil)
    }

    @Test func onlinePINWrongThenTooManyThenRight() throws {
        let wrong = try PINBlock.format0(pin: "0000", pan: "4761739001010028", key: Fixture.pinKey)
        let right = try PINBlock.format0(pin: "4315", pan: "4761739001010028", key: Fixture.pinKey)
        let f = try Fixture("visa-debit-cvn18.yaml", pinBlock: wrong)
        func ask(_ block: [UInt8]) throws -> ResponseCode {
            let req = AuthorisationRequest(pan: f.request.pan, aid: f.request.aid, amount: 100, currency: 484, arqc: nil,
                                           cryptogramData: nil, pinBlock: block, date: Fixture.date)
            return try f.host.authorise(req).responseCode
        }
        #expect(try ask(right) == .approved)
        #expect(try ask(wrong) == "55")
        #expect(try ask(right) == .approved, "the right PIN resets the count")
        #expect(try ask(wrong) == "55")
        #expect(try ask(wrong) == "55")
        #expect(try ask(wrong) == "75")
        #expect(try ask(right) == "75", "once exceeded, even the right PIN is refused")
    }

    @Test func queuedOutcomesComeFirstAndOnce() throws {
        let f = try Fixture("visa-credit-cvn10.yaml")
        f.host.enqueue(.respond("05"))
        f.host.enqueue(.unavailable)
        f.host.enqueue(.delay(milliseconds: 1500))
        let first = try f.host.authorise(f.request)
        #expect(first.responseCode == "05")
        #expect(first.rule == "queue")
        #expect(first.issuerAuthenticationData != nil, "a decline still carries an ARPC for the card")
        #expect(throws: HostError.unavailable(reason: "a queued outcome")) { try f.host.authorise(f.request) }
        let late = try f.host.authorise(f.request)
        #expect(late.delayMilliseconds == 1500)
        #expect(late.responseCode == .approved)
        #expect(f.host.queuedOutcomes.isEmpty)
    }

    @Test func unavailableUntilSetBack() throws {
        let f = try Fixture("visa-credit-cvn10.yaml")
        f.host.setUnavailable(true)
        #expect(throws: HostError.self) { try f.host.authorise(f.request) }
        f.host.setUnavailable(false)
        #expect(try f.host.authorise(f.request).isApproved)
    }

    @Test("Billpocket's 10XX.00 table", arguments: [(105_100, "51"), (100_500, "05"), (101_400, "14"), (104_300, "43"), (100_000, "00"), (105_150, "00")])
    func billpocketTable(amount: Int, code: String) throws {
        let f = try Fixture("visa-credit-cvn10.yaml", amount: amount, table: .billpocket)
        let r = try f.host.authorise(f.request)
        #expect(r.responseCode == ResponseCode(code))
        #expect(r.rule == (code == "00" ? "approve" : "amount table"))
    }

    @Test("Stripe-style cents table", arguments: [(1_001, "01"), (1_005, "05"), (1_055, "55"), (1_065, "65"), (1_075, "75"), (1_000, "00"), (1_002, "00")])
    func centsTable(amount: Int, code: String) throws {
        let f = try Fixture("visa-credit-cvn10.yaml", amount: amount, table: .stripeCents)
        #expect(try f.host.authorise(f.request).responseCode == ResponseCode(code))
    }

    @Test func creditGivesTheBalanceBack() throws {
        let f = try Fixture("visa-credit-cvn10.yaml")
        let before = try #require(f.host.account(pan: f.profile.pan)).balance
        _ = try f.host.authorise(f.request)
        f.host.credit(pan: f.profile.pan, amount: 10_000)
        #expect(f.host.account(pan: f.profile.pan)?.balance == before)
    }

    @Test func responseCodeMeanings() {
        #expect(ResponseCode("51").description == "51 (Insufficient funds)")
        #expect(ResponseCode("Z3").meaning == "Unable to go online, offline declined")
        #expect(ResponseCode("Y3").isApproval)
        #expect(!ResponseCode("05").isApproval)
        #expect(ResponseCode("QQ").meaning == "Declined (response code QQ)")
    }
}

@Suite("STAN, RRN and clock")
struct CounterTests {
    @Test func stanWrapsAndFormats() {
        #expect(STAN.first.description == "000001")
        #expect(STAN(999_999)!.next == STAN.first)
        #expect(STAN(41)!.next.description == "000042")
        #expect(STAN(0) == nil)
        #expect(STAN(1_000_000) == nil)
    }

    @Test("RRN is Y DDD HH (UTC) + STAN, as in the Viva field example")
    func rrn() {
        // specs/README.md: rrn=432122575537 for transactionDate 2024-11-17T00:16:11+02:00,
        // which is 2024-11-16 22:16 UTC, day 321 of a leap year.
        let date = UTCDateParts(secondsSince1970: 1_731_795_371)
        #expect(date == UTCDateParts(year: 2024, month: 11, day: 16, hour: 22, minute: 16, second: 11))
        #expect(date.dayOfYear == 321)
        #expect(RRN.make(stan: STAN(575_537)!, at: date) == "432122575537")
        #expect(RRN.make(stan: STAN(7)!, at: UTCDateParts(year: 2026, month: 1, day: 5, hour: 3)) == "600503000007")
    }

    @Test func calendarFromEpochSeconds() {
        #expect(UTCDateParts(secondsSince1970: 0) == UTCDateParts(year: 1970, month: 1, day: 1))
        // 2024-02-29T23:59:59Z, a leap day.
        #expect(UTCDateParts(secondsSince1970: 1_709_251_199) == UTCDateParts(year: 2024, month: 2, day: 29, hour: 23, minute: 59, second: 59))
        #expect(UTCDateParts(year: 2024, month: 12, day: 31).dayOfYear == 366)
        #expect(UTCDateParts(year: 2026, month: 11, day: 22).emvDate == [0x26, 0x11, 0x22])
    }

    @Test func manualClockMovesOnlyWhenTold() {
        let clock = ManualClock(secondsSince1970: 1_000)
        #expect(clock.now() == 1_000)
        clock.advance(seconds: 61)
        #expect(clock.now() == 1_061)
        #expect(SystemClock().now() > 1_700_000_000)
    }
}

@Suite("emulated host: approvals held")
struct HostApprovalsHeldTests {
    @Test("the host holds the last 10,000 approvals: the oldest can no longer be voided, the newest can, and no more are kept")
    func bounded() throws {
        let f = try Fixture("visa-credit-cvn10.yaml", amount: 1, issuerKeys: false)
        var account = try #require(f.host.account(pan: f.profile.pan))
        account.balance = 1_000_000
        f.host.setAccount(pan: f.profile.pan, account)
        var codes: [String] = []
        for _ in 0..<(EmulatedHost.approvalsHeld + 1) {
            let r = try f.host.authorise(f.request)
            try #require(r.responseCode == .approved)
            codes.append(try #require(r.authorisationCode))
        }
        #expect(f.host.heldApprovals <= EmulatedHost.approvalsHeld)
        // A six-digit code can come back; the oldest is released unless a later approval reused it.
        if codes.lastIndex(of: codes[0]) == 0 {
            #expect(!f.host.void(authorisationCode: codes[0], amount: 1))
        }
        #expect(f.host.void(authorisationCode: codes[codes.count - 1], amount: 1))
        #expect(f.host.account(pan: f.profile.pan)?.balance == 1_000_000 - EmulatedHost.approvalsHeld)
    }
}
