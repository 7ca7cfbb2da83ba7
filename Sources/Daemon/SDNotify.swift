import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// systemd's readiness protocol: datagrams like `READY=1` to the socket named by `NOTIFY_SOCKET`
/// (a path, or `@name` in the abstract namespace). Without that variable every call does nothing,
/// so the daemon runs the same outside systemd.
public struct SDNotify: Sendable {
    public let socketPath: String?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when it is set for this process
    /// (`WATCHDOG_PID` absent or ours).
    public static func watchdogInterval(environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let usec = Int64(text), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], let n = Int32(pid), n != getpid() { return nil }
        return .microseconds(usec / 2)
    }

    /// Sends `state` (e.g. "READY=1\nSTATUS=serving"); returns false when there is no socket or
    /// the send failed (systemd then sees no notification, which it reports itself).
    @discardableResult
    public func send(_ state: String) -> Bool {
        guard let socketPath else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        // "@name" is an abstract socket: its name starts with a NUL byte.
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.enumerated() { raw[i] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path.first == 0 ? 0 : 1))
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, sa, length) }
            }
        }
        return sent == bytes.count
    }
}
