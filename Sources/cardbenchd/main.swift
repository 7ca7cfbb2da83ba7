import ArgumentParser
import Daemon
import Defaults
import EMV
import Foundation
import Logging
import Scenario

/// The process's entry point: runs `CardbenchDaemon` on the global executor while the main thread
/// waits. An `async` main would hand the main thread to `dispatch_main()`, which valgrind (3.19
/// and 3.24 alike) cannot run, and callgrind is how the daemon's cost per sale is measured
/// (docs/performance.md). Nothing in the daemon needs the main actor.
@main
enum CardbenchDaemonMain {
    static func main() {
        MemoryTrim.limitArenas()
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await CardbenchDaemon.main()
            finished.signal()
        }
        finished.wait()
    }
}

/// `cardbenchd`: the cardbench daemon, in the foreground as systemd runs it.
struct CardbenchDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cardbenchd",
        abstract: "The cardbench daemon: terminals, readers, the emulated host, the ledger and the HTTP API.",
        discussion: """
        Runs in the foreground. With no --config and no CARDBENCH_* environment it starts on the \
        embedded default: state (the SQLite ledger) under ./.cardbench, sockets under \
        ./.cardbench/run, one terminal bench1 (TID 10000001) with a virtual reader, the embedded \
        card profiles (compiled in; host.cards adds more) known to the emulated issuer, and the \
        API on .cardbench/run/control.sock and http://127.0.0.1:8780. See cardbenchd.yaml(5) \
        and docs/daemon.md for every setting.
        """,
        version: CardbenchVersion.string
    )

    @Option(help: "YAML configuration file (environment variables CARDBENCH_<KEY> override it).")
    var config: String?

    @Flag(help: "Demo mode: present the demo card automatically when a transaction waits for one, and enter its PIN.")
    var demo = false

    @Option(help: "The demo card's profile (implies --demo).")
    var demoCard: String?

    @Option(help: "How the demo card is presented: insert (default), tap or swipe (implies --demo).")
    var demoInterface: String?

    @Option(help: "State directory (the ledger); overrides the configuration.")
    var stateDirectory: String?

    @Option(help: "Runtime directory (sockets); overrides the configuration.")
    var runtimeDirectory: String?

    @Option(help: "Loopback HTTP port (0: any free port, written to <runtime>/http.port; off: none); overrides the configuration.")
    var httpPort: String?

    @Option(help: "The Worldline platform's port (0: any free port, written to <runtime>/worldline.port; off: none); overrides worldline.port.")
    var worldlinePort: String?

    @Option(help: "The Citcon platform's port (0: any free port, written to <runtime>/citcon.port; off: none); overrides citcon.port.")
    var citconPort: String?

    func run() async throws {
        LineLogHandler.bootstrap("cardbenchd")
        var configuration: DaemonConfiguration
        do {
            configuration = try await DaemonConfiguration.load(file: config)
            if let stateDirectory { configuration.stateDirectory = stateDirectory }
            if let runtimeDirectory { configuration.runtimeDirectory = runtimeDirectory }
            if let httpPort {
                if httpPort == "off" { configuration.httpPort = nil } else {
                    guard let port = UInt16(httpPort) else { throw ConfigurationError(key: "--http-port", rule: "must be 0 to 65535 or off") }
                    configuration.httpPort = port
                }
            }
            if let worldlinePort {
                if worldlinePort == "off" { configuration.worldline.port = nil } else {
                    guard let port = UInt16(worldlinePort) else { throw ConfigurationError(key: "--worldline-port", rule: "must be 0 to 65535 or off") }
                    configuration.worldline.port = port
                }
            }
            if let citconPort {
                if citconPort == "off" { configuration.citcon.port = nil } else {
                    guard let port = UInt16(citconPort) else { throw ConfigurationError(key: "--citcon-port", rule: "must be 0 to 65535 or off") }
                    configuration.citcon.port = port
                }
            }
            if demo || demoCard != nil || demoInterface != nil {
                configuration.demoCard = demoCard ?? configuration.demoCard ?? configuration.demoCardSetting ?? EmbeddedDefaults.demoCard
            }
            if let demoInterface {
                guard let interface = CardInterface(verb: demoInterface) else {
                    throw ConfigurationError(key: "--demo-interface", rule: "must be insert, tap or swipe, got \"\(demoInterface)\"")
                }
                configuration.demoInterface = interface
            }
            try configuration.checkListener()
        } catch {
            // Through the logger: under systemd a critical entry in the journal (PRIORITY=2).
            Logger(label: "cardbenchd").critical("\(error)")
            throw ExitCode(2)
        }
        do {
            try await DaemonServer.run(configuration: configuration, logger: Logger(label: "cardbenchd"), scenarios: ConsoleScenarioService())
        } catch {
            Logger(label: "cardbenchd").critical("\(error)")
            // A setting found unusable only once used (a card file that cannot be read, a TLS key)
            // is still a configuration error: the unit's RestartPreventExitStatus=2 stops retrying it.
            throw ExitCode(error is ConfigurationError ? 2 : 1)
        }
    }
}
