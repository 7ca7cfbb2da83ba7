import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A client of the daemon's API, over its Unix control socket (or a loopback http:// base URL).
/// `cardbench` uses it; so do the end-to-end tests.
public struct DaemonClient: Sendable {
    /// The socket path, or an `http://127.0.0.1:port` base URL.
    public let endpoint: String

    public init(endpoint: String) {
        self.endpoint = endpoint
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
        if let body {
            let encoder = JSONEncoder()
            request.body = .bytes(ByteBuffer(bytes: try encoder.encode(body)))
            request.headers.add(name: "Content-Type", value: "application/json")
        }
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(Int64(timeout.components.seconds)))
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
        let request = HTTPClientRequest(url: url(path))
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(365 * 86_400))
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
