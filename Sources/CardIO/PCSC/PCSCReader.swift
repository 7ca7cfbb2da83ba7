import CLibPCSCLite
import EMV
import Foundation
import Logging

/// A reader behind pcscd (USB CCID and contactless readers, or vsmartcard's vpcd): the first
/// reader pcscd lists that `pattern` matches.
///
/// A watcher thread, on a PC/SC context of its own (a call holds its context's lock for its whole
/// length), waits in `SCardGetStatusChange` on the matched reader and on
/// `\\?PnP?\Notification`, at most one second at a time: pcsc-lite 1.9.9's PnP entry only reports
/// a change of the reader count during the call, and `SCardCancel` is lost when it comes between
/// two waits, so the reader list is read again after every return and a stop flag backs the
/// cancel. When pcscd goes away every context and handle from before is dead for good: the
/// watcher releases its context, reports the loss, and establishes a new one every half second
/// until pcscd answers again.
///
/// Cards are connected exclusively with the protocol their ATR asks for first, on the caller's
/// thread and another context. Under T=0 pcscd sends TPDUs as they are, so `T0Exchange` runs
/// above `SCardTransmit` (case 4 without Le, GET RESPONSE after 61xx, re-issue after 6Cxx).
public final class PCSCReader: CardReader, @unchecked Sendable {
    // Unchecked: mutable state is under `condition`; the transaction context is used under `io`;
    // a session locks itself.
    public let name: String
    public let pattern: PCSCReaderPattern
    private let logger: Logger
    private let condition = NSCondition()
    private let io = NSLock()
    private var running = false
    private var watcher: DispatchSemaphore?
    private var watchContext: PCSCContext?
    private var serviceUp = false
    private var serviceError: String?
    private var device: String?
    private var matches: [String] = []
    private var present = false
    private var flags = PCSCReaderState()
    private var presentATR: [UInt8]?
    private var lastProtocol: Int?
    private var lastError: String?
    private var session: PCSCSession?
    private var ioContext: PCSCContext?
    private var observers: [UInt64: @Sendable (ReaderEvent) -> Void] = [:]
    private var nextObservation: UInt64 = 0

    /// How long one `SCardGetStatusChange` waits before the list of readers is read again.
    static let watchMilliseconds: UInt = 1000
    /// How often pcscd is tried again while it is away.
    static let serviceRetry = 0.5

    public init(name: String, pattern: PCSCReaderPattern, logger: Logger = Logger(label: "cardbench")) {
        self.name = name
        self.pattern = pattern
        self.logger = logger
    }

    /// What `cardbench readers` shows.
    public struct Status: Sendable, Equatable {
        /// The PC/SC reader in use: the first one matched.
        public let device: String?
        /// Every reader the pattern matches (more than one is worth a warning).
        public let matches: [String]
        /// `ready` (the reader is there), `in-use` (another program holds it), `absent` (pcscd
        /// lists no reader that matches), `no-service` (pcscd cannot be reached), `starting`
        /// (not asked yet), `stopped`.
        public let state: String
        public let cardPresent: Bool
        /// The present card's ATR, in hex.
        public let atr: String?
        /// T=0 or T=1 of the latest connection.
        public let transmissionProtocol: Int?
        /// The latest error: pcscd unreachable, a refused connection.
        public let error: String?
    }

    public var status: Status {
        condition.withLock {
            let ours = session?.isOpen ?? false
            let state: String =
                !running ? "stopped"
                : !serviceUp ? (serviceError == nil ? "starting" : "no-service")
                : device == nil ? "absent"
                : !ours && !flags.isDisjoint(with: [.exclusive, .inUse]) ? "in-use"
                : "ready"
            return Status(device: device, matches: matches, state: state, cardPresent: present,
                          atr: presentATR.map { Hex.encode($0) }, transmissionProtocol: lastProtocol,
                          error: serviceUp ? lastError : (serviceError ?? lastError))
        }
    }

    // MARK: Lifecycle

    /// Starts the watcher; pcscd need not be running yet.
    public func start() {
        let done = DispatchSemaphore(value: 0)
        let start: Bool = condition.withLock {
            guard !running else { return false }
            running = true
            watcher = done
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            watch()
            done.signal()
        }
        thread.name = "cardio pcsc \(name)"
        thread.start()
    }

    /// Stops the watcher, ends the card's connection and releases the contexts; a card present
    /// is reported removed.
    public func stop() {
        let (done, context): (DispatchSemaphore?, PCSCContext?) = condition.withLock {
            guard running else { return (nil, nil) }
            running = false
            condition.broadcast()
            return (watcher, watchContext)
        }
        guard let done else { return }
        context?.cancel()
        done.wait()
        io.withLock {
            ioContext?.release()
            ioContext = nil
        }
    }

    private var isRunning: Bool { condition.withLock { running } }

    /// Sleeps up to `seconds`, waking early on `stop()`.
    private func pause(_ seconds: Double) {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.withLock {
            while running, condition.wait(until: deadline) {}
        }
    }

    // MARK: Watching

    private func watch() {
        var context: PCSCContext?
        var current: UInt = 0
        var announcedLoss = false
        while isRunning {
            guard let live = context ?? establish(announcedLoss: &announcedLoss) else {
                pause(Self.serviceRetry)
                continue
            }
            if context == nil {
                context = live
                current = 0
            }
            do throws(PCSCError) {
                let names = try live.listReaders()
                let matched = pattern.select(from: names)
                if follow(matched) { current = 0 }
                var watches = [PCSCWatch(reader: PCSCContext.plugAndPlay)]
                let watched = condition.withLock { device }
                if let watched { watches.insert(PCSCWatch(reader: watched, current: current), at: 0) }
                let changed = try live.waitForChange(&watches, milliseconds: Self.watchMilliseconds)
                guard watched != nil else { continue }
                let seen = watches[0]
                guard changed else {
                    // Nothing inserted or removed; who holds the reader may have changed.
                    if seen.event.isDisjoint(with: [.unknown, .unavailable]), seen.event.rawValue & ~PCSCReaderState.changed.rawValue & 0xFFFF != 0 {
                        condition.withLock { flags = seen.event }
                    }
                    continue
                }
                let previous = current
                current = seen.event.rawValue & ~PCSCReaderState.changed.rawValue
                // A reader gone during the wait (the next list drops it), or one whose driver
                // fails: looked at again shortly, not in a tight loop.
                guard seen.event.isDisjoint(with: [.unknown, .unavailable]) else {
                    pause(0.1)
                    continue
                }
                observe(seen, previous: previous)
            } catch {
                if error.isServiceGone {
                    live.release()
                    context = nil
                    lose(error.description)
                    announcedLoss = true
                } else if error.code != SCARD_E_CANCELLED && error.code != SCARD_E_UNKNOWN_READER {
                    logger.error("reader \(name): \(error)")
                    condition.withLock { lastError = error.description }
                    pause(Self.serviceRetry)
                }
            }
        }
        context?.release()
        condition.withLock { watchContext = nil }
        lose(nil)
    }

    /// A new watch context, or nil while pcscd cannot be reached (reported once).
    private func establish(announcedLoss: inout Bool) -> PCSCContext? {
        do throws(PCSCError) {
            let context = try PCSCContext()
            let names = (try? context.listReaders()) ?? []
            let keep = condition.withLock { () -> Bool in
                guard running else { return false }
                watchContext = context
                serviceUp = true
                serviceError = nil
                return true
            }
            guard keep else {
                context.release()
                return nil
            }
            if announcedLoss {
                announcedLoss = false
                logger.notice("reader \(name): pcscd is back, new PC/SC context established; readers: \(names)")
                emit(.serviceRestored(reader: name, devices: names))
            }
            return context
        } catch {
            let detail = "pcscd cannot be reached (\(error)); is it running? (systemctl status pcscd.socket)"
            let first = condition.withLock { () -> Bool in
                let first = serviceError == nil || serviceUp
                serviceUp = false
                // After a loss the message says so (and why); before, why pcscd is not there.
                serviceError = announcedLoss ? (serviceError ?? detail) : detail
                return first
            }
            if first && !announcedLoss {
                logger.error("reader \(name): \(detail)")
                announcedLoss = true
                emit(.serviceLost(reader: name, detail: detail))
            }
            return nil
        }
    }

    /// Follows the first matched reader; returns whether it changed (the card state starts over).
    private func follow(_ matched: [String]) -> Bool {
        let (old, new, wasPresent) = condition.withLock { () -> (String?, String?, Bool) in
            matches = matched
            let old = device
            guard matched.first != old else { return (old, old, present) }
            device = matched.first
            let was = present
            forgetCard()
            return (old, device, was)
        }
        guard old != new else { return false }
        if wasPresent { emit(.cardRemoved(reader: name)) }
        if let old { emit(.readerRemoved(reader: name, device: old)) }
        if let new { emit(.readerAdded(reader: name, device: new)) }
        return true
    }

    /// Applies what one wait saw of the followed reader: insertions, removals, both (a card
    /// swapped between two waits shows only in the event counter), and who holds the reader.
    private func observe(_ seen: PCSCWatch, previous: UInt) {
        let nowPresent = seen.event.contains(.present) && !seen.event.contains(.mute)
        let counterMoved = previous != 0 && (previous >> 16) != seen.event.eventCount
        var events: [ReaderEvent] = []
        condition.withLock {
            flags = seen.event
            if present && (!nowPresent || counterMoved) {
                forgetCard()
                events.append(.cardRemoved(reader: name))
            }
            if nowPresent && !present {
                present = true
                presentATR = seen.atr
                events.append(.cardInserted(reader: name))
            }
            condition.broadcast()
        }
        events.forEach(emit)
    }

    /// pcscd is gone (or the reader stops): the reader, the card and the service with them.
    private func lose(_ detail: String?) {
        let (old, wasPresent) = condition.withLock { () -> (String?, Bool) in
            let old = device, was = present
            device = nil
            matches = []
            flags = []
            forgetCard()
            watchContext = nil
            if let detail {
                serviceUp = false
                serviceError = "pcscd went away (\(detail)); reconnecting"
            }
            return (old, was)
        }
        if wasPresent { emit(.cardRemoved(reader: name)) }
        if let old { emit(.readerRemoved(reader: name, device: old)) }
        if let detail {
            logger.error("reader \(name): pcscd went away (\(detail)); retrying every \(Self.serviceRetry) s")
            emit(.serviceLost(reader: name, detail: "pcscd went away (\(detail))"))
        }
    }

    /// Under `condition`: no card any more; its session's exchanges now fail as a removal.
    private func forgetCard() {
        present = false
        presentATR = nil
        session?.end()
        condition.broadcast()
    }

    // MARK: CardReader

    public var isCardPresent: Bool { condition.withLock { present } }

    /// Waits up to `timeout` for a card in the matched reader, connects to it exclusively with
    /// the protocol its ATR asks for first, and returns its channel.
    /// - Throws: `.noCard` when none came in time (or pcscd went away meanwhile); `.io` naming
    ///   the other program's hold when pcscd refuses the exclusive connection, or pcscd's error.
    public func connect(timeout: Duration) throws(CardIOError) -> any CardChannel {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout.seconds))
        condition.lock()
        while running, device == nil || !present {
            if !condition.wait(until: deadline) { break }
        }
        let target = present ? device : nil
        let atr = presentATR
        condition.unlock()
        guard let target else { throw .noCard(reader: name) }

        io.lock()
        defer { io.unlock() }
        condition.withLock { session }?.close()
        let protocols = Self.protocols(for: atr)
        var handle: PCSCCardHandle?
        // pcscd polls its readers every 400 ms, so its answer can lag the watcher's: a card
        // swapped quickly is found unpowered or mute, a card just pulled out not inserted. Tried
        // again every 100 ms (never in a tight loop: pcscd's poller needs the reader's lock too)
        // until the caller's deadline, or at least a few polls, before it counts.
        let settle = max(ContinuousClock.now + Self.settleTime, ContinuousClock.now + timeout)
        while handle == nil {
            do throws(PCSCError) {
                handle = try connectOnce(target, protocols: protocols)
            } catch where error.isServiceGone && ioContext != nil && ContinuousClock.now < settle {
                // A context from before pcscd restarted: dead for good; a new one is made.
                ioContext?.release()
                ioContext = nil
                Thread.sleep(forTimeInterval: 0.1)
            } catch where Self.isSettling(error) && ContinuousClock.now < settle {
                Thread.sleep(forTimeInterval: 0.1)
            } catch {
                logger.debug("reader \(name): \(error)")
                throw refusal(error, reader: target)
            }
        }
        guard let handle else { throw .noCard(reader: name) }
        let fresh: PCSCSession
        do throws(PCSCError) {
            fresh = PCSCSession(readerName: name, handle: handle, atr: try handle.atr(), protocols: protocols)
        } catch {
            handle.disconnect()
            throw refusal(error, reader: target)
        }
        condition.withLock {
            session = fresh
            lastProtocol = handle.transmissionProtocol
            lastError = nil
        }
        return SessionChannel(fresh, session: fresh.id, atr: fresh.atr)
    }

    /// How long, at least, a connection pcscd refuses for a reason its polling may be behind on
    /// is tried again.
    static let settleTime = Duration.milliseconds(1200)

    static func isSettling(_ error: PCSCError) -> Bool {
        error.code == SCARD_W_UNPOWERED_CARD || error.code == SCARD_W_UNRESPONSIVE_CARD || error.isCardGone
    }

    /// Under `io`: one SCardConnect on the transaction context (made when there is none).
    private func connectOnce(_ target: String, protocols: DWORD) throws(PCSCError) -> PCSCCardHandle {
        let context: PCSCContext
        if let existing = ioContext { context = existing } else { context = try PCSCContext() }
        ioContext = context
        do throws(PCSCError) {
            return try context.connect(reader: target, protocols: protocols)
        } catch where error.code == SCARD_E_PROTO_MISMATCH && protocols != Self.anyProtocol {
            // An ATR whose first protocol is not what the reader speaks (a contactless reader's
            // PC/SC part 3 ATR): let pcscd choose.
            return try context.connect(reader: target, protocols: Self.anyProtocol)
        }
    }

    /// What a failed connection means to the kernel, recorded for `cardbench readers`.
    private func refusal(_ error: PCSCError, reader target: String) -> CardIOError {
        if error.isServiceGone {
            ioContext?.release()
            ioContext = nil
        }
        if error.isServiceGone || error.isCardGone { return .noCard(reader: name) }
        let detail = error.code == SCARD_E_SHARING_VIOLATION
            ? "\"\(target)\" is in use by another program: pcscd refused an exclusive connection (\(error)); close the program holding it (pcsc_scan, a browser, gpg's scdaemon, …)"
            : "pcscd could not connect to the card in \"\(target)\": \(error)"
        condition.withLock { lastError = detail }
        return .io(reader: name, detail: detail)
    }

    static let anyProtocol = DWORD(SCARD_PROTOCOL_T0) | DWORD(SCARD_PROTOCOL_T1)

    /// The protocol an EMV terminal uses: the first the ATR offers (pcscd would try T=1 first
    /// when allowed both); either when the ATR cannot be read.
    /// A contactless card's PC/SC part 3 ATR (`3B 8n 80 01 …`) lists T=0 first, but the reader
    /// exchanges whole APDUs with an ISO 14443-4 card: T=1, with no T=0 GET RESPONSE layer.
    static func protocols(for atr: [UInt8]?) -> DWORD {
        guard let atr, let parsed = try? ATR.parse(atr) else { return anyProtocol }
        if ATR.isContactless(atr) { return DWORD(SCARD_PROTOCOL_T1) }
        return ISO7816.preferredProtocol(of: parsed) == 1 ? DWORD(SCARD_PROTOCOL_T1) : DWORD(SCARD_PROTOCOL_T0)
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

    // MARK: What pcscd sees

    /// One reader as pcscd reports it, for `cardbench pcsc list`.
    public struct Listing: Sendable, Equatable, Encodable {
        /// The full name, as pcscd gives it.
        public let name: String
        /// The name without the plug index and slot: what a pattern is matched against.
        public let baseName: String
        /// `empty`, `present`, `in-use`, `exclusive`, `mute`, `unavailable` (comma-separated when several).
        public let state: String
        /// The card's ATR, in hex.
        public let atr: String?
        /// The protocol the ATR asks for first (what cardbench connects with).
        public let transmissionProtocol: Int?
    }

    /// The readers pcscd has now, with their state and card.
    /// - Throws: `PCSCError` when pcscd cannot be reached.
    public static func survey() throws(PCSCError) -> [Listing] {
        let context = try PCSCContext()
        defer { context.release() }
        let names = try context.listReaders()
        guard !names.isEmpty else { return [] }
        var watches = names.map { PCSCWatch(reader: $0) }
        _ = try context.waitForChange(&watches, milliseconds: 0)
        return watches.map { watch in
            let e = watch.event
            var words: [String] = []
            if e.contains(.empty) { words.append("empty") }
            if e.contains(.present) { words.append("present") }
            if e.contains(.exclusive) { words.append("exclusive") } else if e.contains(.inUse) { words.append("in-use") }
            if e.contains(.mute) { words.append("mute") }
            if e.contains(.unavailable) { words.append("unavailable") }
            let atr = e.contains(.present) && !watch.atr.isEmpty ? watch.atr : nil
            let t = atr.flatMap { try? ATR.parse($0) }.map { ISO7816.preferredProtocol(of: $0) }
            return Listing(name: watch.reader, baseName: PCSCReaderPattern.baseName(watch.reader),
                           state: words.joined(separator: ","), atr: atr.map { Hex.encode($0) }, transmissionProtocol: t)
        }
    }
}

/// A card connected through pcscd: one exclusive handle, until removed, reset or disconnected.
final class PCSCSession: CardSessions, @unchecked Sendable {
    // Unchecked: the handle is used under `lock`; `alive` and `open` are under it too.
    private static let counter = Locked<UInt64>(0)

    let id: UInt64
    let readerName: String
    private(set) var atr: [UInt8]
    private let handle: PCSCCardHandle
    private let protocols: DWORD
    private let lock = NSLock()
    private var alive = true
    private var open = true

    init(readerName: String, handle: PCSCCardHandle, atr: [UInt8], protocols: DWORD) {
        id = Self.counter.withLock { $0 += 1; return $0 }
        self.readerName = readerName
        self.handle = handle
        self.atr = atr
        self.protocols = protocols
    }

    /// Still connected (not yet powered off or replaced).
    var isOpen: Bool { lock.withLock { open } }

    /// The card was seen leaving: exchanges fail as a removal from now on (the handle is closed
    /// by the next connect or power-off, on the terminal's thread).
    func end() { lock.withLock { alive = false } }

    /// Disconnects, powering the card off.
    func close() {
        lock.withLock {
            guard open else { return }
            open = false
            handle.disconnect(unpower: alive)
            alive = false
        }
    }

    func transmit(_ command: [UInt8], session: UInt64) throws(CardIOError) -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        guard alive else { throw .cardRemoved(reader: readerName) }
        guard command.count >= 4 else {
            throw .io(reader: readerName, detail: "a C-APDU is at least 4 bytes (CLA INS P1 P2), got \(command.count); nothing was sent")
        }
        if handle.transmissionProtocol == 0 {
            return try T0Exchange.transmit(command, reader: readerName) { (tpdu: [UInt8]) throws(CardIOError) -> [UInt8] in try raw(tpdu) }
        }
        return try raw(command)
    }

    private func raw(_ bytes: [UInt8]) throws(CardIOError) -> [UInt8] {
        do throws(PCSCError) {
            let answer = try handle.transmit(bytes)
            guard answer.count >= 2 else {
                throw PCSCError(code: SCARD_E_NOT_TRANSACTED, call: "SCardTransmit (a \(answer.count)-byte answer)")
            }
            return answer
        } catch {
            throw failure(error)
        }
    }

    func reset(session: UInt64) throws(CardIOError) -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        guard alive else { throw .cardRemoved(reader: readerName) }
        do throws(PCSCError) {
            atr = try handle.reset(protocols: protocols)
            return atr
        } catch {
            throw failure(error)
        }
    }

    func powerOff(session: UInt64) { close() }

    /// Under `lock`: a removal for the kernel, or pcscd's error.
    ///
    /// A card pulled out during an exchange makes the driver fail it (`SCARD_E_NOT_TRANSACTED`
    /// from vpcd and CCID alike) before pcscd's 400 ms poll has seen the removal; so such a
    /// failure asks pcscd about the card for up to `removalWait` before calling it a reader error.
    private func failure(_ error: PCSCError) -> CardIOError {
        if error.isCardGone || error.isServiceGone || (error.code == SCARD_E_NOT_TRANSACTED && cardLeft()) {
            alive = false
            return .cardRemoved(reader: readerName)
        }
        return .io(reader: readerName, detail: "\(error)")
    }

    static let removalWait = 1.2

    /// Whether pcscd reports the card gone within `removalWait`.
    private func cardLeft() -> Bool {
        let deadline = Date(timeIntervalSinceNow: Self.removalWait)
        repeat {
            do throws(PCSCError) { _ = try handle.atr() } catch {
                return error.isCardGone || error.isServiceGone
            }
            Thread.sleep(forTimeInterval: 0.1)
        } while Date() < deadline
        return false
    }
}
