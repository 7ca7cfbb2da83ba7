#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A pcscd of one's own, for tests and `cardbench bench pcsc`: Debian's `/usr/sbin/pcscd` with a
/// reader configuration holding only vsmartcard's vpcd on a chosen port pair, behind a socket in
/// a directory of its own.
///
/// pcscd's socket path is compiled in (`/run/pcscd/pcscd.comm`), and only clients read
/// `PCSCLITE_CSOCK_NAME`; so pcscd is started through `systemd-socket-activate` on the private
/// path, which a system pcscd (or its socket unit) never sees. A socket-activated pcscd skips the
/// "another pcscd is running" check and, stopping, removes only /run/pcscd/pcscd.pid. It starts at
/// the first client connection; vpcd's ports open then. It must run as root (it writes that pid
/// file).
public final class PrivatePCSCD: @unchecked Sendable {
    // Unchecked: `process` is replaced only by start/stop, which callers do not race.
    /// The directory holding the socket and the reader configuration.
    public let directory: String
    /// The socket clients reach it at (`PCSCLITE_CSOCK_NAME`).
    public let socket: String
    /// vpcd's first slot listens on this port (reader `<name> 00 00`), the second on the next.
    public let port: UInt16
    /// The readers' name (vpcd's FRIENDLYNAME): `<name> 00 00` and `<name> 00 01`.
    public let readerName: String
    /// pcscd's process id while it runs. Not a Foundation `Process`: pcscd closes the descriptors
    /// it inherits, and Foundation takes its monitoring socket closing for the exit and blocks
    /// in waitpid, hanging every later `Process` of the program.
    private var pid: pid_t?
    private let log: String

    /// The programs a private pcscd needs, and what is missing of them (empty when all are there).
    public static var missing: [String] {
        var missing: [String] = []
        if getuid() != 0 { missing.append("root (pcscd writes /run/pcscd/pcscd.pid)") }
        for path in ["/usr/sbin/pcscd", "/usr/lib/pcsc/drivers/serial/libifdvpcd.so", "/usr/bin/systemd-socket-activate"]
        where !FileManager.default.fileExists(atPath: path) {
            missing.append(path)
        }
        return missing
    }

    /// Writes the configuration (nothing runs yet).
    /// - Parameters:
    ///   - directory: an existing directory; the socket path must fit in 107 bytes.
    ///   - port: vpcd's first port, or nil for a free pair found now.
    public init(directory: String, port: UInt16? = nil, readerName: String = "Cardbench PCD") throws {
        self.directory = directory
        self.socket = directory + "/pcscd.comm"
        self.readerName = readerName
        self.port = try port ?? Self.freePortPair()
        log = directory + "/pcscd.log"
        let conf = directory + "/reader.conf.d"
        try FileManager.default.createDirectory(atPath: conf, withIntermediateDirectories: true)
        try """
        FRIENDLYNAME "\(readerName)"
        DEVICENAME   /dev/null:0x\(String(self.port, radix: 16))
        LIBPATH      /usr/lib/pcsc/drivers/serial/libifdvpcd.so
        CHANNELID    0x\(String(self.port, radix: 16))

        """.write(toFile: conf + "/vpcd", atomically: true, encoding: .utf8)
    }

    /// `PCSCLITE_CSOCK_NAME` for a client process.
    public var environment: [String: String] { ["PCSCLITE_CSOCK_NAME": socket] }

    /// The full name of vpcd's slot `slot` (0 or 1).
    public func reader(slot: Int = 0) -> String { "\(readerName) 00 0\(slot)" }

    /// What pcscd logged (with `--debug`).
    public var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Starts pcscd behind the socket, wakes it with a connection, and waits until vpcd listens
    /// (on a loaded 2-core machine, with every test spawning processes, that has taken over 30 s).
    public func start(timeout: Double = 120) throws {
        try? FileManager.default.removeItem(atPath: socket)
        let arguments = ["/usr/bin/systemd-socket-activate", "-l", socket, "/usr/sbin/pcscd", "--foreground", "--debug",
                         "--config", directory + "/reader.conf.d"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let rv = posix_spawn(&child, arguments[0], &actions, nil, argv, environ)
        guard rv == 0 else { throw failure("posix_spawn: \(String(cString: strerror(rv)))") }
        pid = child
        let deadline = Date(timeIntervalSinceNow: timeout)
        // A start that fails stops what it started: a pcscd left behind would hold the next one's place.
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, isRunning else { stop(); throw failure("its socket \(socket) did not appear") }
            usleep(10_000)
        }
        // The first connection execs pcscd, which then opens vpcd's ports. The socket's file
        // appears when it is bound, a moment before it listens: a knock refused in between
        // execs nothing, so it is repeated until one is taken.
        var knocked = knock()
        while !Self.isListening(port) {
            guard Date() < deadline, isRunning else {
                let failed = failure("vpcd did not listen on port \(port)\(knocked ? "" : " (no connection to \(socket) was taken)")")
                stop()
                throw failed
            }
            usleep(20_000)
            if !knocked { knocked = knock() }
        }
    }

    /// Whether the process started last still runs (it is reaped once it has exited).
    private var isRunning: Bool {
        guard let pid else { return false }
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Stops pcscd (SIGTERM, then SIGKILL after 5 s); readers, contexts and vpcd's cards go with it.
    public func stop() {
        guard let child = pid else { return }
        pid = nil
        var status: Int32 = 0
        if waitpid(child, &status, WNOHANG) == 0 {
            kill(child, SIGTERM)
            let deadline = Date(timeIntervalSinceNow: 5)
            while waitpid(child, &status, WNOHANG) == 0 {
                if Date() > deadline {
                    kill(child, SIGKILL)
                    waitpid(child, &status, 0)
                    break
                }
                usleep(10_000)
            }
        }
        try? FileManager.default.removeItem(atPath: socket)
    }

    deinit { stop() }

    private func failure(_ what: String) -> CardIOError {
        .io(reader: "pcscd", detail: "a private pcscd did not start: \(what); log: \(logText.suffix(800))")
    }

    /// Connects to the socket and hangs up: socket activation execs pcscd on the first connection.
    /// Connects to pcscd's socket and hangs up: whether the connection was taken.
    private func knock() -> Bool {
        guard let address = Socket.unixAddress(socket) else { return false }
        let fd = Socket.makeStream(family: AF_UNIX)
        guard fd >= 0 else { return false }
        defer { closeDescriptor(fd) }
        return Socket.connectUnix(fd, address) == 0
    }

    /// Whether a TCP port is in LISTEN state, from /proc/net/tcp: connecting to vpcd's port to
    /// find out would count as a card insertion.
    public static func isListening(_ port: UInt16) -> Bool {
        let hex = String(format: ":%04X", port)
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                if fields.count > 3, fields[1].hasSuffix(hex), fields[3] == "0A" { return true }
            }
        }
        return false
    }

    /// Two consecutive free TCP ports (vpcd binds both slots on all addresses), below the
    /// kernel's ephemeral range: a port is free when looked at and bound by pcscd a moment later,
    /// and in between any outgoing connection of a busy machine could take one from that range.
    static func freePortPair() throws -> UInt16 {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) } ?? []
        let ephemeralStart = range.first ?? 32_768
        let top = UInt16(clamping: max(ephemeralStart - 2, 12_000))
        for _ in 0..<200 {
            let first = UInt16.random(in: 10_000...top)
            if isFree(first), isFree(first + 1) { return first }
        }
        throw CardIOError.io(reader: "pcscd", detail: "no two consecutive free TCP ports found for vpcd")
    }

    private static func isFree(_ port: UInt16) -> Bool {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = INADDR_ANY
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
