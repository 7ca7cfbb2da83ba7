import Daemon
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// The repository root (for Scenarios/cards), found from this file.
@_exported import DaemonTestSupport
@_exported import TestSupport

func card(_ name: String) -> String { name.hasPrefix("/") ? name : repositoryRoot.appendingPathComponent("Scenarios/cards/\(name)").path }

/// A virtual card as a real `cardbench card insert` process connected to a reader socket.
final class InsertedCard: @unchecked Sendable {
    let process = Process()
    let output = Pipe()

    /// - Parameter verb: `insert`, or `tap` (the card answers with a PC/SC part 3 ATR and leaves when powered off).
    init(_ profile: String, reader: String, state: String? = nil, verb: String = "insert", extra: [String] = []) throws {
        process.executableURL = productsDirectory.appendingPathComponent("cardbench")
        process.arguments = ["card", verb, "--profile", card(profile), "--reader", reader] + (state.map { ["--state", $0] } ?? []) + extra
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // "card inserted: …" (or "card tapped: …") once connected.
        let line = output.fileHandleForReading.availableLine(timeout: 10)
        guard line?.hasPrefix(verb == "tap" ? "card tapped" : "card inserted") == true else {
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

    /// Removes the card and returns what it printed after "card inserted" (its `--trace`).
    func transcript() -> String {
        remove()
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

/// Runs the built `cardbench` with `arguments` and extra environment (no `--socket` added).
func cliOffline(_ arguments: [String], environment extra: [String: String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("cardbench")
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
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
    try cliOffline(arguments + ["--socket", socket], environment: [:])
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
    /// Below the kernel's ephemeral range (32768 on): an outgoing connection cannot take it
    /// between the choice and the server's bind.
    let port = Int.random(in: 12_000...32_000)
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
            // Until the server ends: on a loaded machine its first request may come minutes after it started.
            while let line = log.fileHandleForReading.availableLine(timeout: 3_600) { requests.append(line) }
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
