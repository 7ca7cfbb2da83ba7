import ArgumentParser
import CardIO
import Daemon
import Defaults
import EMV
import Foundation
import GRDB
import ISO8583
import Ledger
import NIOCore
import NIOPosix
import Terminal
import VirtualCard
import Workflows

/// `cardbench bench iso8583`: external terminals loading cardbench's issuer over ISO 8583.
struct ISO8583Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iso8583",
        abstract: "Authorisations per second and latency of cardbench's ISO 8583 issuer, beside a TCP echo and a durable commit.",
        discussion: """
        Starts `cardbenchd` (the binary beside this one) with its issuer listening for ISO 8583 \
        (host.iso8583.listen: 0, pyiso8583's default packager, binary2 framing), then plays external \
        terminals: 0200 sales and 0100 pre-authorisations with field 55, each ARQC made beforehand \
        by the virtual card --card through cardbench's kernel (a pool of them, reused: the issuer \
        checks the cryptogram, not the ATC's freshness), each terminal its own TID and STANs. The \
        issuer verifies each ARQC, answers with an ARPC and records each authorisation durably. \
        First one message at a time on one connection (--latency-count), beside two floors measured \
        in the same run: a round trip to a TCP echo server of the same framing (in this process, on \
        SwiftNIO) and one bare durable SQLite commit. Then --connections connections opened and \
        held at once, each with --depth messages in flight (pipelined), --count messages in all, \
        from a load generator on one SwiftNIO event loop thread in this process (its CPU printed). \
        Every answer is checked (response code 00, the ARPC the card's keys give) and the ledger \
        is counted after the daemon stops. Goals: ≥ 5,000 authorisations/s with ≥ 1,000 \
        connections on 2 cores, load generator included; p50 one at a time ≤ 2x the two floors \
        added; RSS within 5 MB of before over 100,000 authorisations.
        """
    )

    @Option(help: "Connections held open at once (1–20000), each an external terminal.")
    var connections: Int = 1000

    @Option(help: "Messages in flight on each connection (pipelining).")
    var depth: Int = 4

    @Option(help: "Authorisations in the timed run, spread over the connections.")
    var count: Int = 100_000

    @Option(help: "Authorisations one at a time for the latency, and as many echo round trips and floor commits.")
    var latencyCount: Int = 2000

    @Option(help: "The card profile whose ARQCs the terminals send (an embedded profile or a file).")
    var card: String = EmbeddedDefaults.demoCard

    @Option(help: ArgumentHelp("Run the daemon under valgrind's callgrind, counting the timed authorisations, and write its profile to this file.",
                               discussion: "Use a small --count and --connections: messages run about 50 times slower."))
    var callgrind: String?

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard (1...20_000).contains(connections) else { throw CLIError(message: "--connections: must be 1 to 20000", code: 2) }
        guard (1...256).contains(depth) else { throw CLIError(message: "--depth: must be 1 to 256", code: 2) }
        guard count >= connections, count <= 10_000_000 else { throw CLIError(message: "--count: must be --connections to 10000000", code: 2) }
        guard count / connections <= 999_999 else { throw CLIError(message: "--count: at most 999,999 per connection (a terminal's STANs)", code: 2) }
        guard (10...100_000).contains(latencyCount) else { throw CLIError(message: "--latency-count: must be 10 to 100000", code: 2) }
    }

    struct Report: Encodable {
        let operation = "iso8583-authorisation-through-cardbenchd"
        let connections: Int
        let depth: Int
        let authorisations: Int
        let approvedWithValidARPC: Int
        let recordedInLedger: Int
        let seconds: Double
        let authorisationsPerSecond: Double
        let loadedP50Milliseconds: Double
        let loadedP99Milliseconds: Double
        let oneAtATimeP50Milliseconds: Double
        let oneAtATimeP99Milliseconds: Double
        let echoRoundTripP50Milliseconds: Double
        let floorCommitP50Milliseconds: Double
        let p50RatioToFloors: Double
        let daemonCPUMicrosecondsPerAuthorisation: Double
        let daemonSystemCPUMicrosecondsPerAuthorisation: Double
        let loadGeneratorCPUMicrosecondsPerAuthorisation: Double
        let daemonRSSBeforeKB: Int
        let daemonRSSAfterKB: Int
        let daemonInstructionsPerAuthorisation: Double?
        let goalAuthorisationsPerSecond = 5000.0
        let goalConnections = 1000
        let goalRatioToFloors = 2.0
        let goalRSSGrowthKB = 5 * 1024
    }

    func run() async throws {
        FileLimit.raise(to: connections * 2 + 512)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-iso8583-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let framing = Framing.binary2
        let packager = Packager.pyiso8583Default

        // The terminals' requests: ARQCs the card made, through the kernel as cardbench's own
        // terminals make them; with the ARPC each should be answered with.
        let profile = try loadCardProfile(card, option: "--card")
        let pool = try Self.cryptograms(profile, count: 64)

        // Floors, in this run: a framed round trip to an echo server, and a durable commit.
        let floorCommits = try Ledger.measureCommitFloor(path: directory.appendingPathComponent("floor.sqlite").path, count: latencyCount).sorted()
        let echo = try Self.echoRoundTrips(framing: framing, count: latencyCount).sorted()

        var yaml = "http:\n  port: off\nviva:\n  amount_table: none\nhost:\n  iso8583:\n    listen: 0\n    max_connections: \(connections + 64)\n"
        if FileManager.default.fileExists(atPath: card) { yaml += "  cards: [\"\(card)\"]\n" }
        let daemon = try await BenchDaemon(directory: directory, yaml: yaml, callgrind: callgrind)
        defer { daemon.stop() }
        let hostBody = try JSONSerialization.jsonObject(with: try await daemon.client.send(method: "GET", "/v1/host").body)
        guard let listen = ((hostBody as? [String: Any])?["iso8583"] as? [String: Any])?["listen"] as? String,
              let port = UInt16(listen.split(separator: ":").last ?? "") else {
            throw daemon.failure(CLIError(message: "the daemon does not say where its ISO 8583 issuer listens"))
        }
        let now = UTCDateParts(secondsSince1970: Int64(Date().timeIntervalSince1970))
        func message(connection: Int, n: Int) throws -> [UInt8] {
            let entry = pool[n % pool.count]
            let r = entry.request
            var request = AuthorisationRequest(pan: r.pan, aid: r.aid, kind: n % 2 == 0 ? .purchase : .preAuthorisation, amount: r.amount,
                                               currency: r.currency, arqc: r.arqc, cryptogramData: r.cryptogramData, date: r.date)
            request.posEntryMode = r.posEntryMode
            let tid = "B" + String(format: "%07d", connection)
            let stan = STAN(n % 999_999 + 1)!
            let context = MessageContext(terminalID: tid, merchantID: "BENCHMERCHANT01", stan: stan,
                                         rrn: String(format: "%05d%07d", connection % 100_000, n), date: now)
            return try packager.pack(TerminalMessages.authorisation(request, context))
        }

        // One at a time, on one connection.
        let single = try FramedConnection.connect(host: "127.0.0.1", port: port, framing: framing, timeout: .seconds(30))
        var oneAtATime: [Double] = []
        var answers: [[UInt8]] = []
        var expected: [[UInt8]] = []
        for n in 0..<latencyCount {
            let bytes = try message(connection: 0, n: n)
            let t0 = ContinuousClock.now
            try single.send(bytes)
            let answer = try single.receive(until: .now + .seconds(30)).message
            oneAtATime.append(milliseconds(ContinuousClock.now - t0))
            answers.append(answer)
            expected.append(pool[n % pool.count].issuerData)
        }
        single.close()
        oneAtATime.sort()

        // Under load: every connection open before the clock starts.
        let perConnection = count / connections
        let total = perConnection * connections
        let frames = try (0..<connections).map { c in try (0..<perConnection).map { try framing.frame(try message(connection: c + 1, n: $0)) } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        var handlers: [LoadHandler] = []
        var channels: [any Channel] = []
        for c in 0..<connections {
            let handler = LoadHandler(frames: frames[c], depth: depth, done: group.next().makePromise())
            let channel = try await ClientBootstrap(group: group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers([ByteToMessageHandler(ISO8583FrameDecoder(framing: framing)), handler])
                    }
                }
                .connect(host: "127.0.0.1", port: Int(port)).get()
            handlers.append(handler)
            channels.append(channel)
        }
        // Held open at once: each connection answers an echo test before the clock starts.
        try await Self.echoTest(channels, handlers, packager: packager, framing: framing)
        let open = channels.filter(\.isActive).count

        // A warm-up at full load (a sixth of the run, at most 20,000) before anything is read, so
        // "before" is the daemon in its stride: its pools, the ledger's page cache and its
        // bounded memories of recent messages filled.
        let warm = min(perConnection / 6, max(1, 20_000 / connections))
        for handler in handlers { handler.limit = warm }
        for (channel, handler) in zip(channels, handlers) { channel.eventLoop.execute { handler.go() } }
        do {
            for handler in handlers { try await handler.done.futureResult.get() }
        } catch {
            throw daemon.failure(error)
        }
        for handler in handlers { handler.rearm(limit: perConnection, done: group.next().makePromise()) }
        let rssBefore = daemon.residentKB
        try daemon.countInstructions()
        let daemonCPUBefore = daemon.cpuSeconds, daemonSystemBefore = daemon.systemCPUSeconds
        let clientCPUBefore = SaleBench.ownCPUSeconds()
        let start = ContinuousClock.now
        for (channel, handler) in zip(channels, handlers) { channel.eventLoop.execute { handler.go() } }
        do {
            for handler in handlers { try await handler.done.futureResult.get() }
        } catch {
            throw daemon.failure(error)
        }
        let elapsed = ContinuousClock.now - start
        let daemonCPU = daemon.cpuSeconds - daemonCPUBefore, daemonSystem = daemon.systemCPUSeconds - daemonSystemBefore
        let clientCPU = SaleBench.ownCPUSeconds() - clientCPUBefore
        let instructions = try daemon.dumpInstructions(part: 1, label: "timed authorisations")
        let timed = total - warm * connections
        let rssAfter = daemon.residentKB
        for channel in channels { try? await channel.close() }

        // Every answer checked, the timed ones and the one-at-a-time ones.
        for (c, handler) in handlers.enumerated() {
            answers += handler.answers
            expected += (0..<perConnection).map { pool[$0 % pool.count].issuerData }
            _ = c
        }
        var approved = 0
        var firstProblem: String?
        for (bytes, issuerData) in zip(answers, expected) {
            do {
                let answer = try packager.unpack(bytes)
                let icc = answer.bytes(55).flatMap { try? TLV.parse($0) } ?? []
                let arpc = icc.first { $0.tag == 0x91 }?.value
                if answer[39] == "00", arpc == issuerData { approved += 1 } else if firstProblem == nil {
                    firstProblem = "\(answer.mti) 39=\(answer[39] ?? "none") 91=\(arpc.map(Hex.encode) ?? "none") (expected \(Hex.encode(issuerData)))"
                }
            } catch {
                if firstProblem == nil { firstProblem = "an answer does not unpack: \(error)" }
            }
        }
        daemon.stop()
        let recorded = try Self.recordedAuthorisations(ledger: daemon.stateDirectory + "/ledger.sqlite")

        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let loaded = handlers.flatMap { $0.latencies.dropFirst(warm) }.sorted()
        let floors = percentile(echo, 50) + percentile(floorCommits, 50) / 1000
        let report = Report(connections: open, depth: depth, authorisations: timed, approvedWithValidARPC: approved, recordedInLedger: recorded,
                            seconds: seconds, authorisationsPerSecond: Double(timed) / seconds,
                            loadedP50Milliseconds: percentile(loaded, 50), loadedP99Milliseconds: percentile(loaded, 99),
                            oneAtATimeP50Milliseconds: percentile(oneAtATime, 50), oneAtATimeP99Milliseconds: percentile(oneAtATime, 99),
                            echoRoundTripP50Milliseconds: percentile(echo, 50), floorCommitP50Milliseconds: percentile(floorCommits, 50) / 1000,
                            p50RatioToFloors: percentile(oneAtATime, 50) / floors,
                            daemonCPUMicrosecondsPerAuthorisation: daemonCPU * 1e6 / Double(timed),
                            daemonSystemCPUMicrosecondsPerAuthorisation: daemonSystem * 1e6 / Double(timed),
                            loadGeneratorCPUMicrosecondsPerAuthorisation: clientCPU * 1e6 / Double(timed),
                            daemonRSSBeforeKB: rssBefore, daemonRSSAfterKB: rssAfter,
                            daemonInstructionsPerAuthorisation: instructions.map { Double($0) / Double(timed) })
        if json { try printJSON(report) } else { print(report: report, profile: profile) }
        let all = answers.count
        if approved != all {
            throw CLIError(message: "\(all - approved) of \(all) answers were not an approval with the card's ARPC; the first: \(firstProblem ?? "?")")
        }
        if recorded != all {
            throw CLIError(message: "the ledger holds \(recorded) approved ISO 8583 authorisations, the terminals were answered \(all) approvals")
        }
    }

    func print(report r: Report, profile: CardProfile) {
        Swift.print("cardbench bench iso8583: external terminals to cardbench's issuer (pyiso8583-default, binary2), 0200 and 0100 with field 55 from \(card) (\(profile.applications.first.map { "\($0.cvn)" } ?? "?"))")
        Swift.print(String(format: "load: %d connections open at once, %d in flight on each: %d authorisations in %.2f s = %.0f/s (after a warm-up of a sixth); latency under load p50 %.2f ms, p99 %.2f ms",
                           r.connections, r.depth, r.authorisations, r.seconds, r.authorisationsPerSecond, r.loadedP50Milliseconds, r.loadedP99Milliseconds))
        Swift.print(String(format: "checked: %d answers approved with the ARPC the card's keys give (latency run included); %d approved authorisations in the ledger",
                           r.approvedWithValidARPC, r.recordedInLedger))
        Swift.print(String(format: "one at a time: p50 %.3f ms, p99 %.3f ms", r.oneAtATimeP50Milliseconds, r.oneAtATimeP99Milliseconds))
        Swift.print(String(format: "floor: a framed round trip to a TCP echo server (SwiftNIO, this process), p50 %.3f ms", r.echoRoundTripP50Milliseconds))
        Swift.print(String(format: "floor: one durable SQLite commit (WAL, synchronous=FULL), p50 %.3f ms", r.floorCommitP50Milliseconds))
        Swift.print(String(format: "CPU per authorisation: daemon %.0f µs (%.0f µs of it in the kernel), load generator %.0f µs (one event loop thread); together %.0f µs = %.0f/s on 2 cores",
                           r.daemonCPUMicrosecondsPerAuthorisation, r.daemonSystemCPUMicrosecondsPerAuthorisation, r.loadGeneratorCPUMicrosecondsPerAuthorisation,
                           r.daemonCPUMicrosecondsPerAuthorisation + r.loadGeneratorCPUMicrosecondsPerAuthorisation,
                           2e6 / (r.daemonCPUMicrosecondsPerAuthorisation + r.loadGeneratorCPUMicrosecondsPerAuthorisation)))
        if let i = r.daemonInstructionsPerAuthorisation { Swift.print(String(format: "instructions (callgrind, daemon): %.0f per authorisation", i)) }
        Swift.print(String(format: "daemon RSS: %.1f MB before the timed authorisations, %.1f MB after: %+.1f MB", Double(r.daemonRSSBeforeKB) / 1024,
                           Double(r.daemonRSSAfterKB) / 1024, Double(r.daemonRSSAfterKB - r.daemonRSSBeforeKB) / 1024))
        Swift.print(String(format: "goal: ≥ 5,000 ISO 8583 authorisations/s, load generator included: %.0f/s, %@", r.authorisationsPerSecond,
                           verdict(r.authorisationsPerSecond >= r.goalAuthorisationsPerSecond)))
        Swift.print(String(format: "goal: ≥ 1,000 connections held open at once, pipelining %d deep: %d, %@", r.depth, r.connections,
                           verdict(r.connections >= r.goalConnections && r.depth > 1)))
        Swift.print(String(format: "goal: ISO 8583 p50 one at a time ≤ 2x (TCP echo round trip + durable commit): %.2fx, %@", r.p50RatioToFloors,
                           verdict(r.p50RatioToFloors <= r.goalRatioToFloors)))
        Swift.print(r.authorisations >= 100_000
                    ? String(format: "goal: ISO 8583 RSS within 5 MB over %d authorisations: %+.1f MB, %@", r.authorisations,
                             Double(r.daemonRSSAfterKB - r.daemonRSSBeforeKB) / 1024, verdict(abs(r.daemonRSSAfterKB - r.daemonRSSBeforeKB) <= r.goalRSSGrowthKB))
                    : "goal of 100,000 authorisations: RSS within 5 MB (run with --count 100000)")
    }

    /// `count` authorisation requests the card made through the kernel (a local issuer with the
    /// card's keys approved each, so the card finished its transaction), with the issuer
    /// authentication data (91) an approval of each carries.
    static func cryptograms(_ profile: CardProfile, count: Int) throws -> [(request: AuthorisationRequest, issuerData: [UInt8])] {
        let pinKey = try TDESKey(SecureRandom.bytes(16))
        let host = RecordingHost(EmulatedHost(pinKey: pinKey, amountTable: .none))
        try host.issuer.register(profile)
        let link = VirtualCardLink(try VirtualCard(profile: profile))
        let date = UTCDateParts(secondsSince1970: Int64(Date().timeIntervalSince1970))
        var made: [(AuthorisationRequest, [UInt8])] = []
        for i in 0..<count {
            var kernel = Kernel(configuration: TerminalConfiguration(pinKey: pinKey), card: link, keypad: TerminalKeypad(autoPIN: profile.pin), host: host)
            _ = try kernel.run(TransactionRequest(amount: 10, date: date, stan: STAN(i + 1)!))
            guard let request = host.last?.request, let data = host.last?.response.issuerAuthenticationData, request.arqc != nil,
                  host.last?.response.responseCode == .approved else {
                throw CLIError(message: "--card: the card made no ARQC its issuer approves (\(host.last.map { "\($0.response.responseCode)" } ?? "no authorisation"))")
            }
            // (An online PIN block, under this bench's key, is left out of the messages.)
            made.append((request, data))
        }
        return made
    }

    /// Round trips of one framed message to an echo server of the same framing on SwiftNIO.
    static func echoRoundTrips(framing: Framing, count: Int) throws -> [Double] {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let server = try ServerBootstrap(group: group)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([ByteToMessageHandler(ISO8583FrameDecoder(framing: framing)), EchoHandler(framing: framing)])
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        defer { try? server.close().wait() }
        let c = try FramedConnection.connect(host: "127.0.0.1", port: UInt16(server.localAddress!.port!), framing: framing, timeout: .seconds(10))
        defer { c.close() }
        // A message of an authorisation's size.
        let message = [UInt8](repeating: 0x30, count: 180)
        var times: [Double] = []
        for _ in 0..<count {
            let t0 = ContinuousClock.now
            try c.send(message)
            _ = try c.receive(until: .now + .seconds(10))
            times.append(milliseconds(ContinuousClock.now - t0))
        }
        return times
    }

    /// An 0800 echo test on every connection, answered before the timed run starts.
    static func echoTest(_ channels: [any Channel], _ handlers: [LoadHandler], packager: Packager, framing: Framing) async throws {
        for (i, (channel, handler)) in zip(channels, handlers).enumerated() {
            var m = ISOMessage(mti: "0800")
            m[7] = "0101000000"
            m[11] = String(format: "%06d", i % 999_999 + 1)
            m[41] = "B" + String(format: "%07d", i + 1)
            m[70] = "301"
            let bytes = try framing.frame(try packager.pack(m))
            let answered = channel.eventLoop.makePromise(of: Void.self)
            channel.eventLoop.execute { handler.echo(bytes, answered) }
            try await answered.futureResult.get()
        }
    }

    /// Approved ISO 8583 authorisations in the ledger (the daemon stopped).
    static func recordedAuthorisations(ledger path: String) throws -> Int {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        return try queue.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM txn WHERE provider = 'iso8583' AND status = 'approved' AND action IN ('sale', 'pre_auth')") ?? 0
        }
    }
}

/// The issuer behind the bench's kernel: asks `issuer`, and keeps the last request and answer.
final class RecordingHost: AuthorisationHost, @unchecked Sendable {
    let issuer: EmulatedHost
    var last: (request: AuthorisationRequest, response: AuthorisationResponse)?
    init(_ issuer: EmulatedHost) { self.issuer = issuer }
    func authorise(_ request: AuthorisationRequest) throws(HostError) -> AuthorisationResponse {
        let response = try issuer.authorise(request)
        last = (request, response)
        return response
    }
    func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse) { issuer.reverse(request, approval: approval) }
}

/// A virtual card in this process, as the kernel's card.
final class VirtualCardLink: CardLink {
    private var card: VirtualCard
    init(_ card: VirtualCard) { self.card = card }
    func powerOn() throws(KernelError) -> [UInt8] { card.powerOn(.contact) }
    func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8] { card.respond(to: command) }
}

/// Echoes each frame back (the floor's server).
private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = (tpdu: [UInt8]?, message: [UInt8])
    typealias OutboundOut = ByteBuffer
    let framing: Framing
    init(framing: Framing) { self.framing = framing }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard let bytes = try? framing.frame(frame.message, tpdu: frame.tpdu ?? Framing.defaultTPDU) else { return }
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }
}

/// One external terminal of the load: keeps `depth` of its frames in flight until all are
/// answered, noting each answer and its latency. Used on its channel's event loop only.
final class LoadHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = (tpdu: [UInt8]?, message: [UInt8])
    typealias OutboundOut = ByteBuffer
    let frames: [[UInt8]]
    let depth: Int
    private(set) var done: EventLoopPromise<Void>
    /// How many of `frames` this run sends (a warm-up sends the first ones).
    var limit: Int
    private(set) var answers: [[UInt8]] = []
    private(set) var latencies: [Double] = []
    private var sentAt: [UInt64] = []
    private var context: ChannelHandlerContext?
    private var echoing: EventLoopPromise<Void>?
    private var finished = false

    init(frames: [[UInt8]], depth: Int, done: EventLoopPromise<Void>) {
        self.frames = frames
        self.depth = depth
        self.done = done
        limit = frames.count
        answers.reserveCapacity(frames.count)
        latencies.reserveCapacity(frames.count)
        sentAt.reserveCapacity(frames.count)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func echo(_ bytes: [UInt8], _ answered: EventLoopPromise<Void>) {
        guard let context else { return answered.fail(CLIError(message: "a connection closed before the run")) }
        echoing = answered
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    func go() {
        guard let context, !finished else { return }
        while sentAt.count < min(answers.count + depth, limit) { send(context) }
        context.flush()
    }

    /// Ready for the next run, to `limit` of the frames (before `go`, not during a run).
    func rearm(limit: Int, done: EventLoopPromise<Void>) {
        self.limit = limit
        self.done = done
        finished = false
    }

    private func send(_ context: ChannelHandlerContext) {
        sentAt.append(DispatchTime.now().uptimeNanoseconds)
        context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: frames[sentAt.count - 1])), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if let echoing {
            self.echoing = nil
            return echoing.succeed()
        }
        latencies.append(Double(DispatchTime.now().uptimeNanoseconds - sentAt[answers.count]) / 1e6)
        answers.append(frame.message)
        if sentAt.count < limit {
            send(context)
            context.flush()
        }
        if answers.count == limit, !finished {
            finished = true
            done.succeed()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.context = nil
        echoing?.fail(CLIError(message: "the issuer closed a connection before answering its echo test"))
        echoing = nil
        guard !finished else { return }
        finished = true
        done.fail(CLIError(message: "the issuer closed a connection after \(answers.count) of its \(limit) answers"))
    }
}
