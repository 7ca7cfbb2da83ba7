import Daemon
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// Tests/DaemonTests/Support/scripted_http.py on a port of its own: redirects, slow answers, and
/// every request line it receives.
final class ScriptedHTTPServer: @unchecked Sendable {
    let port: Int
    let bind: String
    let requests = EventLog()
    private let process = Process()

    /// `redirectTo`: where `GET /r` sends the caller, with status `code`.
    init(bind: String = "127.0.0.1", redirectTo: String? = nil, code: Int = 302) async throws {
        self.bind = bind
        var lastError = "no port tried"
        for _ in 0..<5 {
            let port = Int.random(in: 20_000...45_000)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: pythonForServers.first!)
            process.arguments = Array(pythonForServers.dropFirst()) + ["-u", repositoryRoot.appendingPathComponent("Tests/DaemonTests/Support/scripted_http.py").path,
                                 String(port), bind] + (redirectTo.map { [$0, String(code)] } ?? [])
            let log = Pipe()
            process.standardError = log
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            if log.fileHandleForReading.availableLine(timeout: 10) == "READY" {
                self.port = port
                let requests = self.requests
                Thread.detachNewThread {
                    while let line = log.fileHandleForReading.availableLine(timeout: 3600) {
                        if line.hasPrefix("REQ ") { requests.append(String(line.dropFirst(4))) }
                    }
                }
                processBox = process
                return
            }
            process.terminate()
            lastError = "port \(port) did not come up"
        }
        throw HarnessError("the scripted HTTP server did not start: \(lastError)")
    }

    private var processBox: Process?

    /// `http://127.0.0.1:port` (IPv6 bracketed).
    var base: String { bind.contains(":") ? "http://[\(bind)]:\(port)" : "http://\(bind):\(port)" }

    /// SIGKILL: a child of the test runner starts with SIGTERM blocked (the runner's threads block it).
    func stop() {
        guard let process = processBox, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// The Python a test server runs under, started so that `terminate()` reaches it: Debian's own
/// binary, not a version manager's shim (a shim that forks leaves the server behind).
let pythonForServers: [String] = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? ["/usr/bin/python3"] : ["/usr/bin/env", "python3"]

/// One HTTP/1.1 exchange written by hand on a TCP connection to loopback: a test of what a
/// listener accepts must be free to send any header (Host, Origin) a library would fix.
func rawHTTP(port: Int, _ request: String) throws -> (status: Int, head: String, body: String) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw HarnessError("connect to port \(port): errno \(errno)") }
    let reply = try exchange(fd, Array(request.utf8))
    return (reply.status, reply.head, String(decoding: reply.body, as: UTF8.self))
}

/// The same on the daemon's control socket, with the body as bytes.
func rawUnixHTTP(socketPath: String, _ request: [UInt8]) throws -> (status: Int, head: String, body: [UInt8]) {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in socketPath.utf8.enumerated() { raw[i] = b } }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard connected == 0 else { throw HarnessError("connect \(socketPath): errno \(errno)") }
    return try exchange(fd, request)
}

/// Writes `request` (which says `Connection: close`) and reads the answer until the daemon
/// closes: status, head, and the body with any chunking undone.
func exchange(_ fd: Int32, _ request: [UInt8]) throws -> (status: Int, head: String, body: [UInt8]) {
    var timeout = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The daemon may answer (and close) before reading a whole oversized request.
        guard n > 0 else { break }
        sent += n
    }
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { break }
        reply += buffer[..<n]
    }
    guard let split = Data(reply).range(of: Data("\r\n\r\n".utf8)) else { return (0, String(decoding: reply, as: UTF8.self), []) }
    let head = String(decoding: reply[..<split.lowerBound], as: UTF8.self)
    var body = Array(reply[split.upperBound...])
    if head.lowercased().contains("transfer-encoding: chunked") { body = dechunk(body) }
    let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return (status, head, body)
}

/// A chunked body's data.
func dechunk(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [], i = 0
    while i < bytes.count {
        guard let end = (i..<bytes.count - 1).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
              let size = Int(String(decoding: bytes[i..<end], as: UTF8.self).split(separator: ";")[0], radix: 16), size > 0 else { break }
        let start = end + 2
        out += bytes[start..<min(start + size, bytes.count)]
        i = start + size + 2
    }
    return out
}

extension DaemonProcess {
    /// The TCP listener's port (`--http-port 0` writes it).
    var httpPort: Int { Int((try? String(contentsOfFile: runtime + "/http.port", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0 }

    /// The API token the daemon wrote.
    var apiToken: String {
        (try? String(contentsOfFile: runtime + "/" + APIToken.fileName, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    /// Every byte of the ledger's files (database and write-ahead log): what a PAN check must search.
    var ledgerBytes: [UInt8] {
        ["ledger.sqlite", "ledger.sqlite-wal"].flatMap { name in
            (try? Data(contentsOf: URL(fileURLWithPath: state + "/" + name))).map(Array.init) ?? []
        }
    }

    /// The outbox rows of transaction `id`, as the API shows them.
    func callbacks(of id: Int64) async throws -> [[String: Any]] {
        let (_, body) = try await json("GET", "/v1/transactions/\(id)")
        return ((body as? [String: Any])?["callbacks"] as? [[String: Any]]) ?? []
    }

    /// Polls until `done` holds or `seconds` pass; returns whether it held.
    func waitUntil(seconds: Double = 20, _ done: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await done() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await done()
    }
}

/// Whether `haystack` holds `needle`'s bytes.
func containsBytes(_ haystack: [UInt8], _ needle: String) -> Bool {
    Data(haystack).range(of: Data(needle.utf8)) != nil
}
