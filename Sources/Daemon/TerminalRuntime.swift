import CardIO
import EMV
import Ledger
import Foundation
import Terminal
import VirtualCard
import Workflows

/// An API error: the HTTP status it maps to and a message naming the field and rule.
public enum DaemonError: Error, Sendable, Equatable, CustomStringConvertible {
    case badRequest(field: String, rule: String)
    case notFound(String)
    /// The terminal is busy, or the keypad is asking for something else.
    case conflict(String)
    /// A request body over the API's limit.
    case payloadTooLarge(String)
    /// A transaction whose outcome the ledger refused: taken back at the host and recorded as
    /// failed; the request gets this instead of a callback.
    case unrecordable(String)
    /// The request's body is not JSON (`Content-Type`).
    case unsupportedMediaType(String)
    /// A request from somewhere the listener does not let in (another site, a bad token).
    case forbidden(String)
    case unauthorized(String)
    case failure(String)

    public var status: Int {
        switch self {
        case .badRequest: 400
        case .notFound: 404
        case .conflict: 409
        case .payloadTooLarge: 413
        case .unrecordable: 422
        case .unsupportedMediaType: 415
        case .forbidden: 403
        case .unauthorized: 401
        case .failure: 500
        }
    }

    public var description: String {
        switch self {
        case .badRequest(let field, let rule): "\(field): \(rule)"
        case .notFound(let what), .conflict(let what), .payloadTooLarge(let what), .failure(let what), .unrecordable(let what),
             .unsupportedMediaType(let what), .forbidden(let what), .unauthorized(let what): what
        }
    }
}

extension DaemonError {
    /// A workflow's refusal as the API answers it.
    public init(_ error: WorkflowError) {
        switch error {
        case .badRequest(let field, let rule): self = .badRequest(field: field, rule: rule)
        case .notFound(let what): self = .notFound(what)
        case .conflict(let what): self = .conflict(what)
        case .unrecordable(let what): self = .unrecordable(what)
        case .failure(let what): self = .failure(what)
        }
    }

    /// A ledger failure as the API answers it: a value that broke one of the ledger's rules is the
    /// request's fault (400, naming the field), anything else the daemon's (500).
    init(ledger error: any Error, _ doing: String) {
        if let error = error as? DaemonError {
            self = error
        } else if let error = error as? WorkflowError {
            self.init(error)
        } else if case .invalid(let field, let rule)? = error as? LedgerError {
            self = .badRequest(field: field, rule: rule)
        } else {
            self = .failure("\(doing): \(error)")
        }
    }
}

/// A CardIO channel as the kernel's card link: reader failures become the kernel's precise errors.
public final class ChannelCardLink: CardSession {
    public let channel: any CardChannel

    public init(_ channel: any CardChannel) { self.channel = channel }

    public func powerOn() throws(KernelError) -> [UInt8] { channel.atr }

    public func powerOff() { channel.powerOff() }

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
    public let keypad: TerminalKeypad
    /// The virtual reader's socket ("" for a serial reader).
    let readerSocket: String
    private let work: DispatchQueue
    private let lock = NSLock()
    private var activity: String?
    private var aborted = false
    private var demo: InsertedVirtualCard?

    public var name: String { settings.name }
    public var tid: String { settings.tid }
    public var terminalData: TerminalData {
        TerminalData(countryCode: settings.countryCode, currencyCode: settings.currencyCode, tacDefault: settings.tacDefault)
    }
    public var prompts: any Prompts { keypad }

    init(settings: TerminalSettings, runtimeDirectory: String, demoCard: CardProfile?, events: any EventSink) throws {
        self.settings = settings
        switch settings.reader {
        case .serial(let path):
            let serial = SerialReader(name: settings.name, path: path, settings: settings.serial)
            (serialReader, virtualReader, reader, readerSocket) = (serial, nil, serial, "")
        case .udev(let name):
            // No tty until udev reports the reader plugged in.
            let serial = SerialReader(name: name, path: nil, settings: settings.serial)
            (serialReader, virtualReader, reader, readerSocket) = (serial, nil, serial, "")
        case .virtual(let name):
            let socket = (runtimeDirectory as NSString).appendingPathComponent("readers/\(name).sock")
            let virtual = try VirtualReader(name: name, socketPath: socket, tcpPort: settings.readerTCPPort)
            (serialReader, virtualReader, reader, readerSocket) = (nil, virtual, virtual, socket)
        }
        let terminal = settings.name
        keypad = TerminalKeypad(autoPIN: demoCard?.pin) { prompt in events.publish(.prompt(prompt), terminal: terminal) }
        work = DispatchQueue(label: "cardbench.terminal.\(settings.name)")
        // The demo card keeps its counters (ATC, PIN tries) across transactions, as the one
        // physical card a demo would use.
        demo = try demoCard.map { try InsertedVirtualCard(profile: $0, removeAfter: nil, pinTries: nil) }
        reader.addObserver { event in
            switch event {
            case .cardInserted: events.publish(.cardInserted, terminal: terminal)
            case .cardRemoved: events.publish(.cardRemoved, terminal: terminal)
            }
        }
    }

    /// What the terminal is doing, or nil when idle.
    public var currentActivity: String? { lock.withLock { activity } }

    /// Takes the terminal for one transaction; a second caller gets "terminal busy".
    public func acquire(_ what: String) throws(WorkflowError) {
        let current: String? = lock.withLock {
            if let activity { return activity }
            activity = what
            aborted = false
            return nil
        }
        if let current { throw .conflict("terminal \(settings.name) is busy: \(current) in progress") }
        keypad.begin()
    }

    public func release() {
        keypad.end()
        lock.withLock {
            activity = nil
            aborted = false
        }
    }

    /// Stops the transaction in progress (the Viva `abort` action): the card wait and any prompt
    /// end at once. Returns false when the terminal was idle.
    public func abort() -> Bool {
        let busy = lock.withLock {
            guard activity != nil else { return false }
            aborted = true
            return true
        }
        if busy { keypad.abort() }
        return busy
    }

    public var isAborted: Bool { lock.withLock { aborted } }

    /// Runs blocking card work on the terminal's own thread.
    public func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            work.async { continuation.resume(returning: body()) }
        }
    }

    /// Waits for a card (inserting the demo card when there is one) and powers it on.
    public func waitForCard(timeout: Duration) throws(KernelError) -> any CardSession {
        if let demo, let virtualReader, !virtualReader.isCardPresent { try? virtualReader.insert(demo) }
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

    func start() throws {
        if let virtualReader {
            try FileManager.default.createDirectory(atPath: (readerSocket as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try virtualReader.start()
        }
        serialReader?.start()
    }

    func stop() {
        _ = abort()
        virtualReader?.stop()
        serialReader?.stop()
    }
}
