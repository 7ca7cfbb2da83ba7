import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

let cards = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios/cards")

/// A virtual card in the same process, as the kernel's card link.
final class InProcessCard: CardLink {
    var card: VirtualCard
    /// Makes the card vanish before the n-th command (1-based), to test removal.
    var removeBefore: Int?
    /// Makes the reader fail on the n-th command.
    var failBefore: Int?
    /// Answers these commands (by INS and P1P2) with a status word instead of passing them on.
    var refuse: [(ins: UInt8, p1p2: UInt16, status: [UInt8])] = []
    private(set) var instructions: [UInt8] = []
    var commands: Int { instructions.count }

    /// Replaces the card's ATR.
    var atr: [UInt8]?
    /// Alters a response on its way back: the command, the card's answer, the command's number.
    var alter: ((_ command: [UInt8], _ response: [UInt8], _ number: Int) -> [UInt8])?

    /// How the card is presented: inserted (default), tapped, or swiped (then no APDU is sent).
    var interface = CardInterface.contact

    init(_ card: VirtualCard) { self.card = card }

    func powerOn() throws(KernelError) -> [UInt8] {
        if removeBefore == 0 { throw .cardRemoved(step: "power on") }
        let answer = card.powerOn(interface)
        return atr ?? answer
    }

    var magneticStripe: MagneticStripe? { interface == .magstripe ? card.profile.magneticStripe : nil }

    func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] {
        instructions.append(command[1])
        if let n = removeBefore, commands >= n { throw .cardRemoved(step: "command \(commands)") }
        if let n = failBefore, commands == n { throw .readerError(step: "command \(commands)", detail: "parity error") }
        let p1p2 = UInt16(command[2]) << 8 | UInt16(command[3])
        if let r = refuse.first(where: { $0.ins == command[1] && $0.p1p2 == p1p2 }) { return r.status }
        let response = card.respond(to: command)
        return alter.map { $0(command, response, commands) } ?? response
    }
}

/// Answers prompts from a script; an empty script (or no selection) is a timeout.
final class ScriptedKeypad: Keypad {
    var pins: [String]
    var selection: Int?
    private(set) var pinPrompts: [(online: Bool, triesLeft: Int?)] = []
    private(set) var selectionPrompts: [[String]] = []
    private(set) var timeouts: [Duration] = []

    init(pins: [String] = [], selection: Int? = 0) {
        self.pins = pins
        self.selection = selection
    }

    func selectApplication(_ labels: [String], timeout: Duration) throws(KernelError) -> Int {
        selectionPrompts.append(labels)
        timeouts.append(timeout)
        guard let selection else { throw .promptTimeout(prompt: "application selection") }
        return selection
    }

    func enterPIN(online: Bool, triesLeft: Int?, timeout: Duration) throws(KernelError) -> String {
        pinPrompts.append((online, triesLeft))
        timeouts.append(timeout)
        guard !pins.isEmpty else { throw .promptTimeout(prompt: "PIN") }
        return pins.removeFirst()
    }
}

/// A host whose answers are altered on the way back, as a host with the wrong keys would send them.
final class TamperingHost: AuthorisationHost {
    let inner: EmulatedHost
    init(_ inner: EmulatedHost) { self.inner = inner }

    func authorise(_ request: AuthorisationRequest) throws(HostError) -> AuthorisationResponse {
        let r = try inner.authorise(request)
        var data = r.issuerAuthenticationData
        if data != nil { data![0] ^= 0x01 }
        return AuthorisationResponse(responseCode: r.responseCode, authorisationCode: r.authorisationCode, issuerAuthenticationData: data,
                                     rule: r.rule, message: r.message, delayMilliseconds: r.delayMilliseconds)
    }

    func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse) { inner.reverse(request, approval: approval) }
}

/// Writes a variant of a shipped profile (text replacements) to a temporary file.
func profileVariant(_ file: String, _ replacements: [(String, String)]) throws -> String {
    var yaml = try String(contentsOf: cards.appendingPathComponent(file), encoding: .utf8)
    for (old, new) in replacements {
        precondition(yaml.contains(old), "\(file) has no \(old)")
        yaml = yaml.replacingOccurrences(of: old, with: new)
    }
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("cb-variant-\(UUID().uuidString.prefix(8)).yaml")
    try yaml.write(to: url, atomically: true, encoding: .utf8)
    return url.path
}

struct Bench {
    let profile: CardProfile
    let link: InProcessCard
    let keypad: ScriptedKeypad
    let host: EmulatedHost
    var kernel: Kernel

    static let pinKey = try! TDESKey(hex: "0123456789ABCDEFFEDCBA9876543210")
    static let date = UTCDateParts(year: 2026, month: 11, day: 22, hour: 15)

    init(_ file: String, pins: [String]? = nil, table: AmountTable = .none, hostKeys: Bool = true,
         tamperARPC: Bool = false, configure: (inout TerminalConfiguration) -> Void = { _ in },
         randomPercent: @escaping () -> Int = { 99 }) throws {
        let url = file.hasPrefix("/") ? URL(fileURLWithPath: file) : cards.appendingPathComponent(file)
        profile = try CardProfile.parse(yaml: String(contentsOf: url, encoding: .utf8), file: file)
        if file.hasPrefix("/") { try? FileManager.default.removeItem(at: url) }
        link = InProcessCard(try VirtualCard(profile: profile))
        keypad = ScriptedKeypad(pins: pins ?? profile.pin.map { [$0] } ?? [])
        host = EmulatedHost(pinKey: Self.pinKey, amountTable: table)
        var keys: [String: CryptogramKeys] = [:]
        for app in profile.applications where hostKeys {
            keys[Hex.encode(app.aid)] = try app.cryptogramKeys(pan: profile.pan, psn: profile.psn)
            if let contactless = try app.contactlessCryptogramKeys(pan: profile.pan, psn: profile.psn) {
                keys[IssuerAccount.contactlessKey(aid: app.aid)] = contactless
            }
        }
        var account = IssuerAccount(
            balance: profile.issuerState.balance, currency: profile.issuerState.currency, expiry: (profile.expiry.year, profile.expiry.month),
            pin: profile.pin, keys: keys)
        account.declinesFallback = profile.issuerState.declinesFallback
        host.setAccount(pan: profile.pan, account)
        var configuration = TerminalConfiguration(pinKey: Self.pinKey)
        configure(&configuration)
        kernel = Kernel(configuration: configuration, card: link, keypad: keypad,
                        host: tamperARPC ? TamperingHost(host) : host, randomPercent: randomPercent)
    }

    var balance: Int? { host.account(pan: profile.pan)?.balance }

    mutating func run(amount: Int = 10_000, stan: Int = 42) throws -> TransactionOutcome {
        try kernel.run(TransactionRequest(amount: amount, date: Self.date, stan: STAN(stan)!))
    }

    /// Runs a transaction that must fail, and returns how.
    mutating func failure(amount: Int = 10_000) throws -> TransactionFailure {
        do {
            let outcome = try run(amount: amount)
            Issue.record("expected a failure, got \(outcome.decision) \(outcome.responseCode)")
            throw CancellationError()
        } catch let failure as TransactionFailure {
            return failure
        }
    }
}

let allProfiles = [
    "visa-credit-cvn10.yaml", "visa-debit-cvn18.yaml", "mastercard-credit-cvn16.yaml", "mastercard-debit-cvn20.yaml",
    "amex-signature.yaml", "carnet-debit.yaml", "visa-one-pin-try.yaml", "visa-expired.yaml",
    "mastercard-blocked-application.yaml", "visa-two-applications.yaml",
]

@Suite("kernel against the virtual cards")
struct KernelTests {
    @Test("a 100.00 purchase is approved online with the card's own TC", arguments: [
        ("visa-credit-cvn10.yaml", CVMethod.plaintextPINByICC), ("visa-debit-cvn18.yaml", .encipheredPINOnline),
        ("mastercard-credit-cvn16.yaml", .plaintextPINByICC), ("mastercard-debit-cvn20.yaml", .encipheredPINOnline),
        ("amex-signature.yaml", .signature), ("carnet-debit.yaml", .encipheredPINOnline),
    ])
    func approval(file: String, cvm: CVMethod) throws {
        var b = try Bench(file)
        let outcome = try b.run(stan: 123)
        #expect(outcome.decision == .approved, "\(outcome.responseCode) \(outcome.hostMessage)")
        #expect(outcome.responseCode == .approved)
        #expect(outcome.authorisationCode?.count == 6)
        #expect(outcome.cvm == cvm)
        #expect(outcome.maskedPAN == PAN.masked(b.profile.pan))
        #expect(outcome.aid == b.profile.applications[0].aid)
        #expect(outcome.tsi.contains(TSI.cardholderVerificationPerformed))
        #expect(outcome.tsi.contains(TSI.terminalRiskManagementPerformed))
        #expect(outcome.stan.description == "000123")
        #expect(outcome.rrn == "632615000123", "Y DDD HH + STAN for 2026-11-22 15h UTC")
        #expect(outcome.reversal == nil)
        #expect(b.balance == b.profile.issuerState.balance - 10_000)
        // Traces never hold the full PAN or a PIN block.
        let trace = outcome.trace.map { $0.command + " " + $0.response }.joined(separator: "\n")
        #expect(!trace.contains(b.profile.pan))
        #expect(!trace.contains("241234FF") && !trace.contains("24\(b.profile.pin ?? "x")"))
        #expect(b.keypad.pinPrompts.count == (cvm == .signature ? 0 : 1))
        #expect(b.keypad.timeouts.allSatisfy { $0 == .seconds(30) }, "prompts carry the configured timeout")
    }

    @Test("every shipped profile ends in an outcome or a precise error", arguments: allProfiles)
    func everyProfile(file: String) throws {
        var b = try Bench(file, pins: ["1234", "1234", "4315"])
        b.keypad.selection = 0
        do {
            let outcome = try b.run()
            #expect(outcome.responseCode.bytes.count == 2)
            #expect((outcome.decision == .approved) == (outcome.responseCode.isApproval))
            #expect(outcome.trace.count >= 6)
        } catch let failure as TransactionFailure {
            #expect(file == "mastercard-blocked-application.yaml", "\(failure)")
            #expect(failure.error == .noApplication)
        }
    }

    @Test func answerToReset() throws {
        var b = try Bench("visa-credit-cvn10.yaml")
        #expect(try b.run().atr == b.profile.atr)
        var garbled = try Bench("visa-credit-cvn10.yaml")
        garbled.link.atr = [0x3B, 0x80]
        guard case .invalidCardData(let detail) = try garbled.failure().error else { Issue.record("not invalid card data"); return }
        #expect(detail.hasPrefix("ATR 3B80"))
        #expect(garbled.link.commands == 0, "no command is sent to a card with a bad ATR")
        var t15 = try Bench("visa-credit-cvn10.yaml")
        t15.link.atr = [0x3B, 0x80, 0x0E, 0x8E]
        #expect(try t15.failure().error == .invalidCardData("ATR 3B800E8E offers neither T=0 nor T=1"))
        var gone = try Bench("visa-credit-cvn10.yaml")
        gone.link.removeBefore = 0
        #expect(try gone.failure().error == .cardRemoved(step: "power on"))
    }

    @Test("a terminal without a PIN pad skips PIN rules and sets the TVR bit")
    func noPINPad() throws {
        // 41 00: offline PIN always, else next; 1E 00: signature always.
        let file = try profileVariant("visa-credit-cvn10.yaml", [("000000000000000041031E031F00", "000000000000000041001E00")])
        var b = try Bench(file) { $0.capabilities = [0xE0, 0x28, 0x00] }
        let outcome = try b.run()
        #expect(outcome.cvm == .signature)
        #expect(outcome.tvr.contains(TVR.pinPadNotPresent))
        #expect(b.keypad.pinPrompts.isEmpty)
    }

    @Test("'if the terminal supports it' skips a method the terminal lacks, without a TVR bit")
    func terminalSupportsCondition() throws {
        var b = try Bench("visa-credit-cvn10.yaml") { $0.capabilities = [0xE0, 0x28, 0x00] }
        let outcome = try b.run()
        #expect(outcome.cvm == .signature)
        #expect(!outcome.tvr.contains(TVR.pinPadNotPresent))
    }

    @Test("cash and cashback CVM conditions", arguments: [(UInt8(0x01), CVMethod.plaintextPINByICC), (0x09, .signature), (0x00, .noCVMRequired)])
    func cashConditions(type: UInt8, expected: CVMethod) throws {
        // 01 04: offline PIN if manual cash; 1E 05: signature if purchase with cashback; 1F 02: no CVM otherwise.
        let file = try profileVariant("visa-credit-cvn10.yaml", [("000000000000000041031E031F00", "000000000000000001041E051F02")])
        var b = try Bench(file)
        var request = TransactionRequest(amount: 10_000, date: Bench.date, stan: STAN(1)!)
        request.transactionType = type
        let outcome = try b.kernel.run(request)
        #expect(outcome.cvm == expected)
    }

    @Test func wrongOfflinePINThenRight() throws {
        var b = try Bench("visa-credit-cvn10.yaml", pins: ["0000", "1234"])
        let outcome = try b.run()
        #expect(outcome.decision == .approved)
        #expect(b.keypad.pinPrompts.map(\.triesLeft) == [3, 2])
        #expect(outcome.cvmResults.bytes.last == CVMResults.Result.successful.rawValue)
    }

    @Test("a blocked PIN falls through to signature, with the TVR bit set")
    func pinTryLimitExceeded() throws {
        var b = try Bench("visa-one-pin-try.yaml", pins: ["0000"])
        let outcome = try b.run()
        #expect(outcome.tvr.contains(TVR.pinTryLimitExceeded))
        #expect(outcome.cvm == .signature)
    }

    @Test("failed verification reports the rule that failed, not the list's last rule")
    func cvmResultsOfAFailedVerification() throws {
        // Offline PIN "always, else fail" (01 00), then "no CVM" (1F 00), with the PIN already
        // blocked: verification fails on the first rule and never reaches the second.
        let file = try profileVariant("visa-one-pin-try.yaml", [
            ("pinTriesRemaining: 1", "pinTriesRemaining: 0"), ("000000000000000041031E031F00", "000000000000000001001F00"),
        ])
        var b = try Bench(file)
        let outcome = try b.run()
        #expect(outcome.cvm == nil)
        #expect(Hex.encode(outcome.cvmResults.bytes) == "010001")
        #expect(outcome.tvr.contains(TVR.cardholderVerificationNotSuccessful))
        #expect(outcome.tvr.contains(TVR.pinTryLimitExceeded))
        #expect(b.keypad.pinPrompts.isEmpty, "a blocked PIN is not asked for")
    }

    @Test("amount conditions pick the CVM: no CVM under X, offline PIN over it")
    func amountConditions() throws {
        // X = 100.00: 1F 06 (no CVM if under X), then 01 00 (offline PIN always).
        let file = try profileVariant("visa-credit-cvn10.yaml", [("000000000000000041031E031F00", "00002710000000001F060100")])
        var small = try Bench(file)
        let under = try small.run(amount: 5_000)
        #expect(under.cvm == .noCVMRequired)
        #expect(small.keypad.pinPrompts.isEmpty)
        let again = try profileVariant("visa-credit-cvn10.yaml", [("000000000000000041031E031F00", "00002710000000001F060100")])
        var large = try Bench(again)
        let over = try large.run(amount: 20_000)
        #expect(over.cvm == .plaintextPINByICC)
        #expect(large.keypad.pinPrompts.count == 1)
    }

    @Test func wrongOnlinePINDeclinesWith55ThenTooManyWith75() throws {
        var b = try Bench("visa-debit-cvn18.yaml", pins: ["0000"])
        let outcome = try b.run()
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "55")
        #expect(outcome.authorisationCode == nil)
        #expect(outcome.tvr.contains(TVR.onlinePINEntered))
        b.keypad.pins = ["1111"]
        #expect(try b.run().responseCode == "55")
        b.keypad.pins = ["2222"]
        #expect(try b.run().responseCode == "75", "the third wrong PIN exhausts the issuer's tries")
        b.keypad.pins = ["4315"]
        #expect(try b.run().responseCode == "75", "even the right PIN is refused once blocked")
        #expect(b.balance == b.profile.issuerState.balance)
    }

    @Test("each host rule reaches the outcome", arguments: [
        ("queue", "05"), ("lost", "41"), ("stolen", "43"), ("blocked", "62"), ("balance", "51"), ("unknown card", "14"),
        ("billpocket table", "51"), ("stripe cents", "65"), ("arqc mismatch", "82"),
    ])
    func hostRules(rule: String, code: String) throws {
        var b = try Bench("mastercard-credit-cvn16.yaml", table: rule == "billpocket table" ? .billpocket : rule == "stripe cents" ? .stripeCents : .none)
        var amount = 10_000
        var account = b.host.account(pan: b.profile.pan)!
        switch rule {
        case "queue": b.host.enqueue(.respond("05"))
        case "lost": account.lost = true
        case "stolen": account.stolen = true
        case "blocked": account.blocked = true
        case "balance": amount = account.balance + 1
        case "unknown card": b.host.removeAccount(pan: b.profile.pan)
        case "billpocket table": amount = 105_100
        case "stripe cents": amount = 10_065
        case "arqc mismatch":
            // The host holds keys derived from another issuer master key.
            let other = try CardProfile.parse(yaml: String(contentsOf: cards.appendingPathComponent("mastercard-debit-cvn20.yaml"), encoding: .utf8), file: "x")
            account.keys = [Hex.encode(b.profile.applications[0].aid): try other.applications[0].cryptogramKeys(pan: b.profile.pan, psn: b.profile.psn)]
        default: Issue.record("unknown rule \(rule)")
        }
        if rule != "unknown card" { b.host.setAccount(pan: b.profile.pan, account) }
        let before = b.balance
        let outcome = try b.run(amount: amount)
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == ResponseCode(stringLiteral: code))
        #expect(outcome.authorisationCode == nil)
        #expect(outcome.reversal == nil)
        #expect(b.balance == before, "a decline moves no money")
    }

    @Test func issuerUnavailableEndsInZ3ForAnOnlineOnlyCard() throws {
        var b = try Bench("visa-credit-cvn10.yaml")
        b.host.setUnavailable(true)
        let outcome = try b.run()
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "Z3", "the IAC default for this card denies when offline")
    }

    @Test("issuer unavailable with permissive action codes and an offline-capable card: Y3")
    func issuerUnavailableY3() throws {
        let file = try profileVariant("visa-credit-cvn10.yaml", [
            ("default: \"DC4000A800\"", "default: \"0000000000\""), ("    offlineLimits:", "    offlineApproval: true\n    offlineLimits:"),
        ])
        var b = try Bench(file) { $0.tacDefault = [0, 0, 0, 0, 0] }
        b.host.setUnavailable(true)
        let outcome = try b.run()
        #expect(outcome.responseCode == "Y3")
        #expect(outcome.decision == .approved)
        #expect(outcome.authorisationCode == nil)
        #expect(b.balance == b.profile.issuerState.balance, "the host never saw it")
    }

    @Test("a slow host's delay is passed on, and a queued unavailable is one-shot")
    func queuedUnavailableIsOneShot() throws {
        var b = try Bench("visa-credit-cvn10.yaml")
        b.host.enqueue(.unavailable)
        #expect(try b.run().responseCode == "Z3")
        b.keypad.pins = ["1234"]
        #expect(try b.run().responseCode == .approved)
    }

    @Test func expiredCardSetsTheTVRAndIsDeclinedByTheHost() throws {
        var b = try Bench("visa-expired.yaml")
        let outcome = try b.run()
        #expect(outcome.tvr.contains(TVR.expiredApplication))
        #expect(outcome.responseCode == "54")
        #expect(outcome.decision == .declined)
    }

    @Test func blockedApplicationMeansNoApplication() throws {
        var b = try Bench("mastercard-blocked-application.yaml")
        let failure = try b.failure()
        #expect(failure.error == .noApplication)
        #expect(failure.maskedPAN == nil)
        #expect(failure.reversal == nil)
    }

    @Test func twoApplicationsAskTheCardholder() throws {
        var b = try Bench("visa-two-applications.yaml")
        b.keypad.selection = 1
        let outcome = try b.run()
        #expect(b.keypad.selectionPrompts == [["VISA CREDITO", "VISA ELECTRON"]])
        #expect(outcome.applicationLabel == "VISA ELECTRON")
        #expect(outcome.aid == (try Hex.decode("A0000000032010")))
        #expect(outcome.cvm == .encipheredPINOnline, "Visa Electron's CVM list asks for an online PIN")
        #expect(outcome.decision == .approved)
    }

    @Test func applicationSelectionTimeoutAndOutOfRangeChoice() throws {
        var b = try Bench("visa-two-applications.yaml")
        b.keypad.selection = nil
        #expect(try b.failure().error == .promptTimeout(prompt: "application selection"))
        var c = try Bench("visa-two-applications.yaml")
        c.keypad.selection = 7
        #expect(try c.failure().error == .cancelled(step: "application selection"))
    }

    @Test func pinPromptTimeoutEndsTheTransaction() throws {
        var b = try Bench("visa-credit-cvn10.yaml", pins: []) { $0.promptTimeout = .seconds(5) }
        let failure = try b.failure()
        #expect(failure.error == .promptTimeout(prompt: "PIN"))
        #expect(failure.maskedPAN == PAN.masked(b.profile.pan))
        #expect(failure.reversal == nil)
        #expect(b.keypad.timeouts == [.seconds(5)])
        #expect(!failure.trace.isEmpty)
        #expect(!failure.trace.map { $0.command + $0.response }.joined().contains(b.profile.pan))
    }

    @Test("removal at every step ends the transaction with a precise error; after the host approved, it is reversed",
          arguments: ["visa-credit-cvn10.yaml", "visa-debit-cvn18.yaml", "mastercard-credit-cvn16.yaml", "mastercard-debit-cvn20.yaml",
                      "amex-signature.yaml", "carnet-debit.yaml"])
    func removalAtEveryStep(file: String) throws {
        var reference = try Bench(file)
        _ = try reference.run()
        let instructions = reference.link.instructions
        let firstGenerateAC = instructions.firstIndex(of: 0xAE)! + 1
        #expect(instructions.count >= 10, "selection, GPO, records, GENERATE ACs at least")
        for n in 1...instructions.count {
            var b = try Bench(file)
            b.link.removeBefore = n
            let failure = try b.failure()
            #expect(failure.error == .cardRemoved(step: "command \(n)"))
            if n > firstGenerateAC {
                // The host approved between the GENERATE ACs: the approval is reversed and the balance restored.
                #expect(failure.reversal?.responseCode == .approved, "command \(n) of \(file)")
                #expect(failure.reversal?.authorisationCode?.count == 6)
                #expect(failure.reversal?.amount == 10_000)
            } else {
                #expect(failure.reversal == nil, "command \(n) of \(file)")
            }
            #expect(b.balance == b.profile.issuerState.balance, "command \(n) of \(file)")
        }
    }

    @Test func readerErrorAfterApprovalIsReversed() throws {
        var reference = try Bench("visa-credit-cvn10.yaml")
        _ = try reference.run()
        var b = try Bench("visa-credit-cvn10.yaml")
        b.link.failBefore = reference.link.commands
        let failure = try b.failure()
        #expect(failure.error == .readerError(step: "command \(reference.link.commands)", detail: "parity error"))
        #expect(failure.reversal != nil)
        #expect(failure.description.contains("reversed"))
        #expect(b.balance == b.profile.issuerState.balance)
    }

    @Test("a wrong ARPC fails issuer authentication; the card declines and the approval is reversed",
          arguments: ["visa-credit-cvn10.yaml", "mastercard-credit-cvn16.yaml"])
    func arpcFailure(file: String) throws {
        var b = try Bench(file, tamperARPC: true)
        let outcome = try b.run()
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "05")
        #expect(outcome.authorisationCode == nil)
        #expect(outcome.reversal?.responseCode == .approved)
        #expect(b.balance == b.profile.issuerState.balance)
        if file.hasPrefix("visa") {
            #expect(outcome.tvr.contains(TVR.issuerAuthenticationFailed), "EXTERNAL AUTHENTICATE was refused")
            #expect(b.link.instructions.contains(0x82))
        } else {
            #expect(!b.link.instructions.contains(0x82), "Mastercard takes the ARPC in CDOL2")
        }
    }

    @Test("velocity checking: a new card, then offline transactions past the limits")
    func velocityChecking() throws {
        // visa-credit-cvn10: lower 5, upper 10, ATC starts at 1, no online transaction yet.
        var b = try Bench("visa-credit-cvn10.yaml")
        let first = try b.run()
        #expect(first.tvr.contains(TVR.newCard))
        #expect(!first.tvr.contains(TVR.lowerOfflineLimitExceeded))
        #expect(b.link.instructions.filter { $0 == 0xCA }.count == 3, "GET DATA PIN try counter, ATC, last online ATC")
        b.keypad.pins = ["1234"]
        #expect(!(try b.run().tvr.contains(TVR.newCard)), "an online transaction was completed")
        // Six transactions the card could not take online push ATC − last online past 5.
        b.host.setUnavailable(true)
        for _ in 0..<6 {
            b.keypad.pins = ["1234"]
            _ = try b.run()
        }
        b.host.setUnavailable(false)
        b.keypad.pins = ["1234"]
        let late = try b.run()
        #expect(late.tvr.contains(TVR.lowerOfflineLimitExceeded))
        #expect(!late.tvr.contains(TVR.upperOfflineLimitExceeded))
    }

    @Test func velocityCountersTheCardWillNotGiveCountAsExceeded() throws {
        var b = try Bench("visa-credit-cvn10.yaml")
        b.link.refuse = [(0xCA, 0x9F13, [0x6A, 0x88])]
        let outcome = try b.run()
        #expect(outcome.tvr.contains(TVR.lowerOfflineLimitExceeded))
        #expect(outcome.tvr.contains(TVR.upperOfflineLimitExceeded))
        #expect(!outcome.tvr.contains(TVR.newCard))
    }

    @Test("application usage control: a card not valid for domestic goods is declined offline")
    func applicationUsageControl() throws {
        // AUC 5500: international cash and goods, valid at terminals other than ATMs — not domestic goods.
        let file = try profileVariant("visa-credit-cvn10.yaml", [("    offlineLimits:", "    auc: \"5500\"\n    offlineLimits:")])
        var b = try Bench(file)
        let outcome = try b.run()
        #expect(outcome.tvr.contains(TVR.serviceNotAllowed))
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "Z1", "the TAC denial has the bit: AAC at the first GENERATE AC")
        #expect(b.link.instructions.filter { $0 == 0xAE }.count == 1)
        #expect(b.balance == b.profile.issuerState.balance)
    }

    @Test("application usage control rules", arguments: [
        // (AUC, issuer country, 9C, terminal type, expected)
        ("FF00", 484, 0x00, 0x22, true), ("0100", 484, 0x00, 0x22, false), ("2100", 484, 0x00, 0x22, true),
        ("2100", 840, 0x00, 0x22, false), ("0900", 840, 0x00, 0x22, false), ("0300", 484, 0x00, 0x14, false), ("8200", 484, 0x01, 0x14, true),
        ("4100", 484, 0x01, 0x22, false), ("4100", 840, 0x01, 0x22, true), ("2100", 484, 0x09, 0x22, false),
        ("2180", 484, 0x09, 0x22, true), ("2140", 484, 0x09, 0x22, false), ("0100", 484, 0x20, 0x22, true),
    ])
    func usageControlRules(auc: String, issuerCountry: Int, transactionType: Int, terminalType: Int, expected: Bool) throws {
        let allowed = Kernel.usageAllowed(
            auc: try Hex.decode(auc), issuerCountry: Kernel.bcd(issuerCountry, bytes: 2), terminalCountry: Kernel.bcd(484, bytes: 2),
            transactionType: UInt8(transactionType), terminalType: UInt8(terminalType), additionalCapabilities: [0x80, 0, 0, 0, 0],
            services: false)
        #expect(allowed == expected)
    }

    @Test("random transaction selection below the floor limit", arguments: [
        // (amount, random 1–99, goes online): target 20 below 100.00, rising to 60 at the 500.00 floor limit.
        (5_000, 20, true), (5_000, 21, false), (30_000, 40, true), (30_000, 41, false), (49_999, 59, true), (60_000, 99, true),
    ])
    func randomSelection(amount: Int, random: Int, online: Bool) throws {
        let file = try profileVariant("visa-credit-cvn10.yaml", [
            ("    offlineLimits:", "    offlineApproval: true\n    offlineLimits:"), ("online: \"DC4004F800\"", "online: \"0000000000\""),
            ("default: \"DC4000A800\"", "default: \"0000000000\""),
        ])
        var b = try Bench(file, configure: {
            $0.floorLimit = 50_000
            $0.tacOnline = [0, 0, 0, 0x98, 0]
            $0.randomSelection = RandomSelection(targetPercentage: 20, maximumTargetPercentage: 60, threshold: 10_000)
        }, randomPercent: { random })
        let outcome = try b.run(amount: amount)
        #expect(outcome.tvr.contains(TVR.randomlySelectedOnline) == (online && amount < 50_000))
        #expect(outcome.tvr.contains(TVR.exceedsFloorLimit) == (amount >= 50_000))
        #expect(outcome.responseCode == (online ? .approved : "Y1"), "\(outcome.hostMessage)")
        #expect(outcome.decision == .approved)
        #expect(b.balance == b.profile.issuerState.balance - (online ? amount : 0))
    }
}
