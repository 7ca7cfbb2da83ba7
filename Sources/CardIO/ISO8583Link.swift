#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import ISO8583

/// shutdown(2) both ways, for the types whose own `shutdown` hides it.
private func shutdownDescriptor(_ fd: Int32) {
    _ = shutdown(fd, Int32(SHUT_RDWR))
}

/// Why an exchange with an ISO 8583 peer failed.
public enum HostLinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection: resolution failed, refused, or not established in time.
    case connect(String)
    /// The peer sent nothing (or not a whole frame) in time.
    case timedOut
    /// The peer closed the connection.
    case closed
    /// A read or write failed.
    case io(String)
    /// The bytes were not a frame of the configured framing.
    case frame(String)
    /// A listener closed a connection as it came: `limit` connections were open already.
    case refused(limit: Int)

    public var description: String {
        switch self {
        case .connect(let why): "cannot connect: \(why)"
        case .timedOut: "no answer in time"
        case .closed: "the peer closed the connection"
        case .io(let why): why
        case .frame(let why): "not a frame: \(why)"
        case .refused(let limit): "refused: \(limit) connections are open already, the listener's limit"
        }
    }
}

/// One TCP connection carrying framed ISO 8583 messages (either side). Blocking: it is used from a
/// terminal's own thread, or a listener's thread per connection.
public final class FramedConnection: @unchecked Sendable {
    private let fd: Int32
    public let framing: Framing
    /// "127.0.0.1:5000", for messages and logs.
    public let peer: String
    private let closed = Locked(false)

    init(fd: Int32, framing: Framing, peer: String) {
        self.fd = fd
        self.framing = framing
        self.peer = peer
        Socket.setNoDelay(fd)
    }

    deinit { close() }

    /// Connects to `host:port`, giving up after `timeout` (a non-blocking connect and a poll, so an
    /// address that drops packets cannot hold the terminal for the kernel's minutes).
    public static func connect(host: String, port: UInt16, framing: Framing, timeout: Duration) throws(HostLinkError) -> FramedConnection {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Socket.streamType
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw .connect("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        let deadline = ContinuousClock.now + timeout
        var lastError = "connection refused"
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = Socket.makeStream(family: info.pointee.ai_family)
            guard fd >= 0 else { lastError = Socket.errorText(errno); continue }
            Socket.setNonBlocking(fd)
            if connectDescriptor(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 {
                guard errno == EINPROGRESS else {
                    lastError = Socket.errorText(errno)
                    closeDescriptor(fd)
                    continue
                }
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                var ready: Int32
                repeat {
                    let left = max(0, Int32((deadline - ContinuousClock.now) / .milliseconds(1)))
                    ready = poll(&p, 1, left)
                } while ready < 0 && errno == EINTR
                var soError: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
                guard ready > 0, soError == 0 else {
                    lastError = ready == 0 ? "no connection in \(timeout)" : Socket.errorText(soError)
                    closeDescriptor(fd)
                    continue
                }
            }
            Socket.setBlocking(fd)
            return FramedConnection(fd: fd, framing: framing, peer: "\(host):\(port)")
        }
        throw .connect("\(host):\(port): \(lastError)")
    }

    /// Sends one message in a frame (with `tpdu` for NAC).
    public func send(_ message: [UInt8], tpdu: [UInt8] = Framing.defaultTPDU) throws(HostLinkError) {
        let frame: [UInt8]
        do { frame = try framing.frame(message, tpdu: tpdu) } catch { throw .frame(error.description) }
        Socket.setTimeouts(fd, seconds: 10)
        let outcome = frame.withUnsafeBytes { Socket.writeAll(fd, $0) }
        switch outcome {
        case .complete: return
        case .timedOut: throw .io("the peer does not read (send timed out)")
        case .failed(let code): throw .io("send failed: \(Socket.errorText(code))")
        }
    }

    /// Waits up to `within` for the peer to send something (or close): whether it has. A caller
    /// whose timeout is on another clock (a manual one) waits in slices and looks at its clock
    /// between them.
    public func waitReadable(within: Duration) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(clamping: within.components.seconds * 1000 + within.components.attoseconds / 1_000_000_000_000_000)
        return poll(&p, 1, max(0, ms)) > 0
    }

    /// Reads one frame; nil `deadline` waits as long as the peer keeps the connection.
    public func receive(until deadline: ContinuousClock.Instant?) throws(HostLinkError) -> (tpdu: [UInt8]?, message: [UInt8]) {
        func wait() throws(HostLinkError) {
            guard let deadline else {
                // No timeout at all: an idle terminal may keep its connection open for days.
                var never = timeval()
                _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &never, socklen_t(MemoryLayout<timeval>.size))
                return
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .timedOut }
            Socket.setTimeouts(fd, seconds: Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)
        }
        func read(_ n: Int) throws(HostLinkError) -> [UInt8] {
            try wait()
            let (bytes, outcome) = Socket.readPayload(fd, count: n, deadline: deadline)
            switch outcome {
            case .complete: return bytes
            case .closed: throw .closed
            case .timedOut: throw .timedOut
            case .failed(let code, _): throw .io("receive failed: \(Socket.errorText(code))")
            }
        }
        let header = try read(framing.headerLength)
        let length: Int
        do { length = try framing.bodyLength(header) } catch { throw .frame(error.description) }
        let body = length == 0 ? [] : try read(length)
        return framing.split(body)
    }

    /// Closes the connection (once; later calls do nothing). Only the thread that uses the
    /// connection closes it: another thread calls `shutdown()`, so a descriptor number the kernel
    /// hands out again is never read or written by a thread that still holds the old one.
    public func close() {
        closed.withLock { c in
            guard !c else { return }
            c = true
            shutdownDescriptor(fd)
            closeDescriptor(fd)
        }
    }

    /// Ends the connection's traffic from another thread: a thread blocked in `receive` returns
    /// (`closed`), and the owner closes the descriptor.
    public func shutdown() {
        closed.withLock { c in
            if !c { shutdownDescriptor(fd) }
        }
    }
}

