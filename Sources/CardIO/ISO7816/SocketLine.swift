#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A `CardLine` over one end of a Unix stream socket pair: the byte channel between a terminal
/// and a `CardSimulator` in tests and benchmarks, with the same semantics as a pty (bytes arrive
/// in bursts, a closed peer reads as EOF).
///
/// One thread reads and writes; `close()` may come from any thread: it only shuts the socket
/// down, which wakes a blocked read with EOF, and the descriptor is closed when the line goes.
public final class SocketLine: CardLine, @unchecked Sendable {
    // Unchecked: `fd` and `readerName` never change; `buffer` belongs to the one reading thread;
    // `closed` is a lock.
    public let readerName: String
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var position = 0
    private let closed = Locked(false)

    private init(fd: Int32, readerName: String) {
        self.fd = fd
        self.readerName = readerName
    }

    deinit { closeDescriptor(fd) }

    /// Two connected lines: what one writes, the other reads.
    public static func pair(readerName: String = "simulator", cardName: String = "card") throws(CardIOError) -> (reader: SocketLine, card: SocketLine) {
        var fds: [Int32] = [-1, -1]
        #if canImport(Darwin)
        let type = SOCK_STREAM
        #else
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #endif
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else {
            throw .io(reader: readerName, detail: "socketpair failed: \(Socket.errorText(errno))")
        }
        return (SocketLine(fd: fds[0], readerName: readerName), SocketLine(fd: fds[1], readerName: cardName))
    }

    public func write(_ bytes: [UInt8]) throws(CardIOError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + done, bytes.count - done, Socket.sendFlags) }
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                let code = errno
                if code == EPIPE || code == ECONNRESET || code == ENOTCONN || isClosed {
                    throw .cardRemoved(reader: readerName)
                }
                throw .io(reader: readerName, detail: "write failed: \(Socket.errorText(code))")
            }
        }
    }

    public func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        if position < buffer.count {
            defer { position += 1 }
            return buffer[position]
        }
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - ContinuousClock.now
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = left <= .zero ? 0 : Int32(min((left.seconds * 1000).rounded(.up), 86_400_000))
            let ready = poll(&p, 1, milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                throw .io(reader: readerName, detail: "poll failed: \(Socket.errorText(errno))")
            }
            if ready == 0 {
                if ContinuousClock.now < deadline { continue }
                throw .timeout(reader: readerName, seconds: timeout.seconds)
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer = Array(chunk[1..<n])
                position = 0
                return chunk[0]
            }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            throw .cardRemoved(reader: readerName)
        }
    }

    public func discardInput() {
        buffer = []
        position = 0
        var chunk = [UInt8](repeating: 0, count: 4096)
        while chunk.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }

    /// Hangs up: the peer reads EOF and its writes fail, as when a card leaves the reader.
    public func close() {
        closed.withLock { isClosed in
            guard !isClosed else { return }
            isClosed = true
            _ = shutdown(fd, Int32(SHUT_RDWR))
        }
    }

    /// Whether `close()` was called on this end.
    public var isClosed: Bool { closed.withLock { $0 } }
}
