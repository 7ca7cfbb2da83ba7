import EMV
import Foundation
import Ledger
import Synchronization
import Terminal
import VirtualCard
import Workflows

/// The checkout this test target was built from (for `Scenarios/cards`, the shipped configuration…).
public let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A shipped card profile, by file name (`visa-credit-cvn10.yaml`).
public func shippedProfile(_ name: String) throws -> CardProfile {
    let path = repositoryRoot.appendingPathComponent("Scenarios/cards/\(name)").path
    return try CardProfile.parse(yaml: try String(contentsOfFile: path, encoding: .utf8), file: path)
}

/// A real ledger file in a fresh temporary directory; `remove()` closes and deletes it.
public final class TemporaryLedger: @unchecked Sendable {
    public let directory: String
    public let ledger: Ledger

    public init() throws {
        var template = Array("/tmp/cardbench-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        directory = String(cString: made)
        let path = directory + "/ledger.sqlite"
        ledger = try Ledger(path: path, panKey: try Ledger.loadOrCreatePANKey(at: Ledger.defaultPANKeyPath(database: path)))
    }

    public func remove() {
        try? ledger.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A virtual card in the test's process, as the card of a terminal session: it keeps its
/// counters across transactions, and can be pulled out right after its n-th command.
public final class VirtualCardSession: CardSession, @unchecked Sendable {
    // Unchecked: under `lock`.
    private let lock = NSLock()
    private var card: VirtualCard
    private var commands = 0
    /// Leave after answering this many commands (nil: stay).
    public var removeAfter: Int?

    public init(_ profile: CardProfile) throws {
        card = try VirtualCard(profile: profile)
    }

    public func powerOn() throws(KernelError) -> [UInt8] {
        lock.withLock {
            card.reset()
            return card.atr
        }
    }

    public func powerOff() {}

    public func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] {
        let answer: [UInt8]? = lock.withLock {
            if let removeAfter, commands >= removeAfter { return nil }
            commands += 1
            return card.respond(to: command)
        }
        guard let answer else { throw .cardRemoved(step: (try? CommandAPDU(bytes: command).instructionName) ?? "an APDU") }
        return answer
    }
}

/// A terminal for workflow tests: a card slot, the one keypad (`TerminalKeypad`, its inputs
/// queued ahead as a scenario's), the daemon's terminals' busy and abort (`TerminalActivity`),
/// and its blocking work on a thread of its own.
public final class TestTerminal: TerminalSession, @unchecked Sendable {
    public let name: String
    public let tid: String
    public var terminalData: TerminalData
    public let keypad = TerminalKeypad()
    public var prompts: any Prompts { keypad }
    private let card = Mutex<VirtualCardSession?>(nil)
    private let activity: TerminalActivity
    private let work: DispatchQueue

    public init(name: String = "bench1", tid: String = "10000001", currency: Int = 978) {
        self.name = name
        self.tid = tid
        terminalData = TerminalData(countryCode: 300, currencyCode: currency)
        work = DispatchQueue(label: "test terminal \(name)")
        activity = TerminalActivity(terminal: name, keypad: keypad)
    }

    /// Puts `card` in the slot (nil: empties it).
    public func insert(_ card: VirtualCardSession?) { self.card.withLock { $0 = card } }

    public var isAborted: Bool { activity.isAborted }
    public func acquire(_ what: String) throws(WorkflowError) { try activity.acquire(what) }
    public func release() { activity.release() }
    public func abort() -> Bool { activity.abort() }

    public func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { c in work.async { c.resume(returning: body()) } }
    }

    public func waitForCard(timeout: Duration) throws(KernelError) -> any CardSession {
        guard let card = card.withLock({ $0 }) else { throw .promptTimeout(prompt: "present card") }
        return card
    }
}

/// The terminals of a harness, by name.
public struct TestTerminals: TerminalDirectory {
    public let all: [TestTerminal]

    public func terminal(_ name: String?) throws(WorkflowError) -> any TerminalSession {
        guard let name, !name.isEmpty else { return all[0] }
        guard let t = all.first(where: { $0.name == name }) else { throw .notFound("no terminal named \"\(name)\"") }
        return t
    }
}

/// Every event published, in order.
public final class RecordedEvents: EventSink, @unchecked Sendable {
    private let events = Mutex<[(BenchEvent, String?)]>([])

    public init() {}

    public func publish(_ event: BenchEvent, terminal: String?) { events.withLock { $0.append((event, terminal)) } }

    public var all: [BenchEvent] { events.withLock { $0.map(\.0) } }
}

/// Everything a workflow runs against, real but in process and without sockets: a ledger file,
/// the emulated host knowing the given cards, a manual clock, recorded events, test terminals.
public final class WorkflowHarness: @unchecked Sendable {
    public let temporary: TemporaryLedger
    public let host: EmulatedHost
    public let clock: ManualClock
    public let events = RecordedEvents()
    public let terminals: [TestTerminal]
    public let context: WorkflowContext

    public init(cards: [CardProfile], terminals: [TestTerminal] = [TestTerminal()], at secondsSince1970: Int64 = 1_795_000_000) throws {
        temporary = try TemporaryLedger()
        host = EmulatedHost(pinKey: try TDESKey(Hex.decode("0123456789ABCDEFFEDCBA9876543210")), amountTable: .none)
        var profiles: [String: CardProfile] = [:]
        for card in cards {
            try host.register(card)
            profiles[card.pan] = card
        }
        clock = ManualClock(secondsSince1970: secondsSince1970)
        self.terminals = terminals
        for t in terminals { _ = try temporary.ledger.ensureTerminal(name: t.name, tid: t.tid) }
        var settings = WorkflowSettings()
        settings.promptTimeout = .milliseconds(200)
        settings.cardTimeout = .milliseconds(200)
        context = WorkflowContext(store: temporary.ledger, host: host, clock: clock, events: events, cards: ProfileDirectory(profiles: profiles),
                                  terminals: TestTerminals(all: terminals), settings: settings)
    }

    public var ledger: Ledger { temporary.ledger }

    public func remove() { temporary.remove() }
}

/// Runs blocking work (a loop of blocking socket calls, a child process waited for) on a thread
/// of its own and awaits its result, so it holds none of the few cooperative threads the other
/// tests of a 2-core machine run on.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

// MARK: Card capture

/// The bench CA (test material in the repository), which re-issues a captured card's certificates.
public let benchCA: CertificationAuthority = {
    let url = repositoryRoot.appendingPathComponent("Scenarios/ca/bench-ca.yaml")
    return try! CertificationAuthority.parse(yaml: String(contentsOf: url, encoding: .utf8), file: url.path)
}()

/// A card profile no shipped file has: a T=0 ATR with its own historical bytes, two Visa
/// applications (CVN 18 with 16 issuer discretionary bytes in its IAD, and CVN 10), SDA only
/// under the 1408-bit bench key with a 1152-bit issuer key, records in a layout of its own, a
/// track 1 discretionary value of its own and an expiry on the 15th.
public func oddCardYAML(pan: String, pse: Bool = true) throws -> String {
    let base = """
        name: Odd card
        pan: "\(pan)"
        psn: "02"
        expiry: "2030-06"
        effective: "2025-01"
        cardholderName: "ODD/CARD"
        pin: "4321"
        atc: 77
        atr: "3B6500004342454E43"
        pse: \(pse)
        applications:
          - aid: "A0000000031010"
            label: "VISA ODD"
            priority: 2
            cvn: 18
            issuerMasterKey: "00112233445566778899AABBCCDDEEFF"
            keyDerivationIndex: 2
            issuerDiscretionaryData: "0F0102030405060708090A0B0C0D0E0F"
            pdol: "9F1A02"
            cvmList: "000000000000000041031E031F00"
            iac: { default: "DC4000A800", denial: "0010000000", online: "DC4004F800" }
            records:
              - { sfi: 1, record: 1, tags: ["57", "5F20", "9F1F"] }
              - { sfi: 2, record: 1, tags: ["5A", "5F24", "5F25", "5F28", "5F34", "9F07", "9F08", "9F42", "9F44"], offlineAuthentication: true }
              - { sfi: 2, record: 2, tags: ["8C", "8D", "8E", "9F0D", "9F0E", "9F0F"], offlineAuthentication: true }
            data: { "9F1F": "3132333435", "5F24": "300615" }
          - aid: "A0000000032010"
            label: "VISA ELECTRON"
            priority: 1
            cvn: 10
            issuerMasterKey: "FFEEDDCCBBAA99887766554433221100"
            cvmList: "000000000000000042031F00"
            currency: "978"

        """
    var options = ODAPersonaliser.Options()
    options.methods = [.sda]
    options.caIndex = 0xB1
    options.issuerBits = 1152
    return try ODAPersonaliser(ca: benchCA).personalise(yaml: base, file: "odd.yaml", options: options)
}

public func luhnNumber(_ partial: String) -> String { partial + String(Luhn.checkDigit(for: partial)!) }

