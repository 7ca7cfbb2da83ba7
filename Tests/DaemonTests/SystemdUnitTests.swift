import Foundation
import Testing
@testable import Daemon
#if canImport(Glibc)
import Glibc
#endif

// The shipped systemd unit (systemd/cardbenchd.service), its sysusers.d file and example
// configuration, and the real `cardbenchd` binary speaking the notify protocol to a fake
// NOTIFY_SOCKET as systemd would see it.

// MARK: - Locations

enum Locations {
    /// The directory holding the test bundle: `.build/<configuration>`, where `cardbenchd` is built.
    static let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()

    static var daemon: URL { products.appendingPathComponent("cardbenchd") }

    /// The package root: the first directory above the test bundle holding Package.swift.
    static let repositoryRoot: URL = {
        var directory = products.standardizedFileURL
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) { return directory }
            directory = directory.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    static func file(_ relative: String) -> URL { repositoryRoot.appendingPathComponent(relative) }

    /// An executable on PATH, or nil.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// A fresh directory under /tmp with a short path (socket paths must fit 108 bytes).
final class TemporaryDirectory {
    let url: URL
    var path: String { url.path }

    init() throws {
        var template = Array("/tmp/cbt-XXXXXX".utf8CString)
        let made: String? = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let made else { throw POSIXFailure(call: "mkdtemp", code: errno) }
        url = URL(fileURLWithPath: made)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

struct POSIXFailure: Error, CustomStringConvertible {
    let call: String
    let code: Int32
    var description: String { "\(call): \(String(cString: strerror(code)))" }
}

// MARK: - Running a program

struct ProgramResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs a program to its end (these are short: systemd-analyze, systemd-sysusers).
func runProgram(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> ProgramResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Read both pipes concurrently so neither can fill up and block the program.
    let errData = LockedData()
    let errHandle = err.fileHandleForReading
    let reader = Thread { errData.set(errHandle.readDataToEndOfFile()) }
    reader.start()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !errData.done { usleep(1000) }
    return ProgramResult(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                         stderr: String(decoding: errData.value, as: UTF8.self))
}

final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var finished = false
    func set(_ d: Data) { lock.withLock { data = d; finished = true } }
    var done: Bool { lock.withLock { finished } }
    var value: Data { lock.withLock { data } }
}

// MARK: - A fake NOTIFY_SOCKET

/// A Unix datagram socket bound to a path, as systemd's notify socket is.
final class NotifySocket {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXFailure(call: "socket", code: errno) }
        var address = try sockaddrUn(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw POSIXFailure(call: "bind \(path)", code: code)
        }
    }

    deinit { close(fd) }

    /// The next datagram, or nil when none arrives within `timeout`.
    func receive(timeout: Duration) -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(max(1, min(Double(Int32.max), (Double(left.components.seconds) * 1000 + Double(left.components.attoseconds) / 1e15).rounded(.up))))
            let ready = poll(&entry, 1, ms)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n < 0 { if errno == EAGAIN || errno == EINTR { continue } else { return nil } }
            return String(decoding: buffer[0..<n], as: UTF8.self)
        }
    }

    /// Datagrams until one has a line equal to `line` (returned last), or nil at `timeout`.
    /// Every datagram received is appended to `seen`.
    func receive(until line: String, timeout: Duration, seen: inout [String]) -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let message = receive(timeout: deadline - ContinuousClock.now) else { return nil }
            seen.append(message)
            if message.split(separator: "\n").contains(Substring(line)) { return message }
        }
        return nil
    }
}

func sockaddrUn(_ path: String) throws -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity else { throw POSIXFailure(call: "socket path \(path)", code: ENAMETOOLONG) }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
    }
    return address
}

// MARK: - HTTP over the control socket

struct HTTPReply {
    let status: Int
    let headers: [String: String]
    let body: Data
    var text: String { String(decoding: body, as: UTF8.self) }
    func json() throws -> Any { try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) }
}

/// A Unix stream connection whose every read is bounded by a timeout.
final class UnixConnection {
    private let fd: Int32
    /// Everything read so far.
    private(set) var received = Data()
    private(set) var closedByPeer = false

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXFailure(call: "socket", code: errno) }
        var address = try sockaddrUn(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw POSIXFailure(call: "connect \(path)", code: code)
        }
    }

    deinit { close(fd) }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXFailure(call: "send", code: errno) }
            written += n
        }
    }

    /// Reads until `done(received)` holds (true), the peer closes or `timeout` passes (false).
    @discardableResult
    func read(until done: (Data) -> Bool, timeout: Duration) throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if done(received) { return true }
            if closedByPeer { return false }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&entry, 1, Int32(min(ms, 60_000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 { if errno == EINTR || errno == EAGAIN { continue } else { throw POSIXFailure(call: "recv", code: errno) } }
            if n == 0 { closedByPeer = true } else { received.append(contentsOf: buffer[0..<n]) }
        }
    }

    static func request(_ method: String, _ target: String, body: String?) -> String {
        var request = "\(method) \(target) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        if let body {
            request += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
        } else if method == "POST" {
            request += "Content-Length: 0\r\n"
        }
        return request + "\r\n" + (body ?? "")
    }
}

/// One HTTP/1.1 request over a Unix stream socket, `Connection: close`, every wait bounded.
func unixHTTP(_ socketPath: String, _ method: String, _ target: String, body: String? = nil,
              timeout: Duration = .seconds(10)) throws -> HTTPReply {
    let connection = try UnixConnection(socketPath)
    try connection.send(UnixConnection.request(method, target, body: body))
    let whole = try connection.read(until: { parseHTTP($0, complete: false) != nil }, timeout: timeout)
    // Not whole: either the server closed (a reply without a length ends there) or time ran out.
    guard whole || connection.closedByPeer, let reply = parseHTTP(connection.received, complete: !whole) else {
        throw POSIXFailure(call: "\(method) \(target): no complete reply in \(timeout): \(String(decoding: connection.received, as: UTF8.self).debugDescription)",
                           code: ETIMEDOUT)
    }
    return reply
}

/// A reply once it is whole (Content-Length or chunked); with `complete`, whatever arrived.
func parseHTTP(_ data: Data, complete: Bool) -> HTTPReply? {
    let separator = Data("\r\n\r\n".utf8)
    guard let end = data.range(of: separator) else { return nil }
    let head = String(decoding: data[data.startIndex..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
    let statusParts = head.first?.split(separator: " ") ?? []
    guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
    var headers: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    let rest = Data(data[end.upperBound...])
    if let length = headers["content-length"].flatMap(Int.init) {
        guard rest.count >= length else { return complete ? HTTPReply(status: status, headers: headers, body: rest) : nil }
        return HTTPReply(status: status, headers: headers, body: rest.prefix(length))
    }
    if headers["transfer-encoding"]?.lowercased() == "chunked" {
        var body = Data(), index = rest.startIndex
        while let lineEnd = rest[index...].range(of: Data("\r\n".utf8)) {
            let sizeText = String(decoding: rest[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { break }
            if size == 0 { return HTTPReply(status: status, headers: headers, body: body) }
            let start = lineEnd.upperBound
            guard rest.distance(from: start, to: rest.endIndex) >= size + 2 else { break }
            let chunkEnd = rest.index(start, offsetBy: size)
            body.append(rest[start..<chunkEnd])
            index = rest.index(chunkEnd, offsetBy: 2)
        }
        return complete ? HTTPReply(status: status, headers: headers, body: body) : nil
    }
    return complete ? HTTPReply(status: status, headers: headers, body: rest) : nil
}

// MARK: - The daemon under a fake systemd

/// `cardbenchd` started as systemd would start it (NOTIFY_SOCKET, WATCHDOG_USEC), on its own
/// state and runtime directories, from the repository root (so `Scenarios/cards` is found).
final class DaemonUnderTest {
    let directory: TemporaryDirectory
    let notify: NotifySocket
    let process = Process()
    let runtime: String
    let state: String
    /// Every notification received so far.
    var notifications: [String] = []

    var controlSocket: String { (runtime as NSString).appendingPathComponent("control.sock") }
    var logPath: String { directory.url.appendingPathComponent("daemon.log").path }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// `launcher`: a program run first, which then execs the daemon with its arguments.
    /// `unprivileged`: the directory and the notify socket open to every user, for a launcher
    /// that drops to another user as the unit's User= does.
    /// `controlPlaceholder`: a launcher argument replaced by the control socket's path.
    init(watchdogMicroseconds: Int? = 400_000, launcher: [String] = [], extraArguments: [String] = [], unprivileged: Bool = false,
         controlPlaceholder: String? = nil, extraEnvironment: [String: String] = [:]) throws {
        directory = try TemporaryDirectory()
        notify = try NotifySocket(path: directory.url.appendingPathComponent("notify").path)
        if unprivileged {
            chmod(directory.path, 0o777)
            chmod(notify.path, 0o777)
        }
        runtime = directory.url.appendingPathComponent("run").path
        state = directory.url.appendingPathComponent("state").path
        var environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("CARDBENCH_") && !["RUNTIME_DIRECTORY", "STATE_DIRECTORY", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS"].contains($0.key)
        }
        environment["NOTIFY_SOCKET"] = notify.path
        environment["WATCHDOG_USEC"] = watchdogMicroseconds.map(String.init)
        environment.merge(extraEnvironment) { _, new in new }
        let arguments = ["--state-directory", state, "--runtime-directory", runtime, "--http-port", "0"] + extraArguments
        if let first = launcher.first {
            let control = (runtime as NSString).appendingPathComponent("control.sock")
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = launcher.dropFirst().map { $0 == controlPlaceholder ? control : $0 } + [Locations.daemon.path] + arguments
        } else {
            process.executableURL = Locations.daemon
            process.arguments = arguments
        }
        process.environment = environment
        process.currentDirectoryURL = Locations.repositoryRoot
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = logHandle
        process.standardError = logHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try? logHandle.close()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Waits for a notification line (e.g. `READY=1`); the datagram, or nil at the timeout.
    func waitFor(_ line: String, timeout: Duration) -> String? {
        notify.receive(until: line, timeout: timeout, seen: &notifications)
    }

    /// Every datagram arriving within `duration`.
    func collect(for duration: Duration) -> [String] {
        var got: [String] = []
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline, let m = notify.receive(timeout: deadline - ContinuousClock.now) { got.append(m) }
        notifications += got
        return got
    }

    /// Waits for the process to end; false at the timeout.
    func waitForExit(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline { return false }
            usleep(20_000)
        }
        process.waitUntilExit()
        return true
    }

    func http(_ method: String, _ target: String, body: String? = nil) throws -> HTTPReply {
        try unixHTTP(controlSocket, method, target, body: body)
    }

    /// Starts a daemon and waits for READY=1 (the build's first start can be slow).
    static func ready(launcher: [String] = [], extraArguments: [String] = [], unprivileged: Bool = false,
                      environment: [String: String] = [:]) throws -> DaemonUnderTest {
        let daemon = try DaemonUnderTest(launcher: launcher, extraArguments: extraArguments, unprivileged: unprivileged, extraEnvironment: environment)
        guard daemon.waitFor("READY=1", timeout: .seconds(60)) != nil else {
            throw DaemonStartFailure(log: daemon.log, notifications: daemon.notifications, running: daemon.process.isRunning)
        }
        return daemon
    }

    /// SIGTERM, then STOPPING=1 and an exit, each within `timeout`.
    func stop(timeout: Duration = .seconds(10)) -> (stopping: Bool, exited: Bool) {
        process.terminate()
        let stopping = waitFor("STOPPING=1", timeout: timeout) != nil
        return (stopping, waitForExit(timeout: timeout))
    }
}

struct DaemonStartFailure: Error, CustomStringConvertible {
    let log: String
    let notifications: [String]
    let running: Bool
    var description: String {
        "cardbenchd sent no READY=1 (running: \(running), notifications: \(notifications)); its output:\n\(log)"
    }
}

// MARK: - The unit file

let systemdAnalyze = Locations.executable("systemd-analyze")
let systemdSysusers = Locations.executable("systemd-sysusers")

/// The unit's `Key=value` lines (comments and section headers left out), in order.
func unitSettings(_ text: String) -> [(key: String, value: String)] {
    text.split(separator: "\n").compactMap { raw in
        let line = raw.trimmingCharacters(in: .whitespaces)
        guard !line.isEmpty, !line.hasPrefix("#"), !line.hasPrefix(";"), !line.hasPrefix("["),
              let eq = line.firstIndex(of: "=") else { return nil }
        return (String(line[..<eq]), String(line[line.index(after: eq)...]))
    }
}

@Suite("systemd unit")
struct SystemdUnitTests {
    let unitText: String
    let settings: [(key: String, value: String)]

    init() throws {
        unitText = try String(contentsOf: Locations.file("systemd/cardbenchd.service"), encoding: .utf8)
        settings = unitSettings(unitText)
    }

    func values(_ key: String) -> [String] { settings.filter { $0.key == key }.map(\.value) }

    @Test("the unit carries the readiness, directory, identity and sandboxing settings")
    func keySettings() {
        let expected: [(String, String)] = [
            ("Type", "notify"), ("NotifyAccess", "main"), ("WatchdogSec", "30s"),
            ("ExecStart", "/usr/bin/cardbenchd --config /etc/cardbench/cardbenchd.yaml"),
            ("User", "cardbench"), ("Group", "cardbench"), ("SupplementaryGroups", "dialout"),
            ("ConfigurationDirectory", "cardbench"),
            ("StateDirectory", "cardbench"), ("StateDirectoryMode", "0750"),
            ("RuntimeDirectory", "cardbench"), ("RuntimeDirectoryMode", "0750"),
            ("WorkingDirectory", "/var/lib/cardbench"), ("UMask", "0007"), ("Restart", "on-failure"),
            ("ProtectSystem", "strict"), ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("NoNewPrivileges", "yes"),
            ("ProtectKernelTunables", "yes"), ("ProtectKernelModules", "yes"), ("ProtectControlGroups", "yes"),
            ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6 AF_NETLINK"), ("RestrictNamespaces", "yes"),
            ("LockPersonality", "yes"), ("MemoryDenyWriteExecute", "yes"), ("RestrictRealtime", "yes"),
            ("SystemCallArchitectures", "native"), ("PrivateDevices", "no"), ("DevicePolicy", "closed"),
            ("PrivateMounts", "yes"), ("ProtectProc", "invisible"), ("RemoveIPC", "yes"),
            ("IPAddressDeny", "any"), ("IPAddressAllow", "localhost"),
        ]
        for (key, value) in expected {
            #expect(values(key) == [value], "\(key)=")
        }
        #expect(Set(values("DeviceAllow")) == ["char-ttyS rw", "char-ttyUSB rw", "char-ttyACM rw"])
        // The ledger reads /proc/sys/kernel/random/boot_id (STANs after a restart vs. a reboot).
        #expect(values("ProcSubset").isEmpty)
        #expect(values("SystemCallFilter") == ["@system-service", "~@privileged @resources", "setpriority"])
        // DynamicUser= cannot be combined with a fixed group like dialout.
        #expect(values("DynamicUser").isEmpty)
        #expect(values("WantedBy") == ["multi-user.target"])
    }

    @Test("systemd-analyze verify accepts the unit without a warning",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed"))
    func verify() throws {
        // verify insists that ExecStart's binary exists, so a copy points at the one just built.
        // User=cardbench stays: verify does not look users up (checked on systemd 252: an unknown
        // user is accepted without a message), so nothing else is rewritten.
        #expect(FileManager.default.isExecutableFile(atPath: Locations.daemon.path), "build cardbenchd first")
        let directory = try TemporaryDirectory()
        let copy = unitText.replacingOccurrences(of: "ExecStart=/usr/bin/cardbenchd ",
                                                 with: "ExecStart=\(Locations.daemon.path) ")
        #expect(copy != unitText)
        let path = directory.url.appendingPathComponent("cardbenchd.service").path
        try copy.write(toFile: path, atomically: true, encoding: .utf8)
        // --man=no: the man pages Documentation= names are installed by the package, not here.
        let result = try runProgram(systemdAnalyze!, ["verify", "--man=no", path])
        #expect(result.status == 0, "\(result.stderr)")
        // verify exits 0 even when it ignores a line it cannot parse ("Invalid device rights
        // 'rwx', ignoring."), so any message about our unit fails the test.
        let ours = result.stderr.split(separator: "\n").filter { $0.contains("cardbenchd") || $0.contains(path) }
        #expect(ours.isEmpty, "systemd-analyze verify: \(ours.joined(separator: "\n"))")
    }

    @Test("systemd-analyze verify does report a broken setting (the check above can fail)",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed"))
    func verifyCatchesMistakes() throws {
        let directory = try TemporaryDirectory()
        let broken = unitText.replacingOccurrences(of: "ExecStart=/usr/bin/cardbenchd ", with: "ExecStart=\(Locations.daemon.path) ")
            .replacingOccurrences(of: "DeviceAllow=char-ttyS rw", with: "DeviceAllow=char-ttyS rwx")
        let path = directory.url.appendingPathComponent("cardbenchd.service").path
        try broken.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try runProgram(systemdAnalyze!, ["verify", "--man=no", path])
        #expect(result.stderr.contains("cardbenchd.service"), "\(result.stderr)")
    }

    @Test("sysusers.d creates the cardbench user and group and adds it to dialout",
          .enabled(if: systemdSysusers != nil, "systemd-sysusers is not installed"))
    func sysusers() throws {
        let root = try TemporaryDirectory()
        let etc = root.url.appendingPathComponent("etc")
        try FileManager.default.createDirectory(at: etc, withIntermediateDirectories: true)
        // A Debian base: dialout already exists with its fixed GID.
        try "root:x:0:0:root:/root:/bin/bash\n".write(to: etc.appendingPathComponent("passwd"), atomically: true, encoding: .utf8)
        try "root:x:0:\ndialout:x:20:\n".write(to: etc.appendingPathComponent("group"), atomically: true, encoding: .utf8)
        let conf = Locations.file("systemd/sysusers.d/cardbench.conf").path
        let result = try runProgram(systemdSysusers!, ["--root=\(root.path)", conf])
        #expect(result.status == 0, "\(result.stderr)")
        let passwd = try String(contentsOf: etc.appendingPathComponent("passwd"), encoding: .utf8)
        let group = try String(contentsOf: etc.appendingPathComponent("group"), encoding: .utf8)
        let user = passwd.split(separator: "\n").first { $0.hasPrefix("cardbench:") }.map { $0.split(separator: ":", omittingEmptySubsequences: false) }
        #expect(user?.count == 7)
        #expect(user?[5] == "/var/lib/cardbench")
        #expect(user?[6] == "/usr/sbin/nologin")
        #expect(group.split(separator: "\n").contains("dialout:x:20:cardbench"), "\(group)")
        #expect(group.split(separator: "\n").contains { $0.hasPrefix("cardbench:x:") })
        // A system user: UID below 1000.
        #expect(user.flatMap { Int($0[2]) }.map { $0 < 1000 } == true)
    }

    @Test("systemd-analyze security rates the unit's exposure at most 2.0",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed"))
    func exposure() throws {
        let result = try runProgram(systemdAnalyze!, ["security", "--offline=yes", "--no-pager", Locations.file("systemd/cardbenchd.service").path])
        let line = result.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }.map(String.init) ?? ""
        let level = line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
        #expect(level != nil, "no rating in: \(result.stdout.suffix(400)) \(result.stderr)")
        #expect((level ?? 10) <= 2.0, "\(line)")
    }

    @Test("the example configuration loads, relies on the embedded profiles and leaves the directories to systemd")
    func exampleConfiguration() async throws {
        let file = Locations.file("systemd/cardbenchd.yaml").path
        let environment = ["STATE_DIRECTORY": "/var/lib/cardbench", "RUNTIME_DIRECTORY": "/run/cardbench"]
        let configuration = try await DaemonConfiguration.load(file: file, environment: environment)
        #expect(configuration.cardProfiles.isEmpty && configuration.capkFiles.isEmpty, "the embedded profiles and keys")
        #expect(configuration.stateDirectory == "/var/lib/cardbench")
        #expect(configuration.effectiveRuntimeDirectory == "/run/cardbench")
        #expect(DaemonServer.controlSocket(runtimeDirectory: configuration.effectiveRuntimeDirectory) == "/run/cardbench/control.sock")
        #expect(configuration.httpPort == nil, "TCP is off under systemd: the socket's group is the permission")
        #expect(configuration.terminals == [TerminalSettings(name: "bench1", tid: "10000001", reader: .virtual(name: "bench1"))])
        #expect(configuration.callbacks.allowedHosts == ["127.0.0.1", "localhost", "::1"])
        #expect(configuration.manualClock == false)
        #expect(configuration.demoCard == nil)
    }

    @Test("a missing --config file is a configuration error (exit 2), which the unit does not restart on")
    func missingConfiguration() throws {
        let directory = try TemporaryDirectory()
        let result = try runProgram(Locations.daemon.path, ["--config", directory.url.appendingPathComponent("absent.yaml").path,
                                                            "--state-directory", directory.path + "/state"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("absent.yaml does not exist"), "\(result.stderr)")
        #expect(values("RestartPreventExitStatus").first?.split(separator: " ").contains("2") == true)
    }
}

// MARK: - The notify protocol, end to end

@Suite("cardbenchd under a fake systemd", .serialized)
struct NotifyProtocolTests {
    @Test("READY=1 once the control socket answers, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1 and exit 0 on SIGTERM")
    func readyWatchdogStopping() throws {
        let daemon = try DaemonUnderTest.ready()
        let readyAt = ContinuousClock.now

        // Ready means bound: the socket is there, 0660, and answers.
        var info = stat()
        #expect(stat(daemon.controlSocket, &info) == 0, "no \(daemon.controlSocket)")
        #expect(info.st_mode & 0o170000 == 0o140000, "not a socket")
        #expect(info.st_mode & 0o777 == 0o660, "mode \(String(info.st_mode & 0o777, radix: 8))")
        let health = try daemon.http("GET", "/v1/health")
        #expect(health.status == 200, "\(health.text)")
        let object = try health.json() as? [String: Any]
        #expect(object?["status"] as? String == "ok")
        #expect(object?["terminals"] as? Int == 1)
        // The READY datagram also says what the daemon is doing.
        #expect(daemon.notifications.last?.contains("STATUS=serving 1 terminal(s)") == true)
        // --http-port 0: the chosen port is written for clients to find.
        let port = try String(contentsOfFile: daemon.runtime + "/http.port", encoding: .utf8)
        #expect(UInt16(port.trimmingCharacters(in: .whitespacesAndNewlines)).map { $0 > 0 } == true)

        // WATCHDOG_USEC=400000: a ping every 200 ms.
        let watchdog = daemon.collect(for: .milliseconds(1100) - (ContinuousClock.now - readyAt))
            .filter { $0.split(separator: "\n").contains("WATCHDOG=1") }
        #expect(watchdog.count >= 2, "WATCHDOG=1 in ~1 s: \(watchdog.count); all: \(daemon.notifications)")
        #expect(watchdog.count <= 8, "pings far too often: \(watchdog.count)")

        let (stopping, exited) = daemon.stop(timeout: .seconds(10))
        #expect(stopping, "no STOPPING=1 after SIGTERM; got \(daemon.notifications); log:\n\(daemon.log)")
        #expect(exited, "still running 10 s after SIGTERM")
        if exited {
            #expect(daemon.process.terminationReason == .exit)
            #expect(daemon.process.terminationStatus == 0, "log:\n\(daemon.log)")
            // A clean stop takes its socket away, so the next start finds none.
            #expect(!FileManager.default.fileExists(atPath: daemon.controlSocket))
        }
    }

    @Test("with a long WatchdogSec, SIGTERM still stops the daemon at once, not after the next ping")
    func stopsWithALongWatchdog() throws {
        // WATCHDOG_USEC of 120 s: a ping every 60 s.
        let daemon = try DaemonUnderTest(watchdogMicroseconds: 120_000_000)
        #expect(daemon.waitFor("READY=1", timeout: .seconds(60)) != nil, "log:\n\(daemon.log)")
        let (stopping, exited) = daemon.stop(timeout: .seconds(10))
        #expect(stopping && exited, "log:\n\(daemon.log)")
        #expect(daemon.process.terminationStatus == 0, "log:\n\(daemon.log)")
    }

    @Test("without WATCHDOG_USEC there are no watchdog pings")
    func noWatchdogWithoutUSEC() throws {
        let daemon = try DaemonUnderTest(watchdogMicroseconds: nil)
        #expect(daemon.waitFor("READY=1", timeout: .seconds(60)) != nil, "log:\n\(daemon.log)")
        _ = daemon.collect(for: .milliseconds(500))
        #expect(!daemon.notifications.contains { $0.split(separator: "\n").contains("WATCHDOG=1") }, "\(daemon.notifications)")
        let (stopping, exited) = daemon.stop()
        #expect(stopping && exited)
        #expect(daemon.process.terminationStatus == 0, "log:\n\(daemon.log)")
    }

    /// The reply to a request made before the daemon was ready, from the thread that made it.
    final class EarlyReply: @unchecked Sendable {
        // Unchecked: `value` is only touched under `lock`.
        private let lock = NSLock()
        private var value: Result<HTTPReply, any Error>?
        func withLock<T>(_ body: (inout Result<HTTPReply, any Error>?) -> T) -> T { lock.withLock { body(&value) } }
    }

    /// What systemd does for cardbenchd.socket: bind and listen on the control socket, pass it
    /// as descriptor 3 with LISTEN_PID (the same process after exec), LISTEN_FDS and
    /// LISTEN_FDNAMES, then exec the daemon.
    static let socketActivationLauncher = """
    import os, socket, sys
    path = sys.argv[1]
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(64)
    os.chmod(path, 0o660)
    open(path + ".listening", "w").close()
    if s.fileno() != 3:
        os.dup2(s.fileno(), 3)
    os.set_inheritable(3, True)
    os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1", LISTEN_FDNAMES="control")
    os.execv(sys.argv[2], sys.argv[2:])
    """

    @Test("socket-activated: the daemon serves the socket systemd passed, a request made before READY=1 is answered, and the socket file stays systemd's",
          .enabled(if: python != nil, "needs python3 to pass a socket"))
    func socketActivation() throws {
        let script = try TemporaryDirectory()
        let path = script.url.appendingPathComponent("activate.py").path
        try Self.socketActivationLauncher.write(toFile: path, atomically: true, encoding: .utf8)
        let daemon = try DaemonUnderTest(launcher: [Self.python!, path, "CONTROL"], extraArguments: ["--demo"], controlPlaceholder: "CONTROL")
        // Asked as soon as the socket listens, before READY=1: the connection waits in the
        // backlog until the daemon serves it.
        let control = daemon.controlSocket
        let early = EarlyReply()
        let asked = Thread {
            for _ in 0..<500 where !FileManager.default.fileExists(atPath: control + ".listening") { usleep(10_000) }
            let result = Result { try unixHTTP(control, "GET", "/v1/health", timeout: .seconds(60)) }
            early.withLock { $0 = result }
        }
        asked.start()
        #expect(daemon.waitFor("READY=1", timeout: .seconds(60)) != nil, "log:\n\(daemon.log)")
        for _ in 0..<500 where early.withLock({ $0 == nil }) { usleep(10_000) }
        let reply = early.withLock { $0 }
        #expect((try? reply?.get())?.status == 200, "\(String(describing: reply)) log:\n\(daemon.log)")
        let url = "vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=K&appId=com.example.app&action=sale&amount=1200&clientTransactionId=activated-1"
        let sale = try daemon.http("POST", "/v1/open", body: "{\"url\": \"\(url)\"}")
        #expect(String(decoding: sale.body, as: UTF8.self).contains("status=success"), "\(String(decoding: sale.body, as: UTF8.self))")
        #expect(daemon.log.contains("control socket \(daemon.controlSocket)"), "\(daemon.log)")
        let (stopping, exited) = daemon.stop()
        #expect(stopping && exited, "log:\n\(daemon.log)")
        #expect(daemon.process.terminationStatus == 0, "log:\n\(daemon.log)")
        // RemoveOnStop= is systemd's business: the daemon leaves the file alone.
        var st = stat()
        #expect(lstat(daemon.controlSocket, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK)
    }

    @Test("a descriptor that is not a listening Unix socket (a unit with the wrong ListenStream=) stops the daemon with exit 2 naming LISTEN_FDS",
          .enabled(if: python != nil, "needs python3 to pass a descriptor"))
    func socketActivationWrongDescriptor() throws {
        let directory = try TemporaryDirectory()
        let script = directory.url.appendingPathComponent("pass-file.py").path
        try """
        import os, sys
        fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
        if fd != 3:
            os.dup2(fd, 3)
        os.set_inheritable(3, True)
        os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1")
        os.execv(sys.argv[2], sys.argv[2:])
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let result = try runProgram(Self.python!, [script, directory.url.appendingPathComponent("not-a-socket").path, Locations.daemon.path,
                                                   "--state-directory", directory.path + "/state", "--runtime-directory", directory.path + "/run",
                                                   "--http-port", "off"])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("LISTEN_FDS: descriptor 3 is not a listening Unix stream socket"), "\(result.stderr)")
    }

    @Test("LISTEN_* meant for another process are ignored; a bad LISTEN_FDS is a configuration error")
    func listenVariables() throws {
        #expect(try SocketActivation.controlSocket(environment: [:], unsetEnvironment: false) == nil)
        #expect(try SocketActivation.controlSocket(environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1"], unsetEnvironment: false) == nil)
        let mine = String(getpid())
        #expect(throws: ConfigurationError.self) { try SocketActivation.controlSocket(environment: ["LISTEN_PID": mine, "LISTEN_FDS": "x"], unsetEnvironment: false) }
        #expect(throws: ConfigurationError.self) { try SocketActivation.controlSocket(environment: ["LISTEN_PID": mine, "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"], unsetEnvironment: false) }
        do {
            _ = try SocketActivation.controlSocket(environment: ["LISTEN_PID": mine, "LISTEN_FDS": "0"], unsetEnvironment: false)
            Issue.record("LISTEN_FDS=0 was accepted")
        } catch {
            #expect(error.key == "LISTEN_FDS" && error.rule.contains("got \"0\""), "\(error)")
        }
    }

    /// systemd's MemoryDenyWriteExecute=yes as the seccomp filter it installs
    /// (src/shared/seccomp-util.c: mmap with PROT_WRITE|PROT_EXEC, mprotect and pkey_mprotect
    /// with PROT_EXEC, shmat with SHM_EXEC fail with EPERM), applied through libseccomp by a
    /// small Python launcher that then execs the daemon.
    static let mdweLauncher = """
    import ctypes, ctypes.util, mmap, os, sys
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    class Cmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(Cmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(0x7fff0000)  # SCMP_ACT_ALLOW
    def deny(name, arg, mask):
        c = Cmp(arg, 7, mask, mask)  # SCMP_CMP_MASKED_EQ
        if lib.seccomp_rule_add_array(ctx, 0x00050000 | 1, lib.seccomp_syscall_resolve_name(name), 1, ctypes.byref(c)) != 0:
            sys.exit("seccomp_rule_add " + name.decode())
    deny(b"mmap", 2, mmap.PROT_WRITE | mmap.PROT_EXEC)
    deny(b"mprotect", 2, mmap.PROT_EXEC)
    deny(b"pkey_mprotect", 2, mmap.PROT_EXEC)
    deny(b"shmat", 2, 0o100000)  # SHM_EXEC
    if lib.seccomp_load(ctx) != 0:
        sys.exit("seccomp_load")
    try:
        mmap.mmap(-1, 4096, prot=mmap.PROT_WRITE | mmap.PROT_EXEC)
        sys.exit("the filter let a writable and executable mapping through")
    except PermissionError:
        pass
    os.execv(sys.argv[1], sys.argv[1:])
    """

    static let python = Locations.executable("python3")
    static let libseccomp = ["/usr/lib/x86_64-linux-gnu/libseccomp.so.2", "/usr/lib/aarch64-linux-gnu/libseccomp.so.2",
                             "/lib/x86_64-linux-gnu/libseccomp.so.2", "/usr/lib64/libseccomp.so.2", "/usr/lib/libseccomp.so.2"]
        .contains { FileManager.default.fileExists(atPath: $0) }

    /// The unit's own `SystemCallFilter=` lines as the seccomp filter systemd builds from them:
    /// the first line an allow list, each `~` line taking calls out of it, every group expanded by
    /// `systemd-analyze syscall-filter` (the tables of the systemd that will run the unit), and any
    /// other call killing the process with SIGSYS, as systemd's default action does.
    static let syscallFilterLauncher = """
    import ctypes, ctypes.util, os, subprocess, sys
    unit, analyze = sys.argv[1], sys.argv[2]
    def expand(name, seen):
        if not name.startswith("@"):
            return {name}
        out = set()
        text = subprocess.run([analyze, "syscall-filter", name], capture_output=True, text=True, check=True).stdout
        for line in text.splitlines()[1:]:
            word = line.strip()
            if not word or word.startswith("#"):
                continue
            if word.startswith("@"):
                if word not in seen:
                    seen.add(word)
                    out |= expand(word, seen)
            else:
                out.add(word)
        if not out:
            sys.exit("systemd-analyze knows no group " + name)
        return out
    allowed = None
    for line in open(unit):
        if not line.startswith("SystemCallFilter="):
            continue
        value = line.split("=", 1)[1].strip()
        words = set()
        for w in value.lstrip("~").split():
            words |= expand(w, set())
        if value.startswith("~"):
            if allowed is None:
                sys.exit("this launcher only knows an allow list first")
            allowed -= words
        else:
            allowed = words if allowed is None else allowed | words
    if not allowed:
        sys.exit("the unit has no SystemCallFilter=")
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(0x80000000)  # SCMP_ACT_KILL_PROCESS
    added = 0
    for name in sorted(allowed):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        # A call this architecture does not have (socketcall, _llseek, ...) is left out, as systemd does.
        if nr != -1 and lib.seccomp_rule_add(ctx, 0x7fff0000, nr, 0) == 0:
            added += 1
    if lib.seccomp_load(ctx) != 0:
        sys.exit("seccomp_load")
    print("seccomp: %d of %d calls allowed" % (added, len(allowed)), file=sys.stderr, flush=True)
    os.execv(sys.argv[3], sys.argv[3:])
    """

    @Test("the daemon sells and runs scenarios under the unit's SystemCallFilter, as an unprivileged user, with /proc as ProtectProc=invisible shows it",
          .enabled(if: python != nil && libseccomp && systemdAnalyze != nil, "needs python3, libseccomp and systemd-analyze"))
    func systemCallFilter() throws {
        let script = try TemporaryDirectory()
        let path = script.url.appendingPathComponent("filter.py").path
        try Self.syscallFilterLauncher.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
        chmod(path, 0o644)
        // The system's python: one under root's home (pyenv) is out of the unprivileged user's reach.
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : Self.python!
        var launcher = [python, path, Locations.file("systemd/cardbenchd.service").path, systemdAnalyze!]
        // As root: a private /proc mounted as the unit's ProtectProc=invisible mounts it, and the daemon run as an
        // unprivileged user as User= runs it (root takes other paths: SQLite chowns its journal
        // to the database's owner, a call @privileged leaves out).
        let (unshare, setpriv) = (Locations.executable("unshare"), Locations.executable("setpriv"))
        let asRoot = getuid() == 0 && unshare != nil && setpriv != nil
        if asRoot {
            launcher = [unshare!, "--mount", "--propagation", "private", "/bin/sh", "-c",
                        "mount -t proc -o hidepid=invisible proc /proc && exec \"$0\" \"$@\"",
                        setpriv!, "--reuid=65534", "--regid=65534", "--clear-groups"] + launcher
        }
        // The shipped configuration, in demo mode: the embedded profiles, a virtual reader, a sale;
        // and the console's scenario runs, whose daemon cores run in the same process.
        let daemon = try DaemonUnderTest.ready(launcher: launcher, extraArguments: ["--config", Locations.file("systemd/cardbenchd.yaml").path, "--demo"],
                                               unprivileged: asRoot,
                                               environment: ["CARDBENCH_SCENARIOS_DIRECTORY": Locations.file("Scenarios").path])
        #expect(daemon.log.contains("seccomp: "), "the filter was loaded: \(daemon.log)")
        let url = "vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=K&appId=com.example.app&action=sale&amount=1200&clientTransactionId=seccomp-1"
        let sale = try daemon.http("POST", "/v1/open", body: "{\"url\": \"\(url)\"}")
        #expect(sale.status == 200, "\(String(decoding: sale.body, as: UTF8.self)) log:\n\(daemon.log)")
        #expect(String(decoding: sale.body, as: UTF8.self).contains("status=success"), "\(String(decoding: sale.body, as: UTF8.self))")
        #expect(try daemon.http("GET", "/v1/transactions").status == 200)
        #expect(try daemon.http("GET", "/metrics").status == 200)
        let run = try daemon.http("POST", "/v1/scenario-runs", body: #"{"path": "magstripe"}"#)
        #expect(run.status == 202, "\(run.text) log:\n\(daemon.log)")
        let id = (try? run.json() as? [String: Any])?["id"] as? String ?? ""
        var view: [String: Any] = [:]
        for _ in 0..<600 {
            view = (try? daemon.http("GET", "/v1/scenario-runs/\(id)").json() as? [String: Any]) ?? [:]
            if view["state"] as? String != "running" { break }
            usleep(100_000)
        }
        #expect(view["state"] as? String == "passed" && view["passed"] as? Int == 9, "\(view) log:\n\(daemon.log)")
        let (stopping, exited) = daemon.stop()
        #expect(stopping && exited, "log:\n\(daemon.log)")
        #expect(daemon.process.terminationStatus == 0, "killed by the filter? log:\n\(daemon.log)")
    }

    @Test("the daemon runs under MemoryDenyWriteExecute's seccomp filter",
          .enabled(if: python != nil && libseccomp, "needs python3 and libseccomp to apply the filter"))
    func memoryDenyWriteExecute() throws {
        let script = try TemporaryDirectory()
        let path = script.url.appendingPathComponent("mdwe.py").path
        try Self.mdweLauncher.write(toFile: path, atomically: true, encoding: .utf8)
        let daemon = try DaemonUnderTest.ready(launcher: [Self.python!, path])
        let health = try daemon.http("GET", "/v1/health")
        #expect(health.status == 200)
        // Some real work under the filter: the ledger, the metrics, the event stream.
        #expect(try daemon.http("GET", "/v1/transactions").status == 200)
        #expect(try daemon.http("GET", "/metrics").status == 200)
        let (stopping, exited) = daemon.stop()
        #expect(stopping && exited, "log:\n\(daemon.log)")
        #expect(daemon.process.terminationStatus == 0, "log:\n\(daemon.log)")
    }
}
