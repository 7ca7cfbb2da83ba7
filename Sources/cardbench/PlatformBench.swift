import ArgumentParser
import Daemon
import Foundation
import Fronts
import NIOCore
import NIOHTTP1
import NIOPosix

/// One request of a platform bench's client.
struct BenchRequest {
    var method: HTTPMethod
    var path: String
    var headers: [(String, String)]
    var body: String
}

/// What a connection of the load sends next: the first request, then one after each answer
/// (nil: this connection is done). Runs on the connection's event loop.
protocol BenchScript: AnyObject {
    func next(after answer: (status: Int, body: [UInt8])?) throws -> BenchRequest?
}

/// A keep-alive HTTP/1.1 connection of the load generator: one request at a time, as a merchant
/// backend's HTTP client sends them; each answer's latency noted.
final class HTTPLoadHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    let script: any BenchScript
    let done: EventLoopPromise<Void>
    let host: String
    private(set) var latencies: [Double] = []
    /// Operations answered 2xx, by the request's first path word after the merchant.
    private(set) var failures: [String] = []
    private var context: ChannelHandlerContext?
    private var status = 0
    private var body: [UInt8] = []
    private var sentAt: UInt64 = 0
    private var finished = false

    init(script: any BenchScript, host: String, done: EventLoopPromise<Void>) {
        self.script = script
        self.host = host
        self.done = done
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func go() { advance(nil) }

    private func advance(_ answer: (status: Int, body: [UInt8])?) {
        guard let context, !finished else { return }
        let request: BenchRequest?
        do { request = try script.next(after: answer) } catch {
            return finish(error)
        }
        guard let request else { return finish(nil) }
        var head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.path)
        head.headers.add(name: "Host", value: host)
        head.headers.add(name: "Content-Length", value: String(request.body.utf8.count))
        for (name, value) in request.headers { head.headers.add(name: name, value: value) }
        sentAt = DispatchTime.now().uptimeNanoseconds
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !request.body.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: request.body)))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func finish(_ error: (any Error)?) {
        guard !finished else { return }
        finished = true
        if let error { done.fail(error) } else { done.succeed() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            body.removeAll(keepingCapacity: true)
        case .body(let buffer):
            body += buffer.readableBytesView
        case .end:
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - sentAt) / 1e6)
            advance((status, body))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.context = nil
        finish(CLIError(message: "the platform closed a connection after \(latencies.count) answers"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(error)
        context.close(promise: nil)
    }
}

/// Runs `scripts` over as many keep-alive connections to 127.0.0.1:`port` from one event loop
/// thread; returns the latencies (ms) and the elapsed time.
func runHTTPLoad(port: Int, scripts: [any BenchScript]) async throws -> (latencies: [Double], elapsed: Duration) {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    defer { group.shutdownGracefully { _ in } }
    var handlers: [HTTPLoadHandler] = []
    for script in scripts {
        let handler = HTTPLoadHandler(script: script, host: "127.0.0.1:\(port)", done: group.next().makePromise())
        _ = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        handlers.append(handler)
    }
    let start = ContinuousClock.now
    for h in handlers { group.next().execute { h.go() } }
    for h in handlers { try await h.done.futureResult.get() }
    return (handlers.flatMap(\.latencies), ContinuousClock.now - start)
}

/// The figures a platform bench prints for one phase.
struct PlatformPhase: Encodable {
    let name: String
    let operations: Int
    let seconds: Double
    let perSecond: Double
    let p50Milliseconds: Double
    let p99Milliseconds: Double
    let daemonCPUMicrosecondsPerOperation: Double
    let clientCPUMicrosecondsPerOperation: Double
}

/// What both platform benches share: the daemon, the phases measured with the daemon's and this
/// process's CPU, the RSS before and after, the goal lines.
struct PlatformBenchRun {
    let daemon: BenchDaemon
    var phases: [PlatformPhase] = []

    mutating func phase(_ name: String, operations: Int, _ scripts: () throws -> [any BenchScript], port: Int) async throws {
        let made = try scripts()
        let daemonBefore = daemon.cpuSeconds, clientBefore = SaleBench.ownCPUSeconds()
        let (latencies, elapsed) = try await runHTTPLoad(port: port, scripts: made)
        let daemonCPU = daemon.cpuSeconds - daemonBefore, clientCPU = SaleBench.ownCPUSeconds() - clientBefore
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let sorted = latencies.sorted()
        phases.append(PlatformPhase(name: name, operations: operations, seconds: seconds, perSecond: Double(operations) / seconds,
                                    p50Milliseconds: percentile(sorted, 50), p99Milliseconds: percentile(sorted, 99),
                                    daemonCPUMicrosecondsPerOperation: daemonCPU * 1e6 / Double(operations),
                                    clientCPUMicrosecondsPerOperation: clientCPU * 1e6 / Double(operations)))
    }

    func printPhases() {
        for p in phases {
            print(String(format: "%@: %d in %.2f s = %.0f/s; p50 %.2f ms, p99 %.2f ms; CPU per operation: daemon %.0f µs, client %.0f µs (signing included)",
                         p.name, p.operations, p.seconds, p.perSecond, p.p50Milliseconds, p.p99Milliseconds,
                         p.daemonCPUMicrosecondsPerOperation, p.clientCPUMicrosecondsPerOperation))
        }
    }
}

/// The options both platform benches take.
struct PlatformBenchOptions: ParsableArguments {
    @Option(help: "Keep-alive connections, each a merchant backend's.")
    var connections: Int = 32

    @Option(help: "Payments in the first phase.")
    var count: Int = 20_000

    @Option(help: "Payments made, captured and refunded in the second phase (three operations each).")
    var lifecycles: Int = 3_000

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard (1...1000).contains(connections) else { throw CLIError(message: "--connections: must be 1 to 1000", code: 2) }
        guard count >= connections else { throw CLIError(message: "--count: must be at least --connections", code: 2) }
        guard lifecycles >= 0 else { throw CLIError(message: "--lifecycles: must be 0 or more", code: 2) }
    }
}

/// A platform bench's figures.
struct PlatformReport: Encodable {
    let operation: String
    let connections: Int
    let phases: [PlatformPhase]
    let daemonRSSBeforeKB: Int
    let daemonRSSAfterKB: Int
    let goalPaymentsPerSecond = 3000.0
}

extension PlatformBenchRun {
    /// What a platform bench measures, the same for each platform: a warm-up, `--count` payments
    /// (`payments(connection, count)` makes each connection's script) with the daemon's RSS
    /// before and after, then `--lifecycles` payments each captured and refunded; then the
    /// report, its goal lines named after `platform`.
    static func measure(platform: String, operation: String, paymentName: String, header: String, goalQualifier: String,
                        options o: PlatformBenchOptions, daemon: BenchDaemon, port: Int,
                        payments: @escaping (_ connection: Int, _ count: Int) -> any BenchScript,
                        lifecycles: @escaping (_ connection: Int, _ count: Int) -> any BenchScript) async throws {
        var run = PlatformBenchRun(daemon: daemon)
        do {
            try await run.phase("warm-up", operations: o.connections * 10, { (0..<o.connections).map { payments($0, 10) } }, port: port)
            run.phases.removeAll()
            let rssBefore = daemon.residentKB
            let per = o.count / o.connections
            try await run.phase(paymentName, operations: per * o.connections, { (0..<o.connections).map { payments(1000 + $0, per) } }, port: port)
            let rssAfter = daemon.residentKB
            if o.lifecycles > 0 {
                let each = max(1, o.lifecycles / o.connections)
                try await run.phase("\(paymentName), capture, refund", operations: each * o.connections * 3,
                                    { (0..<o.connections).map { lifecycles(2000 + $0, each) } }, port: port)
            }
            let report = PlatformReport(operation: operation, connections: o.connections, phases: run.phases, daemonRSSBeforeKB: rssBefore,
                                        daemonRSSAfterKB: rssAfter)
            if o.json { return try printJSON(report) }
            print(header)
            run.printPhases()
            let first = run.phases[0]
            print(String(format: "daemon RSS: %.1f MB before the %@ phase, %.1f MB after: %+.1f MB", Double(rssBefore) / 1024, paymentName,
                         Double(rssAfter) / 1024, Double(rssAfter - rssBefore) / 1024))
            print(String(format: "goal: ≥ 3,000 %@ payments/s%@: %.0f/s, %@", platform, goalQualifier, first.perSecond,
                         verdict(first.perSecond >= report.goalPaymentsPerSecond)))
            print(first.operations >= 100_000
                  ? String(format: "goal: %@ RSS within 5 MB over %d payments: %+.1f MB, %@", platform, first.operations,
                           Double(rssAfter - rssBefore) / 1024, verdict(abs(rssAfter - rssBefore) <= 5 * 1024))
                  : "goal of 100,000 payments: RSS within 5 MB (run with --count 100000)")
        } catch let error as CLIError {
            throw daemon.failure(error)
        }
    }
}

/// The answer's JSON object, or a failure naming what was sent and what came back.
func benchJSON(_ answer: (status: Int, body: [UInt8]), expect: Int = 200, _ what: String) throws -> [String: Any] {
    let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
    guard (200..<300).contains(answer.status), let object else {
        throw CLIError(message: "\(what): HTTP \(answer.status): \(String(decoding: answer.body.prefix(400), as: UTF8.self))")
    }
    return object
}

// MARK: - Worldline

struct WorldlineBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worldline",
        abstract: "Payments per second through cardbench's Worldline platform, as a merchant backend sends them.",
        discussion: """
        Starts `cardbenchd` with the Worldline platform listening (worldline.port: 0), makes a \
        merchant API key, then sends createPayment (POST /v2/{merchantId}/payments: a plain card, \
        FINAL_AUTHORIZATION) over --connections keep-alive connections, one request at a time on \
        each, every request signed with v1HMAC in this client (Date, the string to sign, \
        HMAC-SHA256) as the official SDKs sign. A second phase mixes in the payment's life: each \
        connection creates a payment, captures it, and refunds the capture. The daemon's CPU and \
        this client's (one SwiftNIO event loop thread) are printed per operation. Goal: ≥ 3,000 \
        payments/s, client signing included; the daemon's RSS within 5 MB of before over 100,000.
        """
    )

    @OptionGroup var options: PlatformBenchOptions

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-worldline-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await BenchDaemon(directory: directory, yaml: "http:\n  port: off\nworldline:\n  port: 0\n  settle_seconds: 0.01\n")
        defer { daemon.stop() }
        let key = try benchJSON((200, Array(try await daemon.client.send(method: "POST", "/v1/worldline/api-keys", json: ["merchantId": "bench"]).body)), "POST /v1/worldline/api-keys")
        guard let keyID = key["keyId"] as? String, let secret = key["secretApiKey"] as? String,
              let port = Int(try String(contentsOfFile: daemon.runtime + "/worldline.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw daemon.failure(CLIError(message: "no API key or port from the Worldline platform"))
        }
        let signer = WorldlineSigner(keyID: keyID, secret: secret)
        try await PlatformBenchRun.measure(
            platform: "Worldline", operation: "worldline-createPayment-through-cardbenchd", paymentName: "createPayment",
            header: "cardbench bench worldline: merchant backends to cardbench's Worldline platform, \(options.connections) keep-alive connections, v1HMAC signed in this client",
            goalQualifier: ", client signing included", options: options, daemon: daemon, port: port,
            payments: { _, count in WorldlineCreate(signer, count: count) }, lifecycles: { _, count in WorldlineLifecycle(signer, count: count) })
    }
}

/// Signs as the Worldline SDKs do: `Date`, then HMAC-SHA256 of the string to sign.
struct WorldlineSigner {
    let keyID: String
    let secret: String
    private let formatter: DateFormatter

    init(keyID: String, secret: String) {
        self.keyID = keyID
        self.secret = secret
        formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    }

    func request(_ method: HTTPMethod, _ path: String, body: String) -> BenchRequest {
        let date = formatter.string(from: Date())
        let text = WorldlineAuth.stringToSign(method: method.rawValue, contentType: "application/json", date: date, gcsHeaders: [], pathAndQuery: path)
        return BenchRequest(method: method, path: path, headers: [
            ("Date", date), ("Content-Type", "application/json"),
            ("Authorization", "GCS v1HMAC:\(keyID):\(WorldlineAuth.signature(text, secret: secret))"),
        ], body: body)
    }
}

/// The Scenarios/cards visa-credit-cvn10 card (its issuer holds a balance for five million of
/// these 0.10 payments).
private let benchCard = #"{"cardNumber":"4761739001010010","expiryDate":"1231","cvv":"123"}"#

private func worldlinePayment(_ amount: Int) -> String {
    #"{"order":{"amountOfMoney":{"amount":\#(amount),"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"FINAL_AUTHORIZATION","card":\#(benchCard)}}"#
}

/// createPayment, `count` times; each must be PENDING_CAPTURE.
final class WorldlineCreate: BenchScript {
    let signer: WorldlineSigner
    var left: Int
    init(_ signer: WorldlineSigner, count: Int) {
        self.signer = signer
        left = count
    }
    func next(after answer: (status: Int, body: [UInt8])?) throws -> BenchRequest? {
        if let answer {
            let json = try benchJSON(answer, "createPayment")
            guard let status = (json["payment"] as? [String: Any])?["status"] as? String, status == "PENDING_CAPTURE" else {
                throw CLIError(message: "createPayment: not PENDING_CAPTURE: \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
            }
        }
        guard left > 0 else { return nil }
        left -= 1
        return signer.request(.POST, "/v2/bench/payments", body: worldlinePayment(10))
    }
}

/// createPayment, capture it, refund the capture; `count` times.
final class WorldlineLifecycle: BenchScript {
    let signer: WorldlineSigner
    var left: Int
    var step = 0
    var payment = ""
    init(_ signer: WorldlineSigner, count: Int) {
        self.signer = signer
        left = count
    }
    func next(after answer: (status: Int, body: [UInt8])?) throws -> BenchRequest? {
        if let answer {
            let json = try benchJSON(answer, ["createPayment", "capture", "refund"][step])
            if step == 0 {
                guard let id = (json["payment"] as? [String: Any])?["id"] as? String else { throw CLIError(message: "createPayment: no payment id") }
                payment = id
            }
            step = (step + 1) % 3
        }
        switch step {
        case 0:
            guard left > 0 else { return nil }
            left -= 1
            return signer.request(.POST, "/v2/bench/payments", body: worldlinePayment(10))
        case 1:
            return signer.request(.POST, "/v2/bench/payments/\(payment)/capture", body: #"{"amount":10,"isFinal":true}"#)
        default:
            return signer.request(.POST, "/v2/bench/payments/\(payment)/refund", body: #"{"amountOfMoney":{"amount":10,"currencyCode":"EUR"}}"#)
        }
    }
}

// MARK: - Citcon

struct CitconBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "citcon",
        abstract: "Card charges per second through cardbench's Citcon UPI platform, as a merchant backend sends them.",
        discussion: """
        Starts `cardbenchd` with the Citcon platform listening (citcon.port: 0), makes a merchant \
        and a server access token, then sends card charges (POST /v1/charges, Bearer token) over \
        --connections keep-alive connections, one request at a time on each. A second phase mixes \
        in capture and refund: each connection charges, captures the charge, and refunds the \
        capture. The daemon's CPU and this client's are printed per operation. Goal: ≥ 3,000 \
        payments/s; the daemon's RSS within 5 MB of before over 100,000.
        """
    )

    @OptionGroup var options: PlatformBenchOptions

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-citcon-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await BenchDaemon(directory: directory, yaml: "http:\n  port: off\ncitcon:\n  port: 0\n")
        defer { daemon.stop() }
        let merchant = try benchJSON((200, Array(try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "bench"]).body)),
                                     "POST /v1/citcon/merchants")
        guard let key = merchant["key"] as? String,
              let port = Int(try String(contentsOfFile: daemon.runtime + "/citcon.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw daemon.failure(CLIError(message: "no merchant key or port from the Citcon platform"))
        }
        let token = CitconToken(merchantKey: key)
        do { _ = try await runHTTPLoad(port: port, scripts: [token]) } catch { throw daemon.failure(error) }
        guard let bearer = token.token else { throw daemon.failure(CLIError(message: "no access token from POST /v1/access-tokens")) }
        try await PlatformBenchRun.measure(
            platform: "Citcon", operation: "citcon-card-charge-through-cardbenchd", paymentName: "card charge",
            header: "cardbench bench citcon: merchant backends to cardbench's Citcon platform, \(options.connections) keep-alive connections, a server access token",
            goalQualifier: "", options: options, daemon: daemon, port: port,
            payments: { c, count in CitconCharges(bearer, connection: c, count: count, lifecycle: false) },
            lifecycles: { c, count in CitconCharges(bearer, connection: c, count: count, lifecycle: true) })
    }
}

/// Asks for a server access token once.
final class CitconToken: BenchScript {
    let merchantKey: String
    var token: String?
    init(merchantKey: String) { self.merchantKey = merchantKey }
    func next(after answer: (status: Int, body: [UInt8])?) throws -> BenchRequest? {
        if let answer {
            token = (try benchJSON(answer, "POST /v1/access-tokens")["data"] as? [String: Any])?["access_token"] as? String
            return nil
        }
        return BenchRequest(method: .POST, path: "/v1/access-tokens", headers: [("Authorization", "Bearer " + merchantKey), ("Content-Type", "application/json")],
                            body: #"{"token_type":"server"}"#)
    }
}

/// Card charges (`count`), or charges each captured and its capture refunded.
final class CitconCharges: BenchScript {
    let bearer: String
    let connection: Int
    let lifecycle: Bool
    var left: Int
    var step = 0
    var charge = ""
    var n = 0
    init(_ bearer: String, connection: Int, count: Int, lifecycle: Bool) {
        self.bearer = bearer
        self.connection = connection
        self.lifecycle = lifecycle
        left = count
    }
    private func request(_ path: String, _ body: String) -> BenchRequest {
        BenchRequest(method: .POST, path: path, headers: [("Authorization", "Bearer " + bearer), ("Content-Type", "application/json")], body: body)
    }
    func next(after answer: (status: Int, body: [UInt8])?) throws -> BenchRequest? {
        if let answer {
            let json = try benchJSON(answer, ["charge", "capture", "refund"][step])
            let data = json["data"] as? [String: Any]
            if step == 0 {
                guard let id = data?["id"] as? String else { throw CLIError(message: "charge: no id: \(String(decoding: answer.body.prefix(300), as: UTF8.self))") }
                charge = id
            }
            if lifecycle { step = (step + 1) % 3 }
        }
        n += 1
        let reference = "b\(connection)-\(n)"
        switch step {
        case 0:
            guard left > 0 else { return nil }
            left -= 1
            return request("/v1/charges", #"{"transaction":{"reference":"\#(reference)","amount":10,"currency":"USD","country":"US","auto_capture":\#(lifecycle ? "false" : "true")},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}}"#)
        case 1:
            return request("/v1/captures", #"{"transaction_id":"\#(charge)","amount":10,"reference":"\#(reference)"}"#)
        default:
            return request("/v1/refunds", #"{"transaction_id":"\#(charge)","amount":10,"reference":"\#(reference)"}"#)
        }
    }
}
