import EMV
import Foundation
import Logging

extension SerialPort: CardLine {}

/// A Phoenix/Smartmouse-style reader: a `SerialPort`, the card's reset and presence lines, and
/// ISO 7816-3 (ATR, convention, PPS, T=0 or T=1) on top. A fixed reader has its tty from the
/// start; a udev reader gets it when udev says it was plugged in (`attach`) and loses it when
/// unplugged (`detach`), an exchange in progress then failing as a removed card.
///
/// Exchanges run on the caller's thread, as with the virtual reader; a watcher thread polls the
/// presence line every 50 ms for the insertion and removal events.
public final class SerialReader: CardReader, @unchecked Sendable {
    // Unchecked: mutable state is under `condition`; the port's I/O is serialised by `io`, which
    // an exchange holds for its whole length, so detach() closes the tty only between exchanges.
    public let name: String
    public let settings: SerialSettings
    /// Extra wait on every ISO 7816-3 timeout (bridges deliver in bursts, schedulers run late).
    public let slack: Duration
    private let logger: Logger
    private let condition = NSCondition()
    private let io = NSLock()
    private var path: String?
    private var port: SerialPort?
    private var session: SerialSession?
    private var present = false
    private var running = false
    private var watcher: DispatchSemaphore?
    private var observers: [UInt64: @Sendable (ReaderEvent) -> Void] = [:]
    private var nextObservation: UInt64 = 0
    private var lastATR: [UInt8]?
    private var lastProtocol: Int?
    private var lastError: String?

    /// A reader on `path`, or on nothing until `attach(path:)` when nil (a udev reader).
    public init(name: String, path: String?, settings: SerialSettings, slack: Duration = ISO7816.defaultSlack,
                logger: Logger = Logger(label: "cardbench")) {
        self.name = name
        self.path = path
        self.settings = settings
        self.slack = slack
        self.logger = logger
    }

    /// What `cardbench readers` shows.
    public struct Status: Sendable, Equatable {
        /// The tty, nil while a udev reader is unplugged.
        public let path: String?
        /// `open`, `absent` (no tty), or `error` (the tty could not be opened: see `error`).
        public let state: String
        public let cardPresent: Bool
        /// The ATR of the card's latest reset, in hex.
        public let atr: String?
        /// T=0 or T=1 of the card's latest reset.
        public let transmissionProtocol: Int?
        public let error: String?
    }

    /// The guard times the current card's transport has waited (line time, not the host's).
    public var guardWaited: Duration { condition.withLock { session }?.guardWaited ?? .zero }

    /// The open tty's byte counts (see `SerialPort.byteCounts`).
    public var byteCounts: (written: Int, read: Int)? { condition.withLock { port }?.byteCounts }

    public var status: Status {
        condition.withLock {
            Status(path: path, state: port != nil ? "open" : (lastError != nil && path != nil ? "error" : "absent"),
                   cardPresent: present, atr: lastATR.map { Hex.encode($0) }, transmissionProtocol: lastProtocol, error: lastError)
        }
    }

    // MARK: Lifecycle

    /// Opens the tty (when there is one) and starts watching the presence line.
    public func start() {
        let start: Bool = condition.withLock {
            guard !running else { return false }
            running = true
            return true
        }
        guard start else { return }
        if let path = condition.withLock({ path }) { open(path) }
        let done = DispatchSemaphore(value: 0)
        condition.withLock { watcher = done }
        let thread = Thread { [self] in
            while condition.withLock({ running }) {
                poll()
                Thread.sleep(forTimeInterval: 0.05)
            }
            done.signal()
        }
        thread.name = "cardio serial \(name)"
        thread.start()
    }

    /// Stops watching and closes the tty; a card present is reported removed.
    public func stop() {
        let done: DispatchSemaphore? = condition.withLock {
            guard running else { return nil }
            running = false
            return watcher
        }
        done?.wait()
        closePort()
    }

    /// A udev reader plugged in at `path`.
    public func attach(path: String) {
        condition.withLock { self.path = path }
        if condition.withLock({ running }) { open(path) }
    }

    /// A udev reader unplugged: the tty is closed once an exchange in progress has failed (an
    /// unplugged tty fails its reads at once).
    public func detach() {
        closePort()
        condition.withLock {
            path = nil
            lastError = nil
        }
    }

    private func open(_ path: String) {
        do throws(CardIOError) {
            let opened = try SerialPort(path: path, settings: settings, readerName: name)
            condition.withLock {
                port = opened
                lastError = nil
                condition.broadcast()
            }
        } catch {
            logger.error("reader \(name): \(error)")
            condition.withLock { lastError = error.description }
        }
    }

    private func closePort() {
        io.lock()
        let (closing, wasPresent) = condition.withLock { () -> (SerialPort?, Bool) in
            let p = port
            let was = present
            port = nil
            present = false
            session?.end()
            session = nil
            return (p, was)
        }
        closing?.close()
        io.unlock()
        if wasPresent { emit(.cardRemoved(reader: name)) }
    }

    /// One look at the presence line.
    private func poll() {
        guard let port = condition.withLock({ port }) else { return }
        let now: Bool
        do throws(CardIOError) { now = try port.cardPresent() } catch {
            logger.error("reader \(name): \(error)")
            now = false
        }
        let changed: Bool = condition.withLock {
            guard now != present else { return false }
            present = now
            if !now {
                session?.end()
                session = nil
            }
            condition.broadcast()
            return true
        }
        if changed { emit(now ? .cardInserted(reader: name) : .cardRemoved(reader: name)) }
    }

    // MARK: CardReader

    public var isCardPresent: Bool { condition.withLock { present } }

    /// Waits up to `timeout` for a card, resets it, reads its ATR, negotiates PPS when the card
    /// offers a faster rate the UART can take, and returns a channel speaking the card's first
    /// protocol. Without a reset line the card is reset only once, when it first answers; later
    /// connects reuse that session.
    public func connect(timeout: Duration) throws(CardIOError) -> any CardChannel {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout.seconds))
        condition.lock()
        while port == nil || !present {
            if !condition.wait(until: deadline) { break }
        }
        let port = self.port
        let ready = port != nil && present
        if ready, settings.resetLine == .none, let session, session.isAlive {
            condition.unlock()
            return SessionChannel(session, session: session.id, atr: session.atr)
        }
        condition.unlock()
        guard ready, let port else { throw .noCard(reader: name) }

        io.lock()
        defer { io.unlock() }
        let fresh: SerialSession
        do throws(CardIOError) {
            fresh = try powerUp(port)
        } catch {
            condition.withLock { lastError = error.description }
            throw error
        }
        condition.withLock {
            session?.end()
            session = fresh
            lastATR = fresh.atr
            lastProtocol = fresh.transmissionProtocol
            lastError = nil
        }
        return SessionChannel(fresh, session: fresh.id, atr: fresh.atr)
    }

    /// Reset, ATR, PPS, protocol: a powered card.
    private func powerUp(_ port: SerialPort) throws(CardIOError) -> SerialSession {
        try port.setParity(settings.parity)
        try port.setBaud(settings.baud)
        try port.resetCard()
        let etu = ISO7816.etu(baudRate: settings.baud)
        let (atr, convention) = try ISO7816.readATR(from: port, initialWaitingTime: ISO7816.initialWaitingTime(etu: etu), slack: slack)
        // An inverse-convention card's parity bit reads inverted too: even becomes odd.
        if convention == .inverse, settings.parity == .even { try port.setParity(.odd) }
        let line = ISO7816.line(port, for: convention)
        let t = ISO7816.preferredProtocol(of: atr)
        var rate = ISO7816.Rate.default
        var baud = settings.baud
        if let ta1 = ISO7816.proposedTA1(for: atr), let offered = ISO7816.Rate.fromTA1(of: atr) {
            // A rate the UART cannot be set to is not proposed: the card stays at the default.
            if let faster = Self.baud(for: offered, from: settings.baud),
               try ISO7816.negotiatePPS(line: line, protocol: t, ta1: ta1, waitingTime: ISO7816.initialWaitingTime(etu: etu),
                                        guardTime: etu * (16 - ISO7816.receiveTimeInETU), slack: slack) {
                rate = offered
                baud = faster
            }
        } else if atr.specificMode != nil, let fixed = ISO7816.Rate.fromTA1(of: atr), fixed != .default {
            guard let fixedBaud = Self.baud(for: fixed, from: settings.baud) else {
                throw .protocolError(reader: name, detail: "the card is in specific mode at \(fixed), \(settings.baud * 372 * fixed.d / fixed.f) baud, which the UART cannot be set to")
            }
            baud = fixedBaud
            rate = fixed
        }
        if baud != settings.baud { try port.setBaud(baud) }
        let transport = try ISO7816.makeTransport(line: line, atr: atr, etu: ISO7816.etu(baudRate: baud), rate: rate, slack: slack)
        return SerialSession(readerName: name, atr: atr.bytes, transmissionProtocol: t, transport: transport, io: io)
    }

    /// The termios speed for `rate` on a reader that runs the default rate (F 372, D 1) at
    /// `base` baud: the card's clock is whatever makes the default rate `base` (3.5712 MHz for
    /// 9600; a Phoenix's 3.579545 MHz is 0.2% off, within a UART's tolerance), so the rate scales
    /// the speed by 372·D/F. Nil when no termios speed is within 2% of it.
    static func baud(for rate: ISO7816.Rate, from base: Int) -> Int? {
        let exact = Double(base) * 372 * Double(rate.d) / Double(rate.f)
        return SerialPort.supportedBaudRates.first { abs(Double($0) - exact) / exact <= 0.02 }
    }

    // MARK: Events

    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (ReaderEvent) -> Void) -> ReaderObservation {
        condition.withLock {
            nextObservation += 1
            observers[nextObservation] = observer
            return ReaderObservation(id: nextObservation)
        }
    }

    public func removeObserver(_ observation: ReaderObservation) {
        condition.withLock { _ = observers.removeValue(forKey: observation.id) }
    }

    private func emit(_ event: ReaderEvent) {
        let targets = condition.withLock { observers.sorted { $0.key < $1.key }.map(\.value) }
        for observer in targets { observer(event) }
    }
}

/// A powered card on a serial reader: its transport, until removed, reset or failed.
final class SerialSession: CardSessions, @unchecked Sendable {
    // Unchecked: `alive` is under `state`; the transport is used under the reader's `io` lock.
    private static let counter = Locked<UInt64>(0)

    let id: UInt64
    let readerName: String
    let atr: [UInt8]
    let transmissionProtocol: Int
    private let transport: any APDUTransport
    private let io: NSLock
    private let state = Locked(true)

    init(readerName: String, atr: [UInt8], transmissionProtocol: Int, transport: any APDUTransport, io: NSLock) {
        id = Self.counter.withLock { $0 += 1; return $0 }
        self.readerName = readerName
        self.atr = atr
        self.transmissionProtocol = transmissionProtocol
        self.transport = transport
        self.io = io
    }

    var isAlive: Bool { state.withLock { $0 } }

    var guardWaited: Duration {
        io.lock()
        defer { io.unlock() }
        return transport.guardWaited
    }

    func end() { state.withLock { $0 = false } }

    func transmit(_ command: [UInt8], session: UInt64) throws(CardIOError) -> [UInt8] {
        io.lock()
        defer { io.unlock() }
        guard isAlive else { throw .cardRemoved(reader: readerName) }
        do throws(CardIOError) {
            return try transport.transmit(command)
        } catch {
            // After a failed exchange the transport refuses more (and the card's state is
            // unknown): the next connect resets the card. A malformed APDU sent nothing.
            if case .io = error { throw error }
            end()
            throw error
        }
    }

    func reset(session: UInt64) throws(CardIOError) -> [UInt8] {
        throw .io(reader: readerName, detail: "a serial card is reset by connecting again")
    }

    func powerOff(session: UInt64) {}
}
