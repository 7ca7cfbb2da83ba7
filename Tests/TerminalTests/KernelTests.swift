import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

private let cards = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios/cards")

/// A virtual card in the same process, as the kernel's card link.
final class InProcessCard: CardLink {
    var card: VirtualCard
    /// Makes the card vanish before the n-th command (1-based), to test removal.
    var removeBefore: Int?
    private(set) var commands = 0

    init(_ card: VirtualCard) { self.card = card }

    func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] {
        commands += 1
        if let n = removeBefore, commands >= n { throw .cardRemoved(step: "command \(commands)") }
        return card.respond(to: command)
    }
}

/// Answers prompts from a script; an empty script is a timeout.
final class ScriptedKeypad: Keypad {
    var pins: [String]
    var selection: Int
    private(set) var pinPrompts: [(online: Bool, triesLeft: Int?)] = []
    private(set) var selectionPrompts: [[String]] = []

    init(pins: [String] = [], selection: Int = 0) {
        self.pins = pins
        self.selection = selection
    }

    func selectApplication(_ labels: [String]) throws(KernelError) -> Int {
        selectionPrompts.append(labels)
        return selection
    }

    func enterPIN(online: Bool, triesLeft: Int?) throws(KernelError) -> String {
        pinPrompts.append((online, triesLeft))
        guard !pins.isEmpty else { throw .promptTimeout(prompt: "PIN") }
        return pins.removeFirst()
    }
}

private struct Bench {
    let profile: CardProfile
    let link: InProcessCard
    let keypad: ScriptedKeypad
    let host: EmulatedHost
    var kernel: Kernel

    static let pinKey = try! TDESKey(hex: "0123456789ABCDEFFEDCBA9876543210")
    static let date = UTCDateParts(year: 2026, month: 11, day: 22, hour: 15)

    init(_ file: String, pins: [String]? = nil, table: AmountTable = .none) throws {
        let url = file.hasPrefix("/") ? URL(fileURLWithPath: file) : cards.appendingPathComponent(file)
        profile = try CardProfile.parse(yaml: String(contentsOf: url, encoding: .utf8), file: file)
        link = InProcessCard(try VirtualCard(profile: profile))
        keypad = ScriptedKeypad(pins: pins ?? profile.pin.map { [$0] } ?? [])
        host = EmulatedHost(pinKey: Self.pinKey, amountTable: table)
        var keys: [String: CryptogramKeys] = [:]
        for app in profile.applications {
            keys[Hex.encode(app.aid)] = try app.cryptogramKeys(pan: profile.pan, psn: profile.psn)
        }
        host.setAccount(pan: profile.pan, IssuerAccount(
            balance: profile.issuerState.balance, currency: profile.issuerState.currency, expiry: (profile.expiry.year, profile.expiry.month),
            pin: profile.pin, keys: keys))
        kernel = Kernel(configuration: TerminalConfiguration(pinKey: Self.pinKey), card: link, keypad: keypad, host: host)
    }

    mutating func run(amount: Int = 10_000) throws -> TransactionOutcome {
        try kernel.run(TransactionRequest(amount: amount, date: Self.date))
    }
}

@Suite("kernel against the virtual cards")
struct KernelTests {
    @Test("a 100.00 purchase is approved online with the card's own TC", arguments: [
        ("visa-credit-cvn10.yaml", CVMethod.plaintextPINByICC), ("visa-debit-cvn18.yaml", .encipheredPINOnline),
        ("mastercard-credit-cvn16.yaml", .plaintextPINByICC), ("mastercard-debit-cvn20.yaml", .encipheredPINOnline),
        ("amex-signature.yaml", .signature), ("carnet-debit.yaml", .encipheredPINOnline),
    ])
    func approval(file: String, cvm: CVMethod) throws {
        var b = try Bench(file)
        let outcome = try b.run()
        #expect(outcome.decision == .approved, "\(outcome.responseCode) \(outcome.hostMessage)")
        #expect(outcome.responseCode == .approved)
        #expect(outcome.authorisationCode?.count == 6)
        #expect(outcome.cvm == cvm)
        #expect(outcome.maskedPAN == PAN.masked(b.profile.pan))
        #expect(outcome.aid == b.profile.applications[0].aid)
        #expect(outcome.tsi.contains(TSI.cardholderVerificationPerformed))
        #expect(b.host.account(pan: b.profile.pan)?.balance == b.profile.issuerState.balance - 10_000)
        // Traces never hold the full PAN or a PIN block.
        let trace = outcome.trace.map { $0.command + " " + $0.response }.joined(separator: "\n")
        #expect(!trace.contains(b.profile.pan))
        #expect(!trace.contains("241234FF") && !trace.contains("24\(b.profile.pin ?? "x")"))
        #expect(b.keypad.pinPrompts.count == (cvm == .signature ? 0 : 1))
    }

    @Test func wrongOfflinePINThenRight() throws {
        var b = try Bench("visa-credit-cvn10.yaml", pins: ["0000", "1234"])
        let outcome = try b.run()
        #expect(outcome.decision == .approved)
        #expect(b.keypad.pinPrompts.map(\.triesLeft) == [3, 2])
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
        let yaml = try String(contentsOf: cards.appendingPathComponent("visa-one-pin-try.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "pinTriesRemaining: 1", with: "pinTriesRemaining: 0")
            .replacingOccurrences(of: "000000000000000041031E031F00", with: "000000000000000001001F00")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cb-cvm-\(UUID().uuidString.prefix(8)).yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var b = try Bench(file.path)
        let outcome = try b.run()
        #expect(outcome.cvm == nil)
        #expect(Hex.encode(outcome.cvmResults.bytes) == "010001")
        #expect(outcome.tvr.contains(TVR.cardholderVerificationNotSuccessful))
        #expect(outcome.tvr.contains(TVR.pinTryLimitExceeded))
        #expect(b.keypad.pinPrompts.isEmpty, "a blocked PIN is not asked for")
    }

    @Test func wrongOnlinePINDeclinesWith55() throws {
        var b = try Bench("visa-debit-cvn18.yaml", pins: ["0000"])
        let outcome = try b.run()
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "55")
        #expect(outcome.authorisationCode == nil)
    }

    @Test func hostRulesReachTheOutcome() throws {
        var b = try Bench("mastercard-credit-cvn16.yaml", table: .billpocket)
        let outcome = try b.run(amount: 105_100)
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "51")
    }

    @Test func issuerUnavailableEndsInZ3ForAnOnlineOnlyCard() throws {
        var b = try Bench("visa-credit-cvn10.yaml")
        b.host.setUnavailable(true)
        let outcome = try b.run()
        #expect(outcome.decision == .declined)
        #expect(outcome.responseCode == "Z3", "the TAC default for this terminal denies when offline")
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
        #expect(throws: KernelError.noApplication) { try b.run() }
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

    @Test func pinPromptTimeoutEndsTheTransaction() throws {
        var b = try Bench("visa-credit-cvn10.yaml", pins: [])
        #expect(throws: KernelError.promptTimeout(prompt: "PIN")) { try b.run() }
    }

    @Test("removal before any command ends the transaction with a precise error")
    func removalAtEveryStep() throws {
        var reference = try Bench("visa-credit-cvn10.yaml")
        _ = try reference.run()
        let count = reference.link.commands
        #expect(count >= 12, "PSE, directory, SELECT, GPO, records, PIN, two GENERATE ACs at least")
        for n in 1...count {
            var b = try Bench("visa-credit-cvn10.yaml")
            b.link.removeBefore = n
            #expect(throws: KernelError.cardRemoved(step: "command \(n)")) { try b.run() }
        }
    }
}
