#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging

/// The reader side of vsmartcard's vpcd protocol (see VPCD.swift for the protocol): listens on a
/// Unix socket (mode 0660, never world-writable; an existing stale socket file is replaced) and
/// optionally on a loopback TCP port.
///
/// A connecting card is an insertion, its disconnect a removal. One card at a time: a second card
/// connecting while one is present is refused (closed) with a logged reason. A card that breaks
/// the protocol, stays silent past `responseTimeout` or disconnects mid-APDU fails the call on its
/// channel with a `CardIOError` and is ejected; the listener goes on and the next card can connect.
///
/// One thread per reader accepts cards and watches the present one for a hang-up (poll with
/// POLLRDHUP, so it does not wake for every response); the exchanges themselves run on the
/// caller's thread, blocking, with no hop between threads. Call `stop()` before dropping a started
/// reader: its thread keeps it alive until then.
public final class VirtualReader: CardReader, @unchecked Sendable {
    // Unchecked: the public properties are lets; every mutable field below is guarded by
    // `condition` (an NSCondition, also used to wait for a card), and `lifecycle` serialises
    // start() and stop(). The reader thread owns the listening and card sockets it closes.
    /// The reader's name, in events and errors.
    public let name: String
    /// The Unix socket cards connect to.
    public let socketPath: String
    /// The loopback TCP port asked for (0 for any free port), if any.
    public let tcpPort: UInt16?
    /// How long a card may stay silent before its channel throws `timeout` and it is ejected.
    public let responseTimeout: Duration

    private let logger: Logger
    private let condition = NSCondition()
    private let lifecycle = NSLock()
    private var running: Running?
    private var current: CardConnection?
    private var inProcess: InProcessSlot?
    private var observers: [UInt64: @Sendable (ReaderEvent) -> Void] = [:]
    private var nextObservation: UInt64 = 0
    private var boundTCPPort: UInt16?

    /// What stop() needs to end the reader thread.
    private struct Running {
        let wakeRead: Int32
        let wakeWrite: Int32
        let finished: DispatchSemaphore
    }

    /// The sockets the reader thread serves; it closes them when it ends.
    private struct Listeners: Sendable {
        let unix: Int32
        let unixIdentity: FileIdentity
        let tcp: Int32?
        let wake: Int32
    }

    /// Which file the socket path named when we bound it, so stop() removes only our own.
    private struct FileIdentity: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    /// Makes a reader; nothing listens until `start()`.
    /// - Parameters:
    ///   - name: the reader's name in events and errors.
    ///   - socketPath: the Unix socket to listen on (at most 107 bytes).
    ///   - tcpPort: also listen on 127.0.0.1 at this port; 0 picks a free one (see `tcpPortBound`).
    ///   - responseTimeout: how long a card may take to answer a frame.
    ///   - logger: where refused cards and listener trouble are reported; never given APDU data.
    public init(name: String, socketPath: String, tcpPort: UInt16? = nil, responseTimeout: Duration = .seconds(10),
                logger: Logger = Logger(label: "cardbench")) throws(CardIOError) {
        guard !name.isEmpty else {
            throw .invalidEndpoint("a virtual reader needs a name")
        }
        guard Socket.unixAddress(socketPath) != nil else {
            throw .invalidEndpoint("reader \(name): socket path \"\(socketPath)\" must be 1 to \(Socket.maxUnixPathBytes) bytes with no NUL, got \(socketPath.utf8.count)")
        }
        guard responseTimeout > .zero else {
            throw .invalidEndpoint("reader \(name): the response timeout must be more than 0 s")
        }
        self.name = name
        self.socketPath = socketPath
        self.tcpPort = tcpPort
        self.responseTimeout = responseTimeout
        self.logger = logger
    }

    /// The TCP port actually listened on (the ephemeral one when `tcpPort` was 0), while started.
    public var tcpPortBound: UInt16? {
        locked { boundTCPPort }
    }

    /// Whether a card is connected and has not hung up or been ejected.
    public var isCardPresent: Bool {
        let (socketCard, local) = locked { (current, inProcess) }
        return local?.isRemoved == false || socketCard?.isAlive == true
    }

    /// Whether the card present is an in-process one (see `insert(_:)`).
    public var hasInProcessCard: Bool { locked { inProcess != nil } }

    // MARK: In-process cards

    /// Inserts a card living in this process: observers hear of it as of any insertion, and
    /// `connect` hands its channel out. Throws when a card (of either kind) is already present,
    /// since a reader holds one card at a time.
    public func insert(_ card: any InProcessCard) throws(CardIOError) {
        let refused: Bool = locked {
            if inProcess?.isRemoved == false || current?.isAlive == true { return true }
            let slot = InProcessSlot(card: card, readerName: name)
            // A card that leaves by itself (after a scripted answer) is removed as if pulled out,
            // off the caller's thread, which is inside the slot's exchange.
            slot.onLeft = { [weak self, weak slot] in
                guard let reader = self, let left = slot else { return }
                DispatchQueue.global().async { reader.removeInProcessCard(ifStill: left) }
            }
            inProcess = slot
            condition.broadcast()
            return false
        }
        if refused { throw .io(reader: name, detail: "a card is already inserted; a reader holds one card at a time") }
        emit(.cardInserted(reader: name))
    }

    /// Removes the in-process card, if there is one: its channels throw `cardRemoved` from now
    /// on. Returns whether there was one.
    @discardableResult
    public func removeInProcessCard() -> Bool {
        removeInProcessCard(ifStill: nil)
    }

    /// Removes the in-process card (only `slot`, when given, so a card inserted since is kept).
    @discardableResult
    func removeInProcessCard(ifStill expected: InProcessSlot?) -> Bool {
        guard let slot = locked({ () -> InProcessSlot? in
            let slot = inProcess
            if let expected, slot !== expected { return nil }
            inProcess = nil
            return slot
        }) else { return false }
        slot.remove()
        emit(.cardRemoved(reader: name))
        return true
    }

    // MARK: Lifecycle

    /// Binds and listens (Unix socket, then TCP if asked) and starts the reader thread. Does
    /// nothing if already started.
    public func start() throws(CardIOError) {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        guard locked({ running == nil }) else { return }

        let (unixFD, identity) = try listenUnix()
        var tcpFD: Int32?
        var port: UInt16?
        var pipeFDs: [Int32] = [-1, -1]
        do throws(CardIOError) {
            if let tcpPort {
                let tcp = try listenTCP(port: tcpPort)
                tcpFD = tcp.fd
                port = tcp.port
            }
            guard pipe(&pipeFDs) == 0 else {
                throw .io(reader: name, detail: "cannot make the reader's wake-up pipe: \(Socket.errorText(errno))")
            }
        } catch {
            if let tcpFD { closeDescriptor(tcpFD) }
            closeDescriptor(unixFD)
            removeSocketFile(ifStill: identity)
            throw error
        }
        for fd in pipeFDs {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            Socket.setNonBlocking(fd)
        }

        let listeners = Listeners(unix: unixFD, unixIdentity: identity, tcp: tcpFD, wake: pipeFDs[0])
        let finished = DispatchSemaphore(value: 0)
        locked {
            running = Running(wakeRead: pipeFDs[0], wakeWrite: pipeFDs[1], finished: finished)
            boundTCPPort = port
        }
        let thread = Thread { [self] in
            serve(listeners)
            finished.signal()
        }
        thread.name = "cardio reader \(name)"
        thread.start()
    }

    /// Closes the listeners and ejects any card (observers hear of its removal), removes the
    /// socket file, and waits for the reader thread to end. Idempotent; `start()` works again after.
    public func stop() {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        guard let run = locked({ () -> Running? in
            let run = running
            running = nil
            boundTCPPort = nil
            return run
        }) else { return }
        var byte: UInt8 = 1
        _ = write(run.wakeWrite, &byte, 1)
        run.finished.wait()
        closeDescriptor(run.wakeWrite)
        closeDescriptor(run.wakeRead)
        removeInProcessCard()
    }

    // MARK: CardReader

    /// Waits up to `timeout` for a card, powers it on (`01`, then `04` for the ATR) and returns
    /// its channel; an earlier channel to the same card is superseded. Throws `noCard` if none
    /// came, and the card's error (it is then ejected) if it fails to power on.
    public func connect(timeout: Duration) throws(CardIOError) -> any CardChannel {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout.seconds))
        condition.lock()
        var card: CardConnection?
        var local: InProcessSlot?
        while true {
            if let slot = inProcess, !slot.isRemoved {
                local = slot
                break
            }
            if let c = current, c.isAlive {
                card = c
                break
            }
            if !condition.wait(until: deadline) {
                if let c = current, c.isAlive { card = c }
                local = inProcess.flatMap { $0.isRemoved ? nil : $0 }
                break
            }
        }
        condition.unlock()
        if let local {
            let (session, atr) = try local.powerOn()
            return SessionChannel(local, session: session, atr: atr, magneticStripe: local.card.magneticStripe)
        }
        guard let card else { throw .noCard(reader: name) }
        let (session, atr) = try card.powerOn()
        return SessionChannel(card, session: session, atr: atr)
    }

    /// Adds an observer; it is called on the reader's thread, so it must return promptly and
    /// must not call `stop()` (which waits for that thread).
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (ReaderEvent) -> Void) -> ReaderObservation {
        locked {
            nextObservation += 1
            observers[nextObservation] = observer
            return ReaderObservation(id: nextObservation)
        }
    }

    /// Stops calling an observer.
    public func removeObserver(_ observation: ReaderObservation) {
        locked { _ = observers.removeValue(forKey: observation.id) }
    }

    // MARK: The reader thread

    private func serve(_ listeners: Listeners) {
        var card: CardConnection?
        var fds: [pollfd] = []
        while true {
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: listeners.wake, events: Int16(POLLIN), revents: 0))
            fds.append(pollfd(fd: listeners.unix, events: Int16(POLLIN), revents: 0))
            if let tcp = listeners.tcp { fds.append(pollfd(fd: tcp, events: Int16(POLLIN), revents: 0)) }
            if let card { fds.append(pollfd(fd: card.fd, events: Socket.hangupRequest, revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                let code = errno
                if code == EINTR { continue }
                logger.error("reader \(name): poll failed: \(Socket.errorText(code)); retrying")
                usleep(50_000)
                continue
            }
            if fds[0].revents != 0 { break }
            // A hang-up first: a card that left and a new one arriving in the same wake-up
            // must not see the new one refused.
            if let present = card, fds[fds.count - 1].revents & Socket.hangupEvents != 0 {
                retire(present)
                card = nil
            }
            if fds[1].revents != 0 { accept(from: listeners.unix, tcp: false, card: &card) }
            if let tcp = listeners.tcp, fds[2].revents != 0 { accept(from: tcp, tcp: true, card: &card) }
        }
        if let card { retire(card) }
        closeDescriptor(listeners.unix)
        if let tcp = listeners.tcp { closeDescriptor(tcp) }
        removeSocketFile(ifStill: listeners.unixIdentity)
    }

    private func accept(from listener: Int32, tcp: Bool, card: inout CardConnection?) {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { acceptConnection(listener, $0, &length) }
        }
        guard fd >= 0 else {
            let code = errno
            switch code {
            case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED:
                break
            default:
                // Out of descriptors and the like: keep listening, but do not spin.
                logger.error("reader \(name): accepting a card failed: \(Socket.errorText(code))")
                usleep(50_000)
            }
            return
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let peer = tcp ? Self.describe(address) : "a process on the Unix socket"
        if locked({ inProcess != nil }) {
            logger.warning("reader \(name): refused a card (\(peer)): an in-process card is inserted and a reader holds one card at a time")
            closeDescriptor(fd)
            return
        }
        if let present = card {
            if present.isAlive {
                logger.warning("reader \(name): refused a second card (\(peer)): a card is already inserted and a reader holds one card at a time")
                closeDescriptor(fd)
                return
            }
            retire(present)
            card = nil
        }
        Socket.setBlocking(fd)
        Socket.setTimeouts(fd, seconds: responseTimeout.seconds)
        if tcp { Socket.setNoDelay(fd) }
        let connection = CardConnection(fd: fd, readerName: name, timeout: responseTimeout)
        card = connection
        condition.lock()
        current = connection
        condition.broadcast()
        condition.unlock()
        emit(.cardInserted(reader: name))
    }

    /// Ejects and closes a card, then tells the observers.
    private func retire(_ card: CardConnection) {
        card.close()
        locked {
            if current === card { current = nil }
        }
        emit(.cardRemoved(reader: name))
    }

    private func emit(_ event: ReaderEvent) {
        let targets = locked { observers.sorted { $0.key < $1.key }.map(\.value) }
        for observer in targets { observer(event) }
    }

    private func locked<R>(_ body: () throws -> R) rethrows -> R {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }

    // MARK: Listening sockets

    private func listenUnix() throws(CardIOError) -> (Int32, FileIdentity) {
        guard let address = Socket.unixAddress(socketPath) else {
            throw .invalidEndpoint("reader \(name): socket path \"\(socketPath)\" does not fit a Unix socket address")
        }
        var info = stat()
        if lstat(socketPath, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else {
                throw .io(reader: name, detail: "\(socketPath) exists and is not a socket; refusing to replace it")
            }
            // A socket file left by a reader that died; a live one would be replaced too, as
            // connecting to find out would look like a card to it.
            guard unlink(socketPath) == 0 || errno == ENOENT else {
                throw .io(reader: name, detail: "cannot replace the stale socket \(socketPath): \(Socket.errorText(errno))")
            }
        }
        let fd = Socket.makeStream(family: AF_UNIX)
        guard fd >= 0 else {
            throw .io(reader: name, detail: "cannot make a Unix socket: \(Socket.errorText(errno))")
        }
        guard Socket.bindUnix(fd, address) == 0 else {
            let code = errno
            closeDescriptor(fd)
            throw .io(reader: name, detail: "cannot bind \(socketPath): \(Socket.errorText(code))")
        }
        // chmod before listen: until listen() nobody can connect, so the mode the umask gave the
        // file at bind() never lets anyone in.
        guard chmod(socketPath, 0o660) == 0, lstat(socketPath, &info) == 0 else {
            let code = errno
            closeDescriptor(fd)
            _ = unlink(socketPath)
            throw .io(reader: name, detail: "cannot set mode 0660 on \(socketPath): \(Socket.errorText(code))")
        }
        let identity = FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        guard listen(fd, 16) == 0 else {
            let code = errno
            closeDescriptor(fd)
            removeSocketFile(ifStill: identity)
            throw .io(reader: name, detail: "cannot listen on \(socketPath): \(Socket.errorText(code))")
        }
        // Non-blocking so an accept after poll never hangs on a client that already left.
        Socket.setNonBlocking(fd)
        return (fd, identity)
    }

    private func listenTCP(port: UInt16) throws(CardIOError) -> (fd: Int32, port: UInt16) {
        let fd = Socket.makeStream(family: AF_INET)
        guard fd >= 0 else {
            throw .io(reader: name, detail: "cannot make a TCP socket: \(Socket.errorText(errno))")
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian  // 127.0.0.1: loopback only
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let code = errno
            closeDescriptor(fd)
            throw .io(reader: name, detail: "cannot listen on 127.0.0.1:\(port): \(Socket.errorText(code))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        Socket.setNonBlocking(fd)
        return (fd, UInt16(bigEndian: actual.sin_port))
    }

    /// Removes the socket file if it is still the one we bound (another reader may have replaced it).
    private func removeSocketFile(ifStill identity: FileIdentity) {
        var info = stat()
        guard lstat(socketPath, &info) == 0,
              FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)) == identity else { return }
        _ = unlink(socketPath)
    }

    // MARK: Describing peers for the log

    private static func describe(_ storage: sockaddr_storage) -> String {
        guard Int32(storage.ss_family) == AF_INET else { return "a TCP peer" }
        var storage = storage
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                let address = UInt32(bigEndian: pointer.pointee.sin_addr.s_addr)
                let port = UInt16(bigEndian: pointer.pointee.sin_port)
                return "\(address >> 24).\(address >> 16 & 0xFF).\(address >> 8 & 0xFF).\(address & 0xFF):\(port)"
            }
        }
    }
}

/// accept(2), for the reader whose own `accept` hides it.
private func acceptConnection(_ listener: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: inout socklen_t) -> Int32 {
    accept(listener, address, &length)
}
