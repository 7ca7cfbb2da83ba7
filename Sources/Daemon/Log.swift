import Foundation
import Logging

/// The daemon's and the tool's log messages. Under systemd, when standard error is the journal
/// (`JOURNAL_STREAM` names it), each message goes to journald's native socket as fields:
/// `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `CODE_FILE`/`CODE_LINE`/`CODE_FUNC`, and each
/// swift-log metadata key as a `CARDBENCH_<KEY>` field (`journalctl CARDBENCH_TERMINAL=bench1`).
/// Otherwise, or when the socket refuses a message, one line per message on standard error,
/// `label: message key=value…`, with its sd-daemon(3) priority in front (`<4>` for a warning)
/// when standard error is the journal, so `journalctl -p warning` still finds the warnings.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let journal: Bool
    let native: JournalSocket?

    /// `journalSocket`: the native socket to write to; by default journald's, when standard error
    /// is the journal stream `JOURNAL_STREAM` names (as systemd.exec(5) asks a service to check).
    public init(label: String, environment: [String: String] = ProcessInfo.processInfo.environment, journalSocket: String? = nil) {
        self.label = label
        journal = environment["JOURNAL_STREAM"] != nil
        if let journalSocket {
            native = JournalSocket(path: journalSocket)
        } else if let stream = environment["JOURNAL_STREAM"], Self.isStandardError(stream) {
            native = JournalSocket.shared
        } else {
            native = nil
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let given = event.metadata { merged.merge(given) { _, new in new } }
        let message = "\(event.message)"
        if let native {
            var fields: [(String, String)] = [
                ("MESSAGE", message), ("PRIORITY", String(Self.priority(event.level))), ("SYSLOG_IDENTIFIER", label),
                ("CODE_FILE", event.file), ("CODE_LINE", String(event.line)), ("CODE_FUNC", event.function),
            ]
            for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
                if let name = JournalSocket.fieldName(key) { fields.append((name, "\(value)")) }
            }
            if native.send(JournalSocket.datagram(fields)) { return }
        }
        FileHandle.standardError.write(Data(line(event.level, message, metadata: merged).utf8))
    }

    /// The line written for a message at `level`.
    func line(_ level: Logger.Level, _ message: String, metadata: Logger.Metadata = [:]) -> String {
        let fields = metadata.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        return (journal ? "<\(Self.priority(level))>" : "") + "\(label): \(message)\(fields)\n"
    }

    /// syslog's priority for a swift-log level.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Whether `JOURNAL_STREAM` (`device:inode`) is this process's standard error: a child that
    /// inherited the variable but writes elsewhere (a terminal, a file) must not use the journal.
    static func isStandardError(_ stream: String) -> Bool {
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }

    /// Makes every `Logger` of this process write such messages, labelled `label` (the program's name).
    public static func bootstrap(_ label: String) {
        LoggingSystem.bootstrap { _ in LineLogHandler(label: label) }
    }
}

/// journald's native protocol without libsystemd (systemd's "Native Journal Protocol"): one
/// datagram per entry on a Unix datagram socket, each field `NAME=value\n`, or, for a value
/// holding a line break, `NAME\n`, its length as 64-bit little-endian, the value and `\n`.
final class JournalSocket: Sendable {
    static let shared = JournalSocket(path: "/run/systemd/journal/socket")

    let path: String
    private let descriptor: Int32

    init?(path: String) {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        self.path = path
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// Sends one entry; false when journald is not there or refuses it (too large, say).
    func send(_ datagram: [UInt8]) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (i, byte) in path.utf8.enumerated() { buffer[i] = byte }
        }
        let sent = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        return sent == datagram.count
    }

    /// The entry for `fields`, in order.
    static func datagram(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        for (name, value) in fields {
            out += Array(name.utf8)
            if value.utf8.contains(0x0A) {
                out.append(0x0A)
                var length = UInt64(value.utf8.count).littleEndian
                withUnsafeBytes(of: &length) { out += $0 }
                out += Array(value.utf8)
            } else {
                out.append(UInt8(ascii: "="))
                out += Array(value.utf8)
            }
            out.append(0x0A)
        }
        return out
    }

    /// The journal field for a metadata key: `CARDBENCH_` and the key in upper case, any
    /// character other than a letter or digit as `_` (journald takes `A–Z`, `0–9` and `_`, at most
    /// 64 characters); nil for a key that would not fit.
    static func fieldName(_ key: String) -> String? {
        let body = String(key.uppercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) ? $0 : "_" })
        let name = "CARDBENCH_" + body
        return body.isEmpty || name.utf8.count > 64 ? nil : name
    }
}
