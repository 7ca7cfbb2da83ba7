import ArgumentParser
import Daemon
import Defaults
import EMV
import Foundation
import Ledger
import Terminal
import VirtualCard
import Workflows

/// One EMV sale run in this process: a virtual card, the kernel, the emulated host and the ledger —
/// the daemon's own sale workflow (`WorkflowContext.cardTransaction`), without a daemon.
struct SaleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sale",
        abstract: "Run one EMV chip sale in-process: virtual card, kernel, emulated host, ledger.",
        discussion: """
        The host starts from the profile's issuer state (balance, PIN, keys) on every run. The \
        transaction, its STAN and its trace are recorded in the ledger (by default \
        .cardbench/ledger.sqlite, the daemon's default state directory). Exit status: 0 when the \
        transaction reached an outcome (approved or declined), 1 when it ended without one (card \
        removed, prompt timeout, …), 2 for bad input.
        """
    )

    @Option(help: "Card profile: a YAML file, or the name of an embedded profile (cardbench card list).")
    var card: String = EmbeddedDefaults.demoCard

    @Option(help: "Amount in major units with up to 2 decimals, e.g. 100.00.")
    var amount: String

    @Option(help: "ISO 4217 numeric currency of the terminal.")
    var currency: Int = 484

    @Option(parsing: .upToNextOption, help: "PIN(s) entered at successive PIN prompts (default: the profile's PIN).")
    var pin: [String] = []

    @Option(help: "Application chosen when the cardholder is asked (0-based).")
    var select: Int = 0

    @Option(help: "Queue this response code at the host for this transaction, e.g. 51.")
    var hostCode: String?

    @Flag(help: "The host cannot be reached (the terminal decides Y3/Z3).")
    var hostUnavailable = false

    @Option(help: "The host answers this many milliseconds late.")
    var hostDelay: Int?

    @Option(help: "Seconds the terminal waits for the host before deciding Y3/Z3 (a late approval is reversed).")
    var hostTimeout: Double = 30

    @Option(help: "Decline by amount: none, billpocket (10XX.00 → XX) or stripe-cents (.05 → 05, …).")
    var amountTable: String = "none"

    @Option(help: "Remove the card before its n-th command (1-based), to see a removal and its reversal.")
    var removeBefore: Int?

    @Option(help: "Terminal name in the ledger.")
    var terminal: String = "bench1"

    @Option(help: "Terminal ID (8 digits) for a terminal the ledger does not know yet.")
    var tid: String = "10000001"

    @Option(help: "Ledger database file; its PAN key is kept beside it (<file>.pan-key, mode 0600).")
    var ledger: String = ".cardbench/ledger.sqlite"

    @Option(help: "Keep the card's ATC, PIN tries and blocked state in this JSON file across runs.")
    var state: String?

    @Option(help: "CAPK file for offline data authentication, added to the embedded keys; repeat for more.")
    var capk: [String] = []

    @Option(help: "A revoked issuer certificate, RID:INDEX:SERIAL in hex; repeat for more.")
    var revoked: [String] = []

    @Flag(help: "Tap the card (contactless: Entry Point, Kernel 2 or 3) instead of inserting it.")
    var tap = false

    @Flag(help: "Swipe the card's magnetic stripe instead of inserting it.")
    var swipe = false

    @Option(help: "How the card is presented again when the terminal asks, comma-separated: insert, tap, swipe (e.g. --tap --then insert).")
    var then: String?

    @Flag(help: "The terminal allows fallback: a chip that cannot be read may be swiped (POS entry mode 80).")
    var fallback = false

    @Flag(help: "Print the APDU trace (PAN masked, PIN blocks withheld).")
    var trace = false

    @Flag(help: "Print the outcome as JSON.")
    var json = false

    func validate() throws {
        _ = try Self.minorUnits(amount)
        guard (1...999).contains(currency) else { throw CLIError(message: "--currency: must be an ISO 4217 numeric code, 1–999", code: 2) }
        if let hostCode, hostCode.count != 2 || !hostCode.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            throw CLIError(message: "--host-code: must be 2 letters or digits, e.g. 51", code: 2)
        }
        guard AmountTable(option: amountTable) != nil else {
            throw CLIError(message: "--amount-table: must be none, billpocket or stripe-cents", code: 2)
        }
        if let hostDelay, !(0...600_000).contains(hostDelay) { throw CLIError(message: "--host-delay: must be 0–600000 ms", code: 2) }
        guard hostTimeout > 0, hostTimeout <= 600 else { throw CLIError(message: "--host-timeout: must be more than 0 and at most 600 s", code: 2) }
        if let removeBefore, removeBefore < 1 { throw CLIError(message: "--remove-before: must be 1 or more", code: 2) }
        if tap, swipe { throw CLIError(message: "--tap and --swipe: give one (or neither, to insert)", code: 2) }
        _ = try presentations()
        // The keypad queues at most 16 inputs: the PINs and the application choice.
        if pin.count > 15 { throw CLIError(message: "--pin: at most 15 PINs, got \(pin.count)", code: 2) }
        for p in pin where !(4...12).contains(p.count) || !p.allSatisfy(\.isNumber) {
            throw CLIError(message: "--pin: must be 4–12 digits", code: 2)
        }
    }

    /// The presentations in order: the first from --tap/--swipe (insert otherwise), then --then's.
    func presentations() throws -> [CardInterface] {
        var out: [CardInterface] = [tap ? .contactless : swipe ? .magstripe : .contact]
        for verb in (then ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !verb.isEmpty {
            guard let interface = CardInterface(verb: verb) else { throw CLIError(message: "--then: insert, tap or swipe, got \"\(verb)\"", code: 2) }
            out.append(interface)
        }
        return out
    }

    /// "100.00" → 10000.
    static func minorUnits(_ text: String) throws -> Int {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].count <= 10, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              parts.count == 1 || (1...2).contains(parts[1].count) else {
            throw CLIError(message: "--amount: must be a positive amount with up to 2 decimals, e.g. 100.00", code: 2)
        }
        let fraction = parts.count == 2 ? (parts[1].count == 1 ? Int(parts[1])! * 10 : Int(parts[1])!) : 0
        let value = Int(parts[0])! * 100 + fraction
        guard value > 0 else { throw CLIError(message: "--amount: must be more than 0", code: 2) }
        return value
    }

    func run() async throws {
        let profile = try loadCardProfile(card, option: "--card")
        let cardState = try CardStateFile(path: state).load()
        let presentations = try presentations()
        for interface in presentations where !profile.interfaces.contains(interface) {
            throw CLIError(message: "--card: \(profile.name) cannot be presented by \(interface.verb): its interfaces are \(profile.interfaces.map(\.rawValue).sorted().joined(separator: ", "))", code: 2)
        }
        let link = ProfileCardLink(card: try VirtualCard(profile: profile, state: cardState), removeBefore: removeBefore, presentations: presentations)
        // The PINs and the application choice wait in the keypad's queue; a prompt with no answer
        // left times out at once.
        let keypad = TerminalKeypad()
        let pins = pin.isEmpty ? profile.pin.map { [$0] } ?? [] : pin
        for p in pins { _ = try keypad.enter(.pin(p)) }
        _ = try keypad.enter(.select(select + 1))

        let pinKey = try TDESKey(SecureRandom.bytes(16))
        let host = EmulatedHost(pinKey: pinKey, amountTable: AmountTable(option: amountTable)!, seed: UInt64.random(in: 1...UInt64.max))
        try host.register(profile)
        if let hostDelay { host.enqueue(.delay(milliseconds: hostDelay), queue: terminal) }
        if let hostCode { host.enqueue(.respond(ResponseCode(stringLiteral: hostCode)), queue: terminal) }
        host.setUnavailable(hostUnavailable)

        let store = try openLedgerCLI(ledger)
        let clock = SystemClock()
        do { _ = try store.ensureTerminal(name: terminal, tid: tid) } catch { throw CLIError(message: "--tid: \(error)", code: 2) }
        let oda: ODAConfiguration
        do throws(ConfigurationError) {
            oda = ODAConfiguration(caKeys: try CAPKStore.loadWithEmbedded(capk, key: "--capk"),
                                   revoked: try CAPKStore.revoked(revoked, key: "--revoked"))
        } catch {
            throw CLIError(message: "\(error.key): \(error.rule)", code: 2)
        }
        let session = CommandLineTerminal(name: terminal, tid: tid, currency: currency, keypad: keypad, card: link, oda: oda, fallback: fallback)
        var settings = WorkflowSettings()
        settings.promptTimeout = .zero
        settings.hostTimeout = .milliseconds(Int(hostTimeout * 1000))
        settings.cardTimeout = .zero
        let context = WorkflowContext(store: store, host: host, clock: clock, events: NoEvents(), cards: NoCards(),
                                      terminals: session, settings: settings)
        let amountMinor = try Self.minorUnits(amount)
        let plan = CardTransactionPlan(new: NewTransaction(terminal: terminal, provider: .cli, action: .sale, amount: Int64(amountMinor),
                                                           currency: currency, createdAt: clock.nowMicroseconds()),
                                       kind: .purchase, amountTable: host.amountTable)
        let (answer, run): (Answer, CardRun)
        do throws(WorkflowError) {
            (answer, run) = try await context.recordCardTransaction(on: session, plan) { run in
                Callback(url: nil, target: nil, fields: [], status: run.completion.status.rawValue, message: run.completion.message ?? "")
            }
        } catch {
            throw CLIError(message: "\(error)")
        }
        try CardStateFile(path: state).save(link.state)
        guard let stored = answer.transaction else { throw CLIError(message: "the sale was not recorded") }

        switch run.result {
        case .success(let outcome):
            if json {
                try printJSON(SaleReport(outcome, amount: amountMinor, currency: currency, stored: stored, ledger: ledger))
            } else {
                printOutcome(outcome, amount: amountMinor, stored: stored)
            }
        case .failure(let failure):
            if json {
                try printJSON(SaleReport(failure, amount: amountMinor, currency: currency, stored: stored, ledger: ledger))
            } else {
                print("sale \(Money.decimal(amountMinor)) on \(terminal): FAILED — \(failure)")
                print("STAN \(stored.stan)  ledger \(ledger) #\(stored.id) \(stored.status.rawValue)")
                if let reversal = failure.reversal {
                    print("reversal: approval \(reversal.authorisationCode ?? "-") for \(Money.decimal(reversal.amount)) taken back at the host and recorded")
                }
                if trace { printTrace(failure.trace) }
            }
            throw ExitCode(1)
        }
    }

    private func printOutcome(_ o: TransactionOutcome, amount: Int, stored: StoredTransaction) {
        let verdict = o.decision == .approved ? "APPROVED" : "DECLINED"
        print("sale \(Money.decimal(amount)) on \(terminal): \(verdict) \(o.responseCode)" + (o.authorisationCode.map { " auth \($0)" } ?? ""))
        if o.hostMessage != o.responseCode.meaning { print("message: \(o.hostMessage)") }
        print("STAN \(o.stan)  RRN \(o.rrn)  ledger \(ledger) #\(stored.id) \(stored.status.rawValue)")
        print("card: \(o.brand?.displayName ?? "?") \(o.maskedPAN)" + (o.cardholderName.map { " \($0)" } ?? "") + (o.expiry.map { " exp \($0)" } ?? ""))
        print("application: \(Hex.encode(o.aid)) \(o.applicationLabel)")
        print("CVM: \(o.cvm.map { "\($0)" } ?? "none") (CVM results \(Hex.encode(o.cvmResults.bytes)))")
        print("TVR \(o.tvr)")
        print("TSI \(o.tsi)")
        for (i, line) in o.entry.lines.enumerated() { print(i == 0 ? "entry: \(line)" : "       \(line)") }
        for (i, line) in o.oda.lines.enumerated() { print(i == 0 ? "ODA: \(line)" : "     \(line)") }
        if let arqc = o.arqc, let atc = o.atc { print("ARQC \(Hex.encode(arqc))  ATC \(Hex.encode(atc))") }
        if let reversal = o.reversal {
            print("reversal: approval \(reversal.authorisationCode ?? "-") taken back at the host (\(reversal.reason))")
        }
        if trace { printTrace(o.trace) }
    }

    private func printTrace(_ trace: [(command: String, response: String)]) {
        for (command, response) in trace {
            let name = (try? CommandAPDU(bytes: Hex.decode(command)).instructionName) ?? ""
            print("> \(command)  \(name)\n< \(response)")
        }
    }
}

/// The JSON form of `cardbench sale`.
struct SaleReport: Encodable {
    var result: String
    var responseCode: String?
    var message: String
    var authorisationCode: String?
    var amount: Int
    var currency: Int
    var stan: String
    var rrn: String?
    var ledgerID: Int64
    var ledgerStatus: String
    var maskedPAN: String?
    var brand: String?
    var aid: String?
    var applicationLabel: String?
    var cvm: String?
    var tvr: String?
    var tsi: String?
    var arqc: String?
    var atc: String?
    var oda: ODAReport?
    var entry: EntryReport?
    var reversed: Bool
    var trace: [[String]]

    init(_ o: TransactionOutcome, amount: Int, currency: Int, stored: StoredTransaction, ledger: String) {
        result = o.decision.rawValue
        responseCode = o.responseCode.code
        message = o.hostMessage
        authorisationCode = o.authorisationCode
        self.amount = amount
        self.currency = currency
        stan = o.stan.description
        rrn = o.rrn
        ledgerID = stored.id
        ledgerStatus = stored.status.rawValue
        maskedPAN = o.maskedPAN
        brand = o.brand?.displayName
        aid = o.aid.isEmpty ? nil : Hex.encode(o.aid)
        applicationLabel = o.aid.isEmpty ? nil : o.applicationLabel
        cvm = o.cvm.map { "\($0)" }
        tvr = Hex.encode(o.tvr.bytes)
        tsi = Hex.encode(o.tsi.bytes)
        arqc = o.arqc.map(Hex.encode)
        atc = o.atc.map(Hex.encode)
        oda = o.oda
        entry = o.entry
        reversed = o.reversal != nil
        trace = o.trace.map { [$0.command, $0.response] }
    }

    init(_ f: TransactionFailure, amount: Int, currency: Int, stored: StoredTransaction, ledger: String) {
        result = "failed"
        message = f.description
        self.amount = amount
        self.currency = currency
        stan = stored.stan.description
        ledgerID = stored.id
        ledgerStatus = stored.status.rawValue
        maskedPAN = f.maskedPAN
        aid = f.aid.map(Hex.encode)
        entry = f.entry
        reversed = f.reversal != nil
        trace = f.trace.map { [$0.command, $0.response] }
    }
}

/// A virtual card in this process as the kernel's card link.
final class ProfileCardLink: CardSession, @unchecked Sendable {
    // Unchecked: used by one transaction at a time, on one thread.
    private var card: VirtualCard
    private let removeBefore: Int?
    private var commands = 0
    /// How the card is presented, in order; the first is the current one.
    private var presentations: [CardInterface]

    init(card: VirtualCard, removeBefore: Int?, presentations: [CardInterface] = [.contact]) {
        self.card = card
        self.removeBefore = removeBefore
        self.presentations = presentations.isEmpty ? [.contact] : presentations
    }

    /// The card's counters (ATC, PIN tries) as they are now.
    var state: CardState { card.state }

    func powerOn() throws(KernelError) -> [UInt8] {
        card.powerOn(presentations[0])
    }

    /// A presentation is over: the card is presented the next way, if the cardholder has one.
    func powerOff() {
        if presentations.count > 1 { presentations.removeFirst() }
    }

    var magneticStripe: MagneticStripe? { presentations[0] == .magstripe ? card.profile.magneticStripe : nil }

    func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] {
        commands += 1
        if let removeBefore, commands >= removeBefore { throw .cardRemoved(step: "command \(commands)") }
        return card.respond(to: command)
    }
}

/// `cardbench sale`'s terminal: the card is already in the reader, the keypad answers from the
/// command line, and the work runs on the caller's thread.
final class CommandLineTerminal: TerminalSession, TerminalDirectory, @unchecked Sendable {
    let name: String
    let tid: String
    let terminalData: TerminalData
    let keypad: TerminalKeypad
    let card: ProfileCardLink
    var prompts: any Prompts { keypad }
    var isAborted: Bool { false }

    init(name: String, tid: String, currency: Int, keypad: TerminalKeypad, card: ProfileCardLink, oda: ODAConfiguration, fallback: Bool = false) {
        self.name = name
        self.tid = tid
        var data = TerminalData(countryCode: 484, currencyCode: currency, oda: oda)
        data.fallback = fallback
        terminalData = data
        self.keypad = keypad
        self.card = card
    }

    func acquire(_ what: String) throws(WorkflowError) {}
    func release() {}
    func abort() -> Bool { false }
    func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T { body() }
    func waitForCard(timeout: Duration) throws(KernelError) -> any CardSession { card }
    func terminal(_ name: String?) throws(WorkflowError) -> any TerminalSession { self }
}

/// No one listens to `cardbench sale`'s events.
struct NoEvents: EventSink {
    func publish(_ event: BenchEvent, terminal: String?) {}
}

/// `cardbench sale` asks nothing of the issuer beyond the account.
struct NoCards: CardDirectory {
    func facts(pan: String) -> CardFacts? { nil }
}

/// Opens `--ledger`, naming the option when it cannot be opened.
func openLedgerCLI(_ path: String) throws -> Ledger {
    do { return try Ledger.openFile(path) } catch { throw CLIError(message: "--ledger: \(path): \(error)", code: 2) }
}
