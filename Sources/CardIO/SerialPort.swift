#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation

/// How a Phoenix/Smartmouse-style reader is wired: the card's I/O line on a UART, its reset on a
/// modem control line, its presence switch on a modem status line.
public struct SerialSettings: Sendable, Equatable {
    public enum Parity: String, Sendable, CaseIterable { case even, odd, none }
    /// The output line that drives the card's reset.
    public enum ResetLine: String, Sendable, CaseIterable { case rts, dtr, none }
    /// The input line that says a card is in the slot.
    public enum PresenceLine: String, Sendable, CaseIterable { case cts, dsr, dcd, always }

    /// The line speed before any PPS: 9600 for a card clocked at 3.579545 MHz with Fi 372, Di 1.
    public var baud: Int = 9600
    /// ISO 7816-3 characters carry even parity; some readers want the UART told `none`.
    public var parity: Parity = .even
    /// 2 stop bits give the card its guard time.
    public var stopBits: Int = 2
    public var resetLine: ResetLine = .rts
    /// Whether the reset line asserted (TIOCMBIS) holds the card in reset. Phoenix readers hold
    /// it in reset with RTS asserted; Smartmouse wiring is the other way round.
    public var resetAssertedIsReset: Bool = true
    /// How long the card is held in reset.
    public var resetPulse: Duration = .milliseconds(20)
    public var presenceLine: PresenceLine = .always
    /// Whether the presence line asserted means a card is in (some switches are wired inverted).
    public var presenceAssertedIsCard: Bool = true
    /// Such readers tie TX to RX, so every byte written comes back: check it and drop it.
    public var echo: Bool = true

    public init() {}

    /// The settings of a pseudo-terminal standing in for a reader: no modem lines (ptys fail their
    /// ioctls with ENOTTY), no parity (Linux ptys drop PARENB, then refuse it with EINVAL), no echo.
    public static var pty: SerialSettings {
        var s = SerialSettings()
        s.parity = .none
        s.resetLine = .none
        s.presenceLine = .always
        s.echo = false
        return s
    }
}

/// A serial port opened for a card reader: raw termios, the configured speed, 8 data bits, parity
/// and stop bits, reads with poll-based timeouts, echo removed.
public final class SerialPort: @unchecked Sendable {
    // Unchecked: `fd` is a let; `baud` changes only under `lock`, and a port is driven by one
    // reader thread at a time (the reader serialises its users).
    public let path: String
    public let readerName: String
    public let settings: SerialSettings
    private let fd: Int32
    private let lock = NSLock()
    private var currentBaud: Int
    private var currentParity: SerialSettings.Parity
    private var closed = false
    private var counts = (written: 0, read: 0)
    /// Bytes read from the tty and not yet handed out: one read(2) takes all that is there.
    private var pending: [UInt8] = []
    private var pendingIndex = 0

    /// Bytes written to the line and read from it (echoes included) since the port was opened:
    /// what `cardbench bench serial` turns into wire time.
    public var byteCounts: (written: Int, read: Int) { lock.withLock { counts } }

    /// Opens `path` (O_NOCTTY, so the port never becomes our controlling terminal; non-blocking,
    /// since every read waits in poll with its own timeout) and configures it.
    public init(path: String, settings: SerialSettings, readerName: String) throws(CardIOError) {
        self.path = path
        self.readerName = readerName
        self.settings = settings
        guard (1...2).contains(settings.stopBits) else {
            throw .invalidEndpoint("reader \(readerName): stop bits must be 1 or 2, got \(settings.stopBits)")
        }
        guard Self.speed(settings.baud) != nil else {
            throw .invalidEndpoint("reader \(readerName): baud \(settings.baud) is not one of \(Self.speeds.map(\.baud).map(String.init).joined(separator: ", "))")
        }
        let fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            throw .io(reader: readerName, detail: "cannot open \(path): \(Socket.errorText(errno))")
        }
        self.fd = fd
        currentBaud = settings.baud
        currentParity = settings.parity
        do throws(CardIOError) {
            try configure(baud: settings.baud, parity: settings.parity)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit { close() }

    /// Closes the port; later calls throw `cardRemoved`.
    public func close() {
        lock.withLock {
            guard !closed else { return }
            closed = true
            Glibc.close(fd)
        }
    }

    public var baud: Int { lock.withLock { currentBaud } }

    // MARK: termios

    /// The speeds Linux termios names (a reader's UART takes one of these; a PPS whose Fi/Di give
    /// another rate is not proposed).
    static let speeds: [(baud: Int, speed: speed_t)] = [
        (1200, speed_t(B1200)), (2400, speed_t(B2400)), (4800, speed_t(B4800)), (9600, speed_t(B9600)),
        (19200, speed_t(B19200)), (38400, speed_t(B38400)), (57600, speed_t(B57600)), (115200, speed_t(B115200)),
        (230400, speed_t(B230400)),
    ]

    static func speed(_ baud: Int) -> speed_t? { speeds.first { $0.baud == baud }?.speed }

    /// The baud rates a port can be set to.
    public static var supportedBaudRates: [Int] { speeds.map(\.baud) }

    /// Raw mode (no line discipline, no translation, no signals), CS8, parity, stop bits, the
    /// receiver on, modem status lines ignored for open/close (CLOCAL).
    func configure(baud: Int, parity: SerialSettings.Parity) throws(CardIOError) {
        guard let speed = Self.speed(baud) else {
            throw .io(reader: readerName, detail: "baud \(baud) is not a termios speed")
        }
        var t = termios()
        guard tcgetattr(fd, &t) == 0 else { throw ioError("tcgetattr") }
        cfmakeraw(&t)
        t.c_cflag &= ~(tcflag_t(CSIZE) | tcflag_t(PARENB) | tcflag_t(PARODD) | tcflag_t(CSTOPB) | tcflag_t(CRTSCTS))
        t.c_cflag |= tcflag_t(CS8) | tcflag_t(CLOCAL) | tcflag_t(CREAD)
        switch parity {
        case .even: t.c_cflag |= tcflag_t(PARENB)
        case .odd: t.c_cflag |= tcflag_t(PARENB) | tcflag_t(PARODD)
        case .none: break
        }
        if settings.stopBits == 2 { t.c_cflag |= tcflag_t(CSTOPB) }
        // Parity errors are not marked in the data: the protocols see a wrong byte and their own
        // checks (TCK, LRC/CRC, procedure bytes) catch it.
        t.c_iflag &= ~(tcflag_t(INPCK) | tcflag_t(PARMRK) | tcflag_t(IGNPAR))
        // VTIME (5) and VMIN (6) zero: reads return what is there; poll does the waiting.
        t.c_cc.5 = 0
        t.c_cc.6 = 0
        cfsetispeed(&t, speed)
        cfsetospeed(&t, speed)
        guard tcsetattr(fd, TCSANOW, &t) == 0 else { throw ioError("tcsetattr") }
        lock.withLock {
            currentBaud = baud
            currentParity = parity
        }
    }

    /// Changes the speed (after a PPS, or back to the reset speed).
    public func setBaud(_ baud: Int) throws(CardIOError) {
        guard baud != self.baud else { return }
        try configure(baud: baud, parity: lock.withLock { currentParity })
    }

    /// Changes the parity (odd for an inverse-convention card read by a UART set up for even).
    public func setParity(_ parity: SerialSettings.Parity) throws(CardIOError) {
        guard parity != lock.withLock({ currentParity }) else { return }
        try configure(baud: baud, parity: parity)
    }

    // MARK: Bytes

    /// Writes `bytes` and, with echo on, reads them back and checks them: a byte that comes back
    /// different means the line was garbled (or the card talked over us).
    public func write(_ bytes: [UInt8]) throws(CardIOError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&p, 1, 1000)
                    continue
                }
                if errno == EIO || errno == EBADF { throw .cardRemoved(reader: readerName) }
                throw ioError("write")
            }
            offset += n
        }
        lock.withLock { counts.written += bytes.count }
        guard settings.echo else { return }
        let timeout = wireTime(bytes.count) + .milliseconds(100)
        for (i, expected) in bytes.enumerated() {
            let got: UInt8
            do throws(CardIOError) { got = try read(timeout: timeout) } catch {
                if case .timeout = error {
                    throw .io(reader: readerName, detail: "echo: byte \(i + 1) of \(bytes.count) never came back; is echo on for this reader?")
                }
                throw error
            }
            guard got == expected else {
                throw .io(reader: readerName, detail: String(format: "echo: wrote %02X, read back %02X (byte %d of %d): the line is garbled", expected, got, i + 1, bytes.count))
            }
        }
    }

    /// Reads one byte within `timeout`.
    public func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        if pendingIndex < pending.count {
            pendingIndex += 1
            return pending[pendingIndex - 1]
        }
        let deadline = ContinuousClock.now + timeout
        var hungUp = false
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                lock.withLock { counts.read += n }
                pending = Array(buffer[1..<n])
                pendingIndex = 0
                return buffer[0]
            }
            // With VMIN and VTIME 0 a terminal read returns 0 when nothing is there, so 0 is not
            // end of file; a hang-up shows as EIO, or in poll (then bytes still buffered come first).
            if n < 0 {
                switch errno {
                case EINTR: continue
                case EAGAIN: break
                case EIO, EBADF: throw .cardRemoved(reader: readerName)
                default: throw ioError("read")
                }
            }
            if hungUp { throw .cardRemoved(reader: readerName) }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .timeout(reader: readerName, seconds: timeout.seconds) }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(min(Double(Int32.max), (left.seconds * 1000).rounded(.up)))
            let ready = poll(&p, 1, max(1, ms))
            if ready < 0, errno != EINTR { throw ioError("poll") }
            if ready > 0, p.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { hungUp = true }
        }
    }

    /// Drops whatever was received and not read.
    public func discardInput() {
        pending = []
        pendingIndex = 0
        _ = tcflush(fd, TCIFLUSH)
        // A pty's master may still be writing; what arrived before this call is gone either way.
        var byte: UInt8 = 0
        while Glibc.read(fd, &byte, 1) == 1 {}
    }

    /// How long `count` characters take on the wire: 12 etu each (start, 8 data, parity, 2 stop).
    public func wireTime(_ count: Int) -> Duration {
        .nanoseconds(Int64(Double(count) * 12 / Double(baud) * 1e9))
    }

    // MARK: Modem lines

    /// Resets the card: holds the reset line active for `resetPulse`, drops what came meanwhile,
    /// and releases it; the card's ATR follows. With no reset line it does nothing: the card
    /// sends its ATR when it comes up, and what is waiting on the line may be just that.
    public func resetCard() throws(CardIOError) {
        guard let bit = resetBit else { return }
        try setLine(bit, asserted: settings.resetAssertedIsReset)
        Thread.sleep(forTimeInterval: settings.resetPulse.seconds)
        discardInput()
        try setLine(bit, asserted: !settings.resetAssertedIsReset)
    }

    /// Whether a card is in the slot, from the presence line; always true without one.
    public func cardPresent() throws(CardIOError) -> Bool {
        let bit: Int32
        switch settings.presenceLine {
        case .always: return true
        case .cts: bit = TIOCM_CTS
        case .dsr: bit = TIOCM_DSR
        case .dcd: bit = TIOCM_CAR
        }
        return (try modemLines() & bit != 0) == settings.presenceAssertedIsCard
    }

    /// The modem lines as TIOCMGET reports them (TIOCM_* bits).
    func modemLines() throws(CardIOError) -> Int32 {
        var status: Int32 = 0
        guard ioctl(fd, UInt(TIOCMGET), &status) == 0 else { throw modemError("TIOCMGET") }
        return status
    }

    private var resetBit: Int32? {
        switch settings.resetLine {
        case .rts: TIOCM_RTS
        case .dtr: TIOCM_DTR
        case .none: nil
        }
    }

    private func setLine(_ bit: Int32, asserted: Bool) throws(CardIOError) {
        var bits = bit
        guard ioctl(fd, UInt(asserted ? TIOCMBIS : TIOCMBIC), &bits) == 0 else { throw modemError(asserted ? "TIOCMBIS" : "TIOCMBIC") }
    }

    private func modemError(_ call: String) -> CardIOError {
        let code = errno
        if code == ENOTTY || code == EINVAL {
            return .io(reader: readerName, detail: "\(path) has no modem lines (\(call): \(Socket.errorText(code))); a pseudo-terminal has none: set the reset line to none and presence to always")
        }
        return .io(reader: readerName, detail: "\(call) on \(path): \(Socket.errorText(code))")
    }

    private func ioError(_ call: String) -> CardIOError {
        .io(reader: readerName, detail: "\(call) on \(path): \(Socket.errorText(errno))")
    }
}
