#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pseudo-terminal pair, for a card simulator to stand where a serial reader's card would: the
/// simulator holds the master, a `SerialPort` opens `slavePath`. Used by tests and by
/// `cardbench bench serial`.
public final class PseudoTerminal: @unchecked Sendable {
    // Unchecked: `master` is a let; closing is idempotent under the caller's control.
    /// The master side's descriptor.
    public let master: Int32
    /// `/dev/pts/N`.
    public let slavePath: String

    // Linux's ioctls behind posix_openpt/unlockpt/ptsname, which Swift's Glibc module does not
    // import: _IOW('T', 0x31, int) and _IOR('T', 0x30, unsigned int).
    private static let setLock: UInt = 0x4004_5431
    private static let getNumber: UInt = 0x8004_5430

    /// Opens /dev/ptmx, unlocks the slave and puts the master in raw mode, so bytes pass both
    /// ways unchanged.
    public init() throws(CardIOError) {
        let fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(reader: "pty", detail: "cannot open /dev/ptmx: \(Socket.errorText(errno))") }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(fd, Self.setLock, &unlock) == 0, ioctl(fd, Self.getNumber, &number) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .io(reader: "pty", detail: "cannot unlock a pty: \(Socket.errorText(code))")
        }
        var t = termios()
        tcgetattr(fd, &t)
        cfmakeraw(&t)
        tcsetattr(fd, TCSANOW, &t)
        master = fd
        slavePath = "/dev/pts/\(number)"
    }

    /// The card's side in errors.
    public var readerName: String { "pty card" }

    /// Writes all of `bytes` to the master (to whoever opened the slave).
    public func write(_ bytes: [UInt8]) throws(CardIOError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(master, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw .cardRemoved(reader: readerName)
            }
            offset += n
        }
    }

    /// Reads one byte within `timeout`: the card side of a `CardLine`.
    public func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        let deadline = ContinuousClock.now + timeout
        while true {
            var byte: UInt8 = 0
            let n = Glibc.read(master, &byte, 1)
            if n == 1 { return byte }
            if n < 0, errno != EAGAIN, errno != EINTR { throw .cardRemoved(reader: readerName) }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .timeout(reader: readerName, seconds: timeout.seconds) }
            var p = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(max(1, min(1000, left.seconds * 1000))))
            // A master whose slave is not open reports POLLHUP: the terminal is not there yet, or
            // closed its port; keep waiting for it within the timeout.
            if ready > 0, p.revents & Int16(POLLIN) == 0 { usleep(1000) }
        }
    }

    /// Drops what the terminal wrote and the card has not read.
    public func discardInput() { _ = tcflush(master, TCIFLUSH) }

    /// Reads up to `count` bytes within `timeout`; fewer when they do not come or the slave closed.
    public func read(_ count: Int, timeout: Duration) -> [UInt8] {
        var out: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while out.count < count {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var p = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(max(1, min(1000, left.seconds * 1000)))) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: count - out.count)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(master, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            out += buffer.prefix(n)
        }
        return out
    }

    /// Closes the master: the slave side sees a hang-up. Idempotent.
    public func close() {
        closed.withLock { wasClosed in
            guard !wasClosed else { return }
            wasClosed = true
            Glibc.close(master)
        }
    }

    private let closed = Locked(false)
}

extension PseudoTerminal: CardSideLine {}
