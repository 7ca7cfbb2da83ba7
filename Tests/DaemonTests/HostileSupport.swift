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

    func stop() { processBox?.terminate() }
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
    var timeout = timeval(tv_sec: 20, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let bytes = Array(request.utf8)
    var sent = 0
    while sent < bytes.count {
        let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n > 0 else { throw HarnessError("send: errno \(errno)") }
        sent += n
    }
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { break }
        reply += buffer[..<n]
        // The answer is whole once its head is and the body holds Content-Length bytes.
        let text = String(decoding: reply, as: UTF8.self)
        if let split = text.range(of: "\r\n\r\n") {
            let head = String(text[..<split.lowerBound])
            let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
            if let length, reply.count - (text[..<split.upperBound].utf8.count) >= length { break }
        }
    }
    let text = String(decoding: reply, as: UTF8.self)
    let head = text.range(of: "\r\n\r\n").map { String(text[..<$0.lowerBound]) } ?? text
    let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
    let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return (status, head, body)
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
