import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
#if canImport(Glibc)
import Glibc
#endif

/// A client of the daemon's API, over its Unix control socket (or a loopback http:// base URL).
/// `cardbench` uses it; so do the end-to-end tests.
public struct DaemonClient: Sendable {
    /// The socket path, or an `http(s)://host:port` base URL.
    public let endpoint: String
    /// The API token sent to an http(s) endpoint (`Authorization: Bearer`).
    public let token: String?

    /// A client of `endpoint`; for an http(s) one, `token` or else `APIToken.forClient()`.
    public init(endpoint: String, token: String? = nil) {
        self.endpoint = endpoint
        self.token = endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") ? (token ?? APIToken.forClient()) : nil
    }

    /// An https endpoint's client: trusts the PEM certificates of `CARDBENCH_CA_FILE` besides the
    /// system's, for a bench whose daemon has a certificate of its own making.
    static let httpsClient: HTTPClient? = {
        guard let file = ProcessInfo.processInfo.environment["CARDBENCH_CA_FILE"], !file.isEmpty else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(file)]
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
    }()

    var http: HTTPClient { endpoint.hasPrefix("https://") ? (Self.httpsClient ?? .shared) : .shared }

    /// Fails at once, naming the endpoint and what to check, when nothing answers there: a
    /// missing socket file, a refused connection, a socket this user may not open. (The HTTP
    /// client would keep retrying a refused connection until the request's deadline.)
    public func checkReachable(timeout: Duration = .seconds(3)) throws(Unreachable) {
        if let problem = Reachability.problem(endpoint: endpoint, timeout: timeout) {
            throw Unreachable(endpoint: endpoint, detail: problem)
        }
    }

    /// The socket `cardbench` talks to when not told: `$CARDBENCH_SOCKET`, then
    /// `.cardbench/run/control.sock` (the embedded default, from the directory the daemon was started
    /// in), then `/run/cardbench/control.sock` (systemd's RuntimeDirectory).
    public static func defaultEndpoint(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let socket = environment["CARDBENCH_SOCKET"], !socket.isEmpty { return socket }
        let local = DaemonServer.controlSocket(runtimeDirectory: DaemonConfiguration().effectiveRuntimeDirectory)
        if FileManager.default.fileExists(atPath: local) { return local }
        return "/run/cardbench/control.sock"
    }

    /// An answer: status and body.
    public struct Reply: Sendable {
        public let status: Int
        public let body: Data

        /// The `error` of an error body, or the body as text.
        public var errorMessage: String {
            if let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let error = object["error"] as? String {
                return error
            }
            return String(decoding: body, as: UTF8.self)
        }
    }

    /// A failure to reach the daemon at all.
    public struct Unreachable: Error, CustomStringConvertible {
        public let endpoint: String
        public let detail: String
        public var description: String {
            "cannot reach cardbenchd at \(endpoint): \(detail) (is it running? --socket or CARDBENCH_SOCKET name another)"
        }
    }

    func url(_ path: String) -> String {
        if endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") {
            return endpoint.hasSuffix("/") ? String(endpoint.dropLast()) + path : endpoint + path
        }
        return URL(httpURLWithSocketPath: endpoint, uri: path)?.absoluteString ?? "http+unix://invalid\(path)"
    }

    /// Sends a request and collects the whole answer.
    public func send(_ method: HTTPMethod, _ path: String, json body: (any Encodable)? = nil,
                     timeout: Duration = .seconds(3600)) async throws -> Reply {
        var request = HTTPClientRequest(url: url(path))
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            let encoder = JSONEncoder()
            request.body = .bytes(ByteBuffer(bytes: try encoder.encode(body)))
            request.headers.add(name: "Content-Type", value: "application/json")
        }
        return try await exchange(request, timeout: timeout)
    }

    /// Sends `body` as it is, with `contentType`: for a caller whose JSON must reach the daemon byte
    /// for byte (a test of what the API refuses).
    public func send(method: String, _ path: String, rawBody body: [UInt8], contentType: String? = "application/json",
                     timeout: Duration = .seconds(60)) async throws -> Reply {
        var request = HTTPClientRequest(url: url(path))
        request.method = HTTPMethod(rawValue: method)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        request.body = .bytes(ByteBuffer(bytes: body))
        return try await exchange(request, timeout: timeout)
    }

    /// Sends `request` and collects the whole answer; a failure to reach the daemon is `Unreachable`.
    private func exchange(_ request: HTTPClientRequest, timeout: Duration) async throws -> Reply {
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, timeout: .seconds(Int64(timeout.components.seconds)))
        } catch {
            throw Unreachable(endpoint: endpoint, detail: "\(error)")
        }
        let buffer = try await response.body.collect(upTo: 64 << 20)
        return Reply(status: Int(response.status.code), body: Data(buffer.readableBytesView))
    }

    /// `send` with the method named by a string ("GET", "POST", "DELETE"), for callers that do not import NIO.
    public func send(method: String, _ path: String, json body: (any Encodable)? = nil,
                     timeout: Duration = .seconds(3600)) async throws -> Reply {
        try await send(HTTPMethod(rawValue: method), path, json: body, timeout: timeout)
    }

    /// Streams the body of a GET line by line (server-sent events) until the daemon ends it or
    /// `handle` returns false.
    public func stream(_ path: String, _ handle: (String) -> Bool) async throws {
        var request = HTTPClientRequest(url: url(path))
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, timeout: .seconds(365 * 86_400))
        } catch {
            throw Unreachable(endpoint: endpoint, detail: "\(error)")
        }
        guard response.status == .ok else {
            let buffer = try await response.body.collect(upTo: 1 << 20)
            throw Unreachable(endpoint: endpoint, detail: "HTTP \(response.status.code): \(String(buffer: buffer))")
        }
        var pending = ""
        for try await chunk in response.body {
            pending += String(buffer: chunk)
            while let newline = pending.firstIndex(of: "\n") {
                let line = String(pending[..<newline])
                pending = String(pending[pending.index(after: newline)...])
                if !handle(line) { return }
            }
        }
    }
}

/// A connection attempt to the daemon's endpoint, to tell at once why it cannot be reached.
enum Reachability {
    /// Why nothing answers at `endpoint` (a socket path or an http(s) URL), or nil when a
    /// connection was accepted.
    static func problem(endpoint: String, timeout: Duration) -> String? {
        if endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") {
            guard let components = URLComponents(string: endpoint), var host = components.host, !host.isEmpty else {
                return "not a URL with a host"
            }
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            let port = components.port ?? (endpoint.hasPrefix("https://") ? 443 : 80)
            return tcpProblem(host: host, port: port, timeout: timeout)
        }
        var info = stat()
        if stat(endpoint, &info) != 0 {
            return errno == ENOENT ? "no socket file there (the daemon is not running, or uses another runtime directory)"
                : "cannot look at the socket file: \(String(cString: strerror(errno)))"
        }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else { return "that file is not a socket" }
        switch unixConnect(endpoint) {
        case 0: return nil
        case ECONNREFUSED: return "connection refused (a socket file is left, but no daemon listens on it)"
        case EACCES: return "permission denied (the socket's group is the permission: add this user to it)"
        case ENAMETOOLONG: return "the socket path is too long"
        case let code: return String(cString: strerror(code))
        }
    }

    /// Connects to the Unix socket at `path` and closes at once: 0, or the errno it failed with.
    static func unixConnect(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return ENAMETOOLONG }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return connected == 0 ? 0 : errno
    }

    static func tcpProblem(host: String, port: Int, timeout: Duration) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else { return "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))" }
        defer { freeaddrinfo(list) }
        var last = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            entry = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue), a.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            if connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return nil }
            guard errno == EINPROGRESS else {
                last = errno == ECONNREFUSED ? "connection refused (nothing listens on port \(port))" : String(cString: strerror(errno))
                continue
            }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&poller, 1, milliseconds) == 1 else { last = "no answer in \(timeout)"; continue }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error == 0 { return nil }
            last = error == ECONNREFUSED ? "connection refused (nothing listens on port \(port))" : String(cString: strerror(error))
        }
        return last
    }
}
