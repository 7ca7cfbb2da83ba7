import Daemon
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// The repository root (for Scenarios/cards), found from this file.
@_exported import TestSupport

/// The directory of the built products (cardbenchd and cardbench sit beside the test bundle).
let productsDirectory: URL = {
    var url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: url.appendingPathComponent("cardbenchd").path), url.path != "/" {
        url = url.deletingLastPathComponent()
    }
    return url
}()

func card(_ name: String) -> String { repositoryRoot.appendingPathComponent("Scenarios/cards/\(name)").path }

/// A real `cardbenchd` process on a temporary state and runtime directory.
final class DaemonProcess: @unchecked Sendable {
    let directory: URL
    let process = Process()
    let log: URL
    var runtime: String { directory.appendingPathComponent("run").path }
    var state: String { directory.appendingPathComponent("state").path }
    var socket: String { DaemonServer.controlSocket(runtimeDirectory: runtime) }
    var client: DaemonClient { DaemonClient(endpoint: socket) }
    func readerSocket(_ name: String = "bench1") -> String { "\(runtime)/readers/\(name).sock" }

    /// Starts the daemon (extra arguments and YAML configuration optional) and waits until its
    /// control socket answers `/v1/health`.
    init(_ arguments: [String] = [], config: String? = nil, directory existing: URL? = nil) async throws {
        directory = existing ?? FileManager.default.temporaryDirectory.appendingPathComponent("cbd-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        log = directory.appendingPathComponent("daemon-\(UUID().uuidString.prefix(4)).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        var args = ["--state-directory", state, "--runtime-directory", runtime, "--http-port", "0"] + arguments
        if let config {
            let file = directory.appendingPathComponent("cardbenchd.yaml")
            try config.write(to: file, atomically: true, encoding: .utf8)
            args += ["--config", file.path]
        }
        process.executableURL = productsDirectory.appendingPathComponent("cardbenchd")
        process.arguments = args
        process.currentDirectoryURL = repositoryRoot
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = nil
        environment["CARDBENCH_SOCKET"] = nil
        process.environment = environment
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if !process.isRunning { throw HarnessError("cardbenchd exited with \(process.terminationStatus): \(logText)") }
            if FileManager.default.fileExists(atPath: socket),
               let reply = try? await client.send(method: "GET", "/v1/health", timeout: .seconds(2)), reply.status == 200 {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        throw HarnessError("cardbenchd did not answer on \(socket) within 20 s: \(logText)")
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// SIGTERM, then waits for the exit; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    func kill() {
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    func remove() {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// POST /v1/open, decoded.
    func open(_ url: String, terminal: String? = nil) async throws -> (status: Int, result: OpenResult?, error: String) {
        let reply = try await client.send(method: "POST", "/v1/open", json: OpenRequest(url: url, terminal: terminal))
        let result = try? JSONDecoder().decode(OpenResult.self, from: reply.body)
        return (reply.status, reply.status == 200 ? result : nil, reply.errorMessage)
    }

    /// A JSON request; the status and the decoded body.
    func json(_ method: String, _ path: String, _ body: (any Encodable)? = nil) async throws -> (Int, Any?) {
        let reply = try await client.send(method: method, path, json: body)
        return (reply.status, try? JSONSerialization.jsonObject(with: reply.body))
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A virtual card as a real `cardbench card insert` process connected to a reader socket.
final class InsertedCard: @unchecked Sendable {
    let process = Process()
    let output = Pipe()

    init(_ profile: String, reader: String, state: String? = nil) throws {
        process.executableURL = productsDirectory.appendingPathComponent("cardbench")
        process.arguments = ["card", "insert", "--profile", card(profile), "--reader", reader] + (state.map { ["--state", $0] } ?? [])
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // "card inserted: …" once connected.
        let line = output.fileHandleForReading.availableLine(timeout: 10)
        guard line?.hasPrefix("card inserted") == true else {
            process.terminate()
            throw HarnessError("card insert did not connect: \(line ?? "(nothing)")")
        }
    }

    func remove() {
        if process.isRunning {
            process.interrupt()
            process.waitUntilExit()
        }
    }
}

extension FileHandle {
    /// Reads one line, waiting at most `timeout` seconds.
    func availableLine(timeout: TimeInterval) -> String? {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        var pfd = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
        while Date() < deadline {
            guard poll(&pfd, 1, 100) > 0 else { continue }
            var byte: UInt8 = 0
            guard Glibc.read(fileDescriptor, &byte, 1) == 1 else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }
}

/// Runs the built `cardbench` with `arguments` against `socket`.
func cli(_ arguments: [String], socket: String) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("cardbench")
    process.arguments = arguments + ["--socket", socket]
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

/// A callback URL split as the receiving app splits it (URLComponents): base and ordered fields.
func callbackFields(_ url: String) -> (base: String, fields: [(String, String)]) {
    let base = String(url.split(separator: "?", maxSplits: 1).first ?? "")
    let items = URLComponents(string: url)?.queryItems ?? []
    return (base, items.map { ($0.name, $0.value ?? "") })
}

/// A real HTTP server on loopback (Python's), logging each request line; it serves files, and
/// `path` (one name) answers GET /<path>?… with 200.
final class LoopbackHTTPServer: @unchecked Sendable {
    let port = Int.random(in: 20_000...40_000)
    let requests = EventLog()
    private let process = Process()
    private let served = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-www-\(UUID().uuidString.prefix(6))")

    init(serving path: String) async throws {
        try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
        try "ok".write(to: served.appendingPathComponent(path), atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: pythonForServers.first!)
        process.arguments = Array(pythonForServers.dropFirst()) + ["-u", "-m", "http.server", String(port), "--bind", "127.0.0.1"]
        let log = Pipe()
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        process.currentDirectoryURL = served
        try process.run()
        let requests = self.requests
        Thread.detachNewThread {
            while let line = log.fileHandleForReading.availableLine(timeout: 30) { requests.append(line) }
        }
        try await Task.sleep(for: .milliseconds(500))
    }

    func stop() {
        // SIGKILL: a child of the test runner starts with SIGTERM blocked, so terminate() left
        // every one of these servers running after the tests.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: served)
    }
}
