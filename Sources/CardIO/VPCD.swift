// The vpcd protocol, as vsmartcard implements it. Checked against frankmorgner/vsmartcard:
// virtualsmartcard/src/vpcd/vpcd.c and vpcd.h (the reader side, loaded into pcscd through
// src/ifd-vpcd/ifd-vpcd.c) and src/vpicc/virtualsmartcard/VirtualSmartcard.py (class VirtualICC,
// the card side, "vicc").
//
// - Framing: every message, either way, is a 2-byte big-endian length (`htons`) then that many
//   bytes. `sendToVICC` refuses a payload over 0xFFFF with EINVAL; `recvFromVICC` reads the two
//   length bytes, then the payload, each with MSG_WAITALL.
// - The reader always speaks first; the card only answers.
// - Controls are 1-byte payloads (VPCD_CTRL_LEN = 1): VPCD_CTRL_OFF 0x00, VPCD_CTRL_ON 0x01,
//   VPCD_CTRL_RESET 0x02 get no reply; VPCD_CTRL_ATR 0x04 is answered with the ATR. There are no
//   other controls. vicc.py logs and ignores an unknown control byte and a zero-length message.
// - Power: pcscd's IFDHPowerICC sends ON (power up) or RESET (reset) and then asks for the ATR
//   with 0x04; power down sends OFF alone.
// - Presence: there is no presence message. IFDHICCPresence calls vicc_present(), which accepts a
//   pending connection if there is none and then sends GET ATR (0x04): no reply, an error or an
//   empty ATR means "no card". So pcscd polls with 0x04 at any time, powered or not, and a vicc
//   must always answer it (vicc.py does). This reader does not poll: it sees a card's socket
//   close through poll(POLLRDHUP), which costs no traffic.
// - Anything longer than one byte is a C-APDU passed through verbatim; the reply is the R-APDU,
//   data ‖ SW1 SW2. vpcd does not check the reply's length: an empty reply reads as 0 bytes, which
//   vicc_transmit treats as failure.
// - Errors: on any failed send or receive (and a 0-byte reply), vpcd closes the card's socket
//   (vicc_eject), which is a removal; the next vicc can then connect. vpcd waits for a reply
//   forever (blocking recv, no timeout).
// - Transport: vpcd listens on TCP, INADDR_ANY, port 35963 (VPCDPORT) + slot, backlog 0, one
//   vicc per slot; a "reverse" mode has vpcd connect to a listening vicc instead.
//
// Where this implementation differs, on purpose: it listens on a Unix socket (mode 0660) and only
// optionally on TCP, bound to loopback; a card silent past the response timeout is ejected rather
// than waited for; an empty or SW-less reply and a truncated frame are reported as malformed
// frames; a second card connecting while one is present is refused (closed), not left queued.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// vpcd's 1-byte control messages (VPCD_CTRL_* in vpcd.h).
enum VPCDControl: UInt8 {
    case powerOff = 0x00
    case powerOn = 0x01
    case reset = 0x02
    case getATR = 0x04
}

/// close(2), for types whose own `close()` hides it.
func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

/// connect(2), for types whose own `connect` hides it.
func connectDescriptor(_ fd: Int32, _ address: UnsafePointer<sockaddr>?, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}

/// The largest payload a 2-byte length can announce.
let vpcdMaxPayload = 0xFFFF

/// A value behind an `NSLock`; `Synchronization.Mutex` would do, but needs macOS 15 and the
/// package still declares macOS 14.
final class Locked<Value>: @unchecked Sendable {
    // Unchecked: `value` is only touched inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Thin wrappers over the POSIX calls the vpcd link needs. They return outcomes rather than
/// throwing, so each caller maps a failure to the `CardIOError` that fits where it happened.
enum Socket {
    static let streamType: Int32 = {
        #if canImport(Darwin)
        SOCK_STREAM
        #else
        Int32(SOCK_STREAM.rawValue)
        #endif
    }()

    /// Flags for send: no SIGPIPE when the peer is gone (Darwin uses SO_NOSIGPIPE instead).
    static let sendFlags: Int32 = {
        #if canImport(Darwin)
        0
        #else
        Int32(MSG_NOSIGNAL)
        #endif
    }()

    static let waitAll = Int32(MSG_WAITALL)

    /// The events to ask for to learn of a hang-up without waking on every incoming byte:
    /// POLLRDHUP (0x2000 on Linux), which Glibc's module leaves out as a _GNU_SOURCE name.
    static let hangupRequest: Int16 = {
        #if os(Linux)
        0x2000
        #else
        0
        #endif
    }()

    /// The poll events that mean the peer has gone (or we shut the socket down ourselves).
    static let hangupEvents: Int16 = Int16(POLLHUP | POLLERR | POLLNVAL) | hangupRequest

    static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// A new stream socket that children (a callback command the daemon runs) do not inherit.
    static func makeStream(family: Int32) -> Int32 {
        #if canImport(Darwin)
        let fd = socket(family, streamType, 0)
        if fd >= 0 {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        return fd
        #else
        return socket(family, streamType | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
    }

    /// A `sockaddr_un` for `path`, or nil when the path does not fit (108 bytes with its NUL on Linux).
    static func unixAddress(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// The longest Unix socket path the kernel accepts.
    static let maxUnixPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    static func bindUnix(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
        var address = address
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    static func connectUnix(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
        var address = address
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    /// Sets SO_RCVTIMEO and SO_SNDTIMEO: a blocking call then fails with EAGAIN after `seconds`.
    /// Set once per connection, so the exchange itself needs no poll() per read.
    static func setTimeouts(_ fd: Int32, seconds: Double) {
        let whole = seconds.rounded(.down)
        var tv = timeval()
        tv.tv_sec = .init(whole)
        tv.tv_usec = .init(((seconds - whole) * 1_000_000).rounded())
        if tv.tv_sec == 0 && tv.tv_usec == 0 { tv.tv_usec = 1 }  // 0 would mean "never"
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// TCP_NODELAY: every frame is one write followed by a wait for the answer, the pattern where
    /// Nagle's algorithm and delayed ACKs would add tens of milliseconds.
    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// TCP_QUICKACK, re-armed before every read: the kernel falls back to delayed ACKs after a
    /// while, and vpcd (which waits for the ACK of its frame before sending the next) then pays
    /// about 40 ms per APDU. Linux-only option number 12; a no-op elsewhere and on Unix sockets.
    static func quickAck(_ fd: Int32) {
        #if os(Linux)
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), 12, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    static func setBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0, flags & O_NONBLOCK != 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    enum ReadOutcome: Equatable {
        case complete
        /// The peer closed (or we shut the socket down) after `received` bytes.
        case closed(received: Int)
        /// SO_RCVTIMEO (or the deadline) passed after `received` bytes.
        case timedOut(received: Int)
        case failed(errno: Int32, received: Int)
    }

    /// Reads exactly `buffer.count` bytes. With a deadline, a card trickling bytes cannot stretch
    /// the wait past it by more than one socket timeout.
    static func readExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer,
                            deadline: ContinuousClock.Instant? = nil) -> ReadOutcome {
        var received = 0
        while received < buffer.count {
            let n = recv(fd, buffer.baseAddress! + received, buffer.count - received, waitAll)
            if n > 0 {
                received += n
                if received < buffer.count, let deadline, ContinuousClock.now >= deadline {
                    return .timedOut(received: received)
                }
                continue
            }
            if n == 0 { return .closed(received: received) }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .timedOut(received: received) }
            return .failed(errno: code, received: received)
        }
        return .complete
    }

    enum WriteOutcome: Equatable {
        case complete
        case timedOut
        case failed(errno: Int32)
    }

    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> WriteOutcome {
        var sent = 0
        while sent < buffer.count {
            let n = send(fd, buffer.baseAddress! + sent, buffer.count - sent, sendFlags)
            if n >= 0 {
                sent += n
                continue
            }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .timedOut }
            return .failed(errno: code)
        }
        return .complete
    }

    /// Writes one vpcd frame (length then payload) in a single send, so the peer's first read
    /// usually finds the whole frame. The caller has checked `payload.count <= vpcdMaxPayload`.
    static func writeFrame(_ fd: Int32, _ payload: [UInt8]) -> WriteOutcome {
        withUnsafeTemporaryAllocation(byteCount: payload.count + 2, alignment: 1) { frame in
            frame[0] = UInt8(truncatingIfNeeded: payload.count >> 8)
            frame[1] = UInt8(truncatingIfNeeded: payload.count)
            payload.withUnsafeBytes { source in
                if let base = source.baseAddress { (frame.baseAddress! + 2).copyMemory(from: base, byteCount: source.count) }
            }
            return writeAll(fd, UnsafeRawBufferPointer(frame))
        }
    }

    /// Reads one 2-byte frame length.
    static func readLength(_ fd: Int32, deadline: ContinuousClock.Instant? = nil) -> (ReadOutcome, Int) {
        var header: (UInt8, UInt8) = (0, 0)
        let outcome = withUnsafeMutableBytes(of: &header) { readExactly(fd, into: $0, deadline: deadline) }
        return (outcome, Int(header.0) << 8 | Int(header.1))
    }

    /// Reads a payload of `count` bytes.
    static func readPayload(_ fd: Int32, count: Int, deadline: ContinuousClock.Instant? = nil) -> ([UInt8], ReadOutcome) {
        var outcome = ReadOutcome.complete
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            outcome = readExactly(fd, into: UnsafeMutableRawBufferPointer(buffer), deadline: deadline)
            switch outcome {
            case .complete: initialized = count
            case .closed(let n), .timedOut(let n), .failed(_, let n): initialized = n
            }
        }
        return (bytes, outcome)
    }
}
