import CardIO
import EMV
import Foundation
import Ledger
import Terminal
import VirtualCard

/// The daemon's state: its terminals, the emulated host, the ledger, the clock and the event feed.
/// Everything a request needs passes through here; the HTTP layer only translates.
public final class Bench: @unchecked Sendable {
    public let configuration: DaemonConfiguration
    public let ledger: Ledger
    public let host: EmulatedHost
    public let clock: any Terminal.Clock
    /// Set when the clock is manual: the API moves it.
    public let manualClock: ManualClock?
    public let events = EventHub()
    public let metrics = BenchMetrics()
    /// In configuration order.
    public let terminals: [TerminalRuntime]
    /// Follows udev for `udev:` readers, while started.
    private let udevLock = NSLock()
    private var udev: UdevReaders?
    /// The issuer's card profiles by PAN: installments and other card facts a front asks about.
    private let profiles: [String: CardProfile]
    /// Profile files a request may name, by name (`Bench.profileLibrary`).
    let profileLibrary: [String: String]
    /// Transactions found `in_progress` at start (the daemon had stopped mid-transaction).
    public private(set) var recovered: [StoredTransaction] = []

    public init(configuration: DaemonConfiguration) throws {
        self.configuration = configuration
        if configuration.manualClock {
            let manual = ManualClock(secondsSince1970: configuration.clockStart / 1_000_000)
            manualClock = manual
            clock = manual
        } else {
            manualClock = nil
            clock = SystemClock()
        }
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        ledger = try openLedgerFile((configuration.stateDirectory as NSString).appendingPathComponent("ledger.sqlite"),
                                    outboxMaxAttempts: configuration.callbacks.maxAttempts)
        // The PIN key of online PIN blocks between this terminal and this host: a fixed test key.
        host = EmulatedHost(pinKey: try TDESKey(Hex.decode("0123456789ABCDEFFEDCBA9876543210")), amountTable: .none)
        var profiles: [String: CardProfile] = [:]
        for path in try Self.profilePaths(configuration.cardProfiles) {
            let profile = try Self.loadProfile(path)
            try host.register(profile)
            profiles[profile.pan] = profile
        }
        self.profiles = profiles
        profileLibrary = Self.profileLibrary(configuration.cardProfiles, demoCard: configuration.demoCard)
        let demo = try configuration.demoCard.map(Self.loadProfile)
        if let demo, profiles[demo.pan] == nil { try host.register(demo) }
        let runtime = configuration.effectiveRuntimeDirectory
        let events = self.events
        let clock = self.clock
        terminals = try configuration.terminals.map {
            try TerminalRuntime(settings: $0, runtimeDirectory: runtime, demoCard: demo, events: events, clock: clock)
        }
        for t in configuration.terminals { _ = try ledger.ensureTerminal(name: t.name, tid: t.tid) }
        recovered = try ledger.recoverInterrupted(now: clock.nowMicroseconds())
    }

    /// Starts the readers, and for `udev:` readers finds the ones plugged in and follows udev.
    public func start() throws {
        for t in terminals { try t.start() }
        let hotplug = terminals.filter { $0.settings.udevName != nil }
        guard !hotplug.isEmpty else { return }
        let udev = try UdevReaders()
        udevLock.withLock { self.udev = udev }
        @Sendable func reader(_ found: DiscoveredReader) -> SerialReader? {
            hotplug.first { $0.settings.udevName == found.name }?.serialReader
        }
        try udev.follow { [self] event in
            switch event {
            case .added(let found):
                guard let r = reader(found) else { return }
                publish("reader-added", terminal: hotplug.first { $0.settings.udevName == found.name }?.settings.name,
                        ["reader": found.name, "path": found.devnode])
                r.attach(path: found.devnode)
            case .removed(let found):
                guard let r = reader(found) else { return }
                r.detach()
                publish("reader-removed", terminal: hotplug.first { $0.settings.udevName == found.name }?.settings.name,
                        ["reader": found.name, "path": found.devnode])
            }
        }
        for found in try udev.enumerate() { reader(found)?.attach(path: found.devnode) }
    }

    /// Ends what is in progress and stops the readers. Returns what went wrong giving back the
    /// STANs reserved ahead, if anything did (a reboot then skips up to a block of them).
    @discardableResult
    public func stop() -> (any Error)? {
        udevLock.withLock { udev }?.stop()
        for t in terminals { t.stop() }
        defer { events.finish() }
        // A clean stop gives back the STANs reserved ahead, so a reboot skips none.
        do { try ledger.releaseSTANReservations() } catch { return error }
        return nil
    }

    public func terminal(_ name: String?) throws(DaemonError) -> TerminalRuntime {
        guard let name, !name.isEmpty else {
            guard let first = terminals.first else { throw .notFound("no terminal is configured") }
            return first
        }
        guard let t = terminals.first(where: { $0.settings.name == name }) else {
            throw .notFound("no terminal named \"\(name)\" (terminals: \(terminals.map(\.settings.name).joined(separator: ", ")))")
        }
        return t
    }

    public func profile(pan: String) -> CardProfile? { profiles[pan] }

    public func publish(_ type: String, terminal: String?, _ data: [String: String] = [:]) {
        events.publish(DaemonEvent(type: type, terminal: terminal, at: clock.nowMicroseconds(), data: data))
    }

    // MARK: Card work

    /// What the card part of a transaction produced, before the front renders it.
    struct CardResult: Sendable {
        let started: Started
        /// What the host was asked for, in minor units.
        let amount: Int64
        let completion: Completion
        let trace: [TraceEntry]
        let outcome: TransactionOutcome?
        let failure: TransactionFailure?
    }

    /// Runs one chip transaction on `terminal` (already acquired): begins it in the ledger (the
    /// STAN is durable before the host is asked), waits for the card, runs the kernel, and then
    /// lets `finish` render the callback so the outcome and its outbox rows commit together.
    func cardTransaction(on terminal: TerminalRuntime, _ new: NewTransaction, kind: AuthorisationRequest.Kind,
                         amountTable: AmountTable, tableAmount: Int? = nil, country: Int? = nil,
                         onCardRead: (@Sendable (CardRead) throws(KernelError) -> Int?)? = nil,
                         finish: @escaping @Sendable (CardResult) -> [OutboxMessage]) async throws -> (StoredTransaction, [OutboxMessage]) {
        let name = terminal.settings.name
        // All of it runs on the terminal's own thread: the ledger's writes block (a durable commit,
        // shared with other terminals by group commit), and blocking Swift's cooperative threads
        // would stall every other request on the daemon.
        let done: Result<(StoredTransaction, [OutboxMessage]), any Error> = await terminal.perform { [self] in
            let started: Started
            do { started = try ledger.begin(new) } catch { return .failure(error) }
            publish("transaction-started", terminal: name, ["stan": started.stan.description, "action": new.action.rawValue])
            let result = runKernel(on: terminal, new, started: started, kind: kind, amountTable: amountTable, tableAmount: tableAmount,
                                   country: country, onCardRead: onCardRead)
            let outbox = finish(result)
            do {
                let stored = try ledger.complete(id: started.id, result.completion, trace: result.trace, outbox: outbox)
                return .success((stored, outbox))
            } catch {
                return .failure(recordUnrecordable(result, refused: error))
            }
        }
        let (stored, outbox) = try done.get()
        metrics.recordTransaction(status: stored.status.rawValue, micros: stored.completedAt.map { $0 - stored.createdAt })
        publish("outcome", terminal: name, ["stan": stored.stan.description, "status": stored.status.rawValue,
                                            "responseCode": stored.responseCode ?? "", "message": stored.message ?? ""])
        return (stored, outbox)
    }

    /// A completion the ledger refused (a value breaking one of its rules, a failing disk): an
    /// approval is taken back at the host, since nothing may stay authorised that is not recorded,
    /// and the transaction is recorded as failed (reversed, when it had been approved) without the
    /// refused parts, so it does not stay in progress. Returns the error the request answers with.
    func recordUnrecordable(_ result: CardResult, refused error: any Error) -> DaemonError {
        let completion = result.completion
        let approved = completion.status == .approved
        var reversed = false
        if approved, let code = completion.authorisationCode {
            reversed = host.void(authorisationCode: code, amount: Int(result.amount))
        }
        var failed = completion
        failed.status = .failed
        failed.reversal = approved
        failed.message = String(("not recorded: \(error)" + (approved ? "; the host's approval was reversed" : "")).prefix(500))
        var recorded = (try? ledger.complete(id: result.started.id, failed, trace: result.trace)) != nil
        if !recorded {
            // The trace may be what was refused: the outcome matters more than the exchange.
            recorded = (try? ledger.complete(id: result.started.id, failed)) != nil
        }
        let what = approved ? (reversed ? "was approved, then reversed at the host" : "was approved; the host had no approval left to reverse")
            : "ended \(completion.status.rawValue)"
        return .unrecordable("the transaction (STAN \(result.started.stan)) \(what), and its outcome could not be recorded as it was: \(error)"
            + (recorded ? "; it is recorded as failed" : "; it could not be recorded at all and will be failed at the next start"))
    }

    /// Waits for the card and runs the kernel (on the terminal's thread).
    private func runKernel(on terminal: TerminalRuntime, _ new: NewTransaction, started: Started, kind: AuthorisationRequest.Kind,
                           amountTable: AmountTable, tableAmount: Int?, country: Int?,
                           onCardRead: (@Sendable (CardRead) throws(KernelError) -> Int?)?) -> CardResult {
        let name = terminal.settings.name
        let box = InstallmentsBox()
        // The transaction's currency is the front's (Billpocket sells in pesos whatever the
        // terminal's default), and so is the country it is made in.
        var kernelConfiguration = self.kernelConfiguration(terminal)
        kernelConfiguration.currencyCode = new.currency
        if let country { kernelConfiguration.countryCode = country }
        let date = UTCDateParts(secondsSince1970: new.createdAt / 1_000_000)
        var request = TransactionRequest(amount: Int(new.amount), date: date, stan: started.stan)
        request.kind = kind
        let outcome: Result<TransactionOutcome, TransactionFailure>
        do throws(KernelError) {
            publish("waiting-for-card", terminal: name, ["stan": started.stan.description])
            let channel = try terminal.waitForCard(timeout: configuration.cardTimeout)
            defer { channel.powerOff() }
            var kernel = Kernel(configuration: kernelConfiguration, card: ChannelCardLink(channel), keypad: terminal.keypad,
                                host: TimedHost(host, timeout: configuration.hostTimeout, queue: name, amountTable: amountTable,
                                                tableAmount: tableAmount))
            if let onCardRead {
                kernel.onCardRead = { card throws(KernelError) in box.value = try onCardRead(card) }
            }
            do throws(TransactionFailure) { outcome = .success(try kernel.run(request)) } catch { outcome = .failure(error) }
        } catch {
            outcome = .failure(TransactionFailure(error: error))
        }
        let now = clock.nowMicroseconds()
        switch outcome {
        case .success(let o):
            var completion = Completion(o, completedAt: max(now, new.createdAt))
            completion.installments = box.value
            return CardResult(started: started, amount: new.amount, completion: completion,
                              trace: o.trace.map { TraceEntry(command: $0.command, response: $0.response) }, outcome: o, failure: nil)
        case .failure(let f):
            var completion = Completion(f, completedAt: max(now, new.createdAt))
            switch f.error {
            case .cancelled, .aborted: if f.reversal == nil { completion.status = .cancelled }
            default: break
            }
            return CardResult(started: started, amount: new.amount, completion: completion,
                              trace: f.trace.map { TraceEntry(command: $0.command, response: $0.response) }, outcome: nil, failure: f)
        }
    }

    /// The kernel's terminal data for one of our terminals.
    func kernelConfiguration(_ terminal: TerminalRuntime) -> TerminalConfiguration {
        var c = TerminalConfiguration(pinKey: host.pinKey)
        c.countryCode = terminal.settings.countryCode
        c.currencyCode = terminal.settings.currencyCode
        c.promptTimeout = configuration.promptTimeout
        if let tac = terminal.settings.tacDefault { c.tacDefault = tac }
        return c
    }

    /// Reads a card without a transaction (to find what to cancel).
    func readCard(on terminal: TerminalRuntime) async -> Result<CardRead, TransactionFailure> {
        let now = clock.nowMicroseconds()
        return await terminal.perform { [self] in
            do throws(KernelError) {
                publish("waiting-for-card", terminal: terminal.settings.name)
                let channel = try terminal.waitForCard(timeout: configuration.cardTimeout)
                defer { channel.powerOff() }
                var kernel = Kernel(configuration: kernelConfiguration(terminal), card: ChannelCardLink(channel), keypad: terminal.keypad, host: host)
                do throws(TransactionFailure) {
                    return .success(try kernel.readCard(TransactionRequest(amount: 0, date: UTCDateParts(secondsSince1970: now / 1_000_000), stan: .first)))
                } catch {
                    return .failure(error)
                }
            } catch {
                return .failure(TransactionFailure(error: error))
            }
        }
    }

    // MARK: Loading

    static func profilePaths(_ entries: [String]) throws -> [String] {
        var paths: [String] = []
        for entry in entries {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: entry, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                let names = try FileManager.default.contentsOfDirectory(atPath: entry).filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }
                paths += names.sorted().map { (entry as NSString).appendingPathComponent($0) }
            } else {
                paths.append(entry)
            }
        }
        return paths
    }

    static func loadProfile(_ path: String) throws -> CardProfile {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ConfigurationError(key: "host.cards", rule: "cannot read \(path): \(error.localizedDescription)")
        }
        do { return try CardProfile.parse(yaml: text, file: path) } catch {
            throw ConfigurationError(key: "host.cards", rule: "\(error)")
        }
    }
}

/// Carries the installments a front agreed on out of the kernel's card-read hook.
final class InstallmentsBox: @unchecked Sendable {
    var value: Int?
}
