import CardIO
import EMV
import Ledger
import Logging
import Foundation
import Synchronization
import Terminal
import VirtualCard
import Workflows

/// A CardIO channel as the kernel's card link: reader failures become the kernel's precise errors.
public final class ChannelCardLink: CardSession {
    public let channel: any CardChannel

    public init(_ channel: any CardChannel) { self.channel = channel }

    public func powerOn() throws(KernelError) -> [UInt8] { channel.atr }

    public func powerOff() { channel.powerOff() }

    public var magneticStripe: MagneticStripe? { channel.magneticStripe }

    public func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] {
        do { return try channel.transmit(command) } catch {
            let step = (try? CommandAPDU(bytes: command).instructionName) ?? "an APDU"
            switch error {
            case .cardRemoved, .noCard: throw .cardRemoved(step: step)
            default: throw .readerError(step: step, detail: error.description)
            }
        }
    }
}

/// One emulated device at run time: its reader, keypad, the transaction it is busy with, and the
/// thread its blocking card work runs on (the kernel talks to the card synchronously).
public final class TerminalRuntime: TerminalSession, @unchecked Sendable {
    public let settings: TerminalSettings
    /// The terminal's reader, whichever kind.
    public let reader: any CardReader
    /// The reader when it is a virtual one (virtual cards connect to its socket).
    public let virtualReader: VirtualReader?
    /// The reader when it is a serial one (fixed tty or udev).
    public let serialReader: SerialReader?
    /// The reader when it is a PC/SC one.
    public let pcscReader: PCSCReader?
    public let keypad: TerminalKeypad
    /// The virtual reader's socket ("" for a serial reader).
    let readerSocket: String
    private let work: DispatchQueue
    private let activity: TerminalActivity
    private var demo: InsertedVirtualCard?
    /// The card the daemon connected to vpcd for a `pcsc:` terminal (`settings.vpcd`).
    private var attached: VPCDAttachedCard?
    private let attachLock = NSLock()

    public var name: String { settings.name }
    public var tid: String { settings.tid }
    public var terminalData: TerminalData {
        var data = TerminalData(countryCode: settings.countryCode, currencyCode: settings.currencyCode, tacDefault: settings.tacDefault, oda: oda)
        // Fallback needs a stripe reader to fall back to.
        data.fallback = settings.fallback && settings.interfaces.contains(.magstripe)
        for i in data.contactless.combinations.indices {
            if let limit = settings.contactlessTransactionLimit { data.contactless.combinations[i].transactionLimit = limit }
            if let limit = settings.contactlessFloorLimit { data.contactless.combinations[i].floorLimit = limit }
            if let limit = settings.contactlessCVMLimit { data.contactless.combinations[i].cvmRequiredLimit = limit }
        }
        // A reader without a contact slot cannot ask for an insert (TTQ "EMV contact chip supported").
        if !settings.interfaces.contains(.contact) { data.contactless.ttq[0] &= ~TTQ.contactChipSupported.mask }
        return data
    }
    /// The CA keys and revocations the terminal authenticates cards with.
    let oda: ODAConfiguration
    /// The bench clock: the terminal's work is an activity of it.
    let clock: any Clock
    public var prompts: any Prompts { keypad }

    init(settings: TerminalSettings, runtimeDirectory: String, demoCard: CardProfile?, demoInterface: CardInterface = .contact,
         events: any EventSink, logger: Logger, oda: ODAConfiguration = ODAConfiguration(), clock: any Clock = SystemClock()) throws {
        self.settings = settings
        self.oda = oda
        self.clock = clock
        var pcscReader: PCSCReader?
        switch settings.reader {
        case .serial(let path):
            let serial = SerialReader(name: settings.name, path: path, settings: settings.serial, logger: logger)
            (serialReader, virtualReader, reader, readerSocket) = (serial, nil, serial, "")
        case .udev(let name):
            // No tty until udev reports the reader plugged in.
            let serial = SerialReader(name: name, path: nil, settings: settings.serial, logger: logger)
            (serialReader, virtualReader, reader, readerSocket) = (serial, nil, serial, "")
        case .virtual(let name):
            let socket = (runtimeDirectory as NSString).appendingPathComponent("readers/\(name).sock")
            let virtual = try VirtualReader(name: name, socketPath: socket, tcpPort: settings.readerTCPPort, logger: logger)
            (serialReader, virtualReader, reader, readerSocket) = (nil, virtual, virtual, socket)
        case .pcsc(let pattern):
            let pcsc = PCSCReader(name: settings.name, pattern: pattern, logger: logger)
            pcscReader = pcsc
            (serialReader, virtualReader, reader, readerSocket) = (nil, nil, pcsc, "")
        }
        self.pcscReader = pcscReader
        let terminal = settings.name
        keypad = TerminalKeypad(autoPIN: demoCard?.pin, clock: clock) { prompt in events.publish(.prompt(prompt), terminal: terminal) }
        activity = TerminalActivity(terminal: terminal, keypad: keypad)
        work = DispatchQueue(label: "cardbench.terminal.\(settings.name)")
        // The demo card keeps its counters (ATC, PIN tries) across transactions, as the one
        // physical card a demo would use.
        demo = try demoCard.map { try InsertedVirtualCard(profile: $0, removeAfter: nil, pinTries: nil, presentations: [demoInterface]) }
        if let demo, let demoCard { lastAPICard.withLock { $0 = ("demo card: \(demoCard.name)", demo) } }
        reader.addObserver { event in
            switch event {
            case .cardInserted: events.publish(.cardInserted, terminal: terminal)
            case .cardRemoved: events.publish(.cardRemoved, terminal: terminal)
            case .readerAdded(_, let device): events.publish(.readerAdded(reader: device, path: nil), terminal: terminal)
            case .readerRemoved(_, let device): events.publish(.readerRemoved(reader: device, path: nil), terminal: terminal)
            case .serviceLost(_, let detail): events.publish(.pcscdLost(detail: detail), terminal: terminal)
            case .serviceRestored(_, let devices): events.publish(.pcscdRestarted(readers: devices), terminal: terminal)
            }
        }
    }

    /// What the terminal is doing, or nil when idle.
    public var currentActivity: String? { activity.current }
    /// The card the API last put in this terminal's reader (kept after it leaves, so the console
    /// can show the counters a tap or a transaction left on it), with the profile's name.
    let lastAPICard = Mutex<(profile: String, card: InsertedVirtualCard)?>(nil)

    /// Takes the terminal for one transaction; a second caller gets "terminal busy".
    public func acquire(_ what: String) throws(WorkflowError) { try activity.acquire(what) }

    public func release() { activity.release() }

    /// Stops the transaction in progress (the Viva `abort` action): the card wait and any prompt
    /// end at once. Returns false when the terminal was idle.
    public func abort() -> Bool { activity.abort() }

    public var isAborted: Bool { activity.isAborted }

    /// Runs blocking card work on the terminal's own thread.
    public func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            // The terminal's work is what a manual clock waits for before it jumps.
            work.async { [clock] in continuation.resume(returning: clock.activity { body() }) }
        }
    }

    /// Waits for a card (inserting the demo card when there is one) and powers it on.
    public func waitForCard(timeout: Duration) throws(KernelError) -> any CardSession {
        if let demo, let virtualReader, !virtualReader.isCardPresent {
            // A tapped or swiped demo card left after its last transaction: it is presented again.
            demo.presentAgain()
            try? virtualReader.insert(demo)
        }
        let deadline = ContinuousClock.now + timeout
        while true {
            if isAborted { throw .aborted(step: "waiting for the card") }
            do {
                return ChannelCardLink(try reader.connect(timeout: .milliseconds(100)))
            } catch .noCard {
                if ContinuousClock.now >= deadline { throw .promptTimeout(prompt: "present card") }
            } catch {
                throw .readerError(step: "power on", detail: error.description)
            }
        }
    }

    /// Connects `card` to vpcd at `endpoint`: it reaches this terminal's reader through pcscd.
    func attach(_ card: InsertedVirtualCard, to endpoint: ReaderEndpoint, logger: Logger) throws(DaemonError) {
        attachLock.lock()
        defer { attachLock.unlock() }
        if let attached, attached.isConnected {
            throw .conflict("terminal \(settings.name): a card is already inserted through vpcd \(endpoint); remove it first")
        }
        // pcscd notices cards by polling every 400 ms. The previous card may have left just now:
        // connected at once, the new one would take its place between two polls and pcscd would
        // see no removal and no insertion (its state then stays "no card"). A hand swapping
        // cards takes longer than that; so does this.
        if let pcscReader {
            let deadline = Date(timeIntervalSinceNow: 2)
            while pcscReader.isCardPresent, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        }
        do { attached = try VPCDAttachedCard(card, endpoint: endpoint, logger: logger) } catch {
            throw .conflict("terminal \(settings.name): cannot insert the card through vpcd: \(error)")
        }
    }

    /// Pulls out the card `attach` connected; false when there was none.
    @discardableResult
    func detachCard() -> Bool {
        let card = attachLock.withLock { () -> VPCDAttachedCard? in
            defer { attached = nil }
            return attached
        }
        guard let card else { return false }
        let wasConnected = card.isConnected
        card.remove()
        return wasConnected
    }

    func start() throws {
        if let virtualReader {
            try FileManager.default.createDirectory(atPath: (readerSocket as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try virtualReader.start()
        }
        serialReader?.start()
        pcscReader?.start()
    }

    func stop() {
        _ = abort()
        detachCard()
        virtualReader?.stop()
        serialReader?.stop()
        pcscReader?.stop()
    }
}
