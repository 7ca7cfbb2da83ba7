import Daemon
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The directory of the built products (cardbenchd and cardbench sit beside the test bundle).
public let productsDirectory: URL = {
    var url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: url.appendingPathComponent("cardbenchd").path), url.path != "/" {
        url = url.deletingLastPathComponent()
    }
    return url
}()

/// A real `cardbenchd` process on a temporary state and runtime directory.
public final class DaemonProcess: @unchecked Sendable {
    public let directory: URL
    public let process = Process()
    public let log: URL
    public var runtime: String { directory.appendingPathComponent("run").path }
    public var state: String { directory.appendingPathComponent("state").path }
    public var socket: String { DaemonServer.controlSocket(runtimeDirectory: runtime) }
    public var client: DaemonClient { DaemonClient(endpoint: socket) }
    public func readerSocket(_ name: String = "bench1") -> String { "\(runtime)/readers/\(name).sock" }

    /// Starts the daemon (extra arguments and YAML configuration optional) and waits until its
    /// control socket answers `/v1/health`.
    public init(_ arguments: [String] = [], config: String? = nil, directory existing: URL? = nil,
                environment extra: [String: String] = [:]) async throws {
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
        environment.merge(extra) { $1 }
        process.environment = environment
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        // 60 s: the whole suite at once on two cores (RSA key generation, Python oracles, child
        // processes beside this) has kept a daemon that was ready from being asked for over 20 s.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if !process.isRunning { throw HarnessError("cardbenchd exited with \(process.terminationStatus): \(logText)") }
            if FileManager.default.fileExists(atPath: socket),
               let reply = try? await client.send(method: "GET", "/v1/health", timeout: .seconds(2)), reply.status == 200 {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        throw HarnessError("cardbenchd did not answer on \(socket) within 60 s: \(logText)")
    }

    public var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// SIGTERM, then waits for the exit; returns the exit status.
    @discardableResult
    public func stop() -> Int32 {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    public func kill() {
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    public func remove() {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// POST /v1/open, decoded.
    public func open(_ url: String, terminal: String? = nil) async throws -> (status: Int, result: OpenResult?, error: String) {
        let reply = try await client.send(method: "POST", "/v1/open", json: OpenRequest(url: url, terminal: terminal))
        let result = try? JSONDecoder().decode(OpenResult.self, from: reply.body)
        return (reply.status, reply.status == 200 ? result : nil, reply.errorMessage)
    }

    /// A JSON request; the status and the decoded body.
    public func json(_ method: String, _ path: String, _ body: (any Encodable)? = nil) async throws -> (Int, Any?) {
        let reply = try await client.send(method: method, path, json: body)
        return (reply.status, try? JSONSerialization.jsonObject(with: reply.body))
    }
}

public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

