import CardIO
import Defaults
import EMV
import Foundation
import Synchronization
import Fronts
import ISO8583
import Ledger
import Logging
import Terminal
import VirtualCard
import Workflows

/// The daemon's composition root: it reads the configuration, opens the ledger, registers the
/// cards at the emulated host, makes the terminals and their readers, and wires them into the
/// workflows and the fronts (`Workflows`); it starts and stops them. The HTTP layer translates
/// requests into calls on the fronts and the terminals.
public final class Bench: @unchecked Sendable {
    public let configuration: DaemonConfiguration
    public let ledger: Ledger
    public let host: EmulatedHost
    public let clock: any Terminal.Clock
    /// The bench's clock, system or manual (switched by a scenario run when `scenarios.setup`).
    public let benchClock: BenchClock
    /// Set while the clock is manual: the API moves it.
    public var manualClock: ManualClock? { benchClock.isManual ? benchClock.manual : nil }
    public let events = EventHub()
    public let metrics = BenchMetrics()
    /// The outbox rows being delivered, shared by the delivery loop and resends.
    let deliveryFlights = Flights()
    /// The terminals: the configured ones in configuration order, then those made through the API.
    public var terminals: [TerminalRuntime] { terminalList.all }
    let terminalList: TerminalList
    /// The names of the terminals made through the API (`POST /v1/terminals`): only they may be removed.
    private let madeTerminals = Mutex<Set<String>>([])
    /// Terminals are made and removed one at a time (the issuer's listener is started once).
    private let setupLock = NSLock()
    /// What a terminal made through the API is made with: the events it reports to, the CA keys.
    private let terminalFeed: EventFeed
    let sharedODA: ODAConfiguration
    /// Follows udev for `udev:` readers, while started.
    /// Where the readers and the daemon's own vpcd cards log.
    let logger: Logger
    private let udevLock = NSLock()
    private var udev: UdevReaders?
    /// The issuer's card profiles by PAN: installments and other card facts a front asks about.
    private let profiles: [String: CardProfile]
    /// The loaded profiles' names by the ledger's hash of their card numbers, made on first use.
    private let profileNamesByPANHash = Mutex<[String: String]?>(nil)
    /// Profiles given inline (`profileYAML`), by their text: parsed once (at most 64 kept).
    let inlineProfiles = Mutex<[String: CardProfile]>([:])
    /// Profiles a request may name, by name (`Bench.profileLibrary`).
    let profileLibrary: [String: ProfileEntry]
    /// Transactions found `in_progress` at start (the daemon had stopped mid-transaction).
    public private(set) var recovered: [StoredTransaction] = []
    /// What every workflow runs against: this bench's ledger, host, clock, events and terminals.
    public let context: WorkflowContext
    public let viva: VivaFront
    public let billpocket: BillpocketFront
    /// The Worldline Online Payments platform, and the RSA keys of its Client API.
    public let worldline: WorldlineFront
    public let worldlineKeys: WorldlineKeyRing
    /// The Citcon UPI platform.
    public let citcon: CitconFront
    /// The fronts a URL may be addressed to, by scheme.
    public let fronts: [any Front]

    /// Reads `configuration`, opens the ledger and makes the terminals; `logger` gets the readers'
    /// trouble (refused cards, a failing tty).
    public init(configuration: DaemonConfiguration, logger: Logger = Logger(label: "cardbenchd")) throws {
        self.logger = logger
        self.configuration = configuration
        benchClock = BenchClock(manual: configuration.manualClock, startMicroseconds: configuration.clockStart)
        clock = benchClock
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        ledger = try Ledger.openFile((configuration.stateDirectory as NSString).appendingPathComponent("ledger.sqlite"),
                                    outboxMaxAttempts: configuration.callbacks.maxAttempts)
        // The PIN key of online PIN blocks between this terminal and this host: a fixed test key.
        host = EmulatedHost(pinKey: try TDESKey(Hex.decode("0123456789ABCDEFFEDCBA9876543210")), amountTable: .none)
        // The embedded profiles, then the configured ones (a name given again replaces the
        // embedded profile; a PAN given again, the account the issuer holds).
        var library = try Self.profileLibrary(configuration.cardProfiles)
        var profiles: [String: CardProfile] = [:]
        let ordered = library.filter(\.value.isEmbedded).keys.sorted() + library.filter { !$0.value.isEmbedded }.keys.sorted()
        for name in ordered {
            let profile = try Self.loadProfile(library[name]!, key: "host.cards")
            do { try host.register(profile) } catch { throw ConfigurationError(key: "host.cards", rule: "\(library[name]!): \(error)") }
            profiles[profile.pan] = profile
        }
        self.profiles = profiles
        var demo: CardProfile?
        if let demoCard = configuration.demoCard {
            let (name, entry) = try Self.demoEntry(demoCard, library: library)
            demo = try Self.loadProfile(entry, key: "demo.card")
            if library[name] == nil { library[name] = entry }
        }
        profileLibrary = library
        if let demo, profiles[demo.pan] == nil {
            do { try host.register(demo) } catch { throw ConfigurationError(key: "demo.card", rule: "\(demo.name): \(error)") }
        }
        if let demo, !demo.interfaces.contains(configuration.demoInterface) {
            throw ConfigurationError(key: "demo.interface", rule: "the demo card \(demo.name) cannot be presented by \(configuration.demoInterface.verb): its interfaces are \(demo.interfaces.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        let runtime = configuration.effectiveRuntimeDirectory
        let feed = EventFeed(hub: events, clock: clock, metrics: metrics)
        let revoked = try CAPKStore.revoked(configuration.revokedCertificates, key: "emv.revoked")
        let sharedKeys = try CAPKStore.loadWithEmbedded(configuration.capkFiles, key: "emv.capk")
        // A bench CA the configuration names must load now, not at the first capture.
        if let path = configuration.benchCAFile {
            do throws(DaemonError) { _ = try CardCaptureService.benchCA(path, field: "emv.bench_ca") } catch {
                throw ConfigurationError(key: "emv.bench_ca", rule: error.description)
            }
        }
        terminalFeed = feed
        sharedODA = ODAConfiguration(caKeys: sharedKeys, revoked: revoked)
        let clock = self.clock
        let terminals = try configuration.terminals.map { settings in
            let keys = try settings.capkFiles.map { files in try CAPKStore.loadWithEmbedded(files, key: "terminal.\(settings.name).capk") } ?? sharedKeys
            return try TerminalRuntime(settings: settings, runtimeDirectory: runtime, demoCard: demo, demoInterface: configuration.demoInterface,
                                       events: feed, logger: logger, oda: ODAConfiguration(caKeys: keys, revoked: revoked), clock: clock)
        }
        terminalList = TerminalList(terminals: terminals)
        for t in configuration.terminals { _ = try ledger.ensureTerminal(name: t.name, tid: t.tid) }
        recovered = try ledger.recoverInterrupted(now: clock.nowMicroseconds())
        let context = WorkflowContext(store: ledger, host: host, clock: clock, events: feed,
                                      cards: ProfileDirectory(profiles: profiles), terminals: terminalList,
                                      settings: configuration.workflowSettings)
        for t in configuration.terminals where !t.emulatedHost {
            guard let upstream = t.upstream ?? configuration.upstream else { continue }
            context.upstream[t.name] = ISO8583UpstreamLink(upstream: upstream, settings: configuration.iso8583Settings(for: t),
                                                           timeout: configuration.hostTimeout, logger: logger, clock: clock)
        }
        self.context = context
        viva = VivaFront(context: context)
        billpocket = BillpocketFront(context: context)
        let keys = WorldlineKeyRing(ledger: ledger)
        worldlineKeys = keys
        worldline = WorldlineFront(context: context, store: ledger, settings: configuration.worldline.settings,
                                   privateKey: { keys.privateKey($0) })
        citcon = CitconFront(context: context, store: ledger, settings: configuration.citcon.settings)
        fronts = [viva, billpocket]
    }

    /// Opens a request URL as the app it is addressed to would, and returns its callback.
    /// Throws only when no callback can be produced (a URL with no usable callback, an unknown
    /// terminal, a busy terminal).
    public func open(_ url: String, terminal name: String?) async throws(DaemonError) -> OpenResult {
        // The text before the first ':' (none: the whole URL is no scheme), lower-cased in ASCII only.
        let scheme = url.firstIndex(of: ":").map { String(url[..<$0]) }.map(ASCII.lowercased) ?? ""
        guard let front = fronts.first(where: { $0.scheme == scheme }) else {
            let shown = scheme.count > 40 ? String(scheme.prefix(40)).debugDescription + "…" : scheme.debugDescription
            let names = fronts.map { "\($0.scheme) (\($0.appName))" }
            let list = names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + (names.last ?? "")
            throw .badRequest(field: "url", rule: "the scheme must be \(list), got \(shown)")
        }
        do throws(WorkflowError) { return OpenResult(try await front.open(url, terminal: name)) } catch { throw DaemonError(error) }
    }

    /// cardbench's issuer on ISO 8583, while started with `host.iso8583.listen` set.
    private let issuerListener = Mutex<FramedListener?>(nil)

    /// The terminals' own 0800s to their external hosts, while started with `host.iso8583.sign_on`
    /// or `echo_interval_seconds` set.
    private let networkManager = Mutex<ISO8583NetworkManager?>(nil)

    /// The port the ISO 8583 issuer listens on (the kernel's choice when configured as 0).
    public var iso8583Port: UInt16? { issuerListener.withLock { $0?.port } }

    /// Starts the readers, and for `udev:` readers finds the ones plugged in and follows udev;
    /// and the ISO 8583 issuer when configured.
    public func start() throws {
        for t in terminals { try t.start() }
        if let port = configuration.iso8583.listenPort {
            do { try startIssuerListener(address: configuration.iso8583.listenAddress, port: port) } catch let error as DaemonError {
                throw ConfigurationError(key: "host.iso8583.listen", rule: error.description)
            }
        }
        let links = configuration.terminals.compactMap { t in (context.upstream[t.name] as? ISO8583UpstreamLink).map { (t, $0) } }
        if !links.isEmpty, configuration.iso8583.signOn || configuration.iso8583.echoInterval != nil {
            let manager = ISO8583NetworkManager(links: links, signOn: configuration.iso8583.signOn, interval: configuration.iso8583.echoInterval,
                                                ledger: ledger, clock: clock, logger: logger)
            networkManager.withLock { $0 = manager }
        }
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
                publish(.readerAdded(reader: found.name, path: found.devnode),
                        terminal: hotplug.first { $0.settings.udevName == found.name }?.settings.name)
                r.attach(path: found.devnode)
            case .removed(let found):
                guard let r = reader(found) else { return }
                r.detach()
                publish(.readerRemoved(reader: found.name, path: found.devnode),
                        terminal: hotplug.first { $0.settings.udevName == found.name }?.settings.name)
            }
        }
        for found in try udev.enumerate() { reader(found)?.attach(path: found.devnode) }
    }

    /// Starts the emulated issuer's ISO 8583 listener at `address:port` (0: the kernel's choice).
    private func startIssuerListener(address: String, port: UInt16) throws {
        let service = try ISO8583IssuerService(host: host, ledger: ledger, clock: clock, packager: configuration.iso8583.packager,
                                               amountTable: configuration.iso8583AmountTable, logger: logger) { [events = context.events] stored in
            events.publish(.recorded(stan: stored.stan, status: stored.status, action: stored.action), terminal: ISO8583IssuerService.terminalName)
        }
        let listener: FramedListener
        do throws(HostLinkError) { listener = try FramedListener(address: address, port: port) } catch {
            throw DaemonError.failure(error.description)
        }
        let logger = logger
        let limit = configuration.iso8583.maximumConnections
        let files = FileLimit.raise(to: limit + 256)
        if files < limit + 256 {
            logger.warning("open files are limited to \(files): fewer than host.iso8583.max_connections (\(limit)) connections can be open (raise LimitNOFILE)")
        }
        // 48 messages handled at once: each waits on the ledger's group commit most of its time,
        // so more threads batch more writes per sync (`bench iso8583`: 32 threads 4,100/s, 48
        // 4,700–4,800/s, 64 4,350/s; 96 and 128 fell to under 1,000/s, the kernel's time per
        // authorisation ten times as much).
        listener.start(framing: configuration.iso8583.framing, maximumConnections: limit, threads: 48, onError: { peer, error in
            if case .refused(let limit) = error {
                logger.warning("ISO 8583 connection from \(peer) refused: \(limit) are open already (host.iso8583.max_connections)")
            } else {
                logger.notice("ISO 8583 connection from \(peer) ended: \(error)")
            }
        }, handle: { peer, bytes in service.handle(peer: peer, bytes) })
        issuerListener.withLock { $0 = listener }
        issuerListenAddress.withLock { $0 = address }
        logger.info("ISO 8583 issuer listening on \(address):\(listener.port) (\(configuration.iso8583.packager.name), \(configuration.iso8583.framing.rawValue), at most \(limit) connections)")
    }

    /// The address the ISO 8583 issuer listens on.
    let issuerListenAddress = Mutex<String?>(nil)

    /// Ends what is in progress and stops the readers. Returns what went wrong giving back the
    /// STANs reserved ahead, if anything did (a reboot then skips up to a block of them).
    @discardableResult
    public func stop() -> (any Error)? {
        udevLock.withLock { udev }?.stop()
        issuerListener.withLock { $0 }?.stop()
        networkManager.withLock { $0 }?.stop()
        for t in terminals { t.stop() }
        defer { events.finish() }
        // A clean stop gives back the STANs reserved ahead, so a reboot skips none.
        do { try ledger.releaseSTANReservations() } catch { return error }
        return nil
    }

    public func terminal(_ name: String?) throws(DaemonError) -> TerminalRuntime {
        do throws(WorkflowError) { return try terminalList.runtime(name) } catch { throw DaemonError(error) }
    }

    /// Why a scenario run may not set this daemon up, or nil when it may.
    var scenarioSetupRefusal: DaemonError? {
        configuration.scenarioSetup ? nil
            : .forbidden("this daemon does not let a scenario run set it up (scenarios.setup: false): configure the terminals the scenarios name, and clock.mode: manual")
    }

    /// Makes a terminal with a virtual reader while the daemon runs (a scenario's own terminal,
    /// `POST /v1/terminals`), started and ready. With an external host it gets its link, and the
    /// emulated issuer starts listening for ISO 8583 on the loopback if it was not (a scripted
    /// host asks it for approvals).
    public func makeTerminal(_ settings: TerminalSettings, hostTimeout: Duration?) throws(DaemonError) -> TerminalRuntime {
        if let refusal = scenarioSetupRefusal { throw refusal }
        setupLock.lock()
        defer { setupLock.unlock() }
        guard terminals.first(where: { $0.settings.name == settings.name }) == nil else {
            throw .conflict("a terminal named \(settings.name) exists already")
        }
        let runtime: TerminalRuntime
        do {
            runtime = try TerminalRuntime(settings: settings, runtimeDirectory: configuration.effectiveRuntimeDirectory, demoCard: nil,
                                          events: terminalFeed, logger: logger, oda: sharedODA, clock: clock)
        } catch {
            throw .failure("terminal \(settings.name): \(error)")
        }
        do {
            try runtime.start()
            // The ledger keeps a name's TID for ever: another TID for a known name is refused.
            do { _ = try ledger.ensureTerminal(name: settings.name, tid: settings.tid) } catch let error as LedgerError {
                throw DaemonError.conflict("terminal \(settings.name): \(error)")
            }
            if settings.upstream != nil, iso8583Port == nil { try startIssuerListener(address: "127.0.0.1", port: 0) }
        } catch {
            // Nothing half made stays: the reader's socket is closed again.
            runtime.stop()
            if let error = error as? DaemonError { throw error }
            throw .failure("terminal \(settings.name): \(error)")
        }
        if let upstream = settings.upstream {
            context.upstream[settings.name] = ISO8583UpstreamLink(upstream: upstream, settings: configuration.iso8583Settings(for: settings),
                                                                  timeout: hostTimeout ?? configuration.hostTimeout, logger: logger, clock: clock)
        }
        guard terminalList.add(runtime) else {
            runtime.stop()
            throw .conflict("a terminal named \(settings.name) exists already")
        }
        madeTerminals.withLock { _ = $0.insert(settings.name) }
        return runtime
    }

    /// Removes a terminal made through the API (`DELETE /v1/terminals/{name}`), once idle.
    public func removeTerminal(_ name: String) throws(DaemonError) {
        setupLock.lock()
        defer { setupLock.unlock() }
        let runtime = try terminal(name)
        guard madeTerminals.withLock({ $0.contains(name) }) else {
            throw .conflict("terminal \(name) is configured (terminals:); only terminals made through the API are removed")
        }
        if let activity = runtime.currentActivity { throw .conflict("terminal \(name) is busy: \(activity)") }
        _ = terminalList.remove(name)
        madeTerminals.withLock { _ = $0.remove(name) }
        context.upstream[name] = nil
        runtime.stop()
    }

    /// The external host a terminal authorises against, and the format it speaks; nil for the
    /// emulated issuer.
    func upstream(of terminal: String) -> ISO8583UpstreamLink? { context.upstream[terminal] as? ISO8583UpstreamLink }

    public func profile(pan: String) -> CardProfile? { profiles[pan] }

    /// The name of the profile, among those loaded at start, whose card number the ledger hashes
    /// to `panHash`: the card a transaction was made with, without its number.
    public func profileName(panHash: String?) -> String? {
        guard let panHash else { return nil }
        return profileNamesByPANHash.withLock { cache in
            if cache == nil {
                var names: [String: String] = [:]
                for (pan, profile) in profiles { if let hash = try? ledger.panHash(pan) { names[hash] = profile.name } }
                cache = names
            }
            return cache?[panHash]
        }
    }

    /// The URL the Worldline listener is reached at (for URLs in its answers given through the
    /// control API): the configured one, else the listener's address and port once bound.
    public var worldlinePublicURL: String {
        if let url = configuration.worldline.publicURL { return url }
        let address = configuration.worldline.address.contains(":") ? "[\(configuration.worldline.address)]" : configuration.worldline.address
        return "http://\(address):\(worldlineBoundPort.value ?? Int(configuration.worldline.port ?? 0))"
    }

    /// Set by the daemon once the Worldline listener is bound.
    let worldlineBoundPort = PortBox()

    /// The URL the Citcon listener is reached at (its wallet and challenge pages' links).
    public var citconPublicURL: String {
        if let url = configuration.citcon.publicURL { return url }
        let address = configuration.citcon.address.contains(":") ? "[\(configuration.citcon.address)]" : configuration.citcon.address
        return "http://\(address):\(citconBoundPort.value ?? Int(configuration.citcon.port ?? 0))"
    }

    /// Set by the daemon once the Citcon listener is bound.
    let citconBoundPort = PortBox()

    public func publish(_ event: BenchEvent, terminal: String?) {
        context.events.publish(event, terminal: terminal)
    }

    // MARK: Loading

    /// The files of `host.cards`: each entry a `.yaml`/`.yml` file or a directory of them. An entry
    /// that does not exist or cannot be listed is a configuration error naming it.
    static func profilePaths(_ entries: [String]) throws(ConfigurationError) -> [String] {
        let key = "host.cards"
        var paths: [String] = []
        for entry in entries {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: entry, isDirectory: &isDirectory) else {
                throw ConfigurationError(key: key, rule: "\(entry): no such file or directory (the embedded profiles need no entry: \(key) adds to them)")
            }
            if isDirectory.boolValue {
                let names: [String]
                do { names = try FileManager.default.contentsOfDirectory(atPath: entry).filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") } } catch {
                    throw ConfigurationError(key: key, rule: "cannot list \(entry): \(error.localizedDescription)")
                }
                paths += names.sorted().map { (entry as NSString).appendingPathComponent($0) }
            } else {
                paths.append(entry)
            }
        }
        return paths
    }

    static func loadProfile(_ entry: ProfileEntry, key: String) throws(ConfigurationError) -> CardProfile {
        let text: String
        switch entry {
        case .embedded(let name):
            text = EmbeddedDefaults.cardProfiles[name]!
        case .file(let path):
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw ConfigurationError(key: key, rule: "cannot read \(path): \(error.localizedDescription)")
            }
        }
        do { return try CardProfile.parse(yaml: text, file: entry.description) } catch {
            throw ConfigurationError(key: key, rule: "\(error)")
        }
    }
}

/// A card profile the daemon knows by name: compiled in, or a file of the configured card
/// directories.
enum ProfileEntry: Sendable, Equatable, CustomStringConvertible {
    case embedded(String)
    case file(String)

    var isEmbedded: Bool { if case .embedded = self { true } else { false } }

    var description: String {
        switch self {
        case .embedded(let name): EmbeddedDefaults.displayName(name)
        case .file(let path): path
        }
    }
}

/// The configured terminals, as the workflows find them by name.
/// The bench's terminals, which a scenario run may add to and remove from while it runs.
final class TerminalList: TerminalDirectory, Sendable {
    private let list: Mutex<[TerminalRuntime]>

    init(terminals: [TerminalRuntime]) { list = Mutex(terminals) }

    var all: [TerminalRuntime] { list.withLock { $0 } }

    /// Adds `terminal` unless one has its name: whether it did.
    func add(_ terminal: TerminalRuntime) -> Bool {
        list.withLock { l in
            guard !l.contains(where: { $0.settings.name == terminal.settings.name }) else { return false }
            l.append(terminal)
            return true
        }
    }

    func remove(_ name: String) -> TerminalRuntime? {
        list.withLock { l in
            guard let i = l.firstIndex(where: { $0.settings.name == name }) else { return nil }
            return l.remove(at: i)
        }
    }

    func terminal(_ name: String?) throws(WorkflowError) -> any TerminalSession { try runtime(name) }

    func runtime(_ name: String?) throws(WorkflowError) -> TerminalRuntime {
        let terminals = all
        guard let name, !name.isEmpty else {
            guard let first = terminals.first else { throw .notFound("no terminal is configured") }
            return first
        }
        guard let t = terminals.first(where: { $0.settings.name == name }) else {
            throw .notFound("no terminal named \"\(name)\" (terminals: \(terminals.map(\.settings.name).joined(separator: ", ")))")
        }
        return t
    }
}

extension DaemonConfiguration {
    /// What the workflows take from the configuration.
    var workflowSettings: WorkflowSettings {
        var s = WorkflowSettings()
        s.cardTimeout = cardTimeout
        s.promptTimeout = promptTimeout
        s.hostTimeout = hostTimeout
        s.utcOffsetSeconds = utcOffsetSeconds
        s.vivaAmountTable = vivaAmountTable
        s.billpocketAmountTable = billpocketAmountTable
        s.billpocketCallbacks = billpocketCallbacks
        s.appSchemeCallbacksHandedOn = callbacks.command != nil || callbacks.xdgOpen
        return s
    }
}
