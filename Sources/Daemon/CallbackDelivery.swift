import AsyncHTTPClient
import Foundation
import Fronts
import Logging
import Ledger
import NIOCore
import ServiceLifecycle
import Workflows

/// Delivers the outbox: every callback committed with a transaction is handed on at least once,
/// across restarts — an http(s) callback is requested (GET, on allowed hosts only, redirects not
/// followed), an app-scheme callback goes to the configured command and to `xdg-open` when
/// enabled. Failures are retried with exponential backoff until `callbacks.max_attempts`, then
/// the row is `failed`. A row is due, and its backoff runs, on the bench clock: on a manual clock
/// a retry comes when the clock has moved by its backoff (docs/scenarios.md, "Virtual time"). A callback with nowhere to go but the reply (the default for app schemes)
/// is marked delivered: the reply carried it.
///
/// Deliveries run concurrently, at most `perTargetLimit` at a time to one target (an http(s)
/// callback's host and port; the command; xdg-open) and `totalLimit` in all, so a slow or dead
/// endpoint holds up only its own callbacks.
struct CallbackDelivery: Service {
    let bench: Bench
    let logger: Logger

    static let perTargetLimit = 2
    static let totalLimit = 64
    /// Rows read per look at the outbox; rows waiting for a busy target's slot are skipped, so one
    /// target's backlog of up to this many does not hide another target's rows.
    static let scanLimit = 1000

    /// The callbacks' own HTTP client: no redirects (an allowed host must not be able to send a
    /// callback on to a host that is not allowed), short connect timeout, no retried connection
    /// (the outbox retries), 10 s for an answer.
    static let clientConfiguration: HTTPClient.Configuration = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow,
                                                     timeout: .init(connect: .seconds(5), read: .seconds(10)))
        configuration.decompression = .disabled
        // A refused connection is this attempt's failure at once: the outbox retries with its own
        // backoff, so the client's retrying until the connect timeout would only hold a
        // delivery slot (and a resend's answer) for 5 s.
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }()

    func run() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.clientConfiguration)
        let settings = bench.configuration.callbacks
        let flights = bench.deliveryFlights
        await withDiscardingTaskGroup { group in
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                let due = (try? bench.ledger.pendingOutbox(now: bench.clock.nowMicroseconds(), limit: Self.scanLimit)) ?? []
                var started = 0
                for entry in due {
                    let key = Self.targetKey(entry.kind == .webhook ? entry.target : entry.payload, settings)
                    guard flights.admit(entry.id, key: key) else { continue }
                    started += 1
                    group.addTask {
                        let outcome = await deliver(entry, settings, client: client)
                        record(entry, outcome, settings, flights: flights)
                        flights.finish(entry.id, key: key)
                    }
                }
                flush(flights)
                try? await Task.sleep(for: started > 0 && due.count == Self.scanLimit ? .milliseconds(1) : .milliseconds(100))
            }
        }
        flush(flights)
        try? await client.shutdown()
    }

    /// One commit for the deliveries that succeeded since the last; a crash before it delivers
    /// them again (at least once). The rows are released only after the commit, so no look at
    /// the outbox in between starts them again.
    private func flush(_ flights: Flights) {
        let (delivered, answers) = flights.takeDelivered()
        guard !delivered.isEmpty else { return }
        if (try? bench.ledger.markDelivered(ids: delivered, at: bench.clock.nowMicroseconds(), answers: answers)) == nil {
            for id in delivered { _ = try? bench.ledger.markDelivered(id: id, at: bench.clock.nowMicroseconds(), answer: answers[id] ?? "delivered") }
        }
        flights.release(delivered)
    }

    private func record(_ entry: OutboxEntry, _ outcome: Result<String, DeliveryError>, _ settings: CallbackSettings, flights: Flights) {
        switch outcome {
        case .success(let answer):
            flights.delivered(entry.id, answer: answer)
            bench.metrics.recordDelivery(kind: entry.kind.rawValue, delivered: true)
        case .failure(let error):
            let backoff = Self.backoff(attempt: entry.attempts + 1, settings)
            let now = bench.clock.nowMicroseconds()
            let updated = try? bench.ledger.markAttemptFailed(id: entry.id, error: error.description, nextAttemptAt: now + backoff, at: now)
            bench.metrics.recordDelivery(kind: entry.kind.rawValue, delivered: false)
            if updated?.status == .failed {
                logger.warning("callback \(entry.id) of transaction \(entry.transactionID) given up after \(entry.attempts + 1) attempts: \(error)",
                               metadata: ["callback": "\(entry.id)", "transaction": "\(entry.transactionID)", "attempts": "\(entry.attempts + 1)"])
            }
        }
    }

    /// What a resend came to.
    enum Resent {
        /// The attempt, recorded.
        case attempted(OutboxAttempt)
        /// The delivery loop has the message in hand at this moment.
        case busy
        /// Made, but the ledger could not record it.
        case unrecorded(String)
    }

    /// Sends outbox message `entry` again now, as the delivery loop would (the same payload, so
    /// the same event id; a webhook signed with the merchant's current key), and records the
    /// attempt as a resend.
    static func resend(_ entry: OutboxEntry, bench: Bench) async -> Resent {
        guard bench.deliveryFlights.claim(entry.id) else { return .busy }
        defer { bench.deliveryFlights.unclaim(entry.id) }
        let settings = bench.configuration.callbacks
        let outcome: Result<String, DeliveryError>
        if entry.kind == .callback, !Callback.isHTTP(entry.payload), settings.command == nil, !settings.xdgOpen {
            // An app's callback that went only into its reply: there is nothing to send it to.
            outcome = .failure(DeliveryError(description: "nothing is configured to hand an app's callback on (callbacks.command or callbacks.xdg_open): it went only in the app's reply"))
        } else {
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
            outcome = await CallbackDelivery(bench: bench, logger: Logger(label: "cardbench.resend")).deliver(entry, settings, client: client)
            try? await client.shutdown()
        }
        let now = bench.clock.nowMicroseconds()
        do {
            switch outcome {
            case .success(let answer): return .attempted(try bench.ledger.recordResend(id: entry.id, at: now, delivered: true, answer: answer))
            case .failure(let error): return .attempted(try bench.ledger.recordResend(id: entry.id, at: now, delivered: false, answer: error.description))
            }
        } catch {
            return .unrecorded("\(error)")
        }
    }

    /// Who a delivery waits on: an http(s) callback's host and port, else the program it is handed to.
    static func targetKey(_ url: String, _ settings: CallbackSettings) -> String {
        if let (scheme, host, port) = CallbackTarget.parse(url) { return "\(scheme)://\(host):\(port)" }
        return settings.command.map { "command:\($0[0])" } ?? (settings.xdgOpen ? "xdg-open" : "reply")
    }

    struct DeliveryError: Error, CustomStringConvertible {
        let description: String
    }

    func deliver(_ entry: OutboxEntry, _ settings: CallbackSettings, client: HTTPClient) async -> Result<String, DeliveryError> {
        if entry.kind == .webhook { return await deliverWebhook(entry, settings, client: client) }
        let url = entry.payload
        // The same rule the workflows record by: a callback that is not http(s) and that nothing
        // is configured to hand on was recorded delivered with its transaction.
        if Callback.isHTTP(url) {
            guard let (_, host, _) = CallbackTarget.parse(url) else {
                return .failure(DeliveryError(description: "not a URL with a host: \(url.prefix(80))"))
            }
            guard CallbackTarget.isAllowed(host: host, settings.allowedHosts) else {
                return .failure(DeliveryError(description: "host \(host) is not in callbacks.allowed_hosts"))
            }
            do {
                var request = HTTPClientRequest(url: url)
                request.method = .GET
                let response = try await client.execute(request, timeout: .seconds(10))
                let code = Int(response.status.code)
                // Read (and drop) the body so the connection can be reused; a callback's answer has no meaning.
                _ = try? await response.body.collect(upTo: 64 << 10)
                if (300..<400).contains(code) {
                    let location = response.headers.first(name: "location").map { " to \($0.prefix(200))" } ?? ""
                    return .failure(DeliveryError(description: "HTTP \(code) from \(host): a redirect\(location), not followed (callbacks go only to allowed hosts)"))
                }
                guard (200..<300).contains(code) else {
                    return .failure(DeliveryError(description: "HTTP \(code) from \(host)"))
                }
                return .success("HTTP \(code) from \(host)")
            } catch {
                return .failure(DeliveryError(description: "\(error)"))
            }
        }
        var handed: [String] = []
        if let command = settings.command {
            if let error = await Self.runProgram(command[0], CallbackSettings.commandArguments(command, url: url)) { return .failure(error) }
            handed.append("\(command[0]) exited with status 0")
        }
        if settings.xdgOpen {
            if let error = await Self.runProgram("xdg-open", [url]) { return .failure(error) }
            handed.append("xdg-open exited with status 0")
        }
        return .success(handed.isEmpty ? "in the reply (nothing is configured to hand app callbacks on)" : handed.joined(separator: "; "))
    }

    /// A platform webhook: the payload POSTed as JSON to the endpoint its merchant registered
    /// (an admin's choice, so not limited to `callbacks.allowed_hosts`; redirects are not
    /// followed), signed as the Worldline platform signs: `X-GCS-Signature` is the base64
    /// HMAC-SHA256 of the body under the merchant's webhook secret, `X-GCS-KeyId` names the key.
    /// The key is read at delivery, so a webhook waiting through a key rotation goes out signed
    /// with the new key.
    func deliverWebhook(_ entry: OutboxEntry, _ settings: CallbackSettings, client: HTTPClient) async -> Result<String, DeliveryError> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(entry.payload.utf8)) as? [String: Any] else {
            return .failure(DeliveryError(description: "the webhook's payload is not a JSON object"))
        }
        // A Citcon IPN carries its own `sign`; its URL came with the merchant's charge, so it goes
        // only to the allowed hosts, as callbacks do.
        if object["transaction_type"] != nil, object["sign"] != nil {
            guard let (_, host, _) = CallbackTarget.parse(entry.target) else {
                return .failure(DeliveryError(description: "not a URL with a host: \(entry.target.prefix(80))"))
            }
            guard CallbackTarget.isAllowed(host: host, settings.allowedHosts) else {
                return .failure(DeliveryError(description: "host \(host) is not in callbacks.allowed_hosts"))
            }
            return await post(entry, headers: [], client: client)
        }
        guard let merchantID = object["merchantId"] as? String else {
            return .failure(DeliveryError(description: "the webhook's payload names no merchantId"))
        }
        let key: (keyID: String, secret: String)?
        do { key = try bench.ledger.worldlineWebhookKey(merchantID: merchantID) } catch {
            return .failure(DeliveryError(description: "cannot read the webhook key of \(merchantID): \(error)"))
        }
        guard let key else { return .failure(DeliveryError(description: "merchant \(merchantID) has no webhook key")) }
        return await post(entry, headers: [("X-GCS-Signature", WorldlineAuth.webhookSignature(entry.payload, secret: key.secret)),
                                           ("X-GCS-KeyId", key.keyID)], client: client)
    }

    /// POSTs the payload as JSON to the entry's target; a 2xx answer delivers it.
    func post(_ entry: OutboxEntry, headers: [(String, String)], client: HTTPClient) async -> Result<String, DeliveryError> {
        do {
            var request = HTTPClientRequest(url: entry.target)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            request.body = .bytes(ByteBuffer(string: entry.payload))
            let response = try await client.execute(request, timeout: .seconds(10))
            let code = Int(response.status.code)
            _ = try? await response.body.collect(upTo: 64 << 10)
            guard (200..<300).contains(code) else {
                return .failure(DeliveryError(description: "HTTP \(code) from the webhook endpoint \(entry.target.prefix(120))"))
            }
            return .success("HTTP \(code) from the webhook endpoint")
        } catch {
            return .failure(DeliveryError(description: "\(error)"))
        }
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
}

/// The deliveries under way: which rows, how many per target, and which succeeded since the
/// last commit.
///
/// A row is held from `admit` until its outcome is committed: a failure is committed before
/// `finish`, a success only by the next flush (one commit for many), so a succeeded row stays
/// held through `finish` until `release`. Were it let go at `finish`, the outbox scan between
/// `finish` and the flush would still see it pending and deliver it a second time.
final class Flights: @unchecked Sendable {
    // Unchecked: everything mutable is under `lock`.
    private let lock = NSLock()
    /// Rows being delivered, or delivered and waiting for their commit.
    private var rows: Set<Int64> = []
    /// Rows being delivered: the whole delivery's limit counts these.
    private var running = 0
    private var perTarget: [String: Int] = [:]
    private var succeeded: [Int64] = []
    /// What each delivered row's endpoint answered, for its attempt's record.
    private var answers: [Int64: String] = [:]
    /// Delivered rows held until their commit (`succeeded` is emptied by `takeDelivered`
    /// before the commit, perhaps before `finish`).
    private var held: Set<Int64> = []

    /// Takes row `id` for delivery unless it is under way already (or delivered and not yet
    /// committed), or its target or the whole delivery is at its limit.
    func admit(_ id: Int64, key: String) -> Bool {
        lock.withLock {
            guard !rows.contains(id), running < CallbackDelivery.totalLimit,
                  perTarget[key, default: 0] < CallbackDelivery.perTargetLimit else { return false }
            rows.insert(id)
            running += 1
            perTarget[key, default: 0] += 1
            return true
        }
    }

    /// Row `id` was delivered: it stays held until `release`, after its commit.
    func delivered(_ id: Int64, answer: String) {
        lock.withLock {
            succeeded.append(id)
            answers[id] = answer
            held.insert(id)
        }
    }

    /// Takes row `id` for a resend, whatever the limits (someone asked for it now); false while
    /// the delivery loop has it (being delivered, or delivered and not yet committed).
    func claim(_ id: Int64) -> Bool {
        lock.withLock { rows.insert(id).inserted }
    }

    /// Lets go of a row a resend claimed.
    func unclaim(_ id: Int64) {
        _ = lock.withLock { rows.remove(id) }
    }

    /// Row `id`'s delivery ended: its target's slot is free. A failed row (its attempt already
    /// committed) may be started again; a delivered one waits for `release`.
    func finish(_ id: Int64, key: String) {
        lock.withLock {
            running -= 1
            perTarget[key, default: 1] -= 1
            if perTarget[key] == 0 { perTarget[key] = nil }
            if !held.contains(id) { rows.remove(id) }
        }
    }

    /// The delivered rows not yet committed and their answers, for one commit; they stay held
    /// until `release`.
    func takeDelivered() -> ([Int64], [Int64: String]) {
        lock.withLock {
            defer {
                succeeded = []
                answers = [:]
            }
            return (succeeded, answers)
        }
    }

    /// Lets go of delivered rows once their delivery is committed.
    func release(_ ids: [Int64]) {
        lock.withLock {
            for id in ids {
                rows.remove(id)
                held.remove(id)
            }
        }
    }
}

/// An http(s) callback URL's scheme, host and port, and the allow-list rule.
enum CallbackTarget {
    /// Scheme (lower case), host (lower case, an IPv6 literal without its brackets) and port
    /// (the scheme's default when absent); nil for anything else.
    static func parse(_ url: String) -> (scheme: String, host: String, port: Int)? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", var host = components.host?.lowercased(), !host.isEmpty else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (scheme, host, components.port ?? (scheme == "https" ? 443 : 80))
    }

    /// Whether `host` is on the allow-list: the same name or address, written the same way (an
    /// IPv6 address with or without brackets). Nothing is resolved: `2130706433` or `127.1` is not
    /// `127.0.0.1` unless listed so.
    static func isAllowed(host: String, _ allowed: [String]) -> Bool {
        allowed.contains { entry in
            var e = entry.lowercased()
            if e.hasPrefix("["), e.hasSuffix("]") { e = String(e.dropFirst().dropLast()) }
            return e == host
        }
    }
}
