import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import NIOCore
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// Runs `cardbenchd`: the bench, the API on the control socket and on loopback, the watchdog, and
/// the systemd notifications, until SIGTERM or SIGINT.
public enum DaemonServer {
    /// The control socket inside the runtime directory.
    public static func controlSocket(runtimeDirectory: String) -> String {
        (runtimeDirectory as NSString).appendingPathComponent("control.sock")
    }

    /// Runs the daemon until it is told to stop; `logger` gets what an operator should read.
    /// `scenarios` runs the console's scenario runs.
    public static func run(configuration: DaemonConfiguration, logger log: Logger, scenarios: (any ScenarioService)? = nil) async throws {
        let runtime = configuration.effectiveRuntimeDirectory
        // The runtime directory keeps other users out of the sockets before their mode is set.
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o750])
        // Socket-activated (cardbenchd.socket): systemd owns the control socket's file; the
        // daemon neither removes a stale one nor sets its mode (SocketMode= does).
        let activated = try SocketActivation.controlSocket()
        let control = activated.flatMap(SocketActivation.path(of:)) ?? controlSocket(runtimeDirectory: runtime)
        if activated == nil { try removeStaleSocket(control) }

        let bench = try Bench(configuration: configuration, logger: log)
        for t in bench.recovered {
            log.warning("recovered transaction \(t.id) (terminal \(t.terminalName), STAN \(t.stan)): it was in progress when the daemon stopped; now failed",
                        metadata: ["transaction": "\(t.id)", "terminal": "\(t.terminalName)", "stan": "\(t.stan)"])
        }
        try bench.start()
        let notify = SDNotify()
        let api = API(bench: bench, scenarios: scenarios)
        let responder = api.router(policy: .socket).buildResponder()
        var logger = Logger(label: "cardbenchd")
        logger.logLevel = .warning

        let listeners = 1 + (configuration.httpPort == nil ? 0 : 1) + (configuration.worldline.port == nil ? 0 : 1)
            + (configuration.citcon.port == nil ? 0 : 1)
        let worldlinePort = PortBox()
        let readiness = Readiness(expected: listeners) { ports in
            if activated == nil { chmod(control, 0o660) }
            if let port = worldlinePort.value {
                try? "\(port)\n".write(toFile: (runtime as NSString).appendingPathComponent("worldline.port"), atomically: true, encoding: .utf8)
            }
            if let port = bench.citconBoundPort.value {
                try? "\(port)\n".write(toFile: (runtime as NSString).appendingPathComponent("citcon.port"), atomically: true, encoding: .utf8)
            }
            if let port = ports.first {
                try? "\(port)\n".write(toFile: (runtime as NSString).appendingPathComponent("http.port"), atomically: true, encoding: .utf8)
            }
            let scheme = configuration.tlsCertificate == nil ? "http" : "https"
            let shownAddress = configuration.httpAddress.contains(":") ? "[\(configuration.httpAddress)]" : configuration.httpAddress
            let http = ports.first.map { ", \(scheme)://\(shownAddress):\($0) (API token in \(runtime)/\(APIToken.fileName))" } ?? ""
            log.notice("ready: \(bench.terminals.count) terminal(s) [\(bench.terminals.map(\.settings.name).joined(separator: ", "))], control socket \(control)\(http), ledger \(configuration.stateDirectory)/ledger.sqlite\(worldlinePort.value.map { ", Worldline platform on port \($0)" } ?? "")\(bench.citconBoundPort.value.map { ", Citcon platform on port \($0)" } ?? "")\(configuration.demoCard.map { ", demo card \($0)" } ?? "")")
            notify.send("READY=1\nSTATUS=serving \(bench.terminals.count) terminal(s)")
        }

        var services: [any Service] = []
        if let activated {
            services.append(ActivatedSocketServer(descriptor: activated, responder: responder, logger: logger,
                                                  onRunning: { await readiness.bound(port: nil) }))
        } else {
            services.append(Application(responder: responder, configuration: ApplicationConfiguration(address: .unixDomainSocket(path: control)),
                                        onServerRunning: { _ in await readiness.bound(port: nil) }, logger: logger))
        }
        if let port = configuration.httpPort {
            let token = try APIToken.load(file: configuration.httpTokenFile, runtimeDirectory: runtime)
            let policy = ListenerPolicy.tcp(token: token, hostNames: configuration.httpHostNames + [configuration.httpAddress],
                                            admin: configuration.httpAdmin)
            let server: HTTPServerBuilder
            if let certificate = configuration.tlsCertificate, let key = configuration.tlsKey {
                server = try .tls(tlsConfiguration: try tlsConfiguration(certificate: certificate, key: key))
            } else {
                server = .http1()
            }
            services.append(Application(responder: api.router(policy: policy).buildResponder(), server: server,
                                        configuration: ApplicationConfiguration(address: .hostname(configuration.httpAddress, port: Int(port))),
                                        onServerRunning: { channel in await readiness.bound(port: channel.localAddress?.port) },
                                        logger: logger))
        }
        if let port = configuration.worldline.port {
            let address = configuration.worldline.address
            let server = WorldlineServer(bench: bench, publicURL: { bench.worldlinePublicURL })
            services.append(Application(responder: server.responder(),
                                        configuration: ApplicationConfiguration(address: .hostname(address, port: Int(port))),
                                        onServerRunning: { channel in
                                            worldlinePort.value = channel.localAddress?.port
                                            bench.worldlineBoundPort.value = channel.localAddress?.port
                                            await readiness.bound(port: nil)
                                        }, logger: logger))
        }
        if let port = configuration.citcon.port {
            let server = CitconServer(bench: bench, publicURL: { bench.citconPublicURL })
            services.append(Application(responder: server.responder(),
                                        configuration: ApplicationConfiguration(address: .hostname(configuration.citcon.address, port: Int(port))),
                                        onServerRunning: { channel in
                                            bench.citconBoundPort.value = channel.localAddress?.port
                                            await readiness.bound(port: nil)
                                        }, logger: logger))
        }
        if let interval = SDNotify.watchdogInterval() {
            // `WATCHDOG=1` at half of `WATCHDOG_USEC`, for as long as the daemon runs.
            services.append(PeriodicService(interval: interval, first: true) { notify.send("WATCHDOG=1") })
        }
        services.append(CallbackDelivery(bench: bench, logger: log))
        services.append(PeriodicService(interval: .seconds(60)) { MemoryTrim.trim() })
        // Worldline's requested captures and refunds settle when they are due on the bench clock.
        let worldline = bench.worldline
        services.append(PeriodicService(interval: .milliseconds(250)) { _ = try? await offPool { worldline.settleDue() } })
        // Last in the list, so the first to hear of a shutdown: it ends the transactions in
        // progress before the listeners wait for their requests to finish.
        services.append(BenchService(bench: bench, notify: notify, logger: log))

        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        if activated == nil { try? FileManager.default.removeItem(atPath: control) }
    }

    /// The TCP listener's TLS: the PEM chain and key (swift-nio-ssl), TLS 1.2 at least.
    static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
            guard !chain.isEmpty else { throw ConfigurationError(key: "http.tls.certificate", rule: "\(certificate) holds no PEM certificate") }
            let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
            var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
            tls.minimumTLSVersion = .tlsv12
            return tls
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(key: "http.tls", rule: "cannot load the certificate \(certificate) and key \(key): \(error)")
        }
    }

    /// A socket file left by a daemon that died is removed; one a live daemon answers on is not.
    static func removeStaleSocket(_ path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let connected = Reachability.unixConnect(path)
        if connected == 0 {
            throw ConfigurationError(key: "runtime_directory", rule: "another cardbenchd is serving \(path)")
        }
        try FileManager.default.removeItem(atPath: path)
    }
}

/// The port a listener bound, once it has.
final class PortBox: @unchecked Sendable {
    private let lock = NSLock()
    private var port: Int?
    var value: Int? {
        get { lock.withLock { port } }
        set { lock.withLock { port = newValue } }
    }
}

/// Counts listeners as they bind; calls `ready` once all have.
actor Readiness {
    private let expected: Int
    private var ports: [Int] = []
    private var count = 0
    private let ready: @Sendable ([Int]) -> Void

    init(expected: Int, ready: @escaping @Sendable ([Int]) -> Void) {
        self.expected = expected
        self.ready = ready
    }

    func bound(port: Int?) {
        count += 1
        if let port { ports.append(port) }
        if count == expected { ready(ports) }
    }
}


/// Holds the bench for the service group: on SIGTERM it says STOPPING=1 and ends every
/// transaction in progress (each is recorded as failed and answered) before the listeners close.
struct BenchService: Service {
    let bench: Bench
    let notify: SDNotify
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        notify.send("STOPPING=1")
        logger.notice("stopping: ending transactions in progress")
        for t in bench.terminals { _ = t.abort() }
        // Give the aborted transactions a moment to commit their outcome before readers close.
        for _ in 0..<50 where bench.terminals.contains(where: { $0.currentActivity != nil }) {
            try? await Task.sleep(for: .milliseconds(100))
        }
        if let error = bench.stop() {
            logger.error("stopping: could not give back the STANs reserved ahead (a reboot will skip up to 100 of them): \(error)")
        }
    }
}
