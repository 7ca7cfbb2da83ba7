import AsyncHTTPClient
import Foundation
import Ledger
import NIOCore
import ServiceLifecycle

/// Delivers the outbox: every callback committed with a transaction is handed on at least once,
/// across restarts — an http(s) callback is requested (GET, on allowed hosts only), an app-scheme
/// callback goes to the configured command and to `xdg-open` when enabled. Failures are retried
/// with exponential backoff until `callbacks.max_attempts`, then the row is `failed`. A callback
/// with nowhere to go but the reply (the default for app schemes) is marked delivered: the reply
/// carried it.
struct CallbackDelivery: Service {
    let bench: Bench
    let log: @Sendable (String) -> Void

    func run() async throws {
        let settings = bench.configuration.callbacks
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let due = (try? bench.ledger.pendingOutbox(now: Self.wallNow(), limit: 200)) ?? []
            var delivered: [Int64] = []
            for entry in due {
                if Task.isShuttingDownGracefully { break }
                let outcome = await deliver(entry, settings)
                let at = Self.wallNow()
                switch outcome {
                case .success:
                    delivered.append(entry.id)
                    bench.metrics.recordDelivery(kind: entry.kind.rawValue, delivered: true)
                case .failure(let error):
                    let backoff = Self.backoff(attempt: entry.attempts + 1, settings)
                    let updated = try? bench.ledger.markAttemptFailed(id: entry.id, error: error.description,
                                                                      nextAttemptAt: at + backoff)
                    bench.metrics.recordDelivery(kind: entry.kind.rawValue, delivered: false)
                    if updated?.status == .failed {
                        log("callback \(entry.id) of transaction \(entry.transactionID) given up after \(entry.attempts + 1) attempts: \(error)")
                    }
                }
            }
            // One commit for the batch; a crash before it delivers these again (at least once).
            if (try? bench.ledger.markDelivered(ids: delivered, at: Self.wallNow())) == nil, !delivered.isEmpty {
                for id in delivered { _ = try? bench.ledger.markDelivered(id: id, at: Self.wallNow()) }
            }
            try? await Task.sleep(for: due.count < 200 ? .milliseconds(100) : .milliseconds(1))
        }
    }

    struct DeliveryError: Error, CustomStringConvertible {
        let description: String
    }

    func deliver(_ entry: OutboxEntry, _ settings: CallbackSettings) async -> Result<Void, DeliveryError> {
        let url = entry.payload
        let scheme = url.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
        if scheme == "http" || scheme == "https" {
            guard let host = URLComponents(string: url)?.host?.lowercased() else {
                return .failure(DeliveryError(description: "not a URL with a host: \(url.prefix(80))"))
            }
            guard settings.allowedHosts.map({ $0.lowercased() }).contains(host) else {
                return .failure(DeliveryError(description: "host \(host) is not in callbacks.allowed_hosts"))
            }
            do {
                var request = HTTPClientRequest(url: url)
                request.method = .GET
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                guard (200..<300).contains(Int(response.status.code)) else {
                    return .failure(DeliveryError(description: "HTTP \(response.status.code) from \(host)"))
                }
                return .success(())
            } catch {
                return .failure(DeliveryError(description: "\(error)"))
            }
        }
        if let command = settings.command {
            if let error = await Self.runProgram(command, [url]) { return .failure(error) }
        }
        if settings.xdgOpen {
            if let error = await Self.runProgram("xdg-open", [url]) { return .failure(error) }
        }
        return .success(())
    }

    /// Runs a program (no shell: the URL is one argument, whatever it holds) and waits up to 30 s.
    static func runProgram(_ program: String, _ arguments: [String]) async -> DeliveryError? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: program.contains("/") ? program : "/usr/bin/env")
                process.arguments = program.contains("/") ? arguments : [program] + arguments
                process.standardInput = FileHandle.nullDevice
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                do { try process.run() } catch {
                    continuation.resume(returning: DeliveryError(description: "cannot run \(program): \(error.localizedDescription)"))
                    return
                }
                let deadline = Date().addingTimeInterval(30)
                while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
                if process.isRunning {
                    process.terminate()
                    continuation.resume(returning: DeliveryError(description: "\(program) did not finish in 30 s"))
                    return
                }
                continuation.resume(returning: process.terminationStatus == 0
                    ? nil : DeliveryError(description: "\(program) exited with status \(process.terminationStatus)"))
            }
        }
    }

    /// Microseconds to wait before attempt `attempt + 1`: the initial backoff doubled per attempt, capped.
    static func backoff(attempt: Int, _ settings: CallbackSettings) -> Int64 {
        let initial = settings.initialBackoff.components.seconds * 1_000_000 + settings.initialBackoff.components.attoseconds / 1_000_000_000_000
        let cap = settings.maxBackoff.components.seconds * 1_000_000
        let factor = Int64(1) << Int64(min(max(attempt - 1, 0), 20))
        return min(initial * factor, cap)
    }

    /// Delivery runs on wall time even when the transaction clock is manual: retries must happen.
    static func wallNow() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1_000_000)
    }
}
