import CardIO
import EMV
import Ledger
import Foundation
import Terminal
import VirtualCard

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
    /// A ledger failure as the API answers it: a value that broke one of the ledger's rules is the
    /// request's fault (400, naming the field), anything else the daemon's (500).
    init(ledger error: any Error, _ doing: String) {
        if let error = error as? DaemonError {
            self = error
        } else if case .invalid(let field, let rule)? = error as? LedgerError {
            self = .badRequest(field: field, rule: rule)
        } else {
            self = .failure("\(doing): \(error)")
        }
    }
}

/// A CardIO channel as the kernel's card link: reader failures become the kernel's precise errors.
public final class ChannelCardLink: CardLink {
    public let channel: any CardChannel

    public init(_ channel: any CardChannel) { self.channel = channel }

    public func powerOn() throws(KernelError) -> [UInt8] { channel.atr }

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
public final class TerminalRuntime: @unchecked Sendable {
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
    private var demo: DemoCard?

    init(settings: TerminalSettings, runtimeDirectory: String, demoCard: CardProfile?, events: EventHub, clock: any Terminal.Clock) throws {
        self.settings = settings
        if settings.serialPath != nil || settings.udevName != nil {
            let serial = SerialReader(name: settings.udevName ?? settings.name, path: settings.serialPath, settings: settings.serial)
            serialReader = serial
            virtualReader = nil
            reader = serial
            readerSocket = ""
        } else {
            let name = settings.virtualReaderName ?? settings.name
            readerSocket = (runtimeDirectory as NSString).appendingPathComponent("readers/\(name).sock")
            let virtual = try VirtualReader(name: name, socketPath: readerSocket, tcpPort: settings.readerTCPPort)
            virtualReader = virtual
            serialReader = nil
            reader = virtual
        }
        let terminal = settings.name
        keypad = TerminalKeypad(autoPIN: demoCard?.pin) { prompt in
            var data = ["prompt": prompt.name]
            switch prompt {
            case .pin(_, let tries): if let tries { data["triesLeft"] = String(tries) }
            case .select(_, let options): data["options"] = options.joined(separator: "\n")
            case .confirm, .photo: break
            }
            events.publish(DaemonEvent(type: "prompt", terminal: terminal, at: clock.nowMicroseconds(), data: data))
        }
        work = DispatchQueue(label: "cardbench.terminal.\(settings.name)")
        demo = try demoCard.map { try DemoCard(profile: $0) }
        reader.addObserver { event in
            switch event {
            case .cardInserted: events.publish(DaemonEvent(type: "card-inserted", terminal: terminal, at: clock.nowMicroseconds()))
            case .cardRemoved: events.publish(DaemonEvent(type: "card-removed", terminal: terminal, at: clock.nowMicroseconds()))
            }
        }
    }

    /// What the terminal is doing, or nil when idle.
    public var currentActivity: String? { lock.withLock { activity } }

    /// Takes the terminal for one transaction; a second caller gets "terminal busy".
    func acquire(_ what: String) throws(DaemonError) {
        let current: String? = lock.withLock {
            if let activity { return activity }
            activity = what
            aborted = false
            return nil
        }
        if let current { throw .conflict("terminal \(settings.name) is busy: \(current) in progress") }
        keypad.begin()
    }

    func release() {
        keypad.end()
        lock.withLock {
            activity = nil
            aborted = false
        }
    }

    /// Stops the transaction in progress (the Viva `abort` action): the card wait and any prompt
    /// end at once. Returns false when the terminal was idle.
    func abort() -> Bool {
        let busy = lock.withLock {
            guard activity != nil else { return false }
            aborted = true
            return true
        }
        if busy { keypad.abort() }
        return busy
    }

    var isAborted: Bool { lock.withLock { aborted } }

    /// Runs blocking card work on the terminal's own thread.
    func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            work.async { continuation.resume(returning: body()) }
        }
    }

    /// Waits for a card (inserting the demo card when there is one) and powers it on.
    func waitForCard(timeout: Duration) throws(KernelError) -> any CardChannel {
        if let demo, let virtualReader, !virtualReader.isCardPresent { try? virtualReader.insert(demo) }
        let deadline = ContinuousClock.now + timeout
        while true {
            if isAborted { throw .aborted(step: "waiting for the card") }
            do {
                return try reader.connect(timeout: .milliseconds(100))
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

/// Demo mode's card: a virtual card living in the daemon and sitting in the terminal's reader as
/// an in-process card, so it answers on the kernel's own thread. It keeps its counters (ATC, PIN
/// tries) across transactions, as the one physical card a demo would use.
final class DemoCard: InProcessCard, @unchecked Sendable {
    // Unchecked: `card` is touched only under `lock`.
    private let lock = NSLock()
    private var card: VirtualCard

    init(profile: CardProfile) throws(EMVError) {
        card = try VirtualCard(profile: profile)
    }

    func powerOn(warm: Bool) -> [UInt8] {
        lock.withLock {
            card.reset()
            return card.atr
        }
    }

    func powerOff() {
        lock.withLock { card.reset() }
    }

    func respond(to command: [UInt8]) -> [UInt8] {
        lock.withLock { card.respond(to: command) }
    }
}
